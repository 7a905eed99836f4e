// Test-only: FP8 written from the formats' definitions, one value at a time, as the
// reference of codec_test and fp8_worker. Nothing here comes from codec.cc: the values
// are the codes' bit fields read as OCP FP8 defines them, and a value's code is the
// nearest of those values, found by search, ties to the even code.
//
//   const ddplab::fp8::reference::ScalarFp8 e4m3(ddplab::fp8::reference::kE4M3);
//   uint8_t code = e4m3.Encode(1.1f);  // 0x39: 1.125
//   float back = e4m3.Value(code);
#ifndef DDPLAB_PLUGINS_FP8_REFERENCE_H_
#define DDPLAB_PLUGINS_FP8_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace ddplab::fp8::reference {

// An 8-bit float: a sign bit, then the exponent's bits (biased by 2^(bits-1) - 1), then
// the mantissa's. E4M3 "fn" has no infinities: S.1111.111 is its only NaN, and the other
// codes of the top exponent are normal values (up to 448). E5M2 is IEEE's shape:
// S.11111.00 is infinity, S.11111.xx NaN (largest finite 57344).
struct Fp8Format {
  int exponent_bits, mantissa_bits;
  bool ieee_specials;
};
inline constexpr Fp8Format kE4M3{4, 3, false};
inline constexpr Fp8Format kE5M2{5, 2, true};

// The value of `code` in `f` (NaN, or +-infinity, where the code is one).
inline float ValueOf(uint8_t code, const Fp8Format& f) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1, top = (1 << f.exponent_bits) - 1;
  const int mantissa_top = (1 << f.mantissa_bits) - 1;
  const int exponent = (code >> f.mantissa_bits) & top, mantissa = code & mantissa_top;
  double v;
  if (f.ieee_specials && exponent == top) {
    v = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.ieee_specials && exponent == top && mantissa == mantissa_top) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {  // subnormal: 0.m * 2^(1 - bias)
    v = std::ldexp(static_cast<double>(mantissa), 1 - bias - f.mantissa_bits);
  } else {  // 1.m * 2^(exponent - bias)
    v = std::ldexp(static_cast<double>((1 << f.mantissa_bits) + mantissa), exponent - bias - f.mantissa_bits);
  }
  return static_cast<float>((code & 0x80) ? -v : v);
}

// One format's codes and values: Encode rounds to the nearest, ties to the even code.
class ScalarFp8 {
 public:
  explicit ScalarFp8(const Fp8Format& f) : format_(f) {
    for (int code = 0; code < 256; ++code) values_[code] = ValueOf(static_cast<uint8_t>(code), f);
    for (int code = 0; code < 128; ++code) {
      if (std::isfinite(values_[code])) finite_.push_back(static_cast<uint8_t>(code));
    }
    // Positive codes count up in value: the search below relies on it.
    for (size_t k = 1; k < finite_.size(); ++k) {
      if (!(values_[finite_[k]] > values_[finite_[k - 1]])) std::abort();
    }
  }

  const Fp8Format& format() const { return format_; }
  float Value(uint8_t code) const { return values_[code]; }
  float largest() const { return values_[finite_.back()]; }
  // The finite codes from +0 up, in value order.
  const std::vector<uint8_t>& positive_codes() const { return finite_; }

  // The code of `x`: NaN as 0x7F with x's sign; beyond the largest, the largest.
  uint8_t Encode(float x) const {
    const uint8_t sign = std::signbit(x) ? 0x80 : 0;
    if (std::isnan(x)) return sign | 0x7F;
    const float a = std::fabs(x);
    const auto above = std::lower_bound(finite_.begin(), finite_.end(), a,
                                        [this](uint8_t code, float v) { return values_[code] < v; });
    if (above == finite_.end()) return sign | finite_.back();
    if (values_[*above] == a || above == finite_.begin()) return sign | *above;
    const uint8_t lo = *(above - 1), hi = *above;
    // 2a against lo + hi: both exact in double, so a tie is seen as one.
    const double twice = 2.0 * a, sum = static_cast<double>(values_[lo]) + values_[hi];
    if (twice != sum) return sign | (twice < sum ? lo : hi);
    return sign | ((lo & 1) == 0 ? lo : hi);
  }

 private:
  Fp8Format format_;
  float values_[256];
  std::vector<uint8_t> finite_;
};

// Values in blocks: each block's scale (its largest magnitude over the format's largest,
// a float32 division; 1 where that is 0: zeros, or values too small for a scale) and the codes of value / scale (float32),
// clamped to +-largest.
struct Blocks {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

inline Blocks Quantize(const std::vector<float>& values, size_t block, const ScalarFp8& fp8) {
  const float largest = fp8.largest();
  Blocks q;
  q.codes.resize(values.size());
  for (size_t start = 0; start < values.size(); start += block) {
    float amax = 0;
    for (size_t i = start; i < start + block; ++i) amax = std::max(amax, std::fabs(values[i]));
    const float quotient = amax / largest;
    const float scale = quotient == 0 ? 1.0f : quotient;  // zeros, or values too small for a scale
    q.scales.push_back(scale);
    for (size_t i = start; i < start + block; ++i) {
      q.codes[i] = fp8.Encode(std::clamp(values[i] / scale, -largest, largest));
    }
  }
  return q;
}

// Each code's value times its block's scale, the product in T: float rounds it, double
// holds it exactly.
template <typename T>
std::vector<T> Dequantize(const Blocks& q, size_t block, const ScalarFp8& fp8) {
  std::vector<T> out(q.codes.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<T>(fp8.Value(q.codes[i])) * static_cast<T>(q.scales[i / block]);
  }
  return out;
}

// x rounded to bfloat16 (8 significant bits), nearest, ties to even, back as float.
inline float RoundToBfloat16(float x) {
  if (std::isnan(x)) return x;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace ddplab::fp8::reference

#endif  // DDPLAB_PLUGINS_FP8_REFERENCE_H_
