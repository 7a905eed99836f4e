#include <string>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

// What needs a flat bucket is refused when the plugins are loaded, in either order,
// naming both plugins.
TEST(ZeroCopyPluginTest, RefusesWhatNeedsAFlatBucket) {
  for (const char* other : {"bucket_view {}", "bf16 {}", "powersgd { matrix_approximation_rank: 1 }", "no_communication {}"}) {
    EXPECT_EQ(testing::RefusedTogether("zero_copy {}", other), "") << other;
  }
}

// Against one process over the whole batch, with no bucket memory, alone and with what
// it composes with.
TEST(ZeroCopyPluginTest, AveragesExactlyWhereTheGradientsLie) {
  REQUIRE_GLOO();
  const std::vector<std::string> flags{"--expect_no_bucket_memory"};
  EXPECT_EQ(testing::TrainAndCompare(2, std::string("plugin { zero_copy {} }") + testing::kSmallBuckets, flags), "");
  EXPECT_EQ(testing::TrainAndCompare(3, std::string("plugin { zero_copy {} } plugin { static_graph {} }") +
                                            testing::kSmallBuckets,
                                     {"--expect_no_bucket_memory", "--unused_parameter"}),
            "");
  EXPECT_EQ(testing::TrainAndCompare(2, "plugin { zero_copy {} } plugin { static_graph {} }", flags), "");
  EXPECT_EQ(testing::TrainAndCompare(2, std::string("plugin { zero_copy {} } plugin { static_graph {} }") +
                                            testing::kSmallBuckets,
                                     {"--expect_no_bucket_memory", "--accumulate=3"}),
            "");
}

TEST(ZeroCopyPluginTest, AveragesWhereTheGradientsLieOnGpus) {
  REQUIRE_TWO_GPUS();
  EXPECT_EQ(testing::TrainAndCompareOnGpus(std::string("plugin { zero_copy {} } plugin { static_graph {} }") +
                                               testing::kSmallBuckets,
                                           {"--expect_no_bucket_memory", "--unused_parameter"}),
            "");
}

}  // namespace
}  // namespace ddplab
