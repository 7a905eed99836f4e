// bf16_exact's passes (sum_kernel.h). Bound by memory: each thread reads its elements
// and writes each result once.
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
    if (world == 2) {  // a/2 + b/2, as the float32 averages compute it
      seg.out[i] = __fmul_rn(__bfloat162float(from[i]), 0.5f) + __fmul_rn(__bfloat162float(from[stride + i]), 0.5f);
      continue;
    }
    float sum = __bfloat162float(from[i]);
    for (int r = 1; r < world; ++r) sum += __bfloat162float(from[r * stride + i]);
    seg.out[i] = sum / static_cast<float>(world);
  }
}

struct Sources {
  Source s[kSegmentsPerLaunch];
};

__global__ void __launch_bounds__(kThreads)
    NarrowKernel(Sources sources, __nv_bfloat16* __restrict__ wire, unsigned long long* __restrict__ rounded) {
  const Source src = sources.s[blockIdx.y];
  __nv_bfloat16* to = wire + src.offset;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned int inexact = 0;
  // Every thread of a warp runs the same number of rounds: the ballot below needs them all.
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t rounds = (src.n + step - 1) / step;
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t i = first + round * step;
    bool lost = false;
    if (i < src.n) {
      const float x = src.from[i];
      const __nv_bfloat16 y = __float2bfloat16_rn(x);
      to[i] = y;
      lost = __bfloat162float(y) != x && x == x;  // NaN (x != x) is not counted
    }
    inexact += __popc(__ballot_sync(0xffffffffu, lost));
  }
  if ((threadIdx.x & 31) == 0 && inexact != 0) atomicAdd(rounded, static_cast<unsigned long long>(inexact));
}

}  // namespace

cudaError_t Narrow(const Source* sources, int count, uint16_t* wire, int64_t* rounded, cudaStream_t stream) {
  auto* out = reinterpret_cast<__nv_bfloat16*>(wire);
  for (int first = 0; first < count; first += kSegmentsPerLaunch) {
    const int n = std::min(kSegmentsPerLaunch, count - first);
    Sources batch{};
    int64_t longest = 0;
    for (int k = 0; k < n; ++k) {
      batch.s[k] = sources[first + k];
      longest = std::max(longest, sources[first + k].n);
    }
    if (longest == 0) continue;
    const int64_t blocks = std::min<int64_t>((longest + kThreads * 4 - 1) / (kThreads * 4), 1024);
    NarrowKernel<<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(n)), kThreads, 0, stream>>>(
        batch, out, reinterpret_cast<unsigned long long*>(rounded));
    if (cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

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
