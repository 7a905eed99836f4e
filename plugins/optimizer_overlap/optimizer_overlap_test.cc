#include <string>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

// The updates follow whatever reduced the bucket: every plugin composes.
TEST(OptimizerOverlapPluginTest, ComposesWithEveryReduction) {
  for (const char* other : {"zero_copy {}", "bucket_view {}", "bf16 {}", "static_graph {}", "powersgd { matrix_approximation_rank: 1 }",
                            "no_communication {}"}) {
    absl::StatusOr<PluginSet> set =
        testing::ConfigureWithPlugins(std::string("plugin { optimizer_overlap {} } plugin { ") + other + " }");
    ASSERT_TRUE(set.ok()) << other << ": " << set.status();
    EXPECT_FALSE(set->engine_parts().hooks.empty()) << other;
  }
}

// SGD with momentum and weight decay, per bucket, as the averages land: each step's
// gradients equal one process's over the whole batch, so every earlier update was the
// reference's (and the worker fails if the engine did not do the updates).
TEST(OptimizerOverlapPluginTest, UpdatesEachBucketAsItsAverageLands) {
  REQUIRE_GLOO();
  const std::vector<std::string> flags{"--expect_updated", "--momentum=0.9", "--weight_decay=0.01"};
  const std::string overlap = "plugin { optimizer_overlap {} } ";
  for (const std::string& more :
       {std::string(testing::kSmallBuckets), std::string("plugin { bucket_view {} } plugin { static_graph {} }"),
        std::string("plugin { zero_copy {} } plugin { static_graph {} }") + testing::kSmallBuckets}) {
    EXPECT_EQ(testing::TrainAndCompare(2, overlap + more, flags), "") << more;
  }
  std::vector<std::string> accumulate = flags;
  accumulate.push_back("--accumulate=3");
  EXPECT_EQ(testing::TrainAndCompare(3, overlap + testing::kSmallBuckets, accumulate), "");
  EXPECT_EQ(testing::TrainAndCompare(2, overlap + "plugin { bf16 {} }",
                                     {"--expect_updated", "--grad_tolerance=0.00390625", "--wire_dtype=BFloat16"}),
            "");
  // Under the error sampler, which waits for every bucket's future once backward is done:
  // the steps complete those futures first.
  EXPECT_EQ(testing::TrainAndCompare(2, overlap + "plugin { bf16 { sample_error_every: 2 } }",
                                     {"--expect_updated", "--grad_tolerance=0.00390625", "--steps=4", "--timed_from=-1"}),
            "");
}

TEST(OptimizerOverlapPluginTest, UpdatesEachBucketOnGpus) {
  REQUIRE_TWO_GPUS();
  EXPECT_EQ(testing::TrainAndCompareOnGpus(std::string("plugin { optimizer_overlap {} } plugin { zero_copy {} }") +
                                               testing::kSmallBuckets,
                                           {"--expect_updated", "--momentum=0.9", "--weight_decay=0.01"}),
            "");
  EXPECT_EQ(testing::TrainAndCompareOnGpus("plugin { optimizer_overlap {} } plugin { bf16 {} }",
                                           {"--expect_updated", "--grad_tolerance=0.00390625"}),
            "");
}

}  // namespace
}  // namespace ddplab
