#include "core/training/trainer.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "absl/strings/match.h"
#include "core/config/experiment.h"
#include "core/testing/gloo.h"
#include "core/optim/sgd.h"
#include "core/model/vit.h"
#include "core/model/vit_config.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace ddplab {
namespace {

v1::Experiment Tiny(int steps) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(absl::StrCat(R"pb(
    name: "tiny"
    model { preset: VIT_TINY_TEST }
    data { batch_size: 16 image_size: 32 num_workers: 2 task: LEARNABLE seed: 3 }
    steps { warmup: 2 measured: )pb", steps, R"pb( }
    optimizer { sgd { learning_rate: 0.01 momentum: 0.9 } }
    distributed { gpus_per_node: 1 device: CPU }
  )pb"), "tiny", *ExperimentSchema::WithoutPlugins());
  EXPECT_TRUE(suite.ok()) << suite.status();
  return suite->experiment(0);
}

double Mean(const v1::RunResult& r, int from, int to) {
  double sum = 0;
  for (int i = from; i < to; ++i) sum += r.loss(i);
  return sum / (to - from);
}

// The small preset learns the learnable task on the CPU: the loss falls.
TEST(TrainerTest, LossFallsOnTheLearnableTask) {
  absl::StatusOr<v1::RunResult> r = Train(Tiny(40), {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->loss_size(), 42);
  double first = Mean(*r, 0, 5), last = Mean(*r, 37, 42);
  std::string curve;
  for (float l : r->loss()) curve += absl::StrCat(l, " ");
  EXPECT_LT(last, 0.5 * first) << "loss " << first << " -> " << last << ": " << curve;
  EXPECT_EQ(r->measured_steps(), 40u);
  EXPECT_GT(r->steps_per_s(), 0);
  EXPECT_EQ(r->device(), "cpu");
  EXPECT_EQ(r->model(), "VIT_TINY_TEST");
  EXPECT_GT(r->phases().forward_ms(), 0);
  EXPECT_GT(r->phases().backward_ms(), 0);
}

// A learning rate that makes the loss infinite or NaN: the run fails, naming the step,
// instead of being measured and compared (#64).
TEST(TrainerTest, ADivergedRunFails) {
  v1::Experiment e = Tiny(3);
  e.mutable_optimizer()->mutable_sgd()->set_learning_rate(1e30);
  absl::StatusOr<v1::RunResult> r = Train(e, {});
  ASSERT_FALSE(r.ok()) << "a run with a learning rate of 1e30 was measured";
  EXPECT_TRUE(absl::StrContains(r.status().message(), "rank 0: training diverged: the loss is ")) << r.status();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
}

// Two micro-batches of 8 per step: the same samples per step as one batch of 16, and
// the learnable task still learns.
TEST(TrainerTest, GradientAccumulationLearnsToo) {
  v1::Experiment e = Tiny(30);
  e.mutable_data()->set_batch_size(8);
  e.mutable_steps()->set_accumulation(2);
  absl::StatusOr<v1::RunResult> r = Train(e, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(Mean(*r, 27, 32), 0.6 * Mean(*r, 0, 5));
  EXPECT_NEAR(r->samples_per_s(), r->steps_per_s() * 16, 1e-6 * r->samples_per_s());
}

TEST(TrainerTest, WritesTheResultAsJson) {
  TrainOptions options;
  options.suite = "s";
  absl::StatusOr<v1::RunResult> r = Train(Tiny(2), options);
  ASSERT_TRUE(r.ok()) << r.status();
  std::string dir = absl::StrCat(testing::TempDir(), "/results");
  absl::StatusOr<std::string> path = WriteRunResult(*r, dir);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir + "/s/tiny.json");
  std::ifstream in(*path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("\"steps_per_s\""), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\"experiment\": \"tiny\""), std::string::npos) << text.str();
}

// LibTorch's profiler over steps after the measured ones: they run (their losses are
// there) and the trace holds their phases (one "forward" and one "backward" scope each,
// and none of the measured steps'), with the operators they ran.
TEST(TrainerTest, TorchProfileTracesTheStepsAfterTheMeasuredOnes) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/tiny.torch_trace.json");
  std::remove(path.c_str());
  TrainOptions options;
  options.torch_profile_path = path;
  options.torch_profile_steps = 2;
  absl::StatusOr<v1::RunResult> r = Train(Tiny(3), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->measured_steps(), 3u);
  EXPECT_EQ(r->loss_size(), 2 + 3 + 2);  // warm-up, measured, profiled
  // Kineto's own file where LibTorch has Kineto, ours where it has none: both are Chrome
  // traces, a JSON object with "traceEvents".
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  google::protobuf::Struct trace;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &trace).ok()) << text.str().substr(0, 300);
  ASSERT_TRUE(trace.fields().contains("traceEvents"));
  // HTA groups ranks by distributedInfo and refuses a trace without it.
  ASSERT_TRUE(trace.fields().contains("distributedInfo")) << text.str().substr(0, 300);
  EXPECT_EQ(trace.fields().at("distributedInfo").struct_value().fields().at("rank").number_value(), 0);
  EXPECT_EQ(trace.fields().at("distributedInfo").struct_value().fields().at("world_size").number_value(), 1);
  // Host-side events (ours: "cpu"; Kineto's: "user_annotation" for scopes, "cpu_op").
  auto count = [&](const std::string& name) {
    int n = 0;
    for (const google::protobuf::Value& v : trace.fields().at("traceEvents").list_value().values()) {
      const auto& f = v.struct_value().fields();
      if (!f.contains("name") || f.at("name").string_value() != name || !f.contains("cat")) continue;
      const std::string& cat = f.at("cat").string_value();
      n += cat == "cpu" || cat == "user_annotation" || cat == "cpu_op";
    }
    return n;
  };
  EXPECT_EQ(count("forward"), 2);
  EXPECT_EQ(count("backward"), 2);
  EXPECT_EQ(count("optimizer step"), 2);
  EXPECT_GT(count("aten::addmm"), 0);
}

// With the engine, the last warm-up step's gradient ready times: every parameter once,
// named, in the order backward produced them (the head's before the patch embedding's),
// at nondecreasing times within that step's backward.
TEST(TrainerTest, RecordsWhenEachGradientIsReady) {
  REQUIRE_GLOO();  // the engine's group of one process
  v1::Experiment e = Tiny(2);
  e.mutable_distributed()->set_force_engine(true);
  absl::StatusOr<v1::RunResult> r = Train(e, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->gradient_ready_size(), Vit(*VitConfigForModel(e.model(), e.data().image_size()))->parameters().size());
  int64_t bytes = 0;
  std::set<int> seen;
  for (int k = 0; k < r->gradient_ready_size(); ++k) {
    const v1::GradientReady& g = r->gradient_ready(k);
    EXPECT_FALSE(g.name().empty());
    EXPECT_TRUE(seen.insert(g.parameter()).second) << g.name();
    bytes += g.bytes();
    if (k > 0) {
      EXPECT_GE(g.ready_ms(), r->gradient_ready(k - 1).ready_ms()) << g.name();
    }
  }
  EXPECT_EQ(bytes, r->parameters() * 4);
  EXPECT_GT(r->gradient_ready(0).ready_ms(), 0);
  EXPECT_GT(r->gradient_ready(0).parameter(), r->gradient_ready(r->gradient_ready_size() - 1).parameter());
}

// A rank that stops taking part ends its peers' runs with an error that names the rank,
// made from c10d's exception, not with std::terminate: here rank 1 trains one step where
// rank 0 trains many, and rank 0's next collective times out (Gloo: "Timed out waiting
// 3000ms for recv"). The ranks are threads of this process, meeting in one store.
TEST(TrainerTest, APeerThatLeavesEndsTheRunWithAnError) {
  REQUIRE_GLOO();
  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::HashStore>();
  absl::StatusOr<v1::RunResult> results[2];
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      v1::Experiment e = Tiny(rank == 0 ? 1000 : 1);
      e.mutable_distributed()->set_timeout_seconds(3);
      TrainOptions options;
      options.worker.emplace();
      options.worker->rank = options.worker->local_rank = rank;
      options.worker->world_size = options.worker->local_world_size = 2;
      options.store = store;
      results[rank] = Train(e, options);
    });
  }
  for (std::thread& t : ranks) t.join();
  ASSERT_FALSE(results[0].ok()) << "rank 0 trained 1000 steps without its peer";
  EXPECT_EQ(results[0].status().code(), absl::StatusCode::kAborted) << results[0].status();
  EXPECT_TRUE(absl::StartsWith(results[0].status().message(), "rank 0: training failed: "))
      << results[0].status();
}

// Trains `module` (core/model/torchscript's test modules: images [3, 8, 8], 10 classes)
// on two ranks over Gloo; each rank's result.
std::vector<absl::StatusOr<v1::RunResult>> TrainModuleOnTwoRanks(const std::string& module) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(absl::StrCat(R"pb(
    name: "mine"
    model { torchscript { file: ")pb", srcdir ? srcdir : "", "/ddplab/core/model/torchscript/testdata/", module,
                                                          R"pb("
                          input { shape: [3, 8, 8] } classes: 10 } }
    data { batch_size: 8 seed: 5 }
    steps { warmup: 2 measured: 30 }
    optimizer { sgd { learning_rate: 0.05 momentum: 0.9 } }
    distributed { gpus_per_node: 2 device: CPU timeout_seconds: 30 }
  )pb"), "mine", *ExperimentSchema::WithoutPlugins());
  EXPECT_TRUE(suite.ok()) << suite.status();
  if (!suite.ok()) return {suite.status(), suite.status()};
  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::HashStore>();
  std::vector<absl::StatusOr<v1::RunResult>> results(2, absl::UnknownError("not run"));
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      TrainOptions options;
      options.worker.emplace();
      options.worker->rank = options.worker->local_rank = rank;
      options.worker->world_size = options.worker->local_world_size = 2;
      options.store = store;
      results[rank] = Train(suite->experiment(0), options);
    });
  }
  for (std::thread& t : ranks) t.join();
  return results;
}

// A module the user brings (experiment.proto's ScriptedModel, exported by this machine's
// python3 torch) trains through the trainer and the engine on two ranks over Gloo: each
// rank's loss falls on its batches, and the result names the module (#65).
TEST(TrainerTest, AModuleTheUserBringsTrainsOnTwoRanks) {
  REQUIRE_GLOO();
  const std::vector<absl::StatusOr<v1::RunResult>> results = TrainModuleOnTwoRanks("mlp.pt");
  for (int rank = 0; rank < 2; ++rank) {
    const absl::StatusOr<v1::RunResult>& r = results[rank];
    ASSERT_TRUE(r.ok()) << "rank " << rank << ": " << r.status();
    EXPECT_EQ(r->model(), "torchscript mlp.pt");
    EXPECT_TRUE(absl::StartsWith(r->model_digest(), "fnv1a64:")) << r->model_digest();
    EXPECT_TRUE(r->engine());
    EXPECT_GT(r->parameters(), 0);
    EXPECT_EQ(r->tflops_per_gpu(), 0) << "no FLOPs are known for a module";
    ASSERT_EQ(r->loss_size(), 32);
    EXPECT_LT(Mean(*r, 27, 32), 0.8 * Mean(*r, 0, 5)) << "rank " << rank;
  }
}

// A module with parameters that forward never uses: the engine's refusal at the first
// step names them (#65).
TEST(TrainerTest, AModulesParametersWithoutGradientAreNamed) {
  REQUIRE_GLOO();
  for (const absl::StatusOr<v1::RunResult>& r : TrainModuleOnTwoRanks("with_unused.pt")) {
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::StrContains(r.status().message(), "(no gradient: unused.weight (4), unused.bias (5))"))
        << r.status();
  }
}

// SGD (sgd.h), here to share this file's one parse of LibTorch's frontend.

// Our foreach SGD against LibTorch's own torch::optim::SGD, over several steps, with a
// parameter that has no gradient on some steps.
void CompareWithTorch(double lr, double momentum, double weight_decay) {
  torch::manual_seed(0);
  std::vector<at::Tensor> ours, theirs;
  for (int i = 0; i < 3; ++i) {
    at::Tensor p = torch::randn({4, 3});
    ours.push_back(p.clone().requires_grad_());
    theirs.push_back(p.clone().requires_grad_());
  }
  Sgd sgd(ours, lr, momentum, weight_decay);
  torch::optim::SGD reference(theirs, torch::optim::SGDOptions(lr).momentum(momentum).weight_decay(weight_decay));
  for (int step = 0; step < 4; ++step) {
    at::Tensor target = torch::randn({4, 3});
    sgd.ZeroGrad();
    reference.zero_grad();
    // LibTorch 1.13's zero_grad zeroes instead of dropping; drop, as PyTorch does.
    for (at::Tensor& p : theirs) p.mutable_grad() = at::Tensor();
    for (int i = 0; i < 3; ++i) {
      if (i == 2 && step % 2 == 1) continue;  // no gradient this step
      ((ours[i] - target).pow(2).sum() * (i + 1)).backward();
      ((theirs[i] - target).pow(2).sum() * (i + 1)).backward();
    }
    sgd.Step();
    reference.step();
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(at::allclose(ours[i], theirs[i], 1e-6, 1e-6)) << "step " << step << " param " << i;
    }
  }
}

TEST(SgdTest, PlainMatchesTorchOptim) { CompareWithTorch(0.1, 0, 0); }
TEST(SgdTest, MomentumMatchesTorchOptim) { CompareWithTorch(0.05, 0.9, 0); }
TEST(SgdTest, WeightDecayMatchesTorchOptim) { CompareWithTorch(0.05, 0.9, 0.01); }

// A step taken in parts (one bucket's parameters at a time, as the engine does with the
// optimizer overlapped) is one Step, bit for bit, with momentum and weight decay.
TEST(SgdTest, StepInPartsEqualsOneStep) {
  torch::manual_seed(1);
  std::vector<at::Tensor> whole, parts;
  for (int i = 0; i < 4; ++i) {
    at::Tensor p = torch::randn({3, 5});
    whole.push_back(p.clone().requires_grad_());
    parts.push_back(p.clone().requires_grad_());
  }
  Sgd one(whole, 0.05, 0.9, 0.01), split(parts, 0.05, 0.9, 0.01);
  for (int step = 0; step < 3; ++step) {
    at::Tensor target = torch::randn({3, 5});
    one.ZeroGrad();
    split.ZeroGrad();
    for (int i = 0; i < 4; ++i) {
      if (i == 1 && step == 1) continue;  // no gradient this step: skipped in both
      ((whole[i] - target).pow(2).sum() * (i + 1)).backward();
      ((parts[i] - target).pow(2).sum() * (i + 1)).backward();
    }
    one.Step();
    split.StepParameters({3, 2});
    split.StepParameters({1});
    split.StepParameters({0});
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(at::equal(whole[i], parts[i])) << "step " << step << " param " << i;
  }
}

TEST(SgdTest, ZeroGradDropsGradients) {
  at::Tensor p = torch::ones({2}).requires_grad_();
  Sgd sgd({p}, 0.1);
  (p * 2).sum().backward();
  ASSERT_TRUE(p.grad().defined());
  sgd.ZeroGrad();
  EXPECT_FALSE(p.grad().defined());
}

}  // namespace
}  // namespace ddplab
