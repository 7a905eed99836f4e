#include <string>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(BucketViewPluginTest, TakesTheGradientLayout) {
  absl::StatusOr<PluginSet> set = testing::ConfigureWithPlugins("plugin { bucket_view {} } plugin { static_graph {} }");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(DescribeEngine(set->engine_parts()),
            "buckets of 25 MiB, the first 1 MiB, gradients as views into the buckets, averaged by all-reduce");
}

// Every combination with static_graph and bucket sizes, on 2 and 3 ranks, against one
// process over the whole batch; every gradient a view into its bucket after each step.
TEST(BucketViewPluginTest, AveragesExactlyIntoTheGradientsViews) {
  REQUIRE_GLOO();
  for (int ranks : {2, 3}) {
    for (const std::string& more : {std::string(), std::string("plugin { static_graph {} }"),
                                    std::string(testing::kSmallBuckets),
                                    std::string("plugin { static_graph {} }") + testing::kSmallBuckets}) {
      EXPECT_EQ(testing::TrainAndCompare(ranks, "plugin { bucket_view {} } " + more, {"--expect_views"}), "")
          << ranks << " ranks, " << more;
    }
  }
  EXPECT_EQ(testing::TrainAndCompare(2, std::string("plugin { bucket_view {} } plugin { static_graph {} }") +
                                            testing::kSmallBuckets,
                                     {"--expect_views", "--accumulate=3", "--unused_parameter"}),
            "");
}

// Note [Gradients written where they go]: under bf16 autocast the encoder blocks write
// their gradients into the views, which with bf16 on the wire are a float32 buffer of
// their own beside it. (precision_test.cc checks the lossless combinations.)
TEST(BucketViewPluginTest, Bf16WireWithGradientsWrittenIntoTheViews) {
  REQUIRE_GLOO();
  EXPECT_EQ(testing::TrainAndCompare(2, "plugin { bucket_view {} } plugin { bf16 {} }",
                                     {"--expect_views", "--expect_targets=all", "--precision=bf16",
                                      "--grad_tolerance=0.024", "--wire_dtype=BFloat16"}),
            "");
}

// In bfloat16 on the wire: the views are a float32 buffer of their own.
TEST(BucketViewPluginTest, WithBf16TheViewsGetTheRoundedAverage) {
  REQUIRE_GLOO();
  EXPECT_EQ(testing::TrainAndCompare(2, std::string("plugin { bucket_view {} } plugin { bf16 {} } plugin { static_graph {} }"),
                                     {"--expect_views", "--unused_parameter", "--steps=4", "--grad_tolerance=0.00390625",
                                      "--wire_dtype=BFloat16"}),
            "");
  EXPECT_EQ(testing::TrainAndCompare(2, "plugin { bucket_view {} } plugin { bf16 { sample_error_every: 2 } }",
                                     {"--expect_views", "--accumulate=3", "--grad_tolerance=0.00390625", "--wire_dtype=BFloat16"}),
            "");
}

TEST(BucketViewPluginTest, AveragesIntoTheViewsOnGpus) {
  REQUIRE_TWO_GPUS();
  EXPECT_EQ(testing::TrainAndCompareOnGpus(std::string("plugin { bucket_view {} } plugin { static_graph {} }") +
                                               testing::kSmallBuckets,
                                           {"--expect_views", "--unused_parameter"}),
            "");
  EXPECT_EQ(testing::TrainAndCompareOnGpus("plugin { bucket_view {} } plugin { bf16 {} }",
                                           {"--expect_views", "--grad_tolerance=0.00390625", "--wire_dtype=BFloat16"}),
            "");
}

}  // namespace
}  // namespace ddplab
