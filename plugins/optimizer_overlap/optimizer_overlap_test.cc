#include <string>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(OptimizerOverlapPluginTest, SetsOverlapOptimizerOnly) {
  absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins("plugin { optimizer_overlap {} }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->overlap_optimizer);
  EXPECT_FALSE(options->optimizer_during_backward);
  EXPECT_FALSE(options->reduce_in_place);
  EXPECT_FALSE(options->launch_thread);
  EXPECT_EQ(options->comm_dtype, at::ScalarType::Undefined);
}

// After backward, the updates follow whatever reduced the bucket: every plugin composes.
TEST(OptimizerOverlapPluginTest, AfterBackwardComposesWithEveryReduction) {
  for (const char* other : {"zero_copy {}", "bucket_view {}", "bf16 {}", "static_graph {}",
                            "powersgd { rank: 1 }", "no_communication {}", "launch_thread {}"}) {
    absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins(
        std::string("plugin { optimizer_overlap {} } plugin { ") + other + " }");
    ASSERT_TRUE(options.ok()) << other << ": " << options.status();
    EXPECT_TRUE(options->overlap_optimizer);
  }
}

TEST(OptimizerOverlapPluginTest, DuringBackwardComposesWithTheEnginesOwnAllReduce) {
  for (const char* other : {"zero_copy {}", "bucket_view {}", "bf16 {}", "static_graph {}"}) {
    absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins(
        std::string("plugin { optimizer_overlap { during_backward: true } } plugin { ") + other + " }");
    ASSERT_TRUE(options.ok()) << other << ": " << options.status();
    EXPECT_TRUE(options->overlap_optimizer);
    EXPECT_TRUE(options->optimizer_during_backward);
  }
}

// During backward, a hook's reduction or another thread's launches: refused when the
// plugins are loaded, naming both plugins, in either order.
TEST(OptimizerOverlapPluginTest, DuringBackwardRefusesHooksAndTheLaunchThread) {
  for (const char* other : {"powersgd { rank: 1 }", "no_communication {}", "launch_thread {}"}) {
    EXPECT_EQ(testing::RefusedTogether("optimizer_overlap { during_backward: true }", other), "");
  }
}

}  // namespace
}  // namespace ddplab
