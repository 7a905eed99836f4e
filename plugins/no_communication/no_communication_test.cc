#include <ATen/ATen.h>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

TEST(NoCommunicationPluginTest, TheBucketComesBackUntouched) {
  absl::StatusOr<PluginSet> set = testing::ConfigureWithPlugins("plugin { no_communication {} }");
  ASSERT_TRUE(set.ok()) << set.status();
  // The hook uses no process group: none is made (a CUDA build's LibTorch has no Gloo).
  EngineOptions options;
  CommContext context;
  context.world_size = 2;
  context.options = &options;
  std::unique_ptr<CommHook> hook = set->comm_hook_factory()(context);
  ASSERT_NE(hook, nullptr);
  const at::Tensor values = at::arange(12, at::kFloat);
  GradBucket bucket = testing::OneGradientBucket(values.clone(), /*step=*/0);
  c10::intrusive_ptr<c10::ivalue::Future> future = hook->Run(bucket);
  ASSERT_TRUE(future->completed());
  const at::Tensor out = future->value().toTensor();
  EXPECT_TRUE(at::equal(out, values));
  EXPECT_EQ(out.data_ptr(), bucket.buffer.data_ptr());  // the bucket itself: nothing copied
  EXPECT_EQ(hook->Stats().count(kStatNoCommunication), 1u);
}

TEST(NoCommunicationPluginTest, DoesNotComposeWithAnotherHook) {
  absl::StatusOr<PluginSet> set =
      testing::ConfigureWithPlugins("plugin { no_communication {} } plugin { powersgd { rank: 1 } }");
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().ToString().find("powersgd"), std::string::npos) << set.status();
}

}  // namespace
}  // namespace ddplab
