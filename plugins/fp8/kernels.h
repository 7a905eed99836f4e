// fp8's passes over a bucket as CUDA kernels of our own, one pass each where ATen needs
// about ten (wire.h says what each computes; these give the same bits):
//
//   Quantize:   float32 values (+ residual) -> W parts of scales and codes (+ residual)
//   SumShards:  W parts of one shard -> their mean, quantized again as one part (or bfloat16)
//   Dequantize: n parts -> float32 values
//
// One warp per block of values (each lane's values in registers up to 256 a block, read
// twice beyond), one thread per 4 codes to dequantize. Divisions, products and sums are rounded
// once each (no contraction into fused multiply-adds), as ATen's operations are. Plain
// C++ with raw pointers: nvcc compiles the kernels without LibTorch's headers.
#ifndef DDPLAB_PLUGINS_FP8_KERNELS_H_
#define DDPLAB_PLUGINS_FP8_KERNELS_H_

#include <cstdint>

#include <cuda_runtime_api.h>

namespace ddplab::fp8::kernels {

struct FormatParams {
  int mantissa_bits;  // 3 (E4M3), 2 (E5M2)
  int min_exponent;   // of the normal range: -6, -14
  float largest;      // 448, 57344
  bool e5m2;          // decodes 0x7C as infinity
};

// `shards` parts of `shard` values in blocks of `block` (blocks_per_shard of them), each
// part `part_bytes` long: its blocks' float32 scales, then its codes.
struct Shape {
  int shards;
  int64_t shard;
  int64_t block;
  int64_t blocks_per_shard;
  int64_t part_bytes;
};

// values [shards * shard] -> parts [shards * part_bytes]. `residual` may be null; else it
// is added to the values first and becomes (values + residual) - dequantized.
cudaError_t Quantize(const float* values, float* residual, const Shape& shape, const FormatParams& format,
                     uint8_t* parts, cudaStream_t stream);

// received [shards (= ranks) * part_bytes]: every rank's part of one shard -> the mean,
// quantized as one part into `part` [part_bytes], or rounded into `bf16` [shard] (the
// other null).
cudaError_t SumShards(const uint8_t* received, const Shape& shape, const FormatParams& format, uint8_t* part,
                      void* bf16, cudaStream_t stream);

// parts [shards * part_bytes] -> out, float32: the first `numel` values of the
// shards * shard.
cudaError_t Dequantize(const uint8_t* parts, const Shape& shape, const FormatParams& format, float* out,
                       int64_t numel, cudaStream_t stream);

}  // namespace ddplab::fp8::kernels

#endif  // DDPLAB_PLUGINS_FP8_KERNELS_H_
