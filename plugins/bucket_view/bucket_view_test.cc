#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(BucketViewPluginTest, SetsGradientAsBucketViewOnly) {
  absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins("plugin { bucket_view {} }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->gradient_as_bucket_view);
  EXPECT_FALSE(options->static_graph);
}

TEST(BucketViewPluginTest, ComposesWithStaticGraph) {
  absl::StatusOr<EngineOptions> options =
      testing::ResolveWithPlugins("plugin { bucket_view {} } plugin { static_graph {} }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->gradient_as_bucket_view);
  EXPECT_TRUE(options->static_graph);
}

}  // namespace
}  // namespace ddplab
