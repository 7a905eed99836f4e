#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

// An experiment file's text for cuda_graph with `plugins` beside it; `fields` adds to or
// replaces the experiment's own (steps, optimizer, distributed).
std::string Experiment(const std::string& plugins, const std::string& steps = "warmup: 6 measured: 2",
                       const std::string& optimizer = "sgd { learning_rate: 0.1 }",
                       const std::string& device = "CUDA") {
  return absl::StrCat("name: \"graph\" model { preset: VIT_TINY_TEST } data { batch_size: 2 }\n", "steps { ", steps,
                      " }\noptimizer { ", optimizer, " }\ndistributed { device: ", device,
                      " gpus_per_node: 2 }\nplugin { cuda_graph {} }\n", plugins);
}

// The loader's message, or "" where the experiment is accepted.
std::string Refusal(const std::string& text) {
  const absl::Status s = testing::LoadWithPlugins(text);
  return s.ok() ? "" : std::string(s.message());
}

TEST(CudaGraphPluginTest, TakesTheLeversAReplayRepeats) {
  for (const std::string& plugins :
       {"", "plugin { bucket_sizing { bucket_cap_mb: 25 } }", "plugin { static_graph {} } plugin { bucket_view {} }",
        "plugin { bf16 {} }", "plugin { fp8 {} }", "plugin { zero_copy {} }"}) {
    EXPECT_EQ(Refusal(Experiment(plugins)), "") << plugins;
  }
}

TEST(CudaGraphPluginTest, RefusesTheCpu) {
  const std::string message = Refusal(Experiment("", "warmup: 6 measured: 2", "sgd { learning_rate: 0.1 }", "CPU"));
  EXPECT_NE(message.find("plugin \"cuda_graph\" refuses this experiment: it captures GPU work, and the experiment "
                         "runs on the CPU"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("test.textproto:"), std::string::npos) << "no place in the file: " << message;
}

TEST(CudaGraphPluginTest, RefusesPowerSgdNamingIt) {
  EXPECT_EQ(testing::RefusedTogether("cuda_graph {}", "powersgd {}"), "");
}

TEST(CudaGraphPluginTest, RefusesSampledGradientErrors) {
  const std::string message = Refusal(Experiment("plugin { bf16 { sample_error_every: 5 } }"));
  EXPECT_NE(message.find("plugin \"bf16\" samples its gradient error on some steps"), std::string::npos) << message;
}

TEST(CudaGraphPluginTest, RefusesSeveralMicroBatches) {
  const std::string message = Refusal(Experiment("", "warmup: 6 measured: 2 accumulation: 2"));
  EXPECT_NE(message.find("a step of 2 micro-batches (steps.accumulation) is not captured"), std::string::npos)
      << message;
}

TEST(CudaGraphPluginTest, RefusesForeachAdamW) {
  const std::string message =
      Refusal(Experiment("", "warmup: 6 measured: 2", "adamw { learning_rate: 0.001 } foreach: true"));
  EXPECT_NE(message.find("AdamW's foreach form computes its bias corrections on the host"), std::string::npos)
      << message;
}

// What the file cannot say, the run's optimizer as built: on a LibTorch without AdamW's
// fused kernels (before 2.3, or the CPU build's 1.13) the file's AdamW is its foreach
// form. The file is accepted, and the run refused before its first step (the trainer asks
// with Optimizer::capturable).
TEST(CudaGraphPluginTest, RefusesAnOptimizerBuiltWithoutFusedAdamWBeforeTheFirstStep) {
  v1::Experiment experiment;
  absl::StatusOr<PluginSet> set =
      testing::ConfigureText(Experiment("", "warmup: 6 measured: 2", "adamw { learning_rate: 0.001 }"), &experiment);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->VetStepRunner(experiment, /*optimizer_capturable=*/true).ok());
  const absl::Status refused = set->VetStepRunner(experiment, /*optimizer_capturable=*/false);
  EXPECT_NE(std::string(refused.message()).find("plugin \"cuda_graph\" refuses this run: AdamW's foreach form "
                                                "computes its bias corrections on the host"),
            std::string::npos)
      << refused;
}

TEST(CudaGraphPluginTest, RefusesACaptureAfterTheWarmUp) {
  const std::string message = Refusal(Experiment("", "warmup: 4 measured: 2"));
  EXPECT_NE(message.find("steps.warmup must be at least 5 (eager_steps + 2), got 4"), std::string::npos) << message;
}

// One eager step would capture the second, whose start holds the engine's regroup.
TEST(CudaGraphPluginTest, RefusesFewerThanTwoEagerSteps) {
  for (const char* steps : {"0", "1"}) {
    std::string text = Experiment("");
    text.replace(text.find("cuda_graph {}"), 13, std::string("cuda_graph { eager_steps: ") + steps + " }");
    const std::string message = Refusal(text);
    EXPECT_NE(message.find("plugin[0].cuda_graph.eager_steps: plugin \"cuda_graph\" rejected its configuration: "
                           "must be at least 2: the engine regroups its buckets at the start of the second step"),
              std::string::npos)
        << steps << ": " << message;
  }
}

// The step runner is the trainer's, not the engine's: a run of one process without the
// engine takes it, where an engine's lever is refused.
TEST(CudaGraphPluginTest, RunsOneProcessWithoutTheEngine) {
  std::string text = Experiment("");
  text.replace(text.find("gpus_per_node: 2"), 16, "gpus_per_node: 1");
  EXPECT_EQ(Refusal(text), "");
  const std::string message = Refusal(text + "plugin { bucket_sizing { bucket_cap_mb: 25 } }");
  EXPECT_NE(message.find(":6:1: plugin[1]: plugin \"bucket_sizing\" configures the data-parallel engine, which a "
                         "run of one process skips: set distributed.force_engine: true or run more processes"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace ddplab
