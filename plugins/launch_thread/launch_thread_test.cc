#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(LaunchThreadPluginTest, SetsLaunchThreadOnly) {
  absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins("plugin { launch_thread {} }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->launch_thread);
  EXPECT_FALSE(options->reduce_in_place);
  EXPECT_FALSE(options->gradient_as_bucket_view);
}

TEST(LaunchThreadPluginTest, ComposesWithBucketViewsAndCompression) {
  for (const char* other : {"bucket_view {}", "bf16 {}", "powersgd { rank: 2 }"}) {
    absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins(
        std::string("plugin { launch_thread {} } plugin { ") + other + " }");
    ASSERT_TRUE(options.ok()) << other << ": " << options.status();
    EXPECT_TRUE(options->launch_thread);
  }
}

}  // namespace
}  // namespace ddplab
