#include "core/training/precision.h"

namespace ddplab {

absl::Status SetMatmulPrecision(v1::Precision p, const at::Device& device) {
  if (p == v1::TF32 && !device.is_cuda()) {
    return absl::FailedPreconditionError("precision TF32 is a mode of GPUs' matrix units, and this run is on the CPU");
  }
  at::globalContext().setFloat32MatmulPrecision(p == v1::TF32 ? "high" : "highest");
  return absl::OkStatus();
}

ForwardPrecision::ForwardPrecision(v1::Precision p, const at::Device& device) {
  if (p == v1::BF16_AUTOCAST) autocast_.emplace(device.type(), at::kBFloat16);
}

std::string PrecisionWord(v1::Precision p) {
  switch (p) {
    case v1::TF32: return "tf32";
    case v1::BF16_AUTOCAST: return "bfloat16";
    default: return "float32";
  }
}

}  // namespace ddplab
