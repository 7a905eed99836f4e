// bucket_view: parameters' gradients are views into the engine's bucket buffers
// (PyTorch DDP's gradient_as_bucket_view), so backward writes gradients straight into
// the buffers that are all-reduced: no copy in before the reduction, none out after it,
// and one gradient-sized allocation fewer.
#include "core/plugin_api.h"

namespace {

void Register(ddplab::PluginRegistrar& registrar) {
  registrar.AddEngineOptions(
      [](ddplab::EngineOptions& options) { options.gradient_as_bucket_view = true; });
}

}  // namespace

DDPLAB_PLUGIN("bucket_view", "1.0.0", "ddplab.v1.BucketViewConfig", Register)
