#include <string>

#include <torch/types.h>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

// The hook hands each bucket back as it is, and the run is marked a diagnostic.
TEST(NoCommunicationPluginTest, KeepsEachRanksGradientAndIsADiagnostic) {
  REQUIRE_GLOO();
  absl::StatusOr<PluginSet> set = testing::ConfigureWithPlugins("plugin { no_communication {} }");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->diagnostic());
  std::unique_ptr<CommHook> hook = testing::MakeHook(*set);
  at::Tensor g = torch::arange(6.0).view({2, 3});
  GradBucket bucket = testing::OneGradientBucket(g, 0);
  c10::intrusive_ptr<c10::ivalue::Future> future = hook->Run(bucket);
  future->wait();
  EXPECT_TRUE(at::equal(future->value().toTensor(), g.reshape(-1)));
}

// Only one plugin reduces the buckets.
TEST(NoCommunicationPluginTest, RefusesAnotherHook) {
  EXPECT_EQ(testing::RefusedTogether("no_communication {}", "powersgd { matrix_approximation_rank: 1 }"), "");
}

}  // namespace
}  // namespace ddplab
