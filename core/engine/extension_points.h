// The data-parallel engine's extension points: what a plugin may replace or wrap.
//
// The engine (core/engine/engine.h) runs one pipeline per synced step, and each stage
// is an interface below with a default in core that is PyTorch DDP's plain behaviour:
//
//   stage                      interface          default in core
//   1. group parameters        BucketPlanner      CapPlanner: 25 MiB, first bucket 1 MiB
//   2. gradients not produced  MissingGradients   (none: an error)
//   3. where gradients go      GradientLayout     CopyLayout: copied into flat buckets
//   4. how a bucket is reduced CommHook chain     AllreduceHook: c10d's all-reduce, averaged
//
// Stages 1 to 3 are replaced by at most one plugin each. Stage 4 is c10d's model: a
// chain of hooks ending in core's all-reduce, each plugin's hook wrapping the one below
// (a codec such as bf16 wraps whatever reduces; PowerSGD reduces the bucket itself;
// optimizer overlap steps the parameters when the future below it completes). The chain
// says, once, how gradients are packed into its buckets (BucketCodec, Note [A codec's
// bytes]). See docs/architecture.md.
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
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "core/engine/collectives.h"
#include "core/engine/ddp_buckets.h"
#include "core/torch_compat.h"

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

// DDP's rule (ddp_buckets.h), under the name plugins have used.
using ddp::AssignBuckets;

// Buckets by size (DDP's bucket_cap_mb, in MiB as there). The default planner: PyTorch's
// 25 MiB buckets after a first bucket of 1 MiB.
class CapPlanner : public BucketPlanner {
 public:
  static constexpr int64_t kMiB = ddp::kMiB;
  static constexpr int64_t kDefaultCapBytes = static_cast<int64_t>(ddp::kDefaultCapMiB) * kMiB;
  static constexpr int64_t kDefaultFirstCapBytes = static_cast<int64_t>(ddp::kFirstBucketMiB) * kMiB;
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
// 3. Gradient layout and 4. the communication hook chain.

// A bucket of gradients ready for reduction (c10d's GradBucket), as the layout hands it
// to the chain of communication hooks.
struct GradBucket {
  // Position in the engine's bucket order: bucket 0 (the last layers' gradients) is
  // complete first.
  size_t index = 0;
  // The flattened gradients, contiguous, as the chain's codec packed them (BucketCodec).
  // A hook may reduce it in place. Undefined where the layout keeps no flat buffer
  // (gradients averaged where they lie). Where the codec packs nothing
  // (GradientsWhereTheyLie), only the parts that alias one of `gradients` hold their
  // gradient yet, and a hook writes the whole result into it.
  at::Tensor buffer;
  // Per parameter, shaped like it, where its gradient is: a view of `buffer` where the
  // buffer holds it, else the tensor autograd left. On a GPU, a hook that reads them on
  // a stream other than the one current in Run records that stream on them
  // (Tensor::record_stream) before dropping them.
  std::vector<at::Tensor> gradients;
  // Where each parameter's gradient starts in `buffer` (elements), and its shape.
  std::vector<int64_t> offsets;
  std::vector<std::vector<int64_t>> sizes;
  bool is_last = false;  // the last bucket of the step
  int64_t step = 0;      // synced steps before this one (0 on the first)
  // The step is neither timed nor profiled: a hook may spend time measuring itself.
  bool may_measure = false;
  // The step's error is sampled (set by the error sampler, core/fidelity): a hook may
  // measure itself in it at a cost, e.g. the size of what error feedback carries.
  bool sampled = false;
  // Each gradient's parameter: its index in the model's parameters (stable when the
  // engine regroups buckets, so per-parameter state can be keyed by it).
  std::vector<size_t> parameters;
};

// Note [A codec's bytes]
// How a bucket's gradients become the bytes its hook chain reduces, and how the reduced
// bytes become gradients again, is the chain's to say (CommHook::Codec, asked once when
// the chain is made); the layout keeps the buffers and calls it. The layout holds
// gradients as they arrive and packs those it holds together (Note [Held gradients]),
// except that a gradient is packed at once where the buffer the codec made is in another
// dtype than it (a conversion reads each gradient once, held or not; held and cast with
// the others, bf16 measured 0.3% slower, bench/NOTES.md). What the codecs shipped do:
// - core's (the default, this class): a buffer in the gradients' dtype, the gradients
//   copied in, many in one kernel, and the average copied back;
// - a codec that sends bfloat16 (bf16) or float16: a buffer in its dtype, so that each
//   gradient is rounded into its bucket as it arrives and a float32 bucket is never
//   written; the average is widened back;
// - a hook that reads each gradient where autograd left it and writes the whole result
//   into the buffer (PowerSGD, fp8, bf16_fp32_sum: GradientsWhereTheyLie): nothing is
//   packed, which saves a copy of every gradient (+0.85% for PowerSGD rank 1 over NVLink,
//   bench/NOTES.md).
// A wrapper that keeps the bucket as it is passes its inner hook's codec on
// (HookWrapperBase). A buffer in the gradients' own dtype holds their values unchanged:
// a layout that keeps each gradient in its part of the buffer (bucket_view) has nothing
// to pack or unpack there, and calls neither. A codec that changes values (scales them,
// say) does it in its hook's Run, on a buffer of its own (Note [What a codec hands below]).
//
//   // A codec's bytes in float16: each gradient rounded in, the average widened back.
//   std::shared_ptr<const ddplab::BucketCodec> Codec() const override {
//     return std::make_shared<const ddplab::CastBytes>(at::kHalf);
//   }
class BucketCodec {
 public:
  virtual ~BucketCodec() = default;
  // The flat buffer of a bucket of `numel` elements, for gradients with `gradients`'
  // options (device, dtype).
  virtual at::Tensor Buffer(int64_t numel, const at::TensorOptions& gradients) const {
    return at::zeros({numel}, gradients);
  }
  // Packs `grads` (gradients as autograd left them) into `parts` (their parts of the
  // buffer, shaped alike) and returns what the hook reads as each gradient
  // (GradBucket::gradients). The default copies them in, many in one kernel, rounding
  // into the buffer's dtype, and returns `parts`.
  virtual std::vector<at::Tensor> Pack(const std::vector<at::Tensor>& grads, const std::vector<at::Tensor>& parts) const {
    compat::CopyEach(parts, grads);
    return parts;
  }
  // Writes the bucket's average, `parts` (of the result, shaped like each gradient), into
  // `grads` (the parameters' own gradients). The default copies, many in one kernel.
  virtual void Unpack(const std::vector<at::Tensor>& parts, const std::vector<at::Tensor>& grads) const {
    compat::CopyEach(grads, parts);
  }
  // What the engine's description adds, e.g. "sent as BFloat16"; "" for nothing.
  virtual std::string Describe() const { return ""; }
};

// Bytes in `dtype` (bf16: bfloat16): each gradient rounded into a buffer of that dtype
// as it arrives, the average widened back; the engine's description says "sent as
// <dtype>".
class CastBytes : public BucketCodec {
 public:
  explicit CastBytes(at::ScalarType dtype) : dtype_(dtype) {}
  at::Tensor Buffer(int64_t numel, const at::TensorOptions& gradients) const override {
    return at::zeros({numel}, gradients.dtype(dtype_));
  }
  std::string Describe() const override { return std::string("sent as ") + c10::toString(dtype_); }

 private:
  at::ScalarType dtype_;
};

// The codec of a hook that reads each gradient where autograd left it
// (GradBucket::gradients) and writes the whole result into the buffer: nothing is packed
// (Note [A codec's bytes]), except a gradient of another dtype than the buffer, which is
// converted into its part so that the hook reads every gradient in the bucket's dtype.
// The buffer is the gradients' dtype and holds, before the hook writes it, whatever it
// held.
class GradientsWhereTheyLie : public BucketCodec {
 public:
  std::vector<at::Tensor> Pack(const std::vector<at::Tensor>& grads, const std::vector<at::Tensor>& parts) const override {
    std::vector<at::Tensor> out = grads;
    for (size_t k = 0; k < grads.size(); ++k) {
      if (grads[k].scalar_type() == parts[k].scalar_type()) continue;
      parts[k].copy_(grads[k]);
      out[k] = parts[k];
    }
    return out;
  }
};

// One bucket as a layout sees it: its parameters, and where each starts in a flat buffer.
struct LayoutBucket {
  std::vector<size_t> params;
  std::vector<int64_t> offsets;  // elements
  int64_t numel = 0;
};

// Where gradients go between autograd and the reduction, and where the average comes
// back. Called by the engine with its lock held: Collect from autograd's thread.
class GradientLayout {
 public:
  virtual ~GradientLayout() = default;
  // (Re)builds for `buckets`, before the first step and after the rebuild (gradients
  // accumulated so far, in micro-steps, stay the parameters' gradients).
  // `codec` (the chain's, Note [A codec's bytes]) makes the flat buffers and packs
  // gradients into them.
  virtual void Build(const std::vector<LayoutBucket>& buckets, std::shared_ptr<const BucketCodec> codec) = 0;
  // Before a step's first backward: gradients go (or are zeroed).
  virtual void ZeroGrad() = 0;
  // Parameter `slot` of bucket `bucket` has its gradient for this step (param.grad()).
  virtual void Collect(size_t bucket, size_t slot) = 0;
  // That parameter gets no gradient for the rest of the run: its share is zeros.
  virtual void MarkUnused(size_t bucket, size_t slot) = 0;
  // Where the slot's parameter's next gradient may be written by the operation that makes
  // it, in place of a tensor of its own (Note [Gradients written where they go],
  // core/gradient_targets): a tensor shaped like the parameter, which Collect then finds
  // in place. Undefined (the default): nowhere, the gradient is collected as it comes.
  virtual at::Tensor Target(size_t /*bucket*/, size_t /*slot*/) const { return at::Tensor(); }
  // The bucket is complete: fills `out.buffer` and `out.gradients`.
  virtual void HandOver(size_t bucket, GradBucket& out) = 0;
  // The average: `result` flat, as the buffer (the codec unpacks it); undefined when the reduction
  // averaged `out.gradients` in place. Puts it where the parameters' gradients are.
  virtual void Deliver(size_t bucket, const at::Tensor& result) = 0;
  // Bytes held by flat buffers, and by the parameters' gradients outside them.
  virtual int64_t bucket_bytes() const = 0;
  virtual int64_t gradient_bytes() const = 0;
  virtual std::string Describe() const = 0;
};

// Flat buckets as core keeps them (its default layout, PyTorch DDP's: gradients copied
// into flat buckets, core/engine/copy_layout.h), with what a layout that wraps them reads
// of its buckets (plugins/bucket_view). The host makes them for a plugin's layout
// (FlatBucketsMaker); a plugin neither derives from nor links core's layout. The
// buffers' contents are shared (a wrapper may write the average or the gradients into
// them, through their views); the bookkeeping of what is held and unused is theirs,
// changed only through Put and MarkUnused.
class FlatBuckets : public GradientLayout {
 public:
  // What Build made (valid until the next Build): the chain's codec (core's where the
  // chain named none) and the buckets.
  virtual const BucketCodec& codec() const = 0;
  virtual size_t buckets() const = 0;
  // Bucket `bucket`'s flat buffer, as the chain's codec made it (BucketCodec::Buffer).
  virtual const at::Tensor& buffer(size_t bucket) const = 0;
  // Its parameters (indices into the model's) and, per slot, the view of the buffer
  // shaped like the slot's parameter.
  virtual const std::vector<size_t>& parameters(size_t bucket) const = 0;
  virtual const std::vector<at::Tensor>& views(size_t bucket) const = 0;
  // Whether the slot's parameter was marked unused (MarkUnused).
  virtual bool unused(size_t bucket, size_t slot) const = 0;
  // `result` (a tensor of the bucket's size) cut into the bucket's slots, each shaped like
  // its parameter.
  virtual std::vector<at::Tensor> PartsOf(size_t bucket, const at::Tensor& result) const = 0;
  // Puts `grad`, the slot's gradient, on its way into the buffer, as Collect does with
  // the parameter's own: packed at once where the buffer is in another dtype, else held.
  virtual void Put(size_t bucket, size_t slot, const at::Tensor& grad) = 0;
};

// The host's flat buckets over `params` (which outlive them), for a layout that wraps them.
using FlatBucketsMaker = std::function<std::unique_ptr<FlatBuckets>(std::vector<at::Tensor>& params)>;

// What makes a layout: the model's parameters (their gradients are the layout's to set),
// valid while the engine lives, and the host's flat buckets, should it wrap them.
using LayoutFactory =
    std::function<std::unique_ptr<GradientLayout>(std::vector<at::Tensor>& params, const FlatBucketsMaker& flat_buckets)>;

// The experiment's optimizer over some parameters (indices into the model's), with their
// averaged gradients (shaped like them, in any dtype: the optimizer casts).
using ParameterStep = std::function<void(const std::vector<size_t>& params, const std::vector<at::Tensor>& grads)>;

// A part of a parameter: elements [begin, begin + numel) of it, flattened (all of it:
// begin 0, numel its size).
struct ParameterPart {
  int64_t begin = 0;
  int64_t numel = 0;
};

// The experiment's optimizer over a part of each parameter (this rank's shard of it, as a
// sharded optimizer keeps them), with state of its own, as the host makes it for a hook
// (CommContext::optimizer_over_parts).
struct PartsOptimizer {
  // Steps the part of each parameter of `params` that has a gradient this step, with
  // `grads` (the parts' averaged gradients, `numel` elements each, in any dtype), and
  // tells the engine that the hook updated those parameters, as CommContext::step does.
  ParameterStep step;
  // Every parameter flattened: views that share its storage, for a hook that writes the
  // parameters themselves (a sharded optimizer's all-gather of the ranks' parts).
  std::vector<at::Tensor> flat_parameters;
};

// Makes a PartsOptimizer over `parts`, one per parameter (by index, every parameter);
// once per run. A hook must step the same part of a parameter every step: the state is
// the part's.
using PartsOptimizerMaker = std::function<PartsOptimizer(const std::vector<ParameterPart>& parts)>;

// What a communication hook works with.
struct CommContext {
  // c10d's process group (NCCL on GPUs, Gloo on CPUs): allreduce, broadcast, ...
  compat::CollectiveGroup* process_group = nullptr;
  int rank = 0;
  int world_size = 1;
  bool nccl = false;  // the group is NCCL's (GPU tensors), else Gloo's
  // The experiment's optimizer, for a hook that updates parameters as their averages
  // land (PyTorch's _hook_then_optimizer). Parameters it steps are not stepped again
  // after backward. Valid while the engine lives.
  ParameterStep step;
  // The host's collectives over `process_group` (collectives.h); MakeHookChain sets them
  // where the caller left them unset.
  std::shared_ptr<const Collectives> collectives;
  // The experiment's optimizer over parts of the parameters, for a hook that updates them
  // itself (a sharded optimizer); empty where the engine was given none. Valid while the
  // engine lives.
  PartsOptimizerMaker optimizer_over_parts;
  // The store the ranks met at (c10d's), for a hook that meets its peers outside the
  // collectives, e.g. to share memory with them (c10d's symmetric memory); null where the
  // engine was given none. Keys a hook sets there are its own to prefix.
  c10::intrusive_ptr<c10d::Store> store;
};

// Note [What a codec hands below]
// A codec (ExtensionPoint::kCodec, as bf16) wraps whatever reduces the bucket. It may hand
// the hook below a copy of its GradBucket with the same index, parameters, offsets and
// sizes and with `buffer` replaced by any contiguous flat tensor of as many elements, in
// any dtype the hook below reduces (core's all-reduce: any c10d reduces), e.g. the
// gradients rounded to bfloat16 or scaled; `gradients` then views of that buffer, or left
// as they were. The hook below completes its future with that buffer reduced, and the
// codec completes its own with the bucket's result in the bucket's dtype (ReducedGradients
// reads it). Or it packs the bucket in its dtype itself (Codec(), Note [A codec's bytes]),
// so that each gradient is rounded in as it arrives and nothing is converted in Run (bf16,
// fp16 at scale 1).
// A codec that only scales values still takes a flat buffer: a layout that keeps none
// (zero_copy) refuses every codec.

// Reduces a bucket across ranks (c10d's comm hook). The engine hands each bucket, as soon
// as it is complete, to the outermost hook of a chain that ends in core's all-reduce
// (AllreduceHook), and waits on the future before the optimizer step. A wrapper (a codec,
// the optimizer overlap, the error sampler) holds the hook below it, as PyTorch's
// bf16_compress_wrapper holds allreduce_hook.
class CommHook {
 public:
  virtual ~CommHook() = default;
  // Starts reducing `bucket` and returns a future that completes with the averaged
  // buffer (a Tensor of the bucket's shape), or with `bucket.gradients` averaged in place
  // where there is no buffer.
  virtual c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) = 0;
  // How gradients are packed into this hook's buckets and its result unpacked (Note [A
  // codec's bytes]; a wrapper: the hook below it's, or its own). Core's copy unless a
  // hook says otherwise. Asked once, before the first step.
  virtual std::shared_ptr<const BucketCodec> Codec() const { return std::make_shared<const BucketCodec>(); }
  // Figures for the run's result (e.g. "compression_ratio"), read after the run.
  virtual std::map<std::string, double> Stats() const { return {}; }
  // Backward has returned and every bucket of the step has been handed over; the engine
  // waits for the futures next (on a GPU: the current stream is the compute stream, its
  // kernels all queued). A wrapper passes it on.
  virtual void BackwardDone() {}
};

// The averaged gradients a bucket's future completed with, per parameter of the bucket
// and shaped like it: parts of the flat result where the bucket had a buffer (`flat`),
// else the gradients averaged where they lie.
inline std::vector<at::Tensor> ReducedGradients(const c10::IValue& value, bool flat, const std::vector<int64_t>& offsets,
                                                const std::vector<std::vector<int64_t>>& sizes) {
  std::vector<at::Tensor> out;
  if (!flat) return value.toTensorVector();
  const at::Tensor result = value.isTensor() ? value.toTensor() : value.toTensorVector().at(0);
  for (size_t k = 0; k < sizes.size(); ++k) {
    int64_t numel = 1;
    for (int64_t d : sizes[k]) numel *= d;
    out.push_back(result.narrow(0, offsets[k], numel).view(sizes[k]));
  }
  return out;
}

// A hook that wraps the one below it: Codec, Stats and BackwardDone are the inner
// hook's unless overridden.
class HookWrapperBase : public CommHook {
 public:
  explicit HookWrapperBase(std::unique_ptr<CommHook> inner) : inner_(std::move(inner)) {}
  std::shared_ptr<const BucketCodec> Codec() const override { return inner_->Codec(); }
  std::map<std::string, double> Stats() const override { return inner_->Stats(); }
  void BackwardDone() override { inner_->BackwardDone(); }

 protected:
  std::unique_ptr<CommHook> inner_;
};

// Makes a hook of the chain from the hook below it (which it may ignore: a hook that
// reduces the bucket itself, as PowerSGD).
using HookWrapper = std::function<std::unique_ptr<CommHook>(std::unique_ptr<CommHook> inner, const CommContext&)>;

// Sees each gradient as backward produces it in a synced step, before the layout takes
// it (the error sampler keeps an exact copy of them on the steps it samples).
class GradientTap {
 public:
  virtual ~GradientTap() = default;
  // At the start of each synced step: whether to see this step's gradients. `timed`: the
  // step is measured.
  virtual bool Wants(int64_t step, bool timed) = 0;
  // Parameter `param`'s gradient for the step (param.grad()), on autograd's thread.
  virtual void Take(size_t param, const at::Tensor& grad) = 0;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_EXTENSION_POINTS_H_
