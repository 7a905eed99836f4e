#include "plugins/registered_buckets/registered_pool.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "plugins/registered_buckets/one_rank_group.h"

#if defined(DDPLAB_CUDA) && defined(USE_C10D_NCCL)
#include <torch/cuda.h>
#endif

namespace ddplab {
namespace {

// Without a NCCL group there is no pool, and the error says why.
TEST(RegisteredPoolTest, NeedsNccl) {
  absl::StatusOr<std::unique_ptr<RegisteredPool>> pool = RegisteredPool::Make(nullptr);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(std::string(pool.status().message()).find("NCCL"), std::string::npos) << pool.status();
}

#if defined(DDPLAB_CUDA) && defined(USE_C10D_NCCL)

// Buckets made in the pool are registered as windows as they are made, summed where they
// lie, and after InUse a rebuild's buckets go into a pool of their own, registered anew
// (Note [Registered once per build]); the windows go with the pool, and the group goes on.
TEST(RegisteredPoolTest, RegistersEachBuildAndReducesThere) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU";
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group = testing::OneRankNcclGroup();
  {
    absl::StatusOr<std::unique_ptr<RegisteredPool>> pool = RegisteredPool::Make(group.get());
    ASSERT_TRUE(pool.ok()) << pool.status();
    const auto options = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
    std::vector<at::Tensor> kept;
    for (int build = 1; build <= 2; ++build) {
      at::Tensor a = (*pool)->Allocate([&] { return at::arange(1 << 20, options); });
      at::Tensor b = (*pool)->Allocate([&] { return at::zeros({3 << 20}, options.dtype(at::kBFloat16)); });
      EXPECT_EQ((*pool)->windows(), 2 * build);
      EXPECT_EQ((*pool)->bytes(), (4 << 20) + (6 << 20));
      for (const at::Tensor& t : kept) EXPECT_NE(t.data_ptr(), a.data_ptr());  // the rebuild's are new
      (*pool)->InUse();
      const at::Tensor before = a.clone();
      std::vector<at::Tensor> tensors{a};
      c10d::AllreduceOptions sum;
      sum.reduceOp = c10d::ReduceOp::SUM;
      group->allreduce(tensors, sum)->wait();
      EXPECT_TRUE(at::equal(a, before));
      EXPECT_EQ(b.scalar_type(), at::kBFloat16);
      kept = {a, b};
    }
  }
  // The group still reduces after the pool and its windows are gone.
  std::vector<at::Tensor> after{at::ones({8}, at::TensorOptions().device(at::kCUDA))};
  group->allreduce(after)->wait();
  EXPECT_TRUE(at::equal(after[0].cpu(), at::ones({8})));
  group->shutdown();
}

#endif

}  // namespace
}  // namespace ddplab
