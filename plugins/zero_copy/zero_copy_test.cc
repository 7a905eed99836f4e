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

// What needs a flat bucket is refused when the plugins are loaded, naming both plugins.
TEST(ZeroCopyPluginTest, RefusesWhatNeedsAFlatBucket) {
  for (const std::string other : {"bucket_view {}", "bf16 {}", "powersgd { rank: 1 }", "no_communication {}"}) {
    absl::StatusOr<EngineOptions> options =
        testing::ResolveWithPlugins("plugin { zero_copy {} } plugin { " + other + " }");
    ASSERT_FALSE(options.ok()) << other;
    const std::string message(options.status().message());
    const std::string name = other.substr(0, other.find(' '));
    EXPECT_NE(message.find("plugin \"zero_copy\""), std::string::npos) << message;
    EXPECT_NE(message.find("plugin \"" + name + "\""), std::string::npos) << message;
    EXPECT_NE(message.find("list one of them"), std::string::npos) << message;
  }
  // The order they are listed in does not matter.
  absl::StatusOr<EngineOptions> options =
      testing::ResolveWithPlugins("plugin { bucket_view {} } plugin { zero_copy {} }");
  EXPECT_FALSE(options.ok());
}

}  // namespace
}  // namespace ddplab
