#include <memory>
#include <string>
#include <vector>

#include "core/build_flags.h"
#include "core/engine/allreduce_hook.h"
#include "gtest/gtest.h"
#include "plugins/registered_buckets/one_rank_group.h"
#include "plugins/testing/plugin_testutil.h"

#if defined(DDPLAB_CUDA) && defined(USE_C10D_NCCL)
#include <torch/cuda.h>
#endif

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

// The same averages as without it, over NCCL, before and after the rebuild (its buckets
// in a second pool).
TEST(RegisteredBucketsPluginTest, AveragesOnGpus) {
  REQUIRE_TWO_GPUS();
  EXPECT_EQ(testing::TrainAndCompareOnGpus(std::string("plugin { registered_buckets {} }") + testing::kSmallBuckets), "");
}

// Levers that reduce the bucket themselves take the reducer's place: refused, naming both.
TEST(RegisteredBucketsPluginTest, RefusesOtherReducers) {
  if (!DDPLAB_CUDA_BUILD) GTEST_SKIP() << "a CPU build refuses the plugin when it is configured";
  EXPECT_EQ(testing::RefusedTogether("registered_buckets {}", "powersgd { matrix_approximation_rank: 1 }"), "");
  EXPECT_EQ(testing::RefusedTogether("registered_buckets {}", "zero_copy {}"), "");
  EXPECT_EQ(testing::RefusedTogether("registered_buckets {}", "fp8 {}"), "");
  EXPECT_EQ(testing::RefusedTogether("registered_buckets {}", "bf16_fp32_sum {}"), "");
  EXPECT_EQ(testing::RefusedTogether("registered_buckets {}", "no_communication {}"), "");
}

// Under bf16 the windows hold bfloat16 buckets, averaged within bf16's rounding. (What was
// sent is not recorded under this reducer: core's all-reduce records it.)
TEST(RegisteredBucketsPluginTest, AveragesBf16sBytesOnGpus) {
  REQUIRE_TWO_GPUS();
  EXPECT_EQ(testing::TrainAndCompareOnGpus(
                std::string("plugin { bf16 {} } plugin { registered_buckets {} }") + testing::kSmallBuckets,
                {"--grad_tolerance=0.00390625"}),
            "");
}

#if defined(DDPLAB_CUDA) && defined(USE_C10D_NCCL)
// The chain on one GPU, over a group of one rank that the hooks are told has two: its
// codec makes the buckets in the pool (bfloat16 under bf16), the first bucket registers
// them, and the reducer premultiplies by 1/2 and sums over the one rank, so each bucket
// comes back halved.
TEST(RegisteredBucketsPluginTest, HalvesOverOneRankToldOfTwo) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU";
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group = testing::OneRankNcclGroup();
  for (const std::string plugins : {"plugin { registered_buckets {} }", "plugin { bf16 {} } plugin { registered_buckets {} }"}) {
    SCOPED_TRACE(plugins);
    absl::StatusOr<PluginSet> set = testing::ConfigureWithPlugins(plugins, "device: CUDA gpus_per_node: 2");
    ASSERT_TRUE(set.ok()) << set.status();
    std::unique_ptr<CommHook> hook =
        MakeHookChain(set->engine_parts().hooks, CommContext{group.get(), 0, 2, true, {}, nullptr, {}, {}});
    const at::Tensor grad = at::arange(1 << 16, at::TensorOptions().device(at::kCUDA)).to(at::kFloat);
    const std::shared_ptr<const BucketCodec> codec = hook->Codec();
    const at::Tensor buffer = codec->Buffer(grad.numel(), grad.options());
    EXPECT_EQ(buffer.scalar_type(), plugins.find("bf16") == std::string::npos ? at::kFloat : at::kBFloat16);
    codec->Pack({grad}, {buffer});
    GradBucket bucket = testing::OneGradientBucket(grad, 0);
    bucket.buffer = buffer;
    bucket.gradients = {buffer};
    c10::intrusive_ptr<c10::ivalue::Future> future = hook->Run(bucket);
    future->wait();
    const c10::IValue value = future->value();
    const at::Tensor result = (value.isTensor() ? value.toTensor() : value.toTensorVector().at(0)).to(at::kFloat);
    EXPECT_TRUE(at::allclose(result, grad.to(buffer.scalar_type()).to(at::kFloat) * 0.5));
    EXPECT_EQ(hook->Stats().at("windows"), 1);
  }
  group->shutdown();
}
#endif

}  // namespace
}  // namespace ddplab
