#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(StaticGraphPluginTest, SetsStaticGraphOnly) {
  absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins("plugin { static_graph {} }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->static_graph);
  EXPECT_FALSE(options->gradient_as_bucket_view);
  EXPECT_EQ(options->bucket_cap_bytes, EngineOptions().bucket_cap_bytes);
}

}  // namespace
}  // namespace ddplab
