// PowerSGD's fused kernels against the same passes in ATen, on a GPU: shapes with and
// without four-wide rows and aligned pointers, ranks 1 to 8, float32 and bfloat16 state,
// with and without an error, in place and not.
#include <cstdint>
#include <string>
#include <tuple>

#include <gtest/gtest.h>
#include <torch/torch.h>

#if defined(DDPLAB_CUDA)
#include <c10/cuda/CUDAStream.h>

#include "plugins/powersgd/fused.h"
#endif

namespace ddplab::powersgd::fused {
namespace {

#if defined(DDPLAB_CUDA)

// Largest |a - b| relative to b's largest magnitude.
double RelativeError(const at::Tensor& a, const at::Tensor& b) {
  const double scale = b.abs().max().item<double>();
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
}

// A tensor of `numel` elements whose data starts `offset` elements into its storage, so
// that it is not 16-byte aligned when offset is odd.
at::Tensor Offset(int64_t rows, int64_t cols, at::ScalarType dtype, int64_t offset) {
  at::Tensor storage = at::empty({rows * cols + offset}, at::TensorOptions().device(at::kCUDA).dtype(dtype));
  return storage.narrow(0, offset, rows * cols).view({rows, cols});
}

// (rows, cols, rank, bfloat16 state, with an error, in place, misaligned)
using Case = std::tuple<int64_t, int64_t, int, bool, bool, bool, bool>;

class FusedTest : public ::testing::TestWithParam<Case> {};

TEST_P(FusedTest, MatchesATen) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU";
  const auto [rows, cols, r, bf16, with_error, in_place, misaligned] = GetParam();
  ASSERT_TRUE(Supports(rows, r));
  torch::manual_seed(rows * 131 + cols * 7 + r);
  const at::ScalarType dtype = bf16 ? at::kBFloat16 : at::kFloat;
  const State state = bf16 ? State::kBFloat16 : State::kFloat32;
  const int64_t shift = misaligned ? 1 : 0;
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();

  at::Tensor g = Offset(rows, cols, at::kFloat, shift);
  g.copy_(at::randn({rows, cols}, cuda));
  at::Tensor e = Offset(rows, cols, dtype, shift);
  e.copy_(at::randn({rows, cols}, cuda).mul_(0.1));
  at::Tensor q = at::randn({cols, r}, cuda);
  // Reference M: G + E in float32, rounded once to the state's dtype.
  at::Tensor m_ref = (with_error ? g + e.to(at::kFloat) : g.clone()).to(dtype);

  // M = G + E, P = M Q.
  at::Tensor m = in_place && with_error ? e : Offset(rows, cols, dtype, shift);
  at::Tensor p = at::empty({rows, r}, cuda);
  ASSERT_EQ(AddAndProject(g.data_ptr<float>(), with_error ? e.data_ptr() : nullptr, m.data_ptr(), state,
                          q.data_ptr<float>(), p.data_ptr<float>(), rows, cols, r, stream),
            cudaSuccess);
  EXPECT_TRUE(at::equal(m, m_ref)) << "M differs from G + E rounded once";
  const at::Tensor m64 = m_ref.to(at::kDouble);
  EXPECT_LT(RelativeError(p, m64.mm(q.to(at::kDouble))), 1e-5);

  // Q = M^T P, from an orthonormal P as the hook gives it.
  // (linalg_qr's Q is column-major; the kernels take row-major matrices.)
  at::Tensor p_orthonormal = std::get<0>(at::linalg_qr(at::randn({rows, r}, cuda))).contiguous();
  at::Tensor q2 = at::empty({cols, r}, cuda);
  at::Tensor scratch = at::empty({static_cast<int64_t>(ProjectTransposedScratch(rows, cols, r))}, cuda);
  ASSERT_EQ(ProjectTransposed(m.data_ptr(), state, p_orthonormal.data_ptr<float>(), q2.data_ptr<float>(),
                              scratch.numel() > 0 ? scratch.data_ptr<float>() : nullptr, rows, cols, r, stream),
            cudaSuccess);
  EXPECT_LT(RelativeError(q2, m64.t().mm(p_orthonormal.to(at::kDouble))), 1e-5);

  // out = P Q^T and M -= P Q^T.
  at::Tensor out = Offset(rows, cols, at::kFloat, shift);
  ASSERT_EQ(ExpandAndSubtract(m.data_ptr(), state, p_orthonormal.data_ptr<float>(), q2.data_ptr<float>(),
                              out.data_ptr<float>(), rows, cols, r, stream),
            cudaSuccess);
  const at::Tensor expanded = p_orthonormal.to(at::kDouble).mm(q2.to(at::kDouble).t());
  EXPECT_LT(RelativeError(out, expanded), 1e-5);
  // The error, rounded once from M - P Q^T: within one rounding of the state's dtype.
  const at::Tensor error_ref = m64 - expanded;
  EXPECT_LT(RelativeError(m, error_ref), bf16 ? 1.0 / 128 : 1e-5);

  // out alone (no error feedback) leaves nothing else written.
  at::Tensor out2 = Offset(rows, cols, at::kFloat, shift);
  ASSERT_EQ(ExpandAndSubtract(nullptr, state, p_orthonormal.data_ptr<float>(), q2.data_ptr<float>(),
                              out2.data_ptr<float>(), rows, cols, r, stream),
            cudaSuccess);
  EXPECT_TRUE(at::equal(out, out2));
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const auto [rows, cols, r, bf16, with_error, in_place, misaligned] = info.param;
  return std::to_string(rows) + "x" + std::to_string(cols) + "_r" + std::to_string(r) + (bf16 ? "_bf16" : "_f32") +
         (with_error ? "_error" : "") + (in_place ? "_inplace" : "") + (misaligned ? "_misaligned" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedTest,
    ::testing::Values(
        // ViT-L/32's weights at ranks 1 and 4, both state dtypes
        Case{3072, 1024, 1, false, true, true, false}, Case{3072, 1024, 4, true, true, true, false},
        Case{1024, 4096, 1, true, true, true, false}, Case{1024, 4096, 4, false, true, true, false},
        Case{4096, 1024, 2, true, false, false, false}, Case{1000, 1024, 8, false, true, false, false},
        // one row chunk, and a chunk cut short
        Case{40, 128, 1, false, true, true, false}, Case{37, 256, 3, true, true, false, false},
        // columns not divisible by four, and pointers off their alignment
        Case{37, 13, 5, false, true, true, false}, Case{33, 1022, 4, true, true, true, false},
        Case{64, 256, 1, false, true, false, true}, Case{64, 256, 6, true, true, true, true},
        Case{5, 3, 2, false, false, false, true}, Case{1, 4096, 1, true, true, true, false}),
    CaseName);

TEST(FusedTest, RefusesRanksItWasNotBuiltFor) {
  EXPECT_FALSE(Supports(1024, 0));
  EXPECT_FALSE(Supports(1024, kMaxRank + 1));
  EXPECT_TRUE(Supports(1024, kMaxRank));
  EXPECT_EQ(ProjectTransposed(nullptr, State::kFloat32, nullptr, nullptr, nullptr, 16, 16, kMaxRank + 1, nullptr),
            cudaErrorInvalidValue);
}

#else

TEST(FusedTest, CudaBuildOnly) { GTEST_SKIP() << "the fused kernels are built in the CUDA build only"; }

#endif

}  // namespace
}  // namespace ddplab::powersgd::fused
