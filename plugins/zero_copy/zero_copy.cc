// zero_copy: gradients are averaged where autograd left them. When a bucket's gradients
// are all ready, the engine hands them, as they are, to one grouped all-reduce (c10d's
// allreduce_coalesced: on NCCL one group of all-reduces in one launch), instead of
// copying them into a flat bucket buffer first (plain DDP, and bucket_view for every
// gradient autograd allocates itself). No bucket memory, no copy kernels beside backward.
// It needs the engine's own all-reduce in the gradients' dtype, so the plugin host refuses
// it beside bucket_view, bf16 or a communication hook.
#include "core/plugin_api.h"

namespace {

void Register(ddplab::PluginRegistrar& registrar) {
  registrar.AddEngineOptions([](ddplab::EngineOptions& options) { options.reduce_in_place = true; });
}

}  // namespace

DDPLAB_PLUGIN("zero_copy", "1.0.0", "ddplab.v1.ZeroCopyConfig", Register)
