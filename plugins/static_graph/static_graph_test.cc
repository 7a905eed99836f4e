#include <string>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(StaticGraphPluginTest, AcceptsParametersUnusedFromTheFirstStepOnly) {
  absl::StatusOr<PluginSet> set = testing::ConfigureWithPlugins("plugin { static_graph {} }");
  ASSERT_TRUE(set.ok()) << set.status();
  const MissingGradients& policy = *set->engine_parts().missing_gradients;
  EXPECT_EQ(policy.Accept({3}, /*first_step=*/true), "");
  EXPECT_EQ(policy.Accept({3, 5}, /*first_step=*/false),
            "parameter(s) 3, 5 received no gradient in this step, but did in the first: with static_graph a "
            "parameter is used in every step or in none");
}

// Against one process over the whole batch, on 2 and 3 ranks: one bucket and small ones,
// with a parameter the model never uses (its share is zeros, and its gradient stays
// zero), and with gradient accumulation.
TEST(StaticGraphPluginTest, AveragesExactlyWithAParameterUnusedFromTheStart) {
  REQUIRE_GLOO();
  const std::string plugins = "plugin { static_graph {} }";
  EXPECT_EQ(testing::TrainAndCompare(2, plugins, {"--unused_parameter"}), "");
  EXPECT_EQ(testing::TrainAndCompare(3, plugins + testing::kSmallBuckets, {"--unused_parameter"}), "");
  EXPECT_EQ(testing::TrainAndCompare(2, plugins + testing::kSmallBuckets, {"--accumulate=3"}), "");
}

TEST(StaticGraphPluginTest, AveragesExactlyOnGpus) {
  REQUIRE_TWO_GPUS();
  EXPECT_EQ(testing::TrainAndCompareOnGpus(std::string("plugin { static_graph {} }") + testing::kSmallBuckets,
                                           {"--unused_parameter"}),
            "");
}

}  // namespace
}  // namespace ddplab
