#include <string>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(ForwardOverlapPluginTest, UpdatesBesideTheNextForwardInTheOrderBucketsComplete) {
  absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins("plugin { forward_overlap {} }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->overlap_optimizer);
  EXPECT_FALSE(options->optimizer_during_backward);
  EXPECT_TRUE(options->updates_beside_forward);
  EXPECT_EQ(options->reversed_buckets, 0);
  EXPECT_EQ(options->tail_buckets, 0);
}

TEST(ForwardOverlapPluginTest, TakesReversedBuckets) {
  for (int n : {0, 5}) {
    absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins(
        "plugin { forward_overlap { reversed_buckets: " + std::to_string(n) + " } }");
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->reversed_buckets, n);
    EXPECT_TRUE(options->updates_beside_forward);
  }
}

// Whatever the engine's own all-reduce sends: in place, from bucket views, in bfloat16, from
// the launch thread; and beside optimizer_overlap's default (the same updates after backward).
TEST(ForwardOverlapPluginTest, ComposesWithTheEnginesOwnAllReduce) {
  for (const char* other : {"zero_copy {}", "bucket_view {}", "bf16 {}", "static_graph {}",
                            "launch_thread {}", "optimizer_overlap {}", "bucket_sizing { bucket_cap_mb: 10 }"}) {
    absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins(
        std::string("plugin { forward_overlap {} } plugin { ") + other + " }");
    ASSERT_TRUE(options.ok()) << other << ": " << options.status();
    EXPECT_TRUE(options->updates_beside_forward) << other;
  }
}

// A hook replaces the all-reduce whose end the update follows; the optimizer during backward
// and the tail communicator order the end of the step their own way: refused when the
// plugins are loaded, naming both, in either order.
TEST(ForwardOverlapPluginTest, RefusesHooksTheOptimizerDuringBackwardAndTheTail) {
  for (const char* other : {"powersgd { rank: 1 }", "no_communication {}",
                            "optimizer_overlap { during_backward: true }", "tail_communicator {}"}) {
    EXPECT_EQ(testing::RefusedTogether("forward_overlap {}", other), "") << other;
  }
}

}  // namespace
}  // namespace ddplab
