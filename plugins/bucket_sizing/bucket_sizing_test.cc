#include <memory>
#include <string>
#include <vector>

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

// The planner of one configuration.
std::shared_ptr<const BucketPlanner> PlannerOf(const std::string& plugins) {
  absl::StatusOr<PluginSet> set = testing::ConfigureWithPlugins(plugins);
  EXPECT_TRUE(set.ok()) << set.status();
  return set.ok() ? set->engine_parts().planner : nullptr;
}

// Note [A short tail]: from the end of backward, a bucket of last_bucket_cap_mb, then of
// twice that, while below the cap; DDP's buckets before them.
TEST(BucketSizingPluginTest, TheLastBucketsDoubleFromTheLastCapToTheCap) {
  constexpr int64_t kMiB = 1 << 20;
  const std::shared_ptr<const BucketPlanner> planner =
      PlannerOf("plugin { bucket_sizing { bucket_cap_mb: 64 last_bucket_cap_mb: 8 } }");
  ASSERT_NE(planner, nullptr);
  EXPECT_EQ(planner->Describe(), "buckets of 64 MiB, the first 1 MiB, the last 8 MiB and those before it doubling");
  const std::vector<int64_t> bytes(20, 8 * kMiB);  // 20 gradients of 8 MiB, in the order backward makes them
  std::vector<size_t> order(20);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  EXPECT_EQ(planner->Plan(bytes, order),
            (std::vector<std::vector<size_t>>{
                {0}, {1, 2, 3, 4, 5, 6, 7, 8}, {9, 10, 11, 12}, {13, 14, 15, 16}, {17, 18}, {19}}));
  // A model smaller than the tail: the tail alone (8 MiB, then 16), every gradient once, in order.
  EXPECT_EQ(planner->Plan({8 * kMiB, 8 * kMiB, 8 * kMiB}, {2, 0, 1}), (std::vector<std::vector<size_t>>{{2, 0}, {1}}));
  // At or above the cap: DDP's buckets, as without it.
  EXPECT_EQ(PlannerOf("plugin { bucket_sizing { bucket_cap_mb: 64 last_bucket_cap_mb: 64 } }")->Describe(),
            "buckets of 64 MiB, the first 1 MiB");
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
  // The last buckets doubling from a smaller last cap (Note [A short tail]).
  EXPECT_EQ(testing::TrainAndCompare(
                2, "plugin { bucket_sizing { bucket_cap_mb: 0.02 first_bucket_cap_mb: 0.004 last_bucket_cap_mb: 0.002 } }"),
            "");
}

// The CUDA paths (streams, events) over NCCL: one bucket and small ones.
TEST(BucketSizingPluginTest, AveragesExactlyOnGpus) {
  REQUIRE_TWO_GPUS();
  EXPECT_EQ(testing::TrainAndCompareOnGpus(""), "");
  EXPECT_EQ(testing::TrainAndCompareOnGpus(testing::kSmallBuckets, {"--accumulate=3"}), "");
}

}  // namespace
}  // namespace ddplab
