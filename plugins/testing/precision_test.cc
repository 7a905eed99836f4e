// Every lossless combination of plugins averages the gradients one process over the
// concatenated batch gets, under bf16 autocast and with AdamW as under float32 and SGD;
// the lossy plugins stay within their own rounding there.
//
// Under bf16 autocast both sides compute forward and loss in the same bfloat16 casts;
// what differs is where a sample's rows fall in the matrix products (a batch of 4 per
// rank, 8 or 12 at once for the reference), which the CPU's bfloat16 kernels block and
// sum in another order, each order rounding to bfloat16 (2^-8 relative) on its own. Seen:
// a relative (L2) gradient error of 0.0046 on 2 ranks and 0.0065 on 3 (float32: below
// 1e-5). kBf16Autocast allows five such roundings, 0.02; an engine that lost or doubled a
// bucket would be off by far more.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

const std::string kBf16Autocast = "--grad_tolerance=0.02";

// A combination and what the worker checks of it besides the gradients.
struct Combination {
  std::string plugins;
  std::vector<std::string> checks;
};

// With bucket views every gradient has its view as its target, which under bf16 the
// encoder blocks' casts write (Note [Gradients written where they go]); no other layout
// names one.
std::vector<Combination> LosslessCombinations() {
  const std::string small = testing::kSmallBuckets;
  const std::string none = "--expect_targets=none", all = "--expect_targets=all";
  return {
      {"", {none}},  // the engine's defaults
      {small, {none}},
      {small + " plugin { bucket_view {} }", {"--expect_views", all}},
      {"plugin { static_graph {} }", {none}},
      {small + " plugin { optimizer_overlap {} }", {"--expect_updated", none}},
      {"plugin { zero_copy {} }", {"--expect_no_bucket_memory", none}},
      {small + " plugin { bucket_view {} } plugin { static_graph {} } plugin { optimizer_overlap {} }",
       {"--expect_views", "--expect_updated", all}},
  };
}

std::string Train(const Combination& c, std::vector<std::string> flags, int ranks = 2) {
  flags.insert(flags.end(), c.checks.begin(), c.checks.end());
  return testing::TrainAndCompare(ranks, c.plugins, flags);
}

TEST(PrecisionTest, EveryLosslessCombinationUnderBf16Autocast) {
  REQUIRE_GLOO();
  for (const Combination& c : LosslessCombinations()) {
    EXPECT_EQ(Train(c, {"--precision=bf16", kBf16Autocast}), "") << c.plugins;
  }
}

// AdamW's update is elementwise: per bucket (optimizer_overlap) as at once, within
// float32's rounding of the averaged gradients (the engine's default tolerance).
TEST(PrecisionTest, EveryLosslessCombinationWithAdamW) {
  REQUIRE_GLOO();
  for (const Combination& c : LosslessCombinations()) {
    EXPECT_EQ(Train(c, {"--optimizer=adamw", "--lr=0.001"}), "") << c.plugins;
  }
}

TEST(PrecisionTest, Bf16AutocastWithAdamWOnThreeRanks) {
  REQUIRE_GLOO();
  const Combination all = LosslessCombinations().back();
  EXPECT_EQ(Train(all, {"--precision=bf16", "--optimizer=adamw", "--lr=0.001", kBf16Autocast}, 3), "");
}

// The lossy plugins take float32 gradients under bf16 autocast as under float32: each
// within its own rounding (bf16: 2^-8; fp8's E4M3: 0.13, fp8_test.cc) besides autocast's
// (bf16: 0.024 passed on the CPUs CI had run on; an AMD EPYC with AVX2 alone, whose
// bfloat16 products LibTorch computes by other kernels, gave 0.0251 at the third step
// with AdamW, on the tree before and after a change that did not touch this path, so
// 0.03: a lost or doubled bucket is off by far more);
// PowerSGD, whose low-rank result has no such bound, trains with the ranks' parameters
// equal (the worker's check of every run).
TEST(PrecisionTest, LossyPluginsUnderBf16AutocastWithAdamW) {
  REQUIRE_GLOO();
  const std::vector<std::string> amp{"--precision=bf16", "--optimizer=adamw", "--lr=0.001"};
  const auto with = [&amp](const std::string& tolerance) {
    std::vector<std::string> flags = amp;
    flags.push_back(tolerance);
    return flags;
  };
  EXPECT_EQ(testing::TrainAndCompare(2, "plugin { bf16 {} }", with("--grad_tolerance=0.03")), "");
  EXPECT_EQ(testing::TrainAndCompare(2, "plugin { fp8 {} }", with("--grad_tolerance=0.15")), "");
  EXPECT_EQ(testing::TrainAndCompare(2, "plugin { powersgd { matrix_approximation_rank: 2 } }", with("--grad_tolerance=-1")),
            "");
}

// The plugins that read each gradient where it lies and write their result into the
// bucket, with bucket views under bf16 autocast: the blocks' gradients are then in the
// bucket already (Note [Gradients written where they go]), read there and overwritten
// by the result; the same tolerances as above.
TEST(PrecisionTest, GradientsReadFromTheirTargetsUnderBf16Autocast) {
  REQUIRE_GLOO();
  const std::string views = std::string(testing::kSmallBuckets) + " plugin { bucket_view {} } plugin { static_graph {} } ";
  const std::vector<std::string> amp{"--precision=bf16", "--optimizer=adamw", "--lr=0.001", "--expect_views",
                                     "--expect_targets=all"};
  const auto with = [&amp](const std::string& tolerance) {
    std::vector<std::string> flags = amp;
    flags.push_back(tolerance);
    return flags;
  };
  EXPECT_EQ(testing::TrainAndCompare(2, views + "plugin { fp8 {} }", with("--grad_tolerance=0.15")), "");
  EXPECT_EQ(testing::TrainAndCompare(2, views + "plugin { bf16_fp32_sum {} }", with("--grad_tolerance=0.03")), "");
  EXPECT_EQ(testing::TrainAndCompare(2, views + "plugin { powersgd { matrix_approximation_rank: 2 } }",
                                     with("--grad_tolerance=-1")),
            "");
}

}  // namespace
}  // namespace ddplab
