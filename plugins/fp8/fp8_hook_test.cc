// fp8's hook itself over several Gloo processes (fp8_worker.cc): bit for bit as its
// reference, within its roundings, and the bytes it counts. A target of its own so that
// the workers run once, in one job, and beside fp8_test's trainings.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "plugins/testing/plugin_testutil.h"

namespace ddplab {
namespace {

// What the hook's own checks over `ranks` Gloo processes (fp8_worker.cc; 2, 3 and 5 in one
// job) found: "" if they held, and what rank 0 wrote: per configuration the relative
// error against the exact mean, and the hook's figures.
const testing::RanksRun& ReduceOnRanks(int ranks) {
  return testing::RunOnRanks("ddplab/plugins/fp8/fp8_worker", {2, 3, 5}).at(ranks);
}

// On 2, 3 and 5 ranks, each rank's result is, bit for bit, the reduction fp8.cc's top
// comment describes, computed by the worker in scalar loops (reference.h), and within
// its two roundings of the exact mean: for E4M3 and E5M2, blocks of 16, 48, 128 and 256,
// a gather in FP8 or bfloat16, with and without error feedback (two steps, the second
// carrying the first's residuals), for buckets smaller than the ranks, padded, or
// handed over.
TEST(Fp8HookTest, ReducesAsItsReferenceBitForBit) {
  REQUIRE_GLOO();
  for (int ranks : {2, 3, 5}) EXPECT_EQ(ReduceOnRanks(ranks).failure, "") << ranks << " ranks";
}

// On 2, 3 and 5 ranks, against the exact mean of the gradients (of mixed magnitude): E5M2
// errs more than E4M3 (one bit less), a gather in bfloat16 less than one in FP8, and
// E4M3's error (relative, L2) is within two roundings, 2^-3.
TEST(Fp8HookTest, ErrsAsItsRoundingsSay) {
  REQUIRE_GLOO();
  for (int ranks : {2, 3, 5}) {
    const testing::RanksRun& r = ReduceOnRanks(ranks);
    ASSERT_EQ(r.failure, "") << ranks << " ranks";
    const double e4m3 = r.values.at("default"), e5m2 = r.values.at("e5m2"), bf16 = r.values.at("bf16_gather");
    std::cout << ranks << " ranks, relative error against the exact mean: E4M3 " << e4m3 << ", E5M2 " << e5m2
              << ", gather in bfloat16 " << bf16 << ", blocks of 16 " << r.values.at("block16") << ", of 256 "
              << r.values.at("block256") << "\n";
    EXPECT_GT(e4m3, 0) << ranks << " ranks";
    EXPECT_LT(e4m3, 0.125) << ranks << " ranks";
    EXPECT_GT(e5m2, e4m3) << ranks << " ranks";
    EXPECT_LT(bf16, e4m3) << ranks << " ranks";
  }
}

// Stats() after the worker's step (two with error feedback) of buckets of 1, 3, 1000 and
// 65539 values: wire_bytes_per_step is what each rank sends to the others, (W - 1)
// parts of 4 bytes a block and 1 a value (padded to W shards of whole blocks) in the
// all-to-all and as many in the all-gather (2 bytes a value in bfloat16);
// compression_ratio is what a float32 ring all-reduce of the same buckets would send,
// 2 (W - 1) / W * 4 bytes a value, over that.
TEST(Fp8HookTest, CountsTheBytesItSends) {
  REQUIRE_GLOO();
  struct Shape {
    const char* name;
    int64_t block;
    bool bf16;
  };
  const std::vector<Shape> shapes{{"default", 128, false}, {"e5m2", 128, false},     {"block16", 16, false},
                                  {"block256", 256, false}, {"bf16_gather", 128, true}, {"error_feedback", 128, false},
                                  {"all_options", 48, true}};
  for (int ranks : {2, 3, 5}) {
    const testing::RanksRun& r = ReduceOnRanks(ranks);
    ASSERT_EQ(r.failure, "") << ranks << " ranks";
    for (const Shape& s : shapes) {
      double sent = 0, float32 = 0;
      for (int64_t numel : {1, 3, 1000, 65539}) {
        const int64_t blocks = std::max<int64_t>(1, (numel + ranks * s.block - 1) / (ranks * s.block));
        const int64_t part = 4 * blocks + blocks * s.block;
        sent += (ranks - 1) * (part + (s.bf16 ? 2 * blocks * s.block : part));
        float32 += 2.0 * (ranks - 1) / ranks * 4 * numel;
      }
      const std::string name = s.name;
      EXPECT_DOUBLE_EQ(r.values.at(name + ".wire_bytes_per_step"), sent) << name << ", " << ranks << " ranks";
      EXPECT_DOUBLE_EQ(r.values.at(name + ".compression_ratio"), float32 / sent) << name << ", " << ranks << " ranks";
    }
  }
}

}  // namespace
}  // namespace ddplab
