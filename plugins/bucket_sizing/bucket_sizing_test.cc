#include <string>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

std::string Describe(const std::string& plugins) {
  absl::StatusOr<PluginSet> set = testing::ConfigureWithPlugins(plugins);
  if (!set.ok()) return std::string(set.status().message());
  return set->engine_parts().planner ? set->engine_parts().planner->Describe() : "(default)";
}

TEST(BucketSizingPluginTest, PlansBucketsOfTheCapsAsked) {
  EXPECT_EQ(Describe("plugin { bucket_sizing { bucket_cap_mb: 2000 first_bucket_cap_mb: 2.5 } }"),
            "buckets of 2000 MiB, the first 2.5 MiB");
  // PyTorch's first bucket of 1 MiB, never larger than a smaller cap.
  EXPECT_EQ(Describe("plugin { bucket_sizing { bucket_cap_mb: 50 } }"), "buckets of 50 MiB, the first 1 MiB");
  EXPECT_EQ(Describe("plugin { bucket_sizing { bucket_cap_mb: 0.5 } }"), "buckets of 0.5 MiB, the first 0.5 MiB");
  std::vector<std::vector<size_t>> buckets = CapPlanner(500, 400).Plan({100, 100, 300, 50, 50, 400}, {5, 4, 3, 2, 1, 0});
  EXPECT_EQ(buckets, (std::vector<std::vector<size_t>>{{5}, {4, 3, 2, 1}, {0}}));
}

std::string Loaded(const std::string& text) { return std::string(testing::LoadWithPlugins(text).message()); }

// Bad values at their file:line:column: the rules declared in bucket_sizing.proto, and
// the plugin's own check of two fields together.
TEST(BucketSizingPluginTest, BadValuesAreReportedWhereTheyAre) {
  const std::string head =
      "name: \"x\" model { preset: VIT_TINY_TEST } data { batch_size: 2 } steps { measured: 1 }\n"
      "optimizer { sgd { learning_rate: 0.1 } } distributed { device: CPU gpus_per_node: 2 }\n";
  EXPECT_EQ(Loaded(head + "plugin { bucket_sizing { bucket_cap_mb: -1 } }"),
            "test.textproto:3:26: plugin[0].bucket_sizing.bucket_cap_mb: must be > 0, got -1");
  EXPECT_EQ(Loaded(head + "plugin { bucket_sizing {\n bucket_cap_mb: 10 first_bucket_cap_mb: 20 } }"),
            "test.textproto:4:20: plugin[0].bucket_sizing.first_bucket_cap_mb: plugin \"bucket_sizing\" rejected "
            "its configuration: must be at most bucket_cap_mb (10), got 20");
  EXPECT_EQ(Loaded(head + "plugin { bucket_sizing { sweep_cap_mb: [25, 50, 25] } }"),
            "test.textproto:3:26: plugin[0].bucket_sizing.sweep_cap_mb[2]: repeats 25 (sweep_cap_mb[0])");
  EXPECT_EQ(
      Loaded(head + "plugin { bucket_sizing { bucket_cap_mb: 25 sweep_cap_mb: [50] } }"),
      "test.textproto:3:26: plugin[0].bucket_sizing.bucket_cap_mb: contradicts sweep_cap_mb: a sweep sets the "
      "bucket_cap_mb of each run; leave bucket_cap_mb out");
}

// Small buckets (several, rebuilt after the first step) against one process over the
// whole batch, on 2 and 3 ranks, with gradient accumulation.
TEST(BucketSizingPluginTest, SmallBucketsAverageExactly) {
  REQUIRE_GLOO();
  EXPECT_EQ(testing::TrainAndCompare(2, testing::kSmallBuckets), "");
  EXPECT_EQ(testing::TrainAndCompare(3, testing::kSmallBuckets), "");
  EXPECT_EQ(testing::TrainAndCompare(2, testing::kSmallBuckets, {"--accumulate=3"}), "");
}

// The CUDA paths (streams, events) over NCCL: one bucket and small ones.
TEST(BucketSizingPluginTest, AveragesExactlyOnGpus) {
  REQUIRE_TWO_GPUS();
  EXPECT_EQ(testing::TrainAndCompareOnGpus(""), "");
  EXPECT_EQ(testing::TrainAndCompareOnGpus(testing::kSmallBuckets, {"--accumulate=3"}), "");
}

}  // namespace
}  // namespace ddplab
