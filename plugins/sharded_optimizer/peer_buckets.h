// The sharded step by copy engines: the engine's flat buckets in c10d's symmetric memory,
// where every rank of the node reads its peers' over NVLink, and each bucket's sharded
// step done by copies between them (a GPU's copy engines, no multiprocessor held for the
// transfer) with the ranks ordered by signals a CUDA graph replays (Note [A sharded step
// by copy engines]). Only in a CUDA build with a LibTorch that has symmetric memory (2.x);
// elsewhere Make says why not.
//
//   absl::StatusOr<std::unique_ptr<PeerBuckets>> peers = PeerBuckets::Make(context);
//   at::Tensor buffer = (*peers)->Allocate(numel, gradient_options);  // collective
//   (*peers)->InUse();                          // its buckets are reduced now
//   (*peers)->Step(bucket, optimizer);          // on the hook's stream, bucket by bucket
//
// Note [A sharded step by copy engines]
// What it replaces. The sharded step over NCCL (Note [A sharded step], sharded_optimizer.cc)
// reduce-scatters each bucket and all-gathers its stepped shards beside backward, and
// NCCL's kernels hold their multiprocessors for as long as each collective lasts, which
// beside a graph's backward is about twice its length alone: on 2 H200 the probe of the
// same step cost the step 1.82 ms by NCCL and 1.08 by copy engines (bench/NOTES.md, "The
// sharded step's shape, by copy engines with the ranks in order").
// The shards are the same: rank r's of a parameter of n elements is its elements
// [r n/W, (r+1) n/W), and a parameter W does not divide is reduced and stepped whole by
// every rank. So the optimizer's state is the same as over NCCL, which lets the first
// step (before the optimizer over the shards exists) run over NCCL.
// Each bucket, on the hook's stream, once its gradients are complete (three signal
// channels of the bucket's own memory, each signal consumed by its wait, which is what
// lets a graph replay them):
// 1. ready: the rank signals every peer that its bucket holds the step's gradients, and
//    waits for each peer's signal;
// 2. each peer's pieces of this rank's shard are copied over NVLink into a staging buffer,
//    and averaged with this rank's own where they lie (Note [Averaging where the gradients
//    lie]);
// 3. the optimizer steps the shard; the stepped shard is copied into this rank's own range
//    of its bucket (which no peer reads until then: each reads its own range), by one
//    multi-tensor kernel;
// 4. stepped: signals, waits, and each peer's stepped range is copied into this rank's
//    parameters;
// 5. done: the rank signals every peer that it has read their buckets; in the step's last
//    bucket it waits for each peer's signals of every bucket, so that no rank's next
//    backward overwrites a bucket a peer still reads, and no bucket waits for them before
//    the next bucket's step starts.
// Copies between GPUs are one per parameter and peer, each a transfer of the copy engine.
// After the step, a bucket's range of this rank's shard holds parameters, not gradients:
// as over NCCL, the gradients are not their means after the step.
//
// Note [Averaging where the gradients lie]
// Copies within a GPU are kernels, not the copy engine's: one per parameter, they cost a
// step on 2 H200 2.08 ms of multiprocessor time, most of what the copy engines saved
// (bench/NOTES.md, "Where the copy-engine step's time goes"). So this rank's own pieces
// are not copied: the mean is written over them in its bucket, a range no peer reads
// before the stepped shard replaces it in step 3, by one multi-tensor kernel for the
// bucket (lerp from this rank's pieces to the mean of its peers', with weight (W-1)/W;
// the peers' averaged first by one kernel where there are several). A parameter W does not
// divide is the exception: every rank steps it whole, from the same bits, and each peer
// reads it whole from every bucket, so its rows are copied into a buffer in rank order
// and averaged there, as every rank does alike.
#ifndef DDPLAB_PLUGINS_SHARDED_OPTIMIZER_PEER_BUCKETS_H_
#define DDPLAB_PLUGINS_SHARDED_OPTIMIZER_PEER_BUCKETS_H_

#include <memory>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/engine/extension_points.h"

namespace ddplab {

class PeerBuckets {
 public:
  // For `context`'s ranks (two or more of one node, NCCL on GPUs, its store set): an
  // error where this build or its LibTorch has no symmetric memory, or the context cannot
  // have it.
  static absl::StatusOr<std::unique_ptr<PeerBuckets>> Make(const CommContext& context);
  // OK where this build has symmetric memory, else why not.
  static absl::Status Supported();
  ~PeerBuckets();
  PeerBuckets(const PeerBuckets&) = delete;
  PeerBuckets& operator=(const PeerBuckets&) = delete;

  // A zeroed flat buffer of `numel` elements with `options`, in symmetric memory, its
  // peers' found (collective: every rank allocates the same buckets in the same order).
  // After InUse, the first Allocate is a rebuild's: the buffers before are let go. Throws
  // inside a CUDA graph's capture.
  at::Tensor Allocate(int64_t numel, const at::TensorOptions& options);
  // The buffers allocated so far are being reduced.
  void InUse();
  // The sharded step of `bucket` (its buffer one that Allocate made), on the current
  // stream: steps of 1 to 5 of Note [A sharded step by copy engines], with `optimizer`
  // over this rank's shards (Note [A sharded step], sharded_optimizer.cc).
  void Step(const GradBucket& bucket, const PartsOptimizer& optimizer);

 private:
  struct State;
  explicit PeerBuckets(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace ddplab

#endif  // DDPLAB_PLUGINS_SHARDED_OPTIMIZER_PEER_BUCKETS_H_
