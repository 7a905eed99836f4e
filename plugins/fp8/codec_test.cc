// codec.h against reference.h: FP8's values and nearest-value rounding written from the
// formats' definitions, one value at a time (nothing shared with codec.cc), and the
// error bounds codec.h states for blocks with a float32 scale each.
#include "plugins/fp8/codec.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "plugins/fp8/reference.h"

namespace ddplab::fp8 {
namespace {

using reference::ScalarFp8;

// A format as codec.h names it, its reference, and its error bound per element: half a
// unit in the last place, 2^-precision of the value in the normal range, and
// 2^-subnormal_half (half the smallest subnormal) times the block's scale below it.
struct Case {
  Format format;
  ScalarFp8 fp8;
  int precision, subnormal_half;
  const char* name;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases{{Format::kE4M3, ScalarFp8(reference::kE4M3), 4, 10, "E4M3"},
                                       {Format::kE5M2, ScalarFp8(reference::kE5M2), 3, 17, "E5M2"}};
  return cases;
}

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

at::Tensor FloatTensor(const std::vector<float>& v) {
  return at::from_blob(const_cast<float*>(v.data()), {static_cast<int64_t>(v.size())}, at::kFloat).clone();
}

// Inputs that each take one side of a rounding decision: every code's value; every
// midpoint between neighbouring codes (a tie) and the floats just below and above it and
// each value; float32's own subnormals; +-0, +-largest, NaN of either sign; and 10^6
// random floats within +-largest: half with a random exponent from below the format's
// smallest subnormal up, half with random bits (mostly tiny, rounding to zero).
std::vector<float> EncodeInputs(const ScalarFp8& fp8) {
  const float largest = fp8.largest(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> in{0.0f, -0.0f, largest, -largest, std::numeric_limits<float>::denorm_min(),
                        std::numeric_limits<float>::min(), 1e-40f, std::nanf(""), -std::nanf("")};
  const std::vector<uint8_t>& codes = fp8.positive_codes();
  for (size_t k = 0; k < codes.size(); ++k) {
    const float v = fp8.Value(codes[k]);
    in.insert(in.end(), {v, std::nextafter(v, 0.0f), std::nextafter(v, inf)});
    if (k + 1 == codes.size()) break;
    const float mid = static_cast<float>((static_cast<double>(v) + fp8.Value(codes[k + 1])) / 2);  // exact
    in.insert(in.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, inf)});
  }
  std::mt19937 gen(2024);
  const int lowest = static_cast<int>(std::floor(std::log2(fp8.Value(codes[1])))) - 4;
  std::uniform_int_distribution<int> exponent(lowest, static_cast<int>(std::log2(largest)));
  std::uniform_int_distribution<uint32_t> bits;
  while (in.size() < 1000000) {
    const uint32_t b = bits(gen);
    float x;
    if (in.size() % 2 == 0) {
      x = std::ldexp(1.0f + static_cast<float>(b & 0x7FFFFF) / (1 << 23), exponent(gen));
      if (b >> 31) x = -x;
    } else {
      std::memcpy(&x, &b, sizeof x);
    }
    if (std::fabs(x) <= largest) in.push_back(x);  // NaN and beyond the range: left out
  }
  const size_t n = in.size();
  for (size_t i = 0; i < n && i < 4000; ++i) in.push_back(-in[i]);
  return in;
}

// "" if `bytes` are the reference's codes of `in`, else how many are not and the first few.
std::string Mismatches(const std::vector<float>& in, const at::Tensor& bytes, const ScalarFp8& fp8) {
  if (bytes.scalar_type() != at::kByte || bytes.numel() != static_cast<int64_t>(in.size())) return "wrong shape";
  const uint8_t* got = bytes.contiguous().data_ptr<uint8_t>();
  std::ostringstream said;
  int wrong = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint8_t want = fp8.Encode(in[i]);
    if (got[i] == want) continue;
    if (++wrong <= 5) {
      said << std::hex << " [0x" << Bits(in[i]) << std::dec << " = " << in[i] << ": got 0x" << std::hex
           << int{got[i]} << ", want 0x" << int{want} << std::dec << "]";
    }
  }
  if (wrong == 0) return "";
  return std::to_string(wrong) + " wrong:" + said.str();
}

// The reference itself on values checked by hand: it decides every test below.
TEST(ReferenceTest, KnowsTheFormats) {
  const ScalarFp8& e4m3 = Cases()[0].fp8;
  const ScalarFp8& e5m2 = Cases()[1].fp8;
  EXPECT_EQ(e4m3.largest(), 448.0f);
  EXPECT_EQ(e5m2.largest(), 57344.0f);
  EXPECT_EQ(e4m3.Value(0x01), std::ldexp(1.0f, -9));   // smallest subnormal
  EXPECT_EQ(e4m3.Value(0x08), std::ldexp(1.0f, -6));   // smallest normal
  EXPECT_EQ(e5m2.Value(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(e5m2.Value(0x04), std::ldexp(1.0f, -14));
  EXPECT_EQ(e4m3.Encode(1.1f), 0x39);                  // 1.125
  EXPECT_EQ(e4m3.Encode(1.0625f), 0x38);               // a tie between 1 (even) and 1.125
  EXPECT_EQ(e4m3.Encode(1.1875f), 0x3A);               // a tie between 1.125 and 1.25 (even)
  EXPECT_EQ(e4m3.Encode(-0.0f), 0x80);
  EXPECT_EQ(e5m2.Encode(-std::nanf("")), 0xFF);
  EXPECT_TRUE(std::isinf(e5m2.Value(0x7C)));
  EXPECT_EQ(SpecOf(Format::kE4M3).largest, e4m3.largest());
  EXPECT_EQ(SpecOf(Format::kE5M2).largest, e5m2.largest());
}

// Encode (torch's float8 casts in LibTorch 2.x) and EncodeWithAtenOps (ATen arithmetic)
// each give the reference's nearest code, ties to even, on every rounding decision and
// 10^6 random values: the two agree because both are right.
TEST(EncodeTest, BothEncodersRoundToTheNearestTiesToEven) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<float> in = EncodeInputs(c.fp8);
    const at::Tensor x = FloatTensor(in);
    EXPECT_EQ(Mismatches(in, Encode(x, c.format), c.fp8), "") << "Encode";
    EXPECT_EQ(Mismatches(in, internal::EncodeWithAtenOps(x, c.format), c.fp8), "") << "EncodeWithAtenOps";
  }
}

// Every one of the 256 codes decodes to its value: NaN where it is one, E5M2's 0x7C and
// 0xFC to +-infinity, 0x80 to -0.
TEST(DecodeTest, EveryCodeToItsValue) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const at::Tensor got = Decode(at::arange(256, at::kInt).to(at::kByte), c.format);
    ASSERT_EQ(got.scalar_type(), at::kFloat);
    ASSERT_EQ(got.numel(), 256);
    for (int code = 0; code < 256; ++code) {
      const float want = c.fp8.Value(static_cast<uint8_t>(code)), value = got[code].item<float>();
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(value)) << "code " << code << ": " << value;
      } else {
        EXPECT_EQ(Bits(value), Bits(want)) << "code " << code << ": " << value << ", want " << want;
      }
    }
  }
}

// Blocks of `block` values: normal values times 2^k (k from -12 to 12) within a block,
// times 10^m per block (m from -30 to 30 by 5), and one block of zeros.
std::vector<float> MixedBlocks(int64_t block) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> shift(-12, 12);
  std::vector<float> v;
  for (int m = -30; m <= 30; m += 5) {
    for (int64_t i = 0; i < block; ++i) v.push_back(static_cast<float>(normal(gen) * std::ldexp(1.0, shift(gen)) * std::pow(10.0, m)));
  }
  v.insert(v.end(), static_cast<size_t>(block), 0.0f);
  return v;
}

// Each block gets its own scale, its largest magnitude over the format's largest (a
// float32 division), and a block of zeros the scale 1: magnitudes from 1e-30 to 1e30
// side by side keep their own range.
TEST(QuantizeTest, EachBlockScalesByItsLargest) {
  for (const Case& c : Cases()) {
    for (int64_t block : {16, 128}) {
      SCOPED_TRACE(::testing::Message() << c.name << ", block " << block);
      const std::vector<float> v = MixedBlocks(block);
      const Quantized q = Quantize(FloatTensor(v), block, c.format);
      ASSERT_EQ(q.scales.scalar_type(), at::kFloat);
      ASSERT_EQ(q.scales.numel(), static_cast<int64_t>(v.size()) / block);
      ASSERT_EQ(q.bytes.numel(), static_cast<int64_t>(v.size()));
      for (int64_t b = 0; b < q.scales.numel(); ++b) {
        float amax = 0;
        for (int64_t i = b * block; i < (b + 1) * block; ++i) amax = std::max(amax, std::fabs(v[i]));
        const float want = amax == 0 ? 1.0f : amax / c.fp8.largest();
        EXPECT_EQ(q.scales[b].item<float>(), want) << "block " << b << ", largest magnitude " << amax;
      }
    }
  }
}

// Per element, |Dequantize(Quantize(x)) - x| <= |x| 2^-4 + scale 2^-10 for E4M3 (2^-3 and
// 2^-17 for E5M2), in float64 and in float32 (a factor 1 + 2^-20 for float32's roundings
// of the division and the product); each block's largest magnitude comes back within
// 2^-20 of itself (it maps to the format's largest, exactly representable).
TEST(QuantizeTest, WithinHalfAUnitInTheLastPlace) {
  for (const Case& c : Cases()) {
    for (int64_t block : {16, 128}) {
      SCOPED_TRACE(::testing::Message() << c.name << ", block " << block);
      const std::vector<float> v = MixedBlocks(block);
      const Quantized q = Quantize(FloatTensor(v), block, c.format);
      for (at::ScalarType dtype : {at::kDouble, at::kFloat}) {
        const at::Tensor back = Dequantize(q.bytes, q.scales, block, c.format, dtype).to(at::kDouble);
        ASSERT_EQ(back.numel(), static_cast<int64_t>(v.size()));
        const double* got = back.data_ptr<double>();
        int wrong = 0;
        for (size_t b = 0; b * block < v.size(); ++b) {
          const double scale = q.scales[static_cast<int64_t>(b)].item<float>();
          double amax = 0;
          size_t at_max = b * block;
          for (size_t i = b * block; i < (b + 1) * block; ++i) {
            const double x = v[i];
            const double allowed =
                (std::fabs(x) * std::ldexp(1.0, -c.precision) + scale * std::ldexp(1.0, -c.subnormal_half)) *
                (1 + std::ldexp(1.0, -20));
            if (!(std::fabs(got[i] - x) <= allowed) && ++wrong <= 5) {
              ADD_FAILURE() << "element " << i << ": " << x << " came back as " << got[i];
            }
            if (std::fabs(x) > amax) amax = std::fabs(x), at_max = i;
          }
          EXPECT_LE(std::fabs(std::fabs(got[at_max]) - amax), amax * std::ldexp(1.0, -20)) << "block " << b;
        }
        EXPECT_EQ(wrong, 0) << at::toString(dtype);
      }
    }
  }
}

// A block whose largest magnitude is a float32 subnormal below largest * 2^-149 (6e-43
// for E4M3), e.g. a gradient of zeros but for one tiny value: amax / largest rounds to a
// scale of 0. Its values must still come back finite and within the bound above.
TEST(QuantizeTest, ATinyBlockStaysFinite) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<float> v(16, 0.0f);
    v[3] = std::numeric_limits<float>::denorm_min() * 5;  // 7e-45
    const Quantized q = Quantize(FloatTensor(v), 16, c.format);
    const at::Tensor back = Dequantize(q.bytes, q.scales, 16, c.format, at::kFloat);
    EXPECT_TRUE(at::isfinite(back).all().item<bool>()) << "scale " << q.scales[0].item<float>() << ", got " << back;
    EXPECT_LE((back - FloatTensor(v)).abs().max().item<float>(), v[3]) << back;
  }
}

}  // namespace
}  // namespace ddplab::fp8
