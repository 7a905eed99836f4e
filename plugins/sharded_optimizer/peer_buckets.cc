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
  // One bucket's pieces from the peers: of this rank's shard, a row per peer (peers'
  // order from this rank on), with their mean where there are several; of the
  // parameters stepped whole, a row per rank (rank order) and their mean.
  at::Tensor peers, peers_mean, whole, whole_mean;
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

  // Step 2: each piece's mean over the ranks, in the pieces' order (Note [Averaging where
  // the gradients lie]).
  std::vector<at::Tensor> Average(const PeerBucket& b, const std::vector<Piece>& pieces) {
    int64_t shard = 0, whole_numel = 0;
    for (const Piece& p : pieces) (p.sharded ? shard : whole_numel) += p.numel;
    const at::TensorOptions options = b.ranks[rank].options();
    Reserve(peers, {world - 1, shard}, options);
    if (world > 2) Reserve(peers_mean, {shard}, options);
    Reserve(whole, {world, whole_numel}, options);
    Reserve(whole_mean, {whole_numel}, options);
    // Every peer's pieces, by the copy engines; where this rank's own lie.
    std::vector<at::Tensor> own, peer_mean, own_whole, whole_rows;
    for (int i = 0; i + 1 < world; ++i) {
      const int j = (rank + 1 + i) % world;
      int64_t at_shard = 0, at_whole = 0;
      for (const Piece& p : pieces) {
        at::Tensor to = p.sharded ? peers[i].narrow(0, at_shard, p.numel) : whole[j].narrow(0, at_whole, p.numel);
        to.copy_(b.ranks[j].narrow(0, p.Start(rank), p.numel));
        (p.sharded ? at_shard : at_whole) += p.numel;
      }
    }
    std::vector<at::Tensor> grads;
    int64_t at_shard = 0, at_whole = 0;
    const at::Tensor peers_avg = world > 2 ? peers_mean : peers[0];  // Make asks for 2 ranks or more
    for (const Piece& p : pieces) {
      at::Tensor mine = b.ranks[rank].narrow(0, p.Start(rank), p.numel);
      if (p.sharded) {
        own.push_back(mine);
        peer_mean.push_back(peers_avg.narrow(0, at_shard, p.numel));
        grads.push_back(mine);
        at_shard += p.numel;
      } else {
        own_whole.push_back(mine);
        whole_rows.push_back(whole[rank].narrow(0, at_whole, p.numel));
        grads.push_back(whole_mean.narrow(0, at_whole, p.numel));
        at_whole += p.numel;
      }
    }
    if (!own.empty()) {
      if (world > 2) {
        at::Tensor out = peers_mean.narrow(0, 0, shard);
        at::mean_out(out, peers.narrow(1, 0, shard), {0});
      }
      // mean = own + (W-1)/W (mean of the peers' - own), one multi-tensor kernel.
      at::_foreach_lerp_(own, peer_mean, static_cast<double>(world - 1) / world);
    }
    if (!own_whole.empty()) {
      compat::CopyEach(whole_rows, own_whole);
      at::Tensor out = whole_mean.narrow(0, 0, whole_numel);
      at::mean_out(out, whole.narrow(1, 0, whole_numel), {0});
    }
    return grads;
  }

  // `buffer` made `sizes` with `options` unless it is already, or its last dimension
  // longer: the staging buffers grow to the largest bucket during the eager steps, and
  // a graph's replays then reuse them.
  static void Reserve(at::Tensor& buffer, at::IntArrayRef sizes, const at::TensorOptions& options) {
    bool fits = buffer.defined() && buffer.dim() == static_cast<int64_t>(sizes.size()) &&
                buffer.scalar_type() == c10::typeMetaToScalarType(options.dtype()) &&
                buffer.size(-1) >= sizes.back();
    for (size_t d = 0; fits && d + 1 < sizes.size(); ++d) fits = buffer.size(d) == sizes[d];
    if (!fits) buffer = at::empty(sizes, options);
  }
};

PeerBuckets::PeerBuckets(std::unique_ptr<State> state) : state_(std::move(state)) {}
PeerBuckets::~PeerBuckets() = default;

absl::Status PeerBuckets::Supported() { return absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<PeerBuckets>> PeerBuckets::Make(const CommContext& context) {
  if (!context.nccl) return absl::FailedPreconditionError("it needs GPUs (NCCL's group); this run is on CPUs");
  if (!context.store) return absl::FailedPreconditionError("the engine gave its hooks no store to meet at");
  if (context.world_size < 2) return absl::FailedPreconditionError("one rank has no peers to copy from");
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
  // 1, 2: every rank's pieces of this rank's shard, averaged.
  s.Signal(b, kReady);
  const std::vector<at::Tensor> grads = s.Average(b, pieces);
  // 3: the shard stepped, and copied where the peers read it (one multi-tensor kernel).
  std::vector<size_t> params;
  for (const State::Piece& p : pieces) params.push_back(p.param);
  optimizer.step(params, grads);
  std::vector<at::Tensor> where, stepped;
  for (const State::Piece& p : pieces) {
    if (!p.sharded) continue;
    where.push_back(b.ranks[s.rank].narrow(0, p.Start(s.rank), p.numel));
    stepped.push_back(optimizer.flat_parameters.at(p.param).narrow(0, s.rank * p.numel, p.numel));
  }
  if (!where.empty()) compat::CopyEach(where, stepped);
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
