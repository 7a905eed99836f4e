// launch_thread: the engine launches its all-reduces from a thread of its own. Without
// it each bucket's collective is started from autograd's thread as the bucket completes,
// so c10d's host-side work per collective (events, bookkeeping, the NCCL call) sits
// between backward's own kernel launches. With it autograd's thread records an event on
// its stream and hands the bucket over; the thread orders a stream of its own after that
// event and starts the collective from there, in the same bucket order on every rank.
#include "core/plugin_api.h"

namespace {

void Register(ddplab::PluginRegistrar& registrar) {
  registrar.AddEngineOptions([](ddplab::EngineOptions& options) { options.launch_thread = true; });
}

}  // namespace

DDPLAB_PLUGIN("launch_thread", "1.0.0", "ddplab.v1.LaunchThreadConfig", Register)
