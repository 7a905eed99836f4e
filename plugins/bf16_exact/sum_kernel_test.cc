// bf16_exact's GPU kernels (sum_kernel.h) against ATen on the CPU, bit for bit: the
// narrowing and its count of values bfloat16 does not hold, and the sum over 1, 2, 3 and
// 5 ranks, with more segments than one launch takes and segments longer than its grid.
// Skips where this build or machine has no GPU.
#include <ATen/ATen.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

#if defined(DDPLAB_CUDA)
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "plugins/bf16_exact/sum_kernel.h"
#endif

namespace ddplab::bf16_exact {
namespace {

#if defined(DDPLAB_CUDA)
bool HasGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// 130 segments (three launches), the last ones longer than a launch's grid covers in one
// round (1024 blocks of 256 threads, 4 elements each).
std::vector<int64_t> Lengths() {
  std::vector<int64_t> n;
  for (int k = 0; k < 128; ++k) n.push_back(1 + (k * 37) % 300);
  n.push_back(int64_t{1} << 21);
  n.push_back((int64_t{1} << 20) + 3);
  return n;
}

// Mixed magnitudes; every third value made a bfloat16 value, NaN and infinities among
// the others.
at::Tensor Values(int64_t n, int seed) {
  at::manual_seed(seed);
  at::Tensor v = at::randn({n}) * at::exp2(at::randint(-12, 13, {n}).to(at::kFloat));
  at::Tensor exact = v.to(at::kBFloat16).to(at::kFloat);
  v = at::where(at::arange(n) % 3 == 0, exact, v);
  if (n > 10) {
    v[5] = std::numeric_limits<float>::quiet_NaN();
    v[7] = std::numeric_limits<float>::infinity();
  }
  return v;
}

TEST(SumKernelTest, NarrowRoundsAsATenAndCountsWhatItRounded) {
  if (!HasGpu()) GTEST_SKIP() << "needs a GPU";
  const std::vector<int64_t> lengths = Lengths();
  std::vector<at::Tensor> host, device;
  std::vector<Source> sources;
  int64_t at = 0, expected = 0;
  for (size_t k = 0; k < lengths.size(); ++k) {
    host.push_back(Values(lengths[k], static_cast<int>(k)));
    device.push_back(host.back().cuda());
    sources.push_back({device.back().data_ptr<float>(), at, lengths[k]});
    const at::Tensor& g = host.back();
    expected += g.ne(g.to(at::kBFloat16).to(at::kFloat)).logical_and(g.isnan().logical_not()).sum().item<int64_t>();
    at += lengths[k];
  }
  at::Tensor wire = at::empty({at}, at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA));
  at::Tensor rounded = at::zeros({}, at::TensorOptions().dtype(at::kLong).device(at::kCUDA));
  ASSERT_EQ(Narrow(sources.data(), static_cast<int>(sources.size()), reinterpret_cast<uint16_t*>(wire.data_ptr()),
                   rounded.data_ptr<int64_t>(), c10::cuda::getCurrentCUDAStream().stream()),
            cudaSuccess);
  const at::Tensor want = at::cat(host).to(at::kBFloat16);
  const at::Tensor got = wire.cpu();
  // NaN's bits may differ (CUDA's canonical NaN against LibTorch's); where it is, and
  // every other value, may not.
  const at::Tensor nan = want.isnan();
  EXPECT_TRUE(at::equal(got.isnan(), nan));
  EXPECT_TRUE(at::equal(at::where(nan, 0, got).view(at::kShort), at::where(nan, 0, want).view(at::kShort)));
  EXPECT_EQ(rounded.item<int64_t>(), expected);
  EXPECT_GT(expected, 0);
}

TEST(SumKernelTest, SumsInRankOrderAsATen) {
  if (!HasGpu()) GTEST_SKIP() << "needs a GPU";
  const std::vector<int64_t> lengths = Lengths();
  int64_t stride = 0;
  for (int64_t n : lengths) stride += n;
  for (int world : {1, 2, 3, 5}) {
    at::Tensor rows = at::empty({world, stride});
    for (int r = 0; r < world; ++r) rows[r].copy_(Values(stride, 100 + r));
    rows = rows.to(at::kBFloat16);
    at::Tensor want;
    if (world == 2) {
      want = rows[0].to(at::kFloat).mul_(0.5).add_(rows[1].to(at::kFloat).mul_(0.5));
    } else {
      want = rows[0].to(at::kFloat);
      for (int r = 1; r < world; ++r) want.add_(rows[r]);
      want.div_(world);
    }
    const at::Tensor gathered = rows.reshape({-1}).cuda();
    at::Tensor out = at::full({stride}, -1.0f, at::TensorOptions().device(at::kCUDA));
    std::vector<Segment> segments;
    int64_t at = 0;
    for (int64_t n : lengths) {
      segments.push_back({out.data_ptr<float>() + at, at, n});
      at += n;
    }
    ASSERT_EQ(SumInto(reinterpret_cast<const uint16_t*>(gathered.data_ptr()), stride, world, segments.data(),
                      static_cast<int>(segments.size()), c10::cuda::getCurrentCUDAStream().stream()),
              cudaSuccess);
    const at::Tensor got = out.cpu();
    const at::Tensor nan = want.isnan();
    EXPECT_TRUE(at::equal(got.isnan(), nan)) << world << " ranks";
    EXPECT_TRUE(at::equal(at::where(nan, 0, got), at::where(nan, 0, want))) << world << " ranks";
  }
}
#else
TEST(SumKernelTest, NeedsTheCudaBuild) { GTEST_SKIP() << "the kernels are built in the CUDA build only"; }
#endif

}  // namespace
}  // namespace ddplab::bf16_exact
