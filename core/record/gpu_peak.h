// A GPU's dense peak arithmetic rate for the precision a run computes in, from its
// datasheet, so that a run's TFLOP/s can be read as a share of what the GPU can do.
//
//   std::optional<double> peak = ddplab::PeakTflops("NVIDIA H200", v1::BF16_AUTOCAST);  // 989.4
//   if (peak) result.set_peak_fraction(tflops / *peak);
//
// FLOAT32 is the GPU's float32 rate without tensor cores (cuBLAS's float32 matmuls), TF32
// and BF16_AUTOCAST its tensor cores' dense rates (no sparsity). SXM parts; unknown GPUs
// (and CPUs) have none.
#ifndef DDPLAB_CORE_RECORD_GPU_PEAK_H_
#define DDPLAB_CORE_RECORD_GPU_PEAK_H_

#include <optional>
#include <string>

#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

std::optional<double> PeakTflops(const std::string& device, v1::Precision precision);

}  // namespace ddplab

#endif  // DDPLAB_CORE_RECORD_GPU_PEAK_H_
