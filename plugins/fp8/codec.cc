#include "plugins/fp8/codec.h"

#include <cfloat>
#include <cmath>
#include <vector>

#include <torch/version.h>

// LibTorch 2.x casts to and from float8 (in kernels, on any device); 1.x has no float8.
#if TORCH_VERSION_MAJOR >= 2
#define DDPLAB_FP8_CASTS 1
#endif

namespace ddplab::fp8 {
namespace {

constexpr FormatSpec kE4M3{3, -6, 448.0f};
constexpr FormatSpec kE5M2{2, -14, 57344.0f};
constexpr int kNanCode = 0x7F;  // both formats' NaN (E5M2's has a mantissa; E4M3 "fn"'s is its only one)

#if !defined(DDPLAB_FP8_CASTS)
// Every code's value (NaN where the code is one; E5M2's 0x7C is infinity).
at::Tensor DecodeTable(Format format) {
  const FormatSpec& spec = SpecOf(format);
  const int mantissa_codes = 1 << spec.mantissa_bits;
  std::vector<float> values(256);
  for (int code = 0; code < 128; ++code) {
    const int exponent_bits = code >> spec.mantissa_bits, mantissa = code & (mantissa_codes - 1);
    float v;
    if (exponent_bits == 0) {
      v = std::ldexp(static_cast<float>(mantissa), spec.min_exponent - spec.mantissa_bits);
    } else {
      v = std::ldexp(static_cast<float>(mantissa_codes + mantissa),
                     exponent_bits - 1 + spec.min_exponent - spec.mantissa_bits);
    }
    if (v > spec.largest) v = (format == Format::kE5M2 && mantissa == 0) ? INFINITY : NAN;
    values[code] = v;
    values[code + 128] = -v;
  }
  return at::tensor(values);
}
#endif

#if defined(DDPLAB_FP8_CASTS)
at::ScalarType Float8(Format format) {
  return format == Format::kE4M3 ? at::kFloat8_e4m3fn : at::kFloat8_e5m2;
}
#endif

}  // namespace

const FormatSpec& SpecOf(Format format) { return format == Format::kE4M3 ? kE4M3 : kE5M2; }

namespace internal {

// For |y| at most `largest`: its exponent e (floor(log2|y|), at least the normal range's
// smallest), its quantum q = 2^(e - mantissa_bits), k = round-half-even(|y| / q) exactly;
// the code is then (e - min_exponent) * 2^mantissa_bits + k (k = 2^(bits+1) carries into
// the next exponent, as it should), and the sign bit.
at::Tensor EncodeWithAtenOps(const at::Tensor& scaled, Format format) {
  const FormatSpec& spec = SpecOf(format);
  const at::Tensor magnitude = scaled.abs();
  // frexp: |y| = m * 2^x with m in [0.5, 1); zero is taken as the smallest normal float32,
  // whose exponent is below every format's, and rounds to k = 0 all the same.
  const at::Tensor exponent = std::get<1>(at::frexp(magnitude.clamp_min(FLT_MIN))).sub_(1).clamp_min_(spec.min_exponent);
  // 2^(e - mantissa_bits), made from its float32 bits: exact.
  const at::Tensor quantum = exponent.add(127 - spec.mantissa_bits).mul_(1 << 23).view(at::kFloat);
  const at::Tensor k = at::round(magnitude / quantum);
  at::Tensor code = exponent.sub(spec.min_exponent).mul_(1 << spec.mantissa_bits).to(at::kFloat).add_(k);
  code.masked_fill_(at::isnan(scaled), kNanCode);
  return code.add_(at::signbit(scaled).to(at::kFloat).mul_(128)).to(at::kByte);
}

}  // namespace internal

at::Tensor Encode(const at::Tensor& scaled, Format format) {
#if defined(DDPLAB_FP8_CASTS)
  return scaled.to(Float8(format)).view(at::kByte);
#else
  return internal::EncodeWithAtenOps(scaled, format);
#endif
}

at::Tensor Decode(const at::Tensor& bytes, Format format) {
#if defined(DDPLAB_FP8_CASTS)
  return bytes.view(Float8(format)).to(at::kFloat);
#else
  static const at::Tensor tables[2] = {DecodeTable(Format::kE4M3), DecodeTable(Format::kE5M2)};
  const at::Tensor& table = tables[format == Format::kE4M3 ? 0 : 1];
  return table.to(bytes.device()).index_select(0, bytes.reshape(-1).to(at::kLong)).view(bytes.sizes());
#endif
}

at::Tensor DivideBy(const at::Tensor& values, double divisor) {
  // A divisor on the values' device: ATen's CUDA kernels multiply by the reciprocal of a
  // host scalar, which rounds otherwise than its CPU kernels and our own.
  return values.div(at::full({1}, divisor, values.options()));
}

Quantized Quantize(const at::Tensor& values, int64_t block, Format format) {
  const float largest = SpecOf(format).largest;
  const at::Tensor blocks = values.view({-1, block});
  const at::Tensor amax = blocks.abs().amax(1);
  at::Tensor scales = DivideBy(amax, largest);
  scales.masked_fill_(scales == 0, 1.0);  // zeros, or values so small that the scale underflows
  const at::Tensor scaled = blocks.div(scales.unsqueeze(1)).clamp_(-largest, largest);
  return {Encode(scaled.view(-1), format), scales};
}

at::Tensor Dequantize(const at::Tensor& bytes, const at::Tensor& scales, int64_t block, Format format,
                      at::ScalarType dtype) {
  return Decode(bytes, format).to(dtype).view({-1, block}).mul_(scales.to(dtype).unsqueeze(1)).view(-1);
}

}  // namespace ddplab::fp8
