#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(BucketSizingPluginTest, SetsBothCapsInBytes) {
  absl::StatusOr<EngineOptions> options = testing::ResolveWithPlugins(
      "plugin { bucket_sizing { bucket_cap_mb: 2000 first_bucket_cap_mb: 2.5 } }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->bucket_cap_bytes, 2'000'000'000);
  EXPECT_EQ(options->first_bucket_cap_bytes, 2'500'000);
  EXPECT_TRUE(options->sweep_bucket_cap_bytes.empty());
}

TEST(BucketSizingPluginTest, FirstBucketNeverExceedsASmallCap) {
  absl::StatusOr<EngineOptions> options =
      testing::ResolveWithPlugins("plugin { bucket_sizing { bucket_cap_mb: 0.5 } }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->bucket_cap_bytes, 500'000);
  EXPECT_EQ(options->first_bucket_cap_bytes, 500'000);
}

TEST(BucketSizingPluginTest, SweepKeepsTheCapsInOrder) {
  absl::StatusOr<EngineOptions> options =
      testing::ResolveWithPlugins("plugin { bucket_sizing { sweep_cap_mb: [100, 25, 50] } }");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->sweep_bucket_cap_bytes,
            (std::vector<int64_t>{100'000'000, 25'000'000, 50'000'000}));
  EXPECT_EQ(options->bucket_cap_bytes, EngineOptions().bucket_cap_bytes);
}

}  // namespace
}  // namespace ddplab
