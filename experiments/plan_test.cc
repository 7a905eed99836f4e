// The plan's memory check on CPUs (Note [Memory on CPUs], plan.cc): a CPU process holds
// more than the GPU's caching allocator peaks at, and a node's processes share its memory.
#include "experiments/plan.h"

#include <cstdint>
#include <string>

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
  Machine m;
  m.cuda_build = true;
  m.gpus = 2;
  m.gpu_memory_bytes = 5 * kGiB;
  m.cpu_cores = 16;
  m.host_memory_bytes = 8 * kGiB;
  EXPECT_TRUE(MakePlan(ViTL32(2, "CUDA"), m, std::nullopt, PlanOptions()).ok());
  m.gpu_memory_bytes = 4 * kGiB;
  absl::StatusOr<Plan> plan = MakePlan(ViTL32(2, "CUDA"), m, std::nullopt, PlanOptions());
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "needs at least 4.3 GiB")) << plan.status();
  EXPECT_FALSE(absl::StrContains(plan.status().message(), "on CPUs")) << plan.status();
}

}  // namespace
}  // namespace ddplab
