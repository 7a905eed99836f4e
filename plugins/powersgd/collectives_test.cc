// How many collectives PowerSGD issues a bucket: the uncompressed gradients travel with the
// P in one grouped all-reduce, the Q in a second (powersgd.cc's header). Two ranks whose
// gradients are the same, so that every mean is the value itself, through collectives
// that count what they are asked and average nothing.
#include <cmath>
#include <memory>
#include <vector>

#include <torch/types.h>
#include <torch/utils.h>

#include "core/engine/collectives.h"
#include "core/engine/extension_points.h"
#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

// Every call one entry: the tensors it would average (a grouped mean's several).
class CountedCollectives : public Collectives {
 public:
  mutable std::vector<std::vector<at::Tensor>> calls;

  PendingMean StartMean(at::Tensor tensor) const override { return Record({tensor}); }
  PendingMean StartMeanCoalesced(std::vector<at::Tensor> tensors) const override { return Record(tensors); }
  void AllGatherBytes(at::Tensor&, const at::Tensor&) const override {
    ADD_FAILURE() << "PowerSGD gathers nothing";
  }
  PendingMean StartMeanScatter(std::vector<at::Tensor>, std::vector<at::Tensor>) const override {
    ADD_FAILURE() << "PowerSGD scatters nothing";
    return Record({});
  }
  PendingMean StartGatherInPlace(std::vector<at::Tensor>) const override {
    ADD_FAILURE() << "PowerSGD gathers nothing";
    return Record({});
  }

 private:
  PendingMean Record(std::vector<at::Tensor> tensors) const {
    calls.push_back(std::move(tensors));
    PendingMean pending;
    pending.wait = [] {};
    return pending;
  }
};

// A bucket of a compressed matrix and two vectors: two collectives, the first the two
// vectors (where they lie in the bucket) and P together, the second Q. Before the start
// step, the whole bucket in one. A bucket of vectors alone: one grouped mean of them.
TEST(PowerSgdCollectivesTest, TwoCollectivesABucketTheUncompressedWithP) {
  absl::StatusOr<PluginSet> set =
      testing::ConfigureWithPlugins("plugin { powersgd { matrix_approximation_rank: 1 start_powerSGD_iter: 1 } }");
  ASSERT_TRUE(set.ok()) << set.status();
  auto counted = std::make_shared<CountedCollectives>();
  // The plugin's hook alone (it takes no hook below it), over no process group: every
  // collective it asks for is the counted ones'.
  ASSERT_EQ(set->engine_parts().hooks.size(), 1u);
  std::unique_ptr<CommHook> hook = set->engine_parts().hooks[0](nullptr, CommContext{nullptr, 0, 2, false, {}, counted, {}, {}});
  torch::manual_seed(4);
  const std::vector<at::Tensor> gradients{torch::randn({5}), torch::randn({16, 12}), torch::randn({3})};
  auto run = [&](const std::vector<at::Tensor>& grads, int64_t step) {
    GradBucket bucket = testing::BucketOfGradients(grads, step, std::nan(""));
    auto future = hook->Run(bucket);
    future->wait();
    ASSERT_FALSE(future->hasError());
    at::Tensor out = future->value().toTensor();
    for (size_t k : {size_t{0}, grads.size() - 1}) {  // vectors: their values, averaged exactly
      EXPECT_TRUE(at::equal(out.narrow(0, bucket.offsets[k], grads[k].numel()), grads[k])) << k;
    }
  };

  run(gradients, 0);  // before the start step: every gradient exactly, the bucket in one
  ASSERT_EQ(counted->calls.size(), 1u);
  EXPECT_EQ(counted->calls[0].size(), 1u);
  EXPECT_EQ(counted->calls[0][0].numel(), 5 + 16 * 12 + 3);

  counted->calls.clear();
  run(gradients, 1);
  ASSERT_EQ(counted->calls.size(), 2u) << "the uncompressed, P, Q: two collectives";
  const std::vector<at::Tensor>& first = counted->calls[0];
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].numel(), 5);
  EXPECT_EQ(first[1].numel(), 3);
  EXPECT_EQ(first[2].numel(), 16) << "P: rows x rank";
  ASSERT_EQ(counted->calls[1].size(), 1u);
  EXPECT_EQ(counted->calls[1][0].numel(), 12) << "Q: cols x rank";

  counted->calls.clear();
  run({torch::randn({7}), torch::randn({2})}, 2);  // nothing to compress
  ASSERT_EQ(counted->calls.size(), 1u);
  EXPECT_EQ(counted->calls[0].size(), 2u);
}

}  // namespace
}  // namespace ddplab
