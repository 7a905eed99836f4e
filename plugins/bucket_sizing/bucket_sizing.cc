// bucket_sizing: the size of gradient buckets (PyTorch DDP's bucket_cap_mb).
//
// Small buckets start reducing early and overlap with the rest of backward; one bucket
// larger than the model reduces everything at the end of backward. A sweep runs the
// experiment once per cap. The experiment loader has checked the values
// (core/experiment.cc); this applies them.
#include <cmath>
#include <cstdint>

#include "core/plugin_api.h"

namespace {

constexpr double kBytesPerMb = 1000.0 * 1000.0;

int64_t ToBytes(double mb) { return static_cast<int64_t>(std::llround(mb * kBytesPerMb)); }

void Register(ddplab::PluginRegistrar& registrar) {
  const auto& config = static_cast<const ddplab::v1::BucketSizingConfig&>(registrar.config());
  double cap_mb = config.bucket_cap_mb();
  double first_mb = config.first_bucket_cap_mb();
  std::vector<int64_t> sweep;
  for (double mb : config.sweep_cap_mb()) sweep.push_back(ToBytes(mb));
  registrar.AddEngineOptions([cap_mb, first_mb, sweep](ddplab::EngineOptions& options) {
    if (cap_mb > 0) options.bucket_cap_bytes = ToBytes(cap_mb);
    if (first_mb > 0) {
      options.first_bucket_cap_bytes = ToBytes(first_mb);
    } else if (options.first_bucket_cap_bytes > options.bucket_cap_bytes) {
      options.first_bucket_cap_bytes = options.bucket_cap_bytes;
    }
    options.sweep_bucket_cap_bytes = sweep;
  });
}

}  // namespace

DDPLAB_PLUGIN("bucket_sizing", "1.0.0", "ddplab.v1.BucketSizingConfig", Register)
