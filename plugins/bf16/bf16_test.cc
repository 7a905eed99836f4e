#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(Bf16PluginTest, GradientsTravelInBfloat16) {
  absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins("plugin { bf16 {} }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->comm_dtype, at::kBFloat16);
  EXPECT_EQ(options->gradient_error_every, 0);
}

TEST(Bf16PluginTest, SamplesTheErrorWhenAsked) {
  absl::StatusOr<EngineOptions> options =
      testing::ResolveWithPlugins("plugin { bf16 { sample_error_every: 5 } }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->gradient_error_every, 5);
}

}  // namespace
}  // namespace ddplab
