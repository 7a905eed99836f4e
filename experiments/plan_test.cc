// The plan's memory check on CPUs (Note [Memory on CPUs], plan.cc): a CPU process holds
// more than the GPU's caching allocator peaks at, and a node's processes share its memory.
// And what --only selects.
#include "experiments/plan.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/config/experiment.h"
#include "gtest/gtest.h"
#include "plugins/testing/shipped_schema.h"

namespace ddplab {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

v1::Suite ViTL32(int processes, const std::string& device) {
  absl::StatusOr<v1::Suite> s = ParseExperimentText(
      "name: \"vit_l\"\n"
      "model { preset: VIT_L_32 }\n"
      "data { batch_size: 32 }\n"
      "steps { warmup: 1 measured: 1 }\n"
      "optimizer { sgd { learning_rate: 0.01 } }\n"
      "distributed { gpus_per_node: " + std::to_string(processes) + " device: " + device + " }\n",
      "vit_l.textproto", testing::ShippedSchema());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : v1::Suite();
}

Machine Cpus(int64_t memory) {
  Machine m;
  m.cpu_cores = 16;
  m.host_memory_bytes = memory;
  return m;
}

// A CUDA build's machine of two GPUs with `gpu_memory` each, and 16 cores.
Machine TwoGpus(int64_t gpu_memory, int64_t host_memory) {
  Machine m = Cpus(host_memory);
  m.cuda_build = true;
  m.gpus = 2;
  m.gpu_memory_bytes = gpu_memory;
  return m;
}

// ViT-L/32 at batch 32 measured 8.1 GiB in one CPU process, 9.3 with the engine's buckets:
// two such processes do not fit in 16 GiB, though the GPU's figures (4.3 GiB) would.
TEST(PlanMemory, TwoCpuProcessesOfViTL32DoNotFitIn16GiB) {
  absl::StatusOr<Plan> plan = MakePlan(ViTL32(2, "CPU"), Cpus(16 * kGiB), std::nullopt, PlanOptions());
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "cannot fit: each process needs at least 9.0 GiB"))
      << plan.status();
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "on CPUs also the initial weights, the buckets and the "
                                                         "runtime: 2.6 GiB), and this machine has 16.0 GiB for its 2 "
                                                         "processes"))
      << plan.status();
  EXPECT_TRUE(MakePlan(ViTL32(2, "CPU"), Cpus(24 * kGiB), std::nullopt, PlanOptions()).ok());
  // One process keeps no buckets.
  absl::StatusOr<Plan> one = MakePlan(ViTL32(1, "CPU"), Cpus(7 * kGiB), std::nullopt, PlanOptions());
  ASSERT_FALSE(one.ok());
  EXPECT_TRUE(absl::StrContains(one.status().message(), "needs at least 7.8 GiB")) << one.status();
}

TEST(PlanMemory, AGpuHasItsOwnMemoryAndTheGpusFigures) {
  Machine m = TwoGpus(5 * kGiB, 8 * kGiB);
  EXPECT_TRUE(MakePlan(ViTL32(2, "CUDA"), m, std::nullopt, PlanOptions()).ok());
  m.gpu_memory_bytes = 4 * kGiB;
  absl::StatusOr<Plan> plan = MakePlan(ViTL32(2, "CUDA"), m, std::nullopt, PlanOptions());
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "needs at least 4.3 GiB")) << plan.status();
  EXPECT_FALSE(absl::StrContains(plan.status().message(), "on CPUs")) << plan.status();
}

// --only takes the names the file gives as well as the runs' own: an experiment's name
// selects every run its sweeps make of it, as --tune's does.
TEST(PlanOnly, AnExperimentsNameSelectsEveryRunItsSweepsMake) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(R"pb(
    # proto-message: ddplab.v1.Suite
    name: "s"
    defaults {
      model { preset: VIT_TINY_TEST }
      data { batch_size: 4 }
      steps { measured: 2 }
      optimizer { sgd { learning_rate: 0.1 } }
      distributed { gpus_per_node: 2 device: CUDA sweep_transport: [NVLINK, HOST_MEMORY] }
    }
    experiment { name: "single" distributed { gpus_per_node: 1 } }
    experiment {
      name: "caps"
      plugin { bucket_sizing { sweep_cap_mb: [25, 50] } }
    }
    experiment { name: "naive" plugin { bucket_sizing { bucket_cap_mb: 2000 } } }
  )pb", "s.textproto", testing::ShippedSchema());
  ASSERT_TRUE(suite.ok()) << suite.status();
  const Machine m = TwoGpus(80 * kGiB, 64 * kGiB);
  const auto selected = [&](const std::string& only) {
    PlanOptions options;
    options.only = only;
    options.schema = &testing::ShippedSchema();
    absl::StatusOr<Plan> plan = MakePlan(*suite, m, std::nullopt, options);
    EXPECT_TRUE(plan.ok()) << plan.status();
    std::vector<std::string> names;
    if (!plan.ok()) return names;
    for (const PlannedRun& p : plan->runs) {
      if (p.selected) names.push_back(p.run.experiment.name());
    }
    EXPECT_EQ(plan->selected, static_cast<int>(names.size()));
    EXPECT_EQ(OnlyNamesNotFound(*plan, only + ",nope"), std::vector<std::string>{"nope"});
    return names;
  };
  EXPECT_EQ(selected("caps"), (std::vector<std::string>{"caps_25mb_nvlink", "caps_50mb_nvlink",
                                                        "caps_25mb_host_memory", "caps_50mb_host_memory"}));
  EXPECT_EQ(selected("naive"), (std::vector<std::string>{"naive_nvlink", "naive_host_memory"}));
  // A run's own name, that run alone; the names in the suite's order, whatever --only's.
  EXPECT_EQ(selected("caps_50mb_host_memory,single"),
            (std::vector<std::string>{"single", "caps_50mb_host_memory"}));
}

}  // namespace
}  // namespace ddplab
