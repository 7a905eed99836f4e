// static_graph: the model's graph is the same every step (PyTorch DDP's static_graph).
//
// The engine then skips the per-step search for unused parameters, rebuilds buckets
// once from the order in which gradients first became ready, and reports an error if a
// later step produces gradients in another set.
#include "core/plugin_api.h"

namespace {

void Register(ddplab::PluginRegistrar& registrar) {
  registrar.AddEngineOptions([](ddplab::EngineOptions& options) { options.static_graph = true; });
}

}  // namespace

DDPLAB_PLUGIN("static_graph", "1.0.0", "ddplab.v1.StaticGraphConfig", Register)
