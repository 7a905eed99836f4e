// The data-parallel engine's extension points: what a plugin may replace or wrap.
//
// The engine (core/engine/engine.h) runs one pipeline per synced step, and each stage
// is an interface below with a default in core that is PyTorch DDP's plain behaviour:
//
//   stage                      interface          default in core
//   1. group parameters        BucketPlanner      CapPlanner: 25 MiB, first bucket 1 MiB
//   2. gradients not produced  MissingGradients   (none: an error)
//   3. where gradients go      GradientLayout     CopyLayout: copied into flat buckets
//   4. what goes on the wire   Collectives        c10d's all-reduce, averaged
//   5. how a bucket is reduced CommHook           (none: the engine averages it)
//   6. when parameters update  ParameterUpdates   (none: the optimizer after backward)
//
// Stages 1, 2, 3, 5 and 6 are replaced by at most one plugin each; Collectives are
// wrapped, by any number (a codec such as bf16 wraps whatever is below it, so that a
// hook's own collectives travel through it too). See docs/architecture.md.
//
//   // A planner that puts every parameter in one bucket.
//   class OneBucket : public ddplab::BucketPlanner {
//    public:
//     std::vector<std::vector<size_t>> Plan(const std::vector<int64_t>&,
//                                           const std::vector<size_t>& order) const override {
//       return {order};
//     }
//     std::string Describe() const override { return "one bucket"; }
//   };

#ifndef DDPLAB_CORE_ENGINE_EXTENSION_POINTS_H_
#define DDPLAB_CORE_ENGINE_EXTENSION_POINTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include "core/engine/collectives.h"

namespace ddplab {

// ---------------------------------------------------------------------------------------
// 1. Bucket planning.

// Groups parameters into buckets. The engine plans once before the first step, with the
// parameters in reverse order (the order backward is expected to produce their
// gradients), and once more after it, in the order gradients became ready on rank 0.
class BucketPlanner {
 public:
  virtual ~BucketPlanner() = default;
  // `bytes[i]`: parameter i's gradient size. Returns buckets of parameter indices; every
  // index of `order` once, in that order.
  virtual std::vector<std::vector<size_t>> Plan(const std::vector<int64_t>& bytes,
                                                const std::vector<size_t>& order) const = 0;
  // For people and result records, e.g. "buckets of 25 MiB, the first 1 MiB".
  virtual std::string Describe() const = 0;
};

// PyTorch's compute_bucket_assignment_by_size for parameters of one dtype and device:
// parameters are taken in `order` (indices into `bytes`); a bucket is closed once it
// holds at least its cap, `first_cap` for the first bucket and `cap` after.
inline std::vector<std::vector<size_t>> AssignBuckets(const std::vector<int64_t>& bytes,
                                                      const std::vector<size_t>& order,
                                                      int64_t first_cap, int64_t cap) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> current;
  int64_t size = 0;
  for (size_t index : order) {
    current.push_back(index);
    size += bytes[index];
    if (size >= (buckets.empty() ? first_cap : cap)) {
      buckets.push_back(std::move(current));
      current.clear();
      size = 0;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

// Buckets by size (DDP's bucket_cap_mb, in MiB as there). The default planner: PyTorch's
// 25 MiB buckets after a first bucket of 1 MiB.
class CapPlanner : public BucketPlanner {
 public:
  static constexpr int64_t kMiB = 1024 * 1024;
  static constexpr int64_t kDefaultCapBytes = 25 * kMiB;
  static constexpr int64_t kDefaultFirstCapBytes = kMiB;
  explicit CapPlanner(int64_t cap_bytes = kDefaultCapBytes, int64_t first_cap_bytes = kDefaultFirstCapBytes)
      : cap_(cap_bytes), first_cap_(first_cap_bytes) {}
  std::vector<std::vector<size_t>> Plan(const std::vector<int64_t>& bytes,
                                        const std::vector<size_t>& order) const override {
    return AssignBuckets(bytes, order, first_cap_, cap_);
  }
  std::string Describe() const override {
    return "buckets of " + Mib(cap_) + " MiB, the first " + Mib(first_cap_) + " MiB";
  }

 private:
  static std::string Mib(int64_t bytes) {
    std::string s = std::to_string(static_cast<double>(bytes) / kMiB);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  int64_t cap_, first_cap_;
};

// ---------------------------------------------------------------------------------------
// 2. Parameters that receive no gradient in a synced step.

class MissingGradients {
 public:
  virtual ~MissingGradients() = default;
  // `missing`: parameters expected to receive a gradient that did not; `first_step`: this
  // is the first synced step. Returns "" to accept them as unused for the rest of the run
  // (their share of every bucket is zeros, and a gradient for one later is an error), or
  // the step's error.
  virtual std::string Accept(const std::vector<size_t>& missing, bool first_step) const = 0;
};

// ---------------------------------------------------------------------------------------
// 3. Gradient layout, 4. collectives, 5. communication hooks.

// A bucket of gradients ready for reduction (c10d's GradBucket).
struct GradBucket {
  // Position in the engine's bucket order: bucket 0 (the last layers' gradients) is
  // complete first.
  size_t index = 0;
  // The flattened gradients, contiguous, in the bucket's dtype. A hook may reduce it in
  // place. Undefined where the layout keeps no flat buffer (gradients averaged where they
  // lie). Where `gradients` is not empty, only the parts of `buffer` that alias one of
  // them hold their gradient yet, and a hook writes the whole result into `buffer`.
  at::Tensor buffer;
  // Per parameter, shaped like it, where its gradient is: filled when the hook reads
  // gradients where they lie (CommHook::ReadsGradientsWhereTheyLie) or the layout keeps no
  // flat buffer. On a GPU, a hook that reads them on a stream other than the one current
  // in Run records that stream on them (Tensor::record_stream) before dropping them.
  std::vector<at::Tensor> gradients;
  // Where each parameter's gradient starts in `buffer` (elements), and its shape.
  std::vector<int64_t> offsets;
  std::vector<std::vector<int64_t>> sizes;
  bool is_last = false;  // the last bucket of the step
  int64_t step = 0;      // synced steps before this one (0 on the first)
  // The step is sampled (EngineParts::sample_error_every; never a timed step): a hook may
  // measure itself in it at a cost, e.g. the size of what error feedback carries.
  bool sampled = false;
  // Each gradient's parameter: its index in the model's parameters (stable when the
  // engine regroups buckets, so per-parameter state can be keyed by it).
  std::vector<size_t> parameters;
};

// One bucket as a layout sees it: its parameters, and where each starts in a flat buffer.
struct LayoutBucket {
  std::vector<size_t> params;
  std::vector<int64_t> offsets;  // elements
  int64_t numel = 0;
};

// How the buckets a layout builds are used.
struct LayoutSpec {
  // The dtype of a flat bucket: what the reduction takes (Collectives::wire_dtype for the
  // engine's own, the gradients' own for a hook).
  at::ScalarType flat_dtype = at::ScalarType::Undefined;
  // The hook reads each gradient where it lies (GradBucket::gradients) and writes the
  // whole result into the flat buffer: nothing need be copied into it.
  bool hand_over = false;
};

// Where gradients go between autograd and the reduction, and where the average comes
// back. Called by the engine with its lock held: Collect from autograd's thread.
class GradientLayout {
 public:
  virtual ~GradientLayout() = default;
  // (Re)builds for `buckets`, before the first step and after the rebuild (gradients
  // accumulated so far, in micro-steps, stay the parameters' gradients).
  virtual void Build(const std::vector<LayoutBucket>& buckets, const LayoutSpec& spec) = 0;
  // Before a step's first backward: gradients go (or are zeroed).
  virtual void ZeroGrad() = 0;
  // Parameter `slot` of bucket `bucket` has its gradient for this step (param.grad()).
  virtual void Collect(size_t bucket, size_t slot) = 0;
  // That parameter gets no gradient for the rest of the run: its share is zeros.
  virtual void MarkUnused(size_t bucket, size_t slot) = 0;
  // The bucket is complete: fills `out.buffer` and, with LayoutSpec::hand_over or no flat
  // buffer, `out.gradients`.
  virtual void HandOver(size_t bucket, GradBucket& out) = 0;
  // The average: `result` flat, in the bucket's dtype; undefined when the reduction
  // averaged `out.gradients` in place. Puts it where the parameters' gradients are.
  virtual void Deliver(size_t bucket, const at::Tensor& result) = 0;
  // Bytes held by flat buffers, and by the parameters' gradients outside them.
  virtual int64_t bucket_bytes() const = 0;
  virtual int64_t gradient_bytes() const = 0;
  virtual std::string Describe() const = 0;
};

// What makes a layout: the model's parameters (their gradients are the layout's to set),
// valid while the engine lives.
using LayoutFactory = std::function<std::unique_ptr<GradientLayout>(std::vector<at::Tensor>& params)>;

// What goes on the wire: the mean over the ranks. The default is c10d's all-reduce over
// the experiment's process group (NCCL averages inside the reduction); a codec wraps it.
class Collectives {
 public:
  virtual ~Collectives() = default;
  // The dtype tensors travel in; Undefined: their own. The engine fills its flat buckets
  // in it, so that gradients are cast once, as they come in.
  virtual at::ScalarType wire_dtype() const { return at::ScalarType::Undefined; }
  // Starts averaging `tensors` (one dtype and device) over the ranks, each in place.
  virtual PendingMean StartMean(std::vector<at::Tensor> tensors) = 0;
};

// The default collectives: c10d's all-reduce over `group`, averaging (collectives.h).
class GroupCollectives : public Collectives {
 public:
  GroupCollectives(compat::CollectiveGroup& group, bool nccl) : group_(group), nccl_(nccl) {}
  PendingMean StartMean(std::vector<at::Tensor> tensors) override {
    return StartMeanCoalesced(group_, std::move(tensors), nccl_);
  }

 private:
  compat::CollectiveGroup& group_;
  bool nccl_;
};

// What a communication hook works with.
struct CommContext {
  // c10d's process group (NCCL on GPUs, Gloo on CPUs): allreduce, broadcast, ...
  compat::CollectiveGroup* process_group = nullptr;
  int rank = 0;
  int world_size = 1;
  bool nccl = false;  // the group is NCCL's (GPU tensors), else Gloo's
  // The experiment's collectives, codecs included: what the hook's compressed tensors
  // travel through. Valid while the engine lives.
  Collectives* collectives = nullptr;
};

// Reduces buckets across ranks (c10d's comm hook). The engine calls Run for each bucket
// as soon as it is complete and waits on the future before the optimizer step.
class CommHook {
 public:
  virtual ~CommHook() = default;
  // Starts reducing `bucket` and returns a future that completes with the averaged
  // buffer (a Tensor of the bucket's shape and dtype).
  virtual c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) = 0;
  // Figures for the run's result (e.g. "compression_ratio"), read after the run.
  virtual std::map<std::string, double> Stats() const { return {}; }
  // True if Run reads each gradient from GradBucket::gradients and writes the whole
  // result into GradBucket::buffer: the layout then hands gradients over where autograd
  // left them instead of copying them into the bucket first.
  virtual bool ReadsGradientsWhereTheyLie() const { return false; }
};

using CommHookFactory = std::function<std::unique_ptr<CommHook>(const CommContext&)>;
using CollectivesWrapper = std::function<std::unique_ptr<Collectives>(std::unique_ptr<Collectives>)>;

// ---------------------------------------------------------------------------------------
// 6. Parameter updates.

// The experiment's optimizer, over some parameters (indices into the model's).
using ParameterStep = std::function<void(const std::vector<size_t>& params)>;

// When parameters are updated. Without one, the caller's optimizer runs after backward.
class ParameterUpdates {
 public:
  virtual ~ParameterUpdates() = default;
  // Bucket `params` (those with a gradient) has its average in place, on the caller's
  // stream, in bucket order, while later buckets may still be reducing. Returns true if
  // it updated them with `step`: when every bucket of a step was, the caller skips its
  // optimizer step.
  virtual bool OnBucketAveraged(const std::vector<size_t>& params, const ParameterStep& step) = 0;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_EXTENSION_POINTS_H_
