// forward_overlap: the end of the step overlapped with the next step's forward. With
// optimizer_overlap alone the step still ends when the last bucket is reduced and its
// parameters updated; here the step ends with backward's compute, and the last reductions
// and the updates run on a stream of the engine's own while the next forward begins. The
// forward waits, stage by stage, for the updates of the parameters it is about to read
// (DataParallelEngine::WaitForParameters). The first stages' parameters are the ones
// backward's last buckets hold, so `reversed_buckets` of them are reduced last-first.
#include <algorithm>
#include <cstdint>

#include "core/plugin_api.h"

namespace {

void Register(ddplab::PluginRegistrar& registrar) {
  const auto& config = static_cast<const ddplab::v1::ForwardOverlapConfig&>(registrar.config());
  // More than there are buckets means all of them.
  const int reversed = static_cast<int>(std::min<uint32_t>(config.reversed_buckets(), 1u << 30));
  registrar.AddEngineOptions([reversed](ddplab::EngineOptions& options) {
    options.overlap_optimizer = true;
    options.updates_beside_forward = true;
    options.reversed_buckets = reversed;
  });
}

}  // namespace

DDPLAB_PLUGIN("forward_overlap", "1.0.0", "ddplab.v1.ForwardOverlapConfig", Register)
