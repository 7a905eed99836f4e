// initial_q.h against numbers PyTorch 1.13 (with numpy 1.24) gives for the same seeds:
//   numpy.random.RandomState(s).randint(1_000_000_000) for s = 0, 7, 2^32 - 1, and four
//   draws in a row for s = 5;
//   torch.manual_seed(209652396); torch.randn(3, 2); torch.randn(40, 4)   (randn takes
//   one path below 16 elements and a vectorized one from 16 on).
// parity/hooks_parity_test.py compares every initial Q of its case with PyTorch's live.
#include "plugins/powersgd/initial_q.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddplab::powersgd {
namespace {

TEST(QSeedsTest, DrawsAsNumpysLegacyRandomState) {
  EXPECT_EQ(QSeeds(0).Next(), 209652396);
  EXPECT_EQ(QSeeds(7).Next(), 327741615);
  EXPECT_EQ(QSeeds(4294967295u).Next(), 419326371);
  QSeeds five(5);
  for (int64_t expected : {953453411, 236996814, 518541295, 349300413}) EXPECT_EQ(five.Next(), expected);
}

TEST(RandomQsTest, FollowTorchManualSeedAndRandn) {
  const std::vector<at::Tensor> qs = RandomQs(209652396, {{3, 2}, {40, 4}});
  ASSERT_EQ(qs.size(), 2u);
  EXPECT_EQ(qs[0].sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(qs[0].scalar_type(), at::kFloat);
  const std::vector<double> first{-0.8103023767471313, 0.41339945793151855, -1.2778252363204956,
                                  0.3302519619464874,  0.33864617347717285, -0.6434366703033447};
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(qs[0].reshape(-1)[static_cast<int64_t>(i)].item<float>(), static_cast<float>(first[i])) << i;
  }
  const std::vector<double> row0{0.24355919659137726, 1.0947238206863403, -1.3001599311828613, 1.515737533569336};
  const std::vector<double> row39{-0.5243762731552124, 1.146673321723938, -1.1924808025360107, -0.4450785517692566};
  for (int64_t j = 0; j < 4; ++j) {
    EXPECT_EQ(qs[1][0][j].item<float>(), static_cast<float>(row0[static_cast<size_t>(j)])) << j;
    EXPECT_EQ(qs[1][39][j].item<float>(), static_cast<float>(row39[static_cast<size_t>(j)])) << j;
  }
}

}  // namespace
}  // namespace ddplab::powersgd
