#include "core/record/gpu_peak.h"

#include "absl/strings/match.h"

namespace ddplab {
namespace {

struct Peak {
  const char* name;  // a part of the device's name; the first that matches is taken
  double float32, tf32, bfloat16;
};

// NVIDIA's datasheets, dense TFLOP/s.
constexpr Peak kPeaks[] = {
    {"H200", 67, 494.7, 989.4},
    {"H100 PCIe", 51.2, 378, 756},
    {"H100", 67, 494.7, 989.4},
    {"A100", 19.5, 156, 312},
    {"L40S", 91.6, 183.2, 362.1},
};

}  // namespace

std::optional<double> PeakTflops(const std::string& device, v1::Precision precision) {
  for (const Peak& p : kPeaks) {
    if (!absl::StrContains(device, p.name)) continue;
    switch (precision) {
      case v1::TF32: return p.tf32;
      case v1::BF16_AUTOCAST: return p.bfloat16;
      default: return p.float32;
    }
  }
  return std::nullopt;
}

}  // namespace ddplab
