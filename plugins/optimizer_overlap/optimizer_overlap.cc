// optimizer_overlap: each bucket's parameters are stepped by the experiment's optimizer
// as soon as the bucket's future completes, while later buckets are still being reduced
// (PyTorch's _hook_then_optimizer): a hook wrapper around whatever reduces the bucket.
// The step then has no optimizer pass of its own after the last reduction. The
// parameters after each step are the same, bit for bit. An optimizer that needs every
// gradient first (gradient clipping) would not work with it; the experiment's SGD needs
// none.
//
// On a GPU the step is queued, on a stream that waits for the bucket's average, when the
// future completes (for NCCL at once); on a CPU it runs as the collective completes.
#include "core/plugin_api.h"
#include "plugins/optimizer_overlap/optimizer_overlap.pb.h"

namespace {

using ddplab::GradBucket;

class StepWhenReduced : public ddplab::HookWrapperBase {
 public:
  StepWhenReduced(std::unique_ptr<ddplab::CommHook> inner, ddplab::ParameterStep step)
      : HookWrapperBase(std::move(inner)), step_(std::move(step)) {}

  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    return inner_->Run(bucket)->then(
        [step = step_, params = bucket.parameters, flat = bucket.buffer.defined(), offsets = bucket.offsets,
         sizes = bucket.sizes](c10::ivalue::Future& reduced) {
          const c10::IValue value = reduced.value();
          step(params, ddplab::ReducedGradients(value, flat, offsets, sizes));
          return value;
        },
        c10::AnyType::get());
  }

 private:
  ddplab::ParameterStep step_;
};

void Register(ddplab::PluginRegistrar& registrar) {
  registrar.WrapCommHook(ddplab::ExtensionPoint::kHookWrapper,
                         [](std::unique_ptr<ddplab::CommHook> inner, const ddplab::CommContext& context) -> std::unique_ptr<ddplab::CommHook> {
                           return std::make_unique<StepWhenReduced>(std::move(inner), context.step);
                         });
}

}  // namespace

DDPLAB_PLUGIN("optimizer_overlap", "3.0.0", "ddplab.plugins.optimizer_overlap.v1.Config",
              ddplab::PluginStatus::kStable, Register)
