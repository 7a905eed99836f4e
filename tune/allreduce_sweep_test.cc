#include "tune/allreduce_sweep.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/launch/distributed.h"
#include "core/testing/gloo.h"
#include "gtest/gtest.h"

namespace ddplab::tune {
namespace {

// Three ranks over Gloo, each a thread meeting through a file: every size measured, with
// nccl-tests' bandwidths, no wrong element, and the table reads back as nccl-tests'.
TEST(AllReduceSweepTest, ThreeRanksOverGlooGiveNcclTestsRows) {
  REQUIRE_GLOO();
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/sweep";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  WorkerEnv env;
  env.store_file = dir + "/store";
  env.world_size = env.local_world_size = 3;
  std::vector<std::vector<NcclTestsRow>> rows(3);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&rows, env, rank]() mutable {
      env.rank = env.local_rank = rank;
      absl::StatusOr<ProcessGroupPtr> group = CreateProcessGroup(env, /*nccl=*/false, std::chrono::seconds(30));
      ASSERT_TRUE(group.ok()) << group.status();
      SweepOptions options;
      options.bytes = {1024, 65536, 1 << 20};
      options.iters = 3;
      absl::StatusOr<std::vector<NcclTestsRow>> got = SweepAllReduce(**group, at::Device(at::kCPU), options);
      ASSERT_TRUE(got.ok()) << got.status();
      rows[rank] = *got;
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::vector<NcclTestsRow>& r : rows) ASSERT_EQ(r.size(), 3u);
  const std::vector<NcclTestsRow>& r = rows[0];
  EXPECT_EQ(r[0].bytes, 1024);
  EXPECT_EQ(r[0].count, 256);
  EXPECT_EQ(r[2].bytes, 1 << 20);
  for (const NcclTestsRow& row : r) {
    EXPECT_EQ(row.type, "float");
    EXPECT_GT(row.time_us, 0);
    EXPECT_EQ(row.wrong, 0);
    EXPECT_DOUBLE_EQ(row.algbw_gbps, AlgBandwidthGBps(static_cast<double>(row.bytes), row.time_us));
    EXPECT_DOUBLE_EQ(row.busbw_gbps, row.algbw_gbps * 2.0 * 2 / 3);
  }
  absl::StatusOr<std::vector<NcclTestsRow>> back = ParseNcclTestsTable(FormatNcclTestsTable(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->size(), 3u);
  EXPECT_TRUE(CurveFromNcclTests(r).ok());
}

}  // namespace
}  // namespace ddplab::tune
