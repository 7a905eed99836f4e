// fp8's kernels (kernels.h). Quantize and SumShards run one warp per block of values
// (lane l takes values l, l + 32, ..., held in registers up to 256 values a block);
// Dequantize one thread per 4 codes. Arithmetic is written with the
// _rn intrinsics, which nvcc never contracts, so that each operation rounds once as
// ATen's do (wire.cc's other form).
#include "plugins/fp8/kernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace ddplab::fp8::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;  // 8 warps: 8 blocks of values per thread block

// The larger, NaN if either is (as ATen's amax).
__device__ __forceinline__ float MaxNan(float a, float b) { return (a > b || isnan(a)) ? a : b; }

// The largest of the warp's `v`, for every lane.
__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) v = MaxNan(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Within +-largest; NaN stays NaN (as ATen's clamp).
__device__ __forceinline__ float Clamp(float y, float largest) {
  return isnan(y) ? y : fminf(fmaxf(y, -largest), largest);
}

// codec.cc's EncodeWithAtenOps, for one value within +-largest or NaN.
__device__ __forceinline__ uint8_t Encode(float y, const FormatParams& f) {
  const uint8_t sign = signbit(y) ? 0x80 : 0;
  if (isnan(y)) return 0x7F | sign;
  const float magnitude = fabsf(y);
  int e;
  frexpf(fmaxf(magnitude, FLT_MIN), &e);
  const int exponent = max(e - 1, f.min_exponent);
  const float quantum = __int_as_float((exponent - f.mantissa_bits + 127) << 23);
  const int k = static_cast<int>(rintf(__fdiv_rn(magnitude, quantum)));
  return static_cast<uint8_t>(((exponent - f.min_exponent) << f.mantissa_bits) + k) | sign;
}

__device__ __forceinline__ float Decode(uint8_t code, const FormatParams& f) {
  const int magnitude = code & 0x7F, m = f.mantissa_bits;
  const int e = magnitude >> m, mantissa = magnitude & ((1 << m) - 1);
  float v = e == 0 ? ldexpf(static_cast<float>(mantissa), f.min_exponent - m)
                   : ldexpf(static_cast<float>((1 << m) + mantissa), e - 1 + f.min_exponent - m);
  if (v > f.largest) v = (f.e5m2 && mantissa == 0) ? INFINITY : NAN;
  return (code & 0x80) ? -v : v;
}

// amax / largest, or 1 where that is 0 (codec.h's Quantized::scales).
__device__ __forceinline__ float ScaleOf(float amax, const FormatParams& f) {
  const float scale = __fdiv_rn(amax, f.largest);
  return scale == 0.0f ? 1.0f : scale;
}

// Which block of values this warp takes (one warp per block), or -1 past the last.
__device__ __forceinline__ int64_t WarpsBlock(int64_t blocks) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * (kThreads / kWarp) + threadIdx.x / kWarp;
  return g < blocks ? g : -1;
}

// PER: values per lane held in registers (lane l takes values l, l + 32, ...); 0 where a
// block has more than 256 values, which are then read twice.
template <int PER>
__global__ void QuantizeKernel(const float* values, float* residual, Shape s, FormatParams f, uint8_t* parts) {
  const int64_t g = WarpsBlock(s.shards * s.blocks_per_shard);
  if (g < 0) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t shard = g / s.blocks_per_shard, j = g % s.blocks_per_shard;
  const float* x = values + g * s.block;
  float* r = residual == nullptr ? nullptr : residual + g * s.block;
  auto load = [&](int64_t i) { return r == nullptr ? x[i] : __fadd_rn(x[i], r[i]); };
  float v[PER > 0 ? PER : 1];
  float local = 0.0f;
  if constexpr (PER > 0) {
#pragma unroll
    for (int t = 0; t < PER; ++t) {
      const int64_t i = lane + t * kWarp;
      if (i < s.block) local = MaxNan(local, fabsf(v[t] = load(i)));
    }
  } else {
    for (int64_t i = lane; i < s.block; i += kWarp) local = MaxNan(local, fabsf(load(i)));
  }
  const float scale = ScaleOf(WarpMax(local), f);
  uint8_t* part = parts + shard * s.part_bytes;
  if (lane == 0) reinterpret_cast<float*>(part)[j] = scale;
  uint8_t* codes = part + 4 * s.blocks_per_shard + j * s.block;
  auto put = [&](int64_t i, float value) {
    const uint8_t code = Encode(Clamp(__fdiv_rn(value, scale), f.largest), f);
    codes[i] = code;
    if (r != nullptr) r[i] = __fsub_rn(value, __fmul_rn(Decode(code, f), scale));
  };
  if constexpr (PER > 0) {
#pragma unroll
    for (int t = 0; t < PER; ++t) {
      const int64_t i = lane + t * kWarp;
      if (i < s.block) put(i, v[t]);
    }
  } else {
    for (int64_t i = lane; i < s.block; i += kWarp) put(i, load(i));
  }
}

// Value i of block j of the shard: every rank's, dequantized in float64, summed in rank
// order, divided by the ranks, rounded to float32.
__device__ __forceinline__ float MeanOf(const uint8_t* received, const Shape& s, const FormatParams& f, int64_t j,
                                        int64_t i) {
  double sum = 0.0;
  for (int r = 0; r < s.shards; ++r) {
    const uint8_t* part = received + r * s.part_bytes;
    const float scale = reinterpret_cast<const float*>(part)[j];
    const uint8_t code = part[4 * s.blocks_per_shard + j * s.block + i];
    const double term = __dmul_rn(static_cast<double>(Decode(code, f)), static_cast<double>(scale));
    sum = r == 0 ? term : __dadd_rn(sum, term);
  }
  return __double2float_rn(__ddiv_rn(sum, static_cast<double>(s.shards)));
}

template <int PER>
__global__ void SumShardsKernel(const uint8_t* received, Shape s, FormatParams f, uint8_t* part,
                                __nv_bfloat16* bf16) {
  const int64_t j = WarpsBlock(s.blocks_per_shard);
  if (j < 0) return;
  const int lane = threadIdx.x % kWarp;
  if (bf16 != nullptr) {
    for (int64_t i = lane; i < s.block; i += kWarp) bf16[j * s.block + i] = __float2bfloat16_rn(MeanOf(received, s, f, j, i));
    return;
  }
  float v[PER > 0 ? PER : 1];
  float local = 0.0f;
  if constexpr (PER > 0) {
#pragma unroll
    for (int t = 0; t < PER; ++t) {
      const int64_t i = lane + t * kWarp;
      if (i < s.block) local = MaxNan(local, fabsf(v[t] = MeanOf(received, s, f, j, i)));
    }
  } else {
    for (int64_t i = lane; i < s.block; i += kWarp) local = MaxNan(local, fabsf(MeanOf(received, s, f, j, i)));
  }
  const float scale = ScaleOf(WarpMax(local), f);
  if (lane == 0) reinterpret_cast<float*>(part)[j] = scale;
  uint8_t* codes = part + 4 * s.blocks_per_shard + j * s.block;
  if constexpr (PER > 0) {
#pragma unroll
    for (int t = 0; t < PER; ++t) {
      const int64_t i = lane + t * kWarp;
      if (i < s.block) codes[i] = Encode(Clamp(__fdiv_rn(v[t], scale), f.largest), f);
    }
  } else {
    for (int64_t i = lane; i < s.block; i += kWarp) {
      codes[i] = Encode(Clamp(__fdiv_rn(MeanOf(received, s, f, j, i), scale), f.largest), f);
    }
  }
}

// One thread per 4 codes (a block holds a multiple of 16), the first `numel` values out.
__global__ void DequantizeKernel(const uint8_t* parts, Shape s, FormatParams f, float* out, int64_t numel) {
  const int64_t quads = s.shards * s.shard / 4;
  for (int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < quads;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t first = q * 4, shard = first / s.shard, within = first % s.shard, j = within / s.block;
    const uint8_t* part = parts + shard * s.part_bytes;
    const float scale = reinterpret_cast<const float*>(part)[j];
    const uchar4 codes = *reinterpret_cast<const uchar4*>(part + 4 * s.blocks_per_shard + within);
    const float v[4] = {__fmul_rn(Decode(codes.x, f), scale), __fmul_rn(Decode(codes.y, f), scale),
                        __fmul_rn(Decode(codes.z, f), scale), __fmul_rn(Decode(codes.w, f), scale)};
    for (int k = 0; k < 4; ++k) {
      if (first + k < numel) out[first + k] = v[k];
    }
  }
}

unsigned WarpBlocks(int64_t blocks) { return static_cast<unsigned>((blocks + kThreads / kWarp - 1) / (kThreads / kWarp)); }

// Runs KERNEL<PER> with PER the values per lane of the shape's blocks.
#define DDPLAB_FP8_LAUNCH(KERNEL, BLOCKS, STREAM, ...)                                             \
  do {                                                                                             \
    const int64_t per = (s.block + kWarp - 1) / kWarp;                                             \
    if (per <= 1) {                                                                                \
      KERNEL<1><<<WarpBlocks(BLOCKS), kThreads, 0, STREAM>>>(__VA_ARGS__);                         \
    } else if (per <= 2) {                                                                         \
      KERNEL<2><<<WarpBlocks(BLOCKS), kThreads, 0, STREAM>>>(__VA_ARGS__);                         \
    } else if (per <= 4) {                                                                         \
      KERNEL<4><<<WarpBlocks(BLOCKS), kThreads, 0, STREAM>>>(__VA_ARGS__);                         \
    } else if (per <= 8) {                                                                         \
      KERNEL<8><<<WarpBlocks(BLOCKS), kThreads, 0, STREAM>>>(__VA_ARGS__);                         \
    } else {                                                                                       \
      KERNEL<0><<<WarpBlocks(BLOCKS), kThreads, 0, STREAM>>>(__VA_ARGS__);                         \
    }                                                                                              \
  } while (false)

}  // namespace

cudaError_t Quantize(const float* values, float* residual, const Shape& s, const FormatParams& format, uint8_t* parts,
                     cudaStream_t stream) {
  DDPLAB_FP8_LAUNCH(QuantizeKernel, s.shards * s.blocks_per_shard, stream, values, residual, s, format, parts);
  return cudaGetLastError();
}

cudaError_t SumShards(const uint8_t* received, const Shape& s, const FormatParams& format, uint8_t* part, void* bf16,
                      cudaStream_t stream) {
  DDPLAB_FP8_LAUNCH(SumShardsKernel, s.blocks_per_shard, stream, received, s, format, part,
                    static_cast<__nv_bfloat16*>(bf16));
  return cudaGetLastError();
}

cudaError_t Dequantize(const uint8_t* parts, const Shape& s, const FormatParams& format, float* out, int64_t numel,
                       cudaStream_t stream) {
  const int64_t quads = s.shards * s.shard / 4;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((quads + kThreads - 1) / kThreads, 65536));
  DequantizeKernel<<<blocks, kThreads, 0, stream>>>(parts, s, format, out, numel);
  return cudaGetLastError();
}

}  // namespace ddplab::fp8::kernels
