// FP8 in blocks: float32 values as 8-bit floats (OCP FP8 E4M3 or E5M2), each block of
// `block` values with one float32 scale, its largest magnitude over the format's largest
// value, so that every block uses the format's whole range.
//
//   ddplab::fp8::Quantized q = ddplab::fp8::Quantize(values, 128, ddplab::fp8::Format::kE4M3);
//   at::Tensor back = ddplab::fp8::Dequantize(q.bytes, q.scales, 128, Format::kE4M3, at::kFloat);
//
// Rounding is to nearest, ties to even, as PyTorch's float8 casts and CUDA's
// __nv_cvt_float_to_fp8 do; a scaled value never exceeds the format's largest (saturated),
// and NaN stays NaN (0x7F, with its sign). Per element the error is at most half a unit in
// the last place: 2^-4 of the value for E4M3 (2^-3 for E5M2) in the normal range, and
// scale * 2^-10 (2^-17) below it. Every operation is ATen's; the codes are computed by
// elementwise arithmetic in LibTorch 1.x, which has no float8, and by its float8 casts in
// 2.x, which give the same bytes (codec_test).
#ifndef DDPLAB_PLUGINS_FP8_CODEC_H_
#define DDPLAB_PLUGINS_FP8_CODEC_H_

#include <cstdint>

#include <ATen/ATen.h>

namespace ddplab::fp8 {

enum class Format { kE4M3, kE5M2 };

struct FormatSpec {
  int mantissa_bits;  // 3, 2
  int min_exponent;   // of the normal range: -6, -14
  float largest;      // 448, 57344
};
const FormatSpec& SpecOf(Format format);

// The 8-bit codes of `scaled` (float32, each within +-largest or NaN), as uint8.
at::Tensor Encode(const at::Tensor& scaled, Format format);
// The values of `bytes` (uint8) as float32, exactly.
at::Tensor Decode(const at::Tensor& bytes, Format format);

struct Quantized {
  at::Tensor bytes;   // uint8, as many as the values
  at::Tensor scales;  // float32, one per block: amax / largest, or 1 where that is 0 (zeros, or
                      // values below largest times float32's smallest: they quantize to 0)
};
// `values`: contiguous float32, a multiple of `block` of them.
Quantized Quantize(const at::Tensor& values, int64_t block, Format format);
// Each block's decoded values times its scale, computed in `dtype` (float32, or float64,
// where the product is exact).
at::Tensor Dequantize(const at::Tensor& bytes, const at::Tensor& scales, int64_t block, Format format,
                      at::ScalarType dtype);

// values / divisor, rounded once (a true division on every device).
at::Tensor DivideBy(const at::Tensor& values, double divisor);

namespace internal {
// Encode by ATen's elementwise operations only (the reference for kernels and casts).
at::Tensor EncodeWithAtenOps(const at::Tensor& scaled, Format format);
}  // namespace internal

}  // namespace ddplab::fp8

#endif  // DDPLAB_PLUGINS_FP8_CODEC_H_
