// A well-formed test plugin: sets gradient_as_bucket_view.
#include "core/plugin_api.h"

namespace {

void Register(ddplab::PluginRegistrar& registrar) {
  registrar.AddEngineOptions([](ddplab::EngineOptions& options) {
    options.gradient_as_bucket_view = true;
  });
}

}  // namespace

DDPLAB_PLUGIN("good", "1.2.3", "ddplab.v1.BucketViewConfig", Register)
