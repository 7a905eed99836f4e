#include "tune/model/verdict.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tune/model/curve_testing.h"

namespace ddplab::tune {
namespace {

using test_curves::Line;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Ten gradients of 1 MB ready every 10 ms of a 100 ms backward; forward 50, optimizer 5.
StepInputs Spread() {
  StepInputs in;
  in.forward_ms = 50;
  in.backward_ms = 100;
  in.optimizer_ms = 5;
  for (int i = 1; i <= 10; ++i) in.gradients.push_back({10.0 * i, 1000000});
  return in;
}

// Forty gradients of 2.5 MB, all ready at backward's end (10 ms); forward 5, optimizer 1.
StepInputs AllAtTheEnd() {
  StepInputs in;
  in.forward_ms = 5;
  in.backward_ms = 10;
  in.optimizer_ms = 1;
  for (int i = 0; i < 40; ++i) in.gradients.push_back({10.0, 2500000});
  return in;
}

TEST(VerdictTest, ComputeBoundWhenCollectivesHideBehindBackward) {
  // 5 ms per gradient, each sent before the next is ready; only the last shows: 5 ms
  // of a 160 ms step (3.1%). A quarter of the bytes saves 3.75 ms (2.3%): not worth it.
  absl::StatusOr<Verdict> v = Judge(Spread(), Line(0, 5e-3), Levers{});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->bound, Boundedness::kCompute);
  EXPECT_EQ(v->best.partition.buckets(), 10u);
  EXPECT_NEAR(v->overhead_ms, 5, 1e-9);
  EXPECT_NEAR(v->overhead_fraction, 5.0 / 160, 1e-12);
  EXPECT_NEAR(v->quarter_bytes_step_ms, 156.25, 1e-9);
  EXPECT_NEAR(v->half_bytes_step_ms, 157.5, 1e-9);
  EXPECT_FALSE(v->compression_can_pay);
  EXPECT_TRUE(Contains(v->sentence, "Compute-bound: with the best partition (10 buckets)")) << v->sentence;
  EXPECT_TRUE(Contains(v->sentence, "Compression cannot pay here: communication already hides")) << v->sentence;
  EXPECT_EQ(BoundednessName(v->bound), "compute-bound");
}

TEST(VerdictTest, SlowdownBesideCollectivesCountsAgainstCompute) {
  // As above, but backward runs at half speed beside each 5 ms collective: nine of them
  // before backward's end cost 2.5 ms each.
  Levers levers;
  levers.overlap_slowdown = 1;
  absl::StatusOr<Verdict> v = Judge(Spread(), Line(0, 5e-3), levers);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_NEAR(v->best.prediction.slowdown_ms, 22.5, 1e-9);
  EXPECT_NEAR(v->overhead_ms, 27.5, 1e-9);
  EXPECT_EQ(v->bound, Boundedness::kBandwidth);  // alpha is 0
  EXPECT_NEAR(v->latency_share, 0, 1e-9);
}

TEST(VerdictTest, LatencyBoundWhenAlphaDominates) {
  // 20 ms per all-reduce and almost nothing per byte: one bucket, 20 ms exposed.
  absl::StatusOr<Verdict> v = Judge(AllAtTheEnd(), Line(20000, 1e-9), Levers{});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->bound, Boundedness::kLatency);
  EXPECT_EQ(v->best.partition.buckets(), 1u);
  EXPECT_NEAR(v->best.prediction.step_ms, 5 + 10 + (20000 + 1e-9 * 1e8) / 1000 + 1, 1e-9);
  EXPECT_GT(v->latency_share, 0.99);
  EXPECT_NEAR(v->line.alpha_us, 20000, 1e-6);
  EXPECT_FALSE(v->compression_can_pay);
  EXPECT_TRUE(Contains(v->sentence, "Latency-bound")) << v->sentence;
  EXPECT_TRUE(Contains(v->sentence, "mostly latency, which fewer bytes do not remove")) << v->sentence;
  EXPECT_EQ(BoundednessName(v->bound), "latency-bound");
}

TEST(VerdictTest, BandwidthBoundAndCompressionPays) {
  // 100 MB at 10 GB/s (1e-4 us per byte) after a 10 us latency, all after backward:
  // one bucket ending 10.01 ms after backward; a quarter of the bytes, 2.51 ms.
  absl::StatusOr<Verdict> v = Judge(AllAtTheEnd(), Line(10, 1e-4), Levers{});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->bound, Boundedness::kBandwidth);
  EXPECT_NEAR(v->best.prediction.step_ms, 5 + 10 + 10.01 + 1, 1e-9);
  EXPECT_NEAR(v->half_bytes_step_ms, 5 + 10 + 5.01 + 1, 1e-9);
  EXPECT_NEAR(v->quarter_bytes_step_ms, 5 + 10 + 2.51 + 1, 1e-9);
  EXPECT_NEAR(v->latency_share, 10 / 10010.0, 1e-9);
  EXPECT_NEAR(v->line.BandwidthGBps(), 10, 1e-6);
  EXPECT_TRUE(v->compression_can_pay);
  EXPECT_TRUE(Contains(v->sentence, "Bandwidth-bound")) << v->sentence;
  EXPECT_TRUE(Contains(v->sentence, "Compression can pay: a quarter of the bytes")) << v->sentence;
  EXPECT_EQ(BoundednessName(v->bound), "bandwidth-bound");
}

TEST(VerdictTest, CompressionOnTopOfBf16ScalesTheWireFurther) {
  // bf16 already halves the bytes: 5.01 ms; a quarter of those, 1.26 ms.
  Levers bf16;
  bf16.wire_factor = 0.5;
  absl::StatusOr<Verdict> v = Judge(AllAtTheEnd(), Line(10, 1e-4), bf16);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_NEAR(v->best.prediction.step_ms, 5 + 10 + 5.01 + 1, 1e-9);
  EXPECT_NEAR(v->quarter_bytes_step_ms, 5 + 10 + 1.26 + 1, 1e-9);
}

TEST(VerdictTest, JudgesTheBucketsGivenWithTheStepATunerPredicts) {
  // One bucket of all ten gradients, sent at backward's end: 50 ms exposed; the tuner's
  // step adds 2 ms the model leaves out, and every step said has them.
  VerdictOptions cap;
  cap.buckets = BucketsByCap(Spread().gradients, 100000000, 100000000);
  cap.buckets_name = "bucket_cap_mb 100";
  cap.other_ms = 2;
  absl::StatusOr<Verdict> v = Judge(Spread(), Line(0, 5e-3), Levers{}, cap);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->best.partition.buckets(), 1u);
  EXPECT_NEAR(v->step_ms, 50 + 100 + 50 + 5 + 2, 1e-9);
  EXPECT_NEAR(v->quarter_bytes_step_ms, 50 + 100 + 12.5 + 5 + 2, 1e-9);
  EXPECT_TRUE(Contains(v->sentence, "with bucket_cap_mb 100 (1 bucket), communication adds 50 ms")) << v->sentence;
  EXPECT_TRUE(Contains(v->sentence, "of the predicted 207 ms step")) << v->sentence;
  EXPECT_TRUE(Contains(v->sentence, "from 207 to 170 ms (18.1% less;")) << v->sentence;
}

TEST(VerdictTest, ThresholdsAreOptions) {
  VerdictOptions strict;
  strict.compute_bound_fraction = 0.01;
  strict.compression_gain_fraction = 0.02;
  absl::StatusOr<Verdict> v = Judge(Spread(), Line(0, 5e-3), Levers{}, strict);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->bound, Boundedness::kBandwidth);  // 3.1% is above 1%
  EXPECT_TRUE(v->compression_can_pay);           // 2.3% is above 2%
  VerdictOptions bad;
  bad.compute_bound_fraction = 1.5;
  EXPECT_FALSE(Judge(Spread(), Line(0, 5e-3), Levers{}, bad).ok());
  StepInputs none = Spread();
  none.gradients.clear();
  EXPECT_FALSE(Judge(none, Line(0, 5e-3), Levers{}).ok());
}

}  // namespace
}  // namespace ddplab::tune
