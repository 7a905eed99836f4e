#include <string>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(ZeroCopyPluginTest, SetsReduceInPlaceOnly) {
  absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins("plugin { zero_copy {} }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->reduce_in_place);
  EXPECT_FALSE(options->gradient_as_bucket_view);
  EXPECT_FALSE(options->launch_thread);
}

TEST(ZeroCopyPluginTest, ComposesWithStaticGraphBucketSizingAndLaunchThread) {
  absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins(
      "plugin { bucket_sizing { bucket_cap_mb: 50 } } plugin { static_graph {} } "
      "plugin { zero_copy {} } plugin { launch_thread {} }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->reduce_in_place);
  EXPECT_TRUE(options->static_graph);
  EXPECT_TRUE(options->launch_thread);
  EXPECT_EQ(options->bucket_cap_bytes, 50'000'000);
}

// What needs a flat bucket is refused when the plugins are loaded, in either order,
// naming both plugins.
TEST(ZeroCopyPluginTest, RefusesWhatNeedsAFlatBucket) {
  for (const char* other : {"bucket_view {}", "bf16 {}", "powersgd { rank: 1 }", "no_communication {}"}) {
    EXPECT_EQ(testing::RefusedTogether("zero_copy {}", other), "");
  }
}

}  // namespace
}  // namespace ddplab
