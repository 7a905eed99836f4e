// tail_communicator: the last buckets of each step over a communicator of their own.
// What is reduced after backward's compute is the step's exposed communication. With the
// experiment's communicator capped to few NCCL channels, so that its kernels leave
// backward its multiprocessors (distributed.nccl_channels), those last buckets are
// reduced at the capped bandwidth too, though little or nothing computes beside them any
// more. This plugin has the engine reduce them over a second process group, whose
// communicator has channels of its own (by default as many as NCCL would use).
#include "core/plugin_api.h"

namespace {

void Register(ddplab::PluginRegistrar& registrar) {
  const auto& config = static_cast<const ddplab::v1::TailCommunicatorConfig&>(registrar.config());
  const int buckets = config.buckets() > 0 ? static_cast<int>(config.buckets()) : 1;
  const int channels = static_cast<int>(config.channels());
  registrar.AddEngineOptions([buckets, channels](ddplab::EngineOptions& options) {
    options.tail_buckets = buckets;
    options.tail_channels = channels;
  });
}

}  // namespace

DDPLAB_PLUGIN("tail_communicator", "1.0.0", "ddplab.v1.TailCommunicatorConfig", Register)
