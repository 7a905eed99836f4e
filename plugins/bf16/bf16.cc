// bf16: gradients travel in bfloat16 (PyTorch's bf16_compress_hook), half the bytes of
// float32. The engine casts each gradient into its bucket's bfloat16 buffer as autograd
// hands it over, averages the bucket in bfloat16 (NCCL divides inside the reduction, so
// there is no separate division pass) and writes it back in float32. It is an
// engine option rather than a hook so that it composes: with powersgd, P and Q travel
// in bfloat16.
#include "core/plugin_api.h"

namespace {

void Register(ddplab::PluginRegistrar& registrar) {
  const auto& config = static_cast<const ddplab::v1::Bf16CompressConfig&>(registrar.config());
  const int every = static_cast<int>(config.sample_error_every());
  registrar.AddEngineOptions([every](ddplab::EngineOptions& options) {
    options.comm_dtype = at::kBFloat16;
    if (every > 0) options.gradient_error_every = every;
  });
}

}  // namespace

DDPLAB_PLUGIN("bf16", "1.0.0", "ddplab.v1.Bf16CompressConfig", Register)
