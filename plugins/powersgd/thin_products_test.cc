#include "plugins/powersgd/thin_products.h"

#include <cstdint>
#include <tuple>

#include <ATen/ATen.h>

#include "gtest/gtest.h"

namespace ddplab::powersgd {
namespace {

TEST(RowBlocksTest, SplitsOnlyFewTallMatricesAboveRankOne) {
  EXPECT_EQ(RowBlocks(1, 3072, 1024, 4), 32);
  EXPECT_EQ(RowBlocks(2, 4096, 1024, 4), 32);
  EXPECT_EQ(RowBlocks(3, 4096, 1024, 4), 1);  // a batch cuBLAS serves well
  EXPECT_EQ(RowBlocks(1, 4096, 1024, 1), 1);  // rank 1: mm is fast
  EXPECT_EQ(RowBlocks(1, 1024, 4096, 4), 1);  // wide: splitting was slower
  EXPECT_EQ(RowBlocks(1, 1024, 1024, 4), 1);
  EXPECT_EQ(RowBlocks(1, 96, 32, 4), 16);     // blocks of at least r rows
  EXPECT_EQ(RowBlocks(1, 50, 10, 3), 2);      // blocks that divide the rows
  EXPECT_EQ(RowBlocks(1, 51, 10, 3), 1);
}

// Every form against plain batched products, in double so that only the order of the
// sums differs.
class ThinProductsTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t, int64_t>> {};

TEST_P(ThinProductsTest, EqualPlainProducts) {
  const auto [b, rows, cols, r] = GetParam();
  at::manual_seed(7);
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor m = at::randn({b, rows, cols}, options);
  const at::Tensor q = at::randn({b, cols, r}, options);
  const at::Tensor p_in = at::randn({b, rows, r}, options);

  at::Tensor p = at::empty({b, rows, r}, options);
  MulMQ(m, q, p);
  EXPECT_TRUE(at::allclose(p, at::bmm(m, q), 1e-10, 1e-10));

  at::Tensor q_out = at::empty({b, cols, r}, options);
  MulMtP(m, p_in, q_out);
  EXPECT_TRUE(at::allclose(q_out, at::bmm(m.transpose(1, 2), p_in), 1e-10, 1e-10));

  for (int64_t i = 0; i < b; ++i) {
    at::Tensor out = at::empty({rows, cols}, options);
    OuterInto(out, p_in.select(0, i), q.select(0, i));
    EXPECT_TRUE(at::allclose(out, at::mm(p_in.select(0, i), q.select(0, i).t()), 1e-10, 1e-10));
  }

  at::Tensor e = m.clone();
  SubtractOuter(e, p_in, q);
  EXPECT_TRUE(at::allclose(e, m - at::bmm(p_in, q.transpose(1, 2)), 1e-10, 1e-10));
}

INSTANTIATE_TEST_SUITE_P(Shapes, ThinProductsTest,
                         ::testing::Values(std::make_tuple(1, 96, 32, 4),    // split in 16
                                           std::make_tuple(2, 64, 16, 2),    // a pair, split
                                           std::make_tuple(1, 50, 10, 3),    // split in 2
                                           std::make_tuple(1, 32, 64, 4),    // wide: mm
                                           std::make_tuple(1, 64, 16, 1),    // rank 1: mm
                                           std::make_tuple(3, 64, 16, 2)));  // a batch: bmm

}  // namespace
}  // namespace ddplab::powersgd
