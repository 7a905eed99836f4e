#include "tune/model/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tune/model/curve_testing.h"

namespace ddplab::tune {
namespace {

using test_curves::kMiB;

using test_curves::Line;

// The partition whose bucket ends are the set bits of `cuts` (bit i: a bucket ends after
// gradient i), then n.
Partition FromCuts(uint32_t cuts, size_t n) {
  Partition p;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (cuts & (1u << i)) p.ends.push_back(i + 1);
  }
  p.ends.push_back(n);
  return p;
}

struct BruteForce {
  double communication_end_ms = std::numeric_limits<double>::infinity();
  double step_ms = std::numeric_limits<double>::infinity();
};

// Every one of the 2^(n-1) partitions, predicted.
BruteForce SearchAll(const StepInputs& in, const CostCurve& curve, const Levers& levers) {
  BruteForce best;
  const size_t n = in.gradients.size();
  for (uint32_t cuts = 0; cuts < (1u << (n - 1)); ++cuts) {
    absl::StatusOr<StepPrediction> p = PredictStep(in, curve, levers, FromCuts(cuts, n));
    EXPECT_TRUE(p.ok()) << p.status();
    best.communication_end_ms = std::min(best.communication_end_ms, p->CommunicationEndMs());
    best.step_ms = std::min(best.step_ms, p->step_ms);
  }
  return best;
}

// A random curve time = a + b * (bytes / scale)^power, measured at a few sizes: convex
// for power > 1, concave below, with a few percent of noise where `noisy`.
CostCurve RandomCurve(std::mt19937& rng, double scale, bool noisy) {
  std::uniform_real_distribution<double> alpha(0, 2000), beta(100, 5000), power(0.3, 2.5), noise(0.97, 1.03);
  const double a = alpha(rng), b = beta(rng), p = power(rng);
  std::vector<CostPoint> points;
  for (double x = scale / 64; x <= 2 * scale; x *= 2) {
    points.push_back({x, (a + b * std::pow(x / scale, p)) * (noisy ? noise(rng) : 1.0)});
  }
  absl::StatusOr<CostCurve> curve = CostCurve::FromPoints(points);
  EXPECT_TRUE(curve.ok()) << curve.status();
  return *curve;
}

StepInputs RandomInputs(std::mt19937& rng, size_t n, bool sorted) {
  std::uniform_real_distribution<double> ready(0, 10);
  std::uniform_int_distribution<int64_t> bytes(1, 4 * kMiB);
  StepInputs in;
  in.forward_ms = 5;
  in.backward_ms = 10;
  in.optimizer_ms = 1;
  for (size_t i = 0; i < n; ++i) in.gradients.push_back({ready(rng), bytes(rng)});
  if (sorted) {
    std::sort(in.gradients.begin(), in.gradients.end(),
              [](const Gradient& a, const Gradient& b) { return a.ready_ms < b.ready_ms; });
  }
  return in;
}

TEST(PartitionTest, DynamicProgrammeMatchesBruteForce) {
  int cases = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    std::mt19937 rng(seed);
    for (size_t n : {1, 2, 3, 5, 8, 12}) {
      const StepInputs in = RandomInputs(rng, n, /*sorted=*/seed % 4 != 0);
      const CostCurve curve = RandomCurve(rng, 8.0 * kMiB, /*noisy=*/seed % 3 == 0);
      for (double factor : {1.0, 0.5, 0.125}) {
        Levers levers;
        levers.wire_factor = factor;
        absl::StatusOr<BestPartition> best = FindBestPartition(in, curve, levers);
        ASSERT_TRUE(best.ok()) << best.status();
        const BruteForce all = SearchAll(in, curve, levers);
        SCOPED_TRACE(testing::Message() << "seed " << seed << " n " << n << " factor " << factor << ": "
                                        << best->partition.ToString());
        EXPECT_NEAR(best->communication_end_ms, all.communication_end_ms, 1e-9 * all.communication_end_ms);
        EXPECT_DOUBLE_EQ(best->prediction.CommunicationEndMs(), best->communication_end_ms);
        EXPECT_NEAR(best->prediction.step_ms, all.step_ms, 1e-9 * all.step_ms);
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 12 * 6 * 3);
}

TEST(PartitionTest, WithSlowdownItIsAHeuristicPredictedWithEveryLever) {
  std::mt19937 rng(7);
  const StepInputs in = RandomInputs(rng, 9, true);
  const CostCurve curve = RandomCurve(rng, 8.0 * kMiB, false);
  Levers levers;
  levers.overlap_slowdown = 0.3;
  levers.overlap_optimizer = true;
  absl::StatusOr<BestPartition> best = FindBestPartition(in, curve, levers);
  ASSERT_TRUE(best.ok()) << best.status();
  absl::StatusOr<StepPrediction> again = PredictStep(in, curve, levers, best->partition);
  ASSERT_TRUE(again.ok());
  EXPECT_DOUBLE_EQ(best->prediction.step_ms, again->step_ms);
  EXPECT_GT(best->prediction.slowdown_ms, 0);
  EXPECT_GE(best->prediction.step_ms, SearchAll(in, curve, levers).step_ms);
  // The objective is still the plain one: what the search finds without the levers.
  absl::StatusOr<BestPartition> plain = FindBestPartition(in, curve, Levers{});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(best->partition.ends, plain->partition.ends);
}

TEST(PartitionTest, AllReadyAtOnceGivesOneBucket) {
  // Every gradient ready at 5 ms, cost alpha + beta * bytes: any split only adds alpha.
  StepInputs in;
  in.forward_ms = 1;
  in.backward_ms = 5;
  in.optimizer_ms = 2;
  int64_t total = 0;
  for (int i = 0; i < 40; ++i) {
    in.gradients.push_back({5.0, (i + 1) * 10000});
    total += (i + 1) * 10000;
  }
  const double alpha = 50, beta = 1e-4;
  absl::StatusOr<BestPartition> best = FindBestPartition(in, Line(alpha, beta), Levers{});
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->partition.ends, std::vector<size_t>{40});
  const double end = 5 + (alpha + beta * total) / 1000;
  EXPECT_NEAR(best->communication_end_ms, end, 1e-12);
  EXPECT_NEAR(best->prediction.step_ms, 1 + end + 2, 1e-12);
}

TEST(PartitionTest, NoLatencyAndSpacedGradientsLeaveTheLastOneAlone) {
  // Gradient i ready at i + 1 ms, each sent in under 1 ms with no latency: the last
  // bucket is just the last gradient, ending its own transfer after it is ready.
  StepInputs in;
  in.backward_ms = 20;
  for (int i = 0; i < 20; ++i) in.gradients.push_back({i + 1.0, 1000 + 37 * i});
  const double beta = 0.5;  // us per byte: at most 0.85 ms per gradient
  absl::StatusOr<BestPartition> best = FindBestPartition(in, Line(0, beta), Levers{});
  ASSERT_TRUE(best.ok()) << best.status();
  const Partition& p = best->partition;
  ASSERT_GE(p.buckets(), 2u);
  EXPECT_EQ(p.begin(p.buckets() - 1), 19u);
  EXPECT_NEAR(best->communication_end_ms, 20 + beta * (1000 + 37 * 19) / 1000, 1e-12);
  EXPECT_NEAR(best->prediction.exposed_ms, beta * (1000 + 37 * 19) / 1000, 1e-12);
}

TEST(PartitionTest, HugeLatencyGivesOneBucket) {
  // alpha (2 s) above backward's span of ready times: one all-reduce beats any two.
  std::mt19937 rng(3);
  const StepInputs in = RandomInputs(rng, 30, true);
  int64_t total = 0;
  for (const Gradient& g : in.gradients) total += g.bytes;
  const double alpha = 2e6, beta = 1e-3;
  absl::StatusOr<BestPartition> best = FindBestPartition(in, Line(alpha, beta), Levers{});
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->partition.buckets(), 1u);
  EXPECT_NEAR(best->communication_end_ms, in.gradients.back().ready_ms + (alpha + beta * total) / 1000, 1e-9);
}

TEST(PartitionTest, ThousandsOfGradients) {
  std::mt19937 rng(11);
  const StepInputs in = RandomInputs(rng, 3000, true);
  const CostCurve curve = RandomCurve(rng, 64.0 * kMiB, true);
  absl::StatusOr<BestPartition> best = FindBestPartition(in, curve, Levers{});
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_TRUE(CheckPartition(best->partition, 3000).ok());
  absl::StatusOr<StepPrediction> one = PredictStep(in, curve, Levers{}, OneBucket(3000));
  absl::StatusOr<StepPrediction> each = PredictStep(in, curve, Levers{}, OneBucketPerGradient(3000));
  ASSERT_TRUE(one.ok() && each.ok());
  EXPECT_LE(best->communication_end_ms, one->CommunicationEndMs());
  EXPECT_LE(best->communication_end_ms, each->CommunicationEndMs());
}

// Six gradients ready at 1..6 ms of 0.5, 0.75, 2, 3, 1 and 4 MiB; forward 3, backward 6,
// optimizer 1 ms; 100 us + 0.5 ms per MiB.
StepInputs SixGradients() {
  StepInputs in;
  in.forward_ms = 3;
  in.backward_ms = 6;
  in.optimizer_ms = 1;
  in.gradients = {{1, kMiB / 2}, {2, 3 * kMiB / 4}, {3, 2 * kMiB}, {4, 3 * kMiB}, {5, kMiB}, {6, 4 * kMiB}};
  return in;
}

TEST(PartitionTest, BucketsByCapFillsAsDdpDoes) {
  const StepInputs in = SixGradients();
  // First bucket closes at >= 1 MiB (0.5 + 0.75), then at >= 4 MiB (2 + 3, 1 + 4).
  EXPECT_EQ(BucketsByCap(in.gradients, kMiB, 4 * kMiB).ends, (std::vector<size_t>{2, 4, 6}));
  EXPECT_EQ(BucketsByCap(in.gradients, kMiB, 25 * kMiB).ends, (std::vector<size_t>{2, 6}));
  // A bucket that reaches its cap exactly closes.
  std::vector<Gradient> even(6, Gradient{0, kMiB});
  EXPECT_EQ(BucketsByCap(even, kMiB, 2 * kMiB).ends, (std::vector<size_t>{1, 3, 5, 6}));
}

TEST(PartitionTest, CapSweepPredictsEachCap) {
  absl::StatusOr<std::vector<CapPrediction>> sweep =
      SweepBucketCaps(SixGradients(), Line(100, 500.0 / kMiB), Levers{}, {4, 25, 0.5});
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_EQ(sweep->size(), 3u);
  // 4 MiB: [0,2) [2,4) [4,6) end at 2.725, 6.6 and 9.2 ms: 3 + 6 + 3.2 + 1.
  EXPECT_EQ((*sweep)[0].partition.ends, (std::vector<size_t>{2, 4, 6}));
  EXPECT_DOUBLE_EQ((*sweep)[0].first_cap_mib, 1);
  EXPECT_NEAR((*sweep)[0].prediction.step_ms, 13.2, 1e-12);
  // 25 MiB: [0,2) then 10 MiB ready at 6 ms, 5.1 ms: 3 + 6 + 5.1 + 1.
  EXPECT_NEAR((*sweep)[1].prediction.step_ms, 15.1, 1e-12);
  // 0.5 MiB, the first bucket 0.5 MiB too: one bucket per gradient, the last ends at 8.4.
  EXPECT_DOUBLE_EQ((*sweep)[2].first_cap_mib, 0.5);
  EXPECT_EQ((*sweep)[2].partition.ends, OneBucketPerGradient(6).ends);
  EXPECT_NEAR((*sweep)[2].prediction.step_ms, 12.4, 1e-12);
  EXPECT_EQ(FastestCap(*sweep), 2u);

  EXPECT_FALSE(SweepBucketCaps(SixGradients(), Line(1, 1), Levers{}, {}).ok());
  EXPECT_FALSE(SweepBucketCaps(SixGradients(), Line(1, 1), Levers{}, {25, 0}).ok());
  EXPECT_FALSE(SweepBucketCaps(SixGradients(), Line(1, 1), Levers{}, {25}, -1).ok());
}

TEST(PartitionTest, RejectsBadInputs) {
  StepInputs in = SixGradients();
  in.gradients[0].ready_ms = -1;
  EXPECT_FALSE(FindBestPartition(in, Line(1, 1), Levers{}).ok());
}

}  // namespace
}  // namespace ddplab::tune
