#include "plugins/sharded_optimizer/peer_buckets.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/torch_compat.h"

#if defined(DDPLAB_CUDA) && __has_include(<torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>)
#define DDPLAB_PEER_BUCKETS 1
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>
#else
#define DDPLAB_PEER_BUCKETS 0
#endif

namespace ddplab {

#if DDPLAB_PEER_BUCKETS

namespace {

namespace symm = c10d::symmetric_memory;

// A signal waits this long for its peer before the GPU traps (a peer that died): the
// process then fails with CUDA's error instead of hanging.
constexpr size_t kSignalTimeoutMs = 600 * 1000;

// Each bucket's signal channels (Note [A sharded step by copy engines]).
enum Channel : int { kReady = 0, kStepped = 1, kDone = 2 };

// A bucket's memory and its peers'.
struct PeerBucket {
  c10::intrusive_ptr<symm::SymmetricMemory> memory;
  std::vector<at::Tensor> ranks;  // every rank's buffer, this rank's own at its index
};

// The process-wide name of a group of symmetric memory: c10d looks groups up by name (the
// store and ranks of its rendezvous; its signals' records). Every rank makes its engines
// in the same order, so a count names the same group on each.
std::string NextGroupName() {
  static std::atomic<int> made{0};
  return absl::StrCat("ddplab_peer_buckets_", made++);
}

}  // namespace

struct PeerBuckets::State {
  std::string group;
  c10::intrusive_ptr<c10d::ProcessGroup> registered;  // c10d's registry holds it weakly
  int rank = 0, world = 1;
  std::map<const void*, PeerBucket> buckets;  // by buffer
  bool in_use = false;
  at::Tensor staging, mean;  // one bucket's pieces, one row per rank; their mean
  std::vector<PeerBucket*> read;  // buckets of this step whose peers' are read (step 5)

  ~State() {
    buckets.clear();
    try {
      c10d::unregister_process_group(group);
    } catch (const std::exception&) {  // never registered: Make failed
    }
  }

  // One piece per parameter of the bucket: where it starts in the buffer for `rank`
  // (elements) and its size, W dividing the parameter or not (Note [A sharded step]).
  struct Piece {
    size_t param;
    int64_t offset, numel;
    bool sharded;
    int64_t Start(int r) const { return sharded ? offset + r * numel : offset; }
  };
  std::vector<Piece> PiecesOf(const GradBucket& bucket) const {
    std::vector<Piece> out;
    for (size_t k = 0; k < bucket.parameters.size(); ++k) {
      int64_t n = 1;
      for (int64_t d : bucket.sizes[k]) n *= d;
      const bool sharded = n % world == 0;
      out.push_back(Piece{bucket.parameters[k], bucket.offsets[k], sharded ? n / world : n, sharded});
    }
    return out;
  }

  void Put(PeerBucket& b, Channel channel) {
    for (int j = 0; j < world; ++j) {
      if (j != rank) b.memory->put_signal(j, channel, kSignalTimeoutMs);
    }
  }
  void Wait(PeerBucket& b, Channel channel) {
    for (int j = 0; j < world; ++j) {
      if (j != rank) b.memory->wait_signal(j, channel, kSignalTimeoutMs);
    }
  }
  void Signal(PeerBucket& b, Channel channel) {
    Put(b, channel);
    Wait(b, channel);
  }
};

PeerBuckets::PeerBuckets(std::unique_ptr<State> state) : state_(std::move(state)) {}
PeerBuckets::~PeerBuckets() = default;

absl::Status PeerBuckets::Supported() { return absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<PeerBuckets>> PeerBuckets::Make(const CommContext& context) {
  if (!context.nccl) return absl::FailedPreconditionError("it needs GPUs (NCCL's group); this run is on CPUs");
  if (!context.store) return absl::FailedPreconditionError("the engine gave its hooks no store to meet at");
  // A run that keeps NCCL off NVLink (host memory, sockets) measures that transport: copies
  // between the GPUs' buckets would go over NVLink all the same.
  if (const char* p2p = std::getenv("NCCL_P2P_DISABLE"); p2p != nullptr && std::string(p2p) == "1") {
    return absl::FailedPreconditionError(
        "the run keeps NCCL off NVLink (NCCL_P2P_DISABLE=1: its transport is host memory or sockets), and copies "
        "between the GPUs' buckets would travel over NVLink all the same; use transport NVLINK");
  }
  auto state = std::make_unique<State>();
  state->group = NextGroupName();
  state->rank = context.rank;
  state->world = context.world_size;
  try {
    // The group c10d's symmetric memory meets in: its store (a prefix of the run's own),
    // rank and size, under the name, both where LibTorch looks them up by name and
    // where it keeps them for symmetric memory alone.
    c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::PrefixStore>(state->group, context.store);
    state->registered = c10::make_intrusive<c10d::ProcessGroup>(store, context.rank, context.world_size);
    state->registered->setGroupName(state->group);
    c10d::register_process_group(state->group, state->registered);
    symm::set_group_info(state->group, context.rank, context.world_size, store);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat("c10d's symmetric memory refused the group: ", compat::WhatWithoutBacktrace(e)));
  }
  return std::unique_ptr<PeerBuckets>(new PeerBuckets(std::move(state)));
}

at::Tensor PeerBuckets::Allocate(int64_t numel, const at::TensorOptions& options) {
  State& s = *state_;
  if (!options.device().is_cuda()) throw std::invalid_argument("sharded_optimizer: copy engines need buckets on a GPU");
  if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) {
    throw std::runtime_error("sharded_optimizer: buckets in symmetric memory cannot be made inside a CUDA graph's capture");
  }
  if (std::exchange(s.in_use, false)) {  // a rebuild's: the earlier go
    s.buckets.clear();
    s.read.clear();
  }
  at::Tensor buffer = symm::empty_strided_p2p({numel}, {1}, c10::typeMetaToScalarType(options.dtype()), options.device(),
                                              s.group, std::nullopt);
  buffer.zero_();
  PeerBucket b;
  b.memory = symm::rendezvous(buffer, s.group);
  for (int j = 0; j < s.world; ++j) {
    b.ranks.push_back(j == s.rank ? buffer : b.memory->get_buffer(j, {numel}, buffer.scalar_type(), 0));
  }
  s.buckets[buffer.data_ptr()] = std::move(b);
  return buffer;
}

void PeerBuckets::InUse() { state_->in_use = true; }

void PeerBuckets::Step(const GradBucket& bucket, const PartsOptimizer& optimizer) {
  State& s = *state_;
  auto found = s.buckets.find(bucket.buffer.defined() ? bucket.buffer.data_ptr() : nullptr);
  if (found == s.buckets.end()) {
    throw std::logic_error(absl::StrCat("sharded_optimizer: bucket ", bucket.index, " is not in symmetric memory"));
  }
  PeerBucket& b = found->second;
  const std::vector<State::Piece> pieces = s.PiecesOf(bucket);
  int64_t total = 0;
  for (const State::Piece& p : pieces) total += p.numel;
  if (!s.staging.defined() || s.staging.size(1) < total || s.staging.scalar_type() != bucket.buffer.scalar_type()) {
    s.staging = at::empty({s.world, total}, bucket.buffer.options());
    s.mean = at::empty({total}, bucket.buffer.options());
  }
  // 1, 2: every rank's pieces of this rank's shard, averaged.
  s.Signal(b, kReady);
  for (int j = 0; j < s.world; ++j) {
    int64_t pos = 0;
    for (const State::Piece& p : pieces) {
      s.staging[j].narrow(0, pos, p.numel).copy_(b.ranks[j].narrow(0, p.Start(s.rank), p.numel));
      pos += p.numel;
    }
  }
  at::Tensor mean = s.mean.narrow(0, 0, total);
  at::mean_out(mean, s.staging.narrow(1, 0, total), {0});
  // 3: the shard stepped, and copied where the peers read it.
  std::vector<size_t> params;
  std::vector<at::Tensor> grads;
  int64_t pos = 0;
  for (const State::Piece& p : pieces) {
    params.push_back(p.param);
    grads.push_back(mean.narrow(0, pos, p.numel));
    pos += p.numel;
  }
  optimizer.step(params, grads);
  const at::Tensor& mine = b.ranks[s.rank];
  for (const State::Piece& p : pieces) {
    if (!p.sharded) continue;
    mine.narrow(0, p.Start(s.rank), p.numel).copy_(optimizer.flat_parameters.at(p.param).narrow(0, s.rank * p.numel, p.numel));
  }
  // 4: every peer's stepped shard into this rank's parameters.
  s.Signal(b, kStepped);
  for (int j = 0; j < s.world; ++j) {
    if (j == s.rank) continue;
    for (const State::Piece& p : pieces) {
      if (!p.sharded) continue;
      optimizer.flat_parameters.at(p.param).narrow(0, j * p.numel, p.numel).copy_(b.ranks[j].narrow(0, p.Start(j), p.numel));
    }
  }
  // 5: no rank goes on to overwrite a bucket a peer still reads. The waits are the last
  // bucket's, so that no bucket's chain waits for a peer's before the next one starts.
  s.Put(b, kDone);
  s.read.push_back(&b);
  if (!bucket.is_last) return;
  for (PeerBucket* read : s.read) s.Wait(*read, kDone);
  s.read.clear();
}

#else  // no symmetric memory in this build

struct PeerBuckets::State {};
PeerBuckets::PeerBuckets(std::unique_ptr<State> state) : state_(std::move(state)) {}
PeerBuckets::~PeerBuckets() = default;

absl::Status PeerBuckets::Supported() {
  return absl::FailedPreconditionError(
      "this build has no symmetric memory: c10d has it in LibTorch 2.x with CUDA, and this is a CPU build or an older "
      "LibTorch");
}
absl::StatusOr<std::unique_ptr<PeerBuckets>> PeerBuckets::Make(const CommContext&) { return Supported(); }
at::Tensor PeerBuckets::Allocate(int64_t, const at::TensorOptions&) { throw std::logic_error("no symmetric memory"); }
void PeerBuckets::InUse() {}
void PeerBuckets::Step(const GradBucket&, const PartsOptimizer&) { throw std::logic_error("no symmetric memory"); }

#endif

}  // namespace ddplab
