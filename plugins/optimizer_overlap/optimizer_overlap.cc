// optimizer_overlap: each bucket's parameters are updated by the experiment's optimizer
// as soon as the bucket's average is in place, in bucket order after backward's compute,
// while the last buckets are still being reduced; the step then has no optimizer pass of
// its own after the last reduction (PyTorch's _hook_then_optimizer). The parameters after
// each step are the same, bit for bit. An optimizer that needs every gradient first
// (gradient clipping) would not work with it; the experiment's SGD needs none.
#include "core/plugin_api.h"
#include "plugins/optimizer_overlap/optimizer_overlap.pb.h"

namespace {

class UpdatePerBucket : public ddplab::ParameterUpdates {
 public:
  bool OnBucketAveraged(const std::vector<size_t>& params, const ddplab::ParameterStep& step) override {
    step(params);
    return true;
  }
};

void Register(ddplab::PluginRegistrar& registrar) {
  registrar.SetParameterUpdates([] { return std::make_unique<UpdatePerBucket>(); });
}

}  // namespace

DDPLAB_PLUGIN("optimizer_overlap", "2.0.0", "ddplab.plugins.optimizer_overlap.v1.Config",
              ddplab::PluginStatus::kStable, Register)
