// bf16_exact's sum (sum_kernel.h). Bound by memory: each thread reads its elements of
// every rank's row and writes one float32.
#include "plugins/bf16_exact/sum_kernel.h"

#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ddplab::bf16_exact {
namespace {

constexpr int kSegmentsPerLaunch = 64;
constexpr int kThreads = 256;

struct Segments {
  Segment s[kSegmentsPerLaunch];
};

__global__ void __launch_bounds__(kThreads)
    SumKernel(const __nv_bfloat16* __restrict__ gathered, int64_t stride, int world, Segments segments) {
  const Segment seg = segments.s[blockIdx.y];
  const __nv_bfloat16* from = gathered + seg.offset;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < seg.n; i += step) {
    float sum = __bfloat162float(from[i]);
    for (int r = 1; r < world; ++r) sum += __bfloat162float(from[r * stride + i]);
    seg.out[i] = sum / static_cast<float>(world);
  }
}

}  // namespace

cudaError_t SumInto(const uint16_t* gathered, int64_t stride, int world, const Segment* segments, int count,
                    cudaStream_t stream) {
  const auto* rows = reinterpret_cast<const __nv_bfloat16*>(gathered);
  for (int first = 0; first < count; first += kSegmentsPerLaunch) {
    const int n = std::min(kSegmentsPerLaunch, count - first);
    Segments batch{};
    int64_t longest = 0;
    for (int k = 0; k < n; ++k) {
      batch.s[k] = segments[first + k];
      longest = std::max(longest, segments[first + k].n);
    }
    if (longest == 0) continue;
    const int64_t blocks = std::min<int64_t>((longest + kThreads * 4 - 1) / (kThreads * 4), 1024);
    SumKernel<<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(n)), kThreads, 0, stream>>>(
        rows, stride, world, batch);
    if (cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

}  // namespace ddplab::bf16_exact
