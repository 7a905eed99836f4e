#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/build_flags.h"
#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

// What rank 1 of 2 asks of the host's collectives: each call's tensors; the scatter's
// shards are filled with the input's chunk `rank` (one rank's "mean").
class RecordedCollectives : public Collectives {
 public:
  mutable std::vector<std::vector<at::Tensor>> scatters, means, gathers;

  PendingMean StartMean(at::Tensor tensor) const override { return Record(means, {tensor}); }
  PendingMean StartMeanCoalesced(std::vector<at::Tensor> tensors) const override { return Record(means, tensors); }
  void AllGatherBytes(at::Tensor&, const at::Tensor&) const override { ADD_FAILURE() << "no byte gathers"; }
  PendingMean StartMeanScatter(std::vector<at::Tensor> inputs, std::vector<at::Tensor> shards) const override {
    for (size_t k = 0; k < shards.size(); ++k) shards[k].copy_(inputs[k].narrow(0, shards[k].numel(), shards[k].numel()));
    return Record(scatters, inputs);
  }
  PendingMean StartGatherInPlace(std::vector<at::Tensor> wholes) const override { return Record(gathers, wholes); }

 private:
  static PendingMean Record(std::vector<std::vector<at::Tensor>>& calls, std::vector<at::Tensor> tensors) {
    calls.push_back(std::move(tensors));
    PendingMean pending;
    pending.wait = [] {};
    return pending;
  }
};

// Rank 1 of 2, a bucket of a parameter of 6 elements (sharded: its elements 3 to 5) and
// one of 3 (which 2 does not divide: whole). The optimizer is made over those parts; the
// step gets the shard's mean and the whole one's; the shard's parameter is gathered.
TEST(ShardedOptimizerTest, StepsThisRanksShardAndGathersTheRest) {
  absl::StatusOr<PluginSet> set = testing::ConfigureWithPlugins("plugin { sharded_optimizer {} }");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->engine_parts().hooks.size(), 1u);
  auto collectives = std::make_shared<RecordedCollectives>();
  std::vector<ParameterPart> parts_made;
  std::vector<size_t> stepped;
  std::vector<at::Tensor> step_grads;
  const std::vector<at::Tensor> params{at::zeros({2, 3}), at::zeros({3})};
  CommContext context{nullptr, 1, 2, false, {}, collectives, {}, {}};
  context.optimizer_over_parts = [&](const std::vector<ParameterPart>& parts) {
    parts_made = parts;
    PartsOptimizer out;
    for (const at::Tensor& p : params) out.flat_parameters.push_back(p.view(-1));
    out.step = [&](const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads) {
      stepped = indices;
      step_grads = grads;
    };
    return out;
  };
  std::unique_ptr<CommHook> hook = set->engine_parts().hooks[0](nullptr, context);
  const std::vector<at::Tensor> gradients{at::arange(6, at::kFloat).view({2, 3}), at::arange(3, at::kFloat)};
  GradBucket bucket = testing::BucketOfGradients(gradients, 0, 0.0);
  auto future = hook->Run(bucket);
  EXPECT_FALSE(future->completed()) << "completes once its parameters are gathered, after backward";
  ASSERT_EQ(collectives->scatters.size(), 1u);
  EXPECT_EQ(collectives->scatters[0].size(), 1u);
  EXPECT_EQ(collectives->scatters[0][0].numel(), 6);
  ASSERT_EQ(collectives->means.size(), 1u);
  EXPECT_EQ(collectives->means[0][0].numel(), 3);
  hook->BackwardDone();
  ASSERT_TRUE(future->completed());
  ASSERT_FALSE(future->hasError()) << future->tryRetrieveErrorMessage();

  ASSERT_EQ(parts_made.size(), 2u);
  EXPECT_EQ(parts_made[0].begin, 3);
  EXPECT_EQ(parts_made[0].numel, 3);
  EXPECT_EQ(parts_made[1].begin, 0);
  EXPECT_EQ(parts_made[1].numel, 3);
  EXPECT_EQ(stepped, (std::vector<size_t>{0, 1}));
  ASSERT_EQ(step_grads.size(), 2u);
  EXPECT_TRUE(at::equal(step_grads[0], at::arange(3, 6, at::kFloat)));
  EXPECT_TRUE(at::equal(step_grads[1], at::arange(3, at::kFloat)));
  ASSERT_EQ(collectives->gathers.size(), 1u);
  ASSERT_EQ(collectives->gathers[0].size(), 1u);
  EXPECT_TRUE(collectives->gathers[0][0].is_same(params[0].view(-1)) ||
              collectives->gathers[0][0].data_ptr() == params[0].data_ptr());
}

// Each step's gradients equal one process's over the whole batch, so every earlier
// update was the reference's: a wrong shard, a missing gather or a state kept for the
// wrong elements shows in the next step's gradients (the worker also fails unless the
// engine did the updates). Over 3 ranks most of the tiny ViT's parameters are whole.
TEST(ShardedOptimizerTest, TrainsAsAnAllReduceAndAWholeStep) {
  REQUIRE_GLOO();
  const std::string sharded = "plugin { sharded_optimizer {} } ";
  const std::vector<std::string> sgd{"--expect_updated", "--momentum=0.9", "--weight_decay=0.01", "--param_tolerance=1e-6"};
  for (const std::string& more :
       {std::string(testing::kSmallBuckets), std::string("plugin { bucket_view {} } plugin { static_graph {} }")}) {
    EXPECT_EQ(testing::TrainAndCompare(2, sharded + more, sgd), "") << more;
  }
  EXPECT_EQ(testing::TrainAndCompare(3, sharded + testing::kSmallBuckets, sgd), "");
  // After backward: each bucket stepped alone, in groups of a few, and all in one (the
  // default group takes all of the tiny ViT's buckets).
  for (const char* group : {"step_group_mb: 0", "step_group_mb: 0.01", ""}) {
    EXPECT_EQ(testing::TrainAndCompare(2, std::string("plugin { sharded_optimizer { during_backward: false ") + group +
                                              " } } " +
                                              testing::kSmallBuckets,
                                       sgd),
              "")
        << group;
  }
  // AdamW: its first updates are about lr times the gradient's sign, which rounding flips
  // where a gradient is near 0 (the parameters differ by 1e-3 with or without the plugin):
  // the gradients are checked, not the parameters.
  EXPECT_EQ(testing::TrainAndCompare(2, sharded + testing::kSmallBuckets, {"--expect_updated", "--optimizer=adamw"}), "");
  // The parameters alone, as on GPUs, where the gradients after a step are each rank's own.
  EXPECT_EQ(testing::TrainAndCompare(2, sharded + testing::kSmallBuckets,
                                     {"--expect_updated", "--grad_tolerance=-1", "--param_tolerance=1e-6"}),
            "");
  // Each bucket stepped and gathered as its reduce-scatter lands (from the second step),
  // said in so many words.
  EXPECT_EQ(testing::TrainAndCompare(2, "plugin { sharded_optimizer { during_backward: true } } " +
                                            std::string(testing::kSmallBuckets),
                                     sgd),
            "");
  std::vector<std::string> accumulate = sgd;
  accumulate.push_back("--accumulate=3");
  EXPECT_EQ(testing::TrainAndCompare(2, sharded + "plugin { bucket_view {} }", accumulate), "");
}

TEST(ShardedOptimizerTest, RefusesANegativeGroup) {
  const absl::Status s = testing::LoadWithPlugins(
      "name: \"x\" model { preset: VIT_TINY_TEST } data { batch_size: 2 } steps { measured: 1 }\n"
      "optimizer { sgd { learning_rate: 0.1 } } distributed { device: CPU gpus_per_node: 2 }\n"
      "plugin { sharded_optimizer { step_group_mb: -1 } }\n");
  EXPECT_NE(std::string(s.message()).find("test.textproto:3:"), std::string::npos) << s;
  EXPECT_NE(std::string(s.message()).find("step_group_mb"), std::string::npos) << s;
}

// Copies are made bucket by bucket beside backward, and only where symmetric memory is.
// A build without it loads the file (a suite's other rows still run) and refuses the run
// that asks, before its first step.
TEST(ShardedOptimizerTest, RefusesCopyEnginesWhereTheyCannotRun) {
  const std::string head =
      "name: \"x\" model { preset: VIT_TINY_TEST } data { batch_size: 2 } steps { measured: 1 }\n"
      "optimizer { sgd { learning_rate: 0.1 } } distributed { device: CPU gpus_per_node: 2 }\n";
  absl::Status s =
      testing::LoadWithPlugins(head + "plugin { sharded_optimizer { during_backward: false by_copy_engines: true } }\n");
  EXPECT_NE(std::string(s.message()).find("test.textproto:3:"), std::string::npos) << s;
  EXPECT_NE(std::string(s.message()).find("leave during_backward set"), std::string::npos) << s;
  EXPECT_TRUE(testing::LoadWithPlugins(head + "plugin { sharded_optimizer { by_copy_engines: true } }\n").ok());
  if (DDPLAB_CUDA_BUILD) {
    GTEST_SKIP() << "this build has symmetric memory";
  }
  absl::StatusOr<PluginSet> set = testing::ConfigureWithPlugins("plugin { sharded_optimizer { by_copy_engines: true } }");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->engine_parts().hooks.size(), 1u);
  CommContext two_ranks;
  two_ranks.world_size = 2;
  try {
    set->engine_parts().hooks[0](nullptr, two_ranks);
    ADD_FAILURE() << "the hook was made";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("by_copy_engines: this build has no symmetric memory"), std::string::npos)
        << e.what();
  }
}

TEST(ShardedOptimizerTest, RefusesWhatReadsTheAveragedGradients) {
  for (const char* other : {"bf16 {}", "optimizer_overlap {}", "powersgd { matrix_approximation_rank: 1 }",
                            "no_communication {}", "zero_copy {}"}) {
    EXPECT_EQ(testing::RefusedTogether("sharded_optimizer {}", other), "") << other;
  }
}

// With a parameter of 7 elements besides the model's (--unused_parameter), which 2 ranks
// cannot shard: every rank steps it whole (Note [Averaging where the gradients lie]).
TEST(ShardedOptimizerTest, TrainsOnGpus) {
  REQUIRE_TWO_GPUS();
  for (const char* fields : {"", "during_backward: false", "by_copy_engines: true"}) {
    EXPECT_EQ(testing::TrainAndCompareOnGpus(std::string("plugin { sharded_optimizer { ") + fields +
                                                 " } } plugin { bucket_view {} } plugin { static_graph {} }",
                                             {"--expect_updated", "--grad_tolerance=-1", "--param_tolerance=1e-4",
                                              "--momentum=0.9", "--steps=4", "--unused_parameter"}),
              "")
        << fields;
  }
}

}  // namespace
}  // namespace ddplab
