// optimizer_overlap: each bucket's parameters are stepped by the experiment's optimizer
// as soon as the bucket's average lands, while later buckets are still being reduced
// (PyTorch's _hook_then_optimizer): a hook wrapper around whatever reduces the bucket.
// The step then has no optimizer pass of its own after the last reduction. The
// parameters after each step are the same, bit for bit. An optimizer that needs every
// gradient first (gradient clipping) would not work with it; the experiment's SGD needs
// none.
//
// Where the steps run: each bucket's future is this hook's own, completed once backward
// has returned (CommHook::BackwardDone), its compute all queued: then, bucket after
// bucket, the current stream waits for the bucket's average and the optimizer steps its
// parameters, queued behind it (on a CPU: once the average is in), while later buckets
// still reduce. PyTorch's future.then() would run each step at once, on a stream of
// CUDA's pool, beside backward: for zero_copy over NVLink that measured 2.5% slower and
// 0.33 GiB more (bench/NOTES.md).
#include <exception>
#include <vector>

#include "core/plugin/plugin_api.h"
#include "plugins/optimizer_overlap/optimizer_overlap.pb.h"

namespace {

using ddplab::GradBucket;

class StepWhenReduced : public ddplab::HookWrapperBase {
 public:
  StepWhenReduced(std::unique_ptr<ddplab::CommHook> inner, ddplab::ParameterStep step)
      : HookWrapperBase(std::move(inner)), step_(std::move(step)) {}

  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    Pending pending{inner_->Run(bucket), bucket.parameters, bucket.buffer.defined(), bucket.offsets, bucket.sizes, {}};
    std::vector<c10::Device> devices;  // the bucket's, where its gradients are (always handed over)
    if (!bucket.gradients.empty() && !bucket.gradients[0].device().is_cpu()) devices.push_back(bucket.gradients[0].device());
    pending.done = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get(), devices);
    c10::intrusive_ptr<c10::ivalue::Future> done = pending.done;
    pending_.push_back(std::move(pending));
    return done;
  }

  void BackwardDone() override {
    StepAll();
    inner_->BackwardDone();
  }

 private:
  struct Pending {
    c10::intrusive_ptr<c10::ivalue::Future> reduced;
    std::vector<size_t> params;
    bool flat;
    std::vector<int64_t> offsets;
    std::vector<std::vector<int64_t>> sizes;
    c10::intrusive_ptr<c10::ivalue::Future> done;
  };

  // Every bucket of the step, in order: its average waited for, its parameters stepped.
  void StepAll() {
    for (Pending& p : pending_) {
      try {
        p.reduced->wait();
        if (p.reduced->hasError()) std::rethrow_exception(p.reduced->exception_ptr());
        const c10::IValue value = p.reduced->value();
        step_(p.params, ddplab::ReducedGradients(value, p.flat, p.offsets, p.sizes));
        p.done->markCompleted(value);
      } catch (...) {
        p.done->setError(std::current_exception());
      }
    }
    pending_.clear();
  }

  ddplab::ParameterStep step_;
  std::vector<Pending> pending_;  // this step's buckets so far
};

void Register(const ddplab::plugins::optimizer_overlap::v1::Config&, ddplab::PluginRegistrar& registrar) {
  registrar.WrapCommHook(ddplab::ExtensionPoint::kHookWrapper,
                         [](std::unique_ptr<ddplab::CommHook> inner, const ddplab::CommContext& context) -> std::unique_ptr<ddplab::CommHook> {
                           return std::make_unique<StepWhenReduced>(std::move(inner), context.step);
                         });
}

}  // namespace

DDPLAB_PLUGIN("optimizer_overlap", "3.0.0", ddplab::plugins::optimizer_overlap::v1::Config, ddplab::PluginStatus::kStable, Register)
