#include <string>

#include "core/build_flags.h"
#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

// A build without NCCL refuses the plugin when it is configured, saying why; a CUDA build
// takes it.
TEST(RegisteredBucketsPluginTest, NeedsABuildWithNccl) {
  absl::StatusOr<PluginSet> set = testing::ConfigureWithPlugins("plugin { registered_buckets {} }");
  if (DDPLAB_CUDA_BUILD) {
    EXPECT_TRUE(set.ok()) << set.status();
  } else {
    ASSERT_FALSE(set.ok());
    EXPECT_NE(std::string(set.status().message()).find("this build has no NCCL"), std::string::npos) << set.status();
  }
}

// In a CUDA build a run over Gloo (CPU processes) fails before its first step, naming the
// plugin and why.
TEST(RegisteredBucketsPluginTest, RefusesGlooInACudaBuild) {
  if (!DDPLAB_CUDA_BUILD) GTEST_SKIP() << "a CPU build refuses the plugin when it is configured";
  REQUIRE_GLOO();
  const std::string failure = testing::TrainAndCompare(2, "plugin { registered_buckets {} }");
  EXPECT_NE(failure.find("registered_buckets: the run's collectives are not NCCL's"), std::string::npos) << failure;
}

// The same averages as without it, over NCCL, through the rebuild (a second
// registration): core's all-reduce, bf16's bytes, and symmetric windows.
TEST(RegisteredBucketsPluginTest, AveragesExactlyOnGpus) {
  REQUIRE_TWO_GPUS();
  EXPECT_EQ(testing::TrainAndCompareOnGpus(std::string("plugin { registered_buckets {} }") + testing::kSmallBuckets), "");
  EXPECT_EQ(testing::TrainAndCompareOnGpus(std::string("plugin { registered_buckets { symmetric: true } }") +
                                           testing::kSmallBuckets),
            "");
}

TEST(RegisteredBucketsPluginTest, KeepsBf16sBytesOnGpus) {
  REQUIRE_TWO_GPUS();
  EXPECT_EQ(testing::TrainAndCompareOnGpus(
                std::string("plugin { bf16 {} } plugin { registered_buckets {} }") + testing::kSmallBuckets,
                {"--grad_tolerance=0.00390625", "--wire_dtype=BFloat16"}),
            "");
}

}  // namespace
}  // namespace ddplab
