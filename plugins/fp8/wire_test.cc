// wire.h's passes: their ATen form against codec.h's functions (any build), and on a GPU
// of a CUDA build the kernels against the ATen form, bit for bit: both formats, blocks of
// 16 to 1024 values, 1 to 5 shards, with and without error feedback, buckets with blocks
// of zeros and of very different magnitudes. Then the time of each form on a 25 MiB
// bucket, printed (bench/NOTES.md, "FP8 on the wire").
#include <chrono>
#include <cstdint>
#include <iostream>
#include <tuple>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include "plugins/fp8/codec.h"
#include "plugins/fp8/wire.h"

namespace ddplab::fp8 {
namespace {

// Values of mixed magnitude (normal times 2^k, k in [-20, 20]), a block of zeros, a
// block of one tiny value.
at::Tensor Values(int64_t n, int64_t block, uint64_t seed, at::Device device) {
  torch::manual_seed(seed);
  at::Tensor v = at::randn({n}) * at::exp2(at::randint(-20, 21, {n}).to(at::kFloat));
  if (n >= 3 * block) {
    v.narrow(0, block, block).zero_();
    v.narrow(0, 2 * block, block).zero_();
    v[2 * block + 1] = 1e-30f;
  }
  return v.to(device);
}

// Bit for bit, -0 and 0 told apart.
bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor x = a.contiguous().view(at::kByte).cpu(), y = b.contiguous().view(at::kByte).cpu();
  return at::equal(x, y);
}

TEST(WireTest, AtenPassesAreCodecsFunctions) {
  for (Format format : {Format::kE4M3, Format::kE5M2}) {
    const Layout layout = LayoutOf(1000, 3, 16);
    ASSERT_EQ(layout.shard(), 336);  // 1000 values in 3 shards of 21 blocks of 16
    const at::Tensor values = at::zeros({layout.padded()});
    values.narrow(0, 0, 1000).copy_(Values(1000, 16, 1, at::kCPU));
    at::Tensor residual = at::zeros_like(values);
    const at::Tensor parts = QuantizeParts(values, &residual, layout, format, /*kernels=*/false);
    ASSERT_EQ(parts.sizes(), (std::vector<int64_t>{3, layout.part_bytes()}));
    const Quantized q = Quantize(values, 16, format);
    const at::Tensor expected = Dequantize(q.bytes, q.scales, 16, format, at::kFloat);
    EXPECT_TRUE(SameBits(DequantizeParts(parts, layout, format, false), expected));
    EXPECT_TRUE(SameBits(residual, values - expected)) << "what quantizing lost";
    // Shard 1's scales lead its row, then its codes.
    EXPECT_TRUE(SameBits(parts[1].narrow(0, 0, 84).view(at::kFloat), q.scales.narrow(0, 21, 21)));
    EXPECT_TRUE(SameBits(parts[1].narrow(0, 84, 336), q.bytes.narrow(0, 336, 336)));
  }
}

// (format, block, shards, error feedback, gather in bfloat16)
using Case = std::tuple<Format, int64_t, int, bool, bool>;
class KernelsTest : public ::testing::TestWithParam<Case> {};

TEST_P(KernelsTest, GiveTheAtenFormsBits) {
  if (!torch::cuda::is_available() || !KernelsRun(at::zeros({1}, at::kCUDA))) {
    GTEST_SKIP() << "the kernels run on a GPU of a CUDA build";
  }
  const auto [format, block, world, feedback, to_bf16] = GetParam();
  for (int64_t numel : {int64_t{1}, block * world * 3 + 5, int64_t{262147}}) {
    SCOPED_TRACE(numel);
    const Layout layout = LayoutOf(numel, world, block);
    at::Tensor values = at::zeros({layout.padded()}, at::kCUDA);
    values.narrow(0, 0, numel).copy_(Values(numel, block, numel, at::kCUDA));
    at::Tensor aten_residual, kernel_residual;
    if (feedback) {
      aten_residual = Values(layout.padded(), block, 7, at::kCUDA).mul_(1e-3);
      kernel_residual = aten_residual.clone();
    }
    const at::Tensor aten = QuantizeParts(values, &aten_residual, layout, format, false);
    const at::Tensor ours = QuantizeParts(values, &kernel_residual, layout, format, true);
    ASSERT_TRUE(SameBits(ours, aten)) << "Quantize";
    if (feedback) {
      EXPECT_TRUE(SameBits(kernel_residual, aten_residual)) << "the residual";
    }
    EXPECT_TRUE(SameBits(DequantizeParts(ours, layout, format, true), DequantizeParts(aten, layout, format, false)))
        << "Dequantize";
    // What rank 0 receives: every rank's shard 0 (here the W shards of one rank).
    EXPECT_TRUE(SameBits(SumParts(ours, layout, format, to_bf16, true), SumParts(aten, layout, format, to_bf16, false)))
        << "SumShards";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, KernelsTest,
                         ::testing::Combine(::testing::Values(Format::kE4M3, Format::kE5M2),
                                            ::testing::Values(16, 128, 1024), ::testing::Values(1, 2, 5),
                                            ::testing::Bool(), ::testing::Bool()));

// Milliseconds per call of `pass`, over 20 calls after 3.
template <typename Pass>
double Time(Pass pass) {
  for (int i = 0; i < 3; ++i) pass();
  torch::cuda::synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) pass();
  torch::cuda::synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / 20;
}

// Each pass on a 25 MiB bucket over 2 ranks, kernels and ATen: printed, and the kernels
// no slower (the reason they exist).
TEST(KernelsTest, TimedOnA25MiBBucket) {
  if (!torch::cuda::is_available() || !KernelsRun(at::zeros({1}, at::kCUDA))) {
    GTEST_SKIP() << "the kernels run on a GPU of a CUDA build";
  }
  const Layout layout = LayoutOf(25 << 18, 2, 128);
  const at::Tensor values = Values(layout.padded(), 128, 3, at::kCUDA);
  at::Tensor residual = at::zeros_like(values);
  double ms[2][3];
  for (bool kernels : {false, true}) {
    const at::Tensor parts = QuantizeParts(values, nullptr, layout, Format::kE4M3, kernels);
    ms[kernels][0] = Time([&] { QuantizeParts(values, &residual, layout, Format::kE4M3, kernels); });
    ms[kernels][1] = Time([&] { SumParts(parts, layout, Format::kE4M3, false, kernels); });
    ms[kernels][2] = Time([&] { DequantizeParts(parts, layout, Format::kE4M3, kernels); });
  }
  std::cout << "25 MiB bucket, 2 ranks, E4M3 blocks of 128, ms per call (ATen / kernels): quantize with error "
            << "feedback " << ms[0][0] << " / " << ms[1][0] << ", sum a shard " << ms[0][1] << " / " << ms[1][1]
            << ", dequantize " << ms[0][2] << " / " << ms[1][2] << "\n";
  for (int pass = 0; pass < 3; ++pass) EXPECT_LT(ms[1][pass], ms[0][pass]) << "pass " << pass;
}

}  // namespace
}  // namespace ddplab::fp8
