// PowerSGD's fused kernels against the same passes in ATen, on a GPU: shapes with and
// without four-wide rows and aligned pointers, ranks 1 to 8, float32 and bfloat16 state,
// with and without an error, in place and not.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/utils.h>

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

// (matrices, rows, cols, rank, bfloat16 state, with an error, in place, misaligned)
using Case = std::tuple<int64_t, int64_t, int64_t, int, bool, bool, bool, bool>;

class FusedTest : public ::testing::TestWithParam<Case> {};

TEST_P(FusedTest, MatchesATen) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU";
  const auto [batch, rows, cols, r, bf16, with_error, in_place, misaligned] = GetParam();
  ASSERT_TRUE(Supports(rows, r));
  torch::manual_seed(rows * 131 + cols * 7 + r + batch);
  const at::ScalarType dtype = bf16 ? at::kBFloat16 : at::kFloat;
  const State state = bf16 ? State::kBFloat16 : State::kFloat32;
  const int64_t shift = misaligned ? 1 : 0;
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();

  // Per matrix: G, E, M (E itself in place), out; the reference M: G + E in float32,
  // rounded once.
  std::vector<at::Tensor> g, e, m, m_ref, out, out2;
  std::vector<const float*> g_ptrs;
  std::vector<const void*> e_ptrs;
  std::vector<void*> m_ptrs;
  std::vector<float*> out_ptrs, out2_ptrs;
  for (int64_t i = 0; i < batch; ++i) {
    g.push_back(Offset(rows, cols, at::kFloat, shift));
    g.back().copy_(at::randn({rows, cols}, cuda));
    e.push_back(Offset(rows, cols, dtype, shift));
    e.back().copy_(at::randn({rows, cols}, cuda).mul_(0.1));
    m_ref.push_back((with_error ? g.back() + e.back().to(at::kFloat) : g.back().clone()).to(dtype));
    m.push_back(in_place && with_error ? e.back() : Offset(rows, cols, dtype, shift));
    out.push_back(Offset(rows, cols, at::kFloat, shift));
    out2.push_back(Offset(rows, cols, at::kFloat, shift));
    g_ptrs.push_back(g.back().data_ptr<float>());
    e_ptrs.push_back(with_error ? e.back().data_ptr() : nullptr);
    m_ptrs.push_back(m.back().data_ptr());
    out_ptrs.push_back(out.back().data_ptr<float>());
    out2_ptrs.push_back(out2.back().data_ptr<float>());
  }
  at::Tensor q = at::randn({batch, cols, r}, cuda);

  // M = G + E, P = M Q.
  at::Tensor p = at::empty({batch, rows, r}, cuda);
  ASSERT_EQ(AddAndProject(batch, g_ptrs.data(), with_error ? e_ptrs.data() : nullptr, m_ptrs.data(), state,
                          q.data_ptr<float>(), p.data_ptr<float>(), rows, cols, r, stream),
            cudaSuccess);
  // Q = M^T P, from an orthonormal P as the hook gives it (linalg_qr's Q is
  // column-major; the kernels take row-major matrices).
  at::Tensor p_orthonormal = std::get<0>(at::linalg_qr(at::randn({batch, rows, r}, cuda))).contiguous();
  at::Tensor q2 = at::empty({batch, cols, r}, cuda);
  at::Tensor scratch = at::empty({static_cast<int64_t>(ProjectTransposedScratch(batch, rows, cols, r))}, cuda);
  std::vector<const void*> m_const(m_ptrs.begin(), m_ptrs.end());
  ASSERT_EQ(ProjectTransposed(batch, m_const.data(), state, p_orthonormal.data_ptr<float>(), q2.data_ptr<float>(),
                              scratch.numel() > 0 ? scratch.data_ptr<float>() : nullptr, rows, cols, r, stream),
            cudaSuccess);
  std::vector<at::Tensor> m_after_project;
  for (const at::Tensor& x : m) m_after_project.push_back(x.clone());
  // out = P Q^T and M -= P Q^T; then out alone (no error feedback), which writes nothing else.
  ASSERT_EQ(ExpandAndSubtract(batch, m_ptrs.data(), state, p_orthonormal.data_ptr<float>(), q2.data_ptr<float>(),
                              out_ptrs.data(), rows, cols, r, stream),
            cudaSuccess);
  ASSERT_EQ(ExpandAndSubtract(batch, nullptr, state, p_orthonormal.data_ptr<float>(), q2.data_ptr<float>(),
                              out2_ptrs.data(), rows, cols, r, stream),
            cudaSuccess);

  for (int64_t i = 0; i < batch; ++i) {
    SCOPED_TRACE("matrix " + std::to_string(i));
    EXPECT_TRUE(at::equal(m_after_project[i], m_ref[i])) << "M differs from G + E rounded once";
    const at::Tensor m64 = m_ref[i].to(at::kDouble);
    EXPECT_LT(RelativeError(p[i], m64.mm(q[i].to(at::kDouble))), 1e-5);
    const at::Tensor p64 = p_orthonormal[i].to(at::kDouble);
    EXPECT_LT(RelativeError(q2[i], m64.t().mm(p64)), 1e-5);
    const at::Tensor expanded = p64.mm(q2[i].to(at::kDouble).t());
    EXPECT_LT(RelativeError(out[i], expanded), 1e-5);
    // The error, rounded once from M - P Q^T: within one rounding of the state's dtype.
    EXPECT_LT(RelativeError(m[i], m64 - expanded), bf16 ? 1.0 / 128 : 1e-5);
    EXPECT_TRUE(at::equal(out[i], out2[i]));
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const auto [batch, rows, cols, r, bf16, with_error, in_place, misaligned] = info.param;
  return std::to_string(batch) + "_" + std::to_string(rows) + "x" + std::to_string(cols) + "_r" + std::to_string(r) + (bf16 ? "_bf16" : "_f32") +
         (with_error ? "_error" : "") + (in_place ? "_inplace" : "") + (misaligned ? "_misaligned" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedTest,
    ::testing::Values(
        // ViT-L/32's weights at ranks 1 and 4, both state dtypes, one and several at once
        Case{1, 3072, 1024, 1, false, true, true, false}, Case{3, 3072, 1024, 4, true, true, true, false},
        Case{2, 1024, 4096, 1, true, true, true, false}, Case{1, 1024, 4096, 4, false, true, true, false},
        Case{1, 4096, 1024, 2, true, false, false, false}, Case{2, 1000, 1024, 8, false, true, false, false},
        // one row chunk, and a chunk cut short; more matrices than one launch takes (32)
        Case{1, 40, 128, 1, false, true, true, false}, Case{3, 37, 256, 3, true, true, false, false},
        Case{35, 40, 128, 4, false, true, true, false}, Case{33, 70, 64, 1, true, false, false, false},
        // columns not divisible by four, and pointers off their alignment
        Case{2, 37, 13, 5, false, true, true, false}, Case{1, 33, 1022, 4, true, true, true, false},
        Case{3, 64, 256, 1, false, true, false, true}, Case{1, 64, 256, 6, true, true, true, true},
        Case{1, 5, 3, 2, false, false, false, true}, Case{1, 1, 4096, 1, true, true, true, false}),
    CaseName);

// powersgd.cc's GramSchmidt, in double: `passes` passes over [batch, rows, r].
at::Tensor GramSchmidtReference(at::Tensor p, int passes, double dependent) {
  const int64_t r = p.size(2);
  for (int pass = 0; pass < passes; ++pass) {
    at::Tensor threshold = p.norm(2, {1}, /*keepdim=*/true).mul_(dependent);
    for (int64_t j = 0; j < r; ++j) {
      at::Tensor col = p.narrow(2, j, 1);
      at::Tensor norm = col.norm(2, {1}, /*keepdim=*/true);
      col.mul_(at::where(norm > threshold.narrow(2, j, 1), norm.reciprocal(), 0.0));
      if (j + 1 < r) {
        at::Tensor rest = p.narrow(2, j + 1, r - j - 1);
        rest.sub_(at::bmm(col, at::bmm(col.transpose(1, 2), rest)));
      }
    }
  }
  return p;
}

// One launch orthonormalizes a batch as Gram-Schmidt does: random columns, a zero column
// and a dependent one (twice an earlier column plus noise of 1e-6 of it, which float32
// keeps and the 1e-4 threshold drops), which both come out zero; the others orthonormal.
TEST(FusedTest, OrthonormalizeMatchesGramSchmidt) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU";
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  for (int r : {1, 2, 3, 4, 8}) {
    for (int64_t rows : {1, 37, 1024, 4096}) {
      if (rows < r) continue;
      for (int passes : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << "rank " << r << ", rows " << rows << ", passes " << passes);
        torch::manual_seed(r * 1000 + rows + passes);
        const int64_t batch = 3;
        at::Tensor p = at::randn({batch, rows, r}, at::TensorOptions().dtype(at::kDouble));
        if (r >= 3) {
          p.select(0, 1).select(1, 1).zero_();
          p.select(0, 2).select(1, 2).copy_(p.select(0, 2).select(1, 0) * 2 +
                                            1e-6 * at::randn({rows}, at::TensorOptions().dtype(at::kDouble)));
        }
        at::Tensor device = p.to(at::kFloat).to(at::kCUDA);
        ASSERT_EQ(Orthonormalize(batch, device.data_ptr<float>(), rows, r, passes, 1e-4f, stream), cudaSuccess);
        at::Tensor expected = GramSchmidtReference(p.to(at::kFloat).to(at::kDouble), passes, 1e-4);
        at::Tensor got = device.cpu().to(at::kDouble);
        EXPECT_LT((got - expected).abs().max().item<double>(), 2e-5);
        if (r >= 3) {
          EXPECT_EQ(got.select(0, 1).select(1, 1).abs().max().item<double>(), 0.0);
          EXPECT_EQ(got.select(0, 2).select(1, 2).abs().max().item<double>(), 0.0);
        }
        // P^T P: 1 on the kept columns, 0 elsewhere.
        at::Tensor gram = at::bmm(got.transpose(1, 2), got);
        at::Tensor kept = (got.norm(2, {1}) > 0).to(at::kDouble);  // [batch, r]
        EXPECT_LT((gram - at::diag_embed(kept)).abs().max().item<double>(), passes == 2 || r == 1 ? 1e-5 : 1e-3);
      }
    }
  }
}

// Zero columns of Q take the fill's; the rest is Q's, bit for bit.
TEST(FusedTest, ReplaceZeroColumns) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU";
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  for (int r : {1, 4, 8}) {
    for (int64_t cols : {1, 100, 4096}) {
      SCOPED_TRACE(::testing::Message() << "rank " << r << ", cols " << cols);
      const auto cuda = at::TensorOptions().device(at::kCUDA);
      at::Tensor q = at::randn({2, cols, r}, cuda), fill = at::randn({2, cols, r}, cuda);
      q.select(0, 1).select(1, r - 1).zero_();
      at::Tensor next = at::empty_like(q);
      ASSERT_EQ(ReplaceZeroColumns(2, q.data_ptr<float>(), fill.data_ptr<float>(), next.data_ptr<float>(), cols, r,
                                   stream),
                cudaSuccess);
      at::Tensor expected = q.clone();
      expected.select(0, 1).select(1, r - 1).copy_(fill.select(0, 1).select(1, r - 1));
      EXPECT_TRUE(at::equal(next, expected));
    }
  }
}

TEST(FusedTest, RefusesRanksItWasNotBuiltFor) {
  EXPECT_FALSE(Supports(1024, 0));
  EXPECT_FALSE(Supports(1024, kMaxRank + 1));
  EXPECT_TRUE(Supports(1024, kMaxRank));
  const void* m = nullptr;
  EXPECT_EQ(ProjectTransposed(1, &m, State::kFloat32, nullptr, nullptr, nullptr, 16, 16, kMaxRank + 1, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(Orthonormalize(1, nullptr, 16, kMaxRank + 1, 1, 1e-4f, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ReplaceZeroColumns(1, nullptr, nullptr, nullptr, 16, 0, nullptr), cudaErrorInvalidValue);
}

#else

TEST(FusedTest, CudaBuildOnly) { GTEST_SKIP() << "the fused kernels are built in the CUDA build only"; }

#endif

}  // namespace
}  // namespace ddplab::powersgd::fused
