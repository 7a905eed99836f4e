#include <string>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(TailCommunicatorPluginTest, OneBucketOnNcclsChannelsByDefault) {
  absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins("plugin { tail_communicator {} }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->tail_buckets, 1);
  EXPECT_EQ(options->tail_channels, 0);
  EXPECT_FALSE(options->reduce_in_place);
  EXPECT_FALSE(options->overlap_optimizer);
}

// Channels are NCCL's: an experiment on GPUs takes them, one over Gloo is refused.
TEST(TailCommunicatorPluginTest, TakesBucketsAndChannels) {
  const std::string plugin = "plugin { tail_communicator { buckets: 3 channels: 16 } }";
  absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins(plugin, "device: CUDA gpus_per_node: 2");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->tail_buckets, 3);
  EXPECT_EQ(options->tail_channels, 16);
  options = testing::ResolveWithPlugins(plugin);
  ASSERT_FALSE(options.ok());
  EXPECT_NE(options.status().message().find("plugin[0].tail_communicator.channels: sets NCCL's channels, but "
                                            "this experiment uses Gloo"),
            std::string::npos)
      << options.status();
}

TEST(TailCommunicatorPluginTest, ComposesWithTheEnginesOwnAllReduce) {
  for (const char* other : {"zero_copy {}", "bucket_view {}", "bf16 {}", "static_graph {}",
                            "launch_thread {}", "optimizer_overlap {}",
                            "optimizer_overlap { during_backward: true }"}) {
    absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins(
        std::string("plugin { tail_communicator {} } plugin { ") + other + " }");
    ASSERT_TRUE(options.ok()) << other << ": " << options.status();
    EXPECT_EQ(options->tail_buckets, 1) << other;
  }
}

// A hook reduces every bucket itself, over the experiment's group: refused when the
// plugins are loaded, naming both, in either order.
TEST(TailCommunicatorPluginTest, RefusesCommunicationHooks) {
  for (const char* other : {"powersgd { rank: 1 }", "no_communication {}"}) {
    EXPECT_EQ(testing::RefusedTogether("tail_communicator {}", other), "");
  }
}

}  // namespace
}  // namespace ddplab
