#include "tune/model/step_model.h"

#include <vector>

#include "gtest/gtest.h"
#include "tune/model/curve_testing.h"

namespace ddplab::tune {
namespace {

using test_curves::kMiB;

using test_curves::Line;

// Six gradients ready at 1..6 ms, of 0.5, 0.75, 2, 3, 1 and 4 MiB; forward 3 ms,
// backward 6 ms, optimizer 1 ms. On a line of 100 us + 0.5 ms per MiB.
StepInputs SixGradients() {
  StepInputs in;
  in.forward_ms = 3;
  in.backward_ms = 6;
  in.optimizer_ms = 1;
  in.gradients = {{1, kMiB / 2}, {2, 3 * kMiB / 4}, {3, 2 * kMiB}, {4, 3 * kMiB}, {5, kMiB}, {6, 4 * kMiB}};
  return in;
}
CostCurve HalfMsPerMiB() { return Line(100, 500.0 / kMiB); }

TEST(StepModelTest, CollectivesRunOneAfterAnother) {
  // Buckets [0,2) [2,4) [4,6): 1.25, 5 and 5 MiB, ready at 2, 4 and 6 ms.
  absl::StatusOr<StepPrediction> p = PredictStep(SixGradients(), HalfMsPerMiB(), Levers{}, Partition{{2, 4, 6}});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->buckets.size(), 3u);
  EXPECT_EQ(p->buckets[0].bytes, 5 * kMiB / 4);
  EXPECT_DOUBLE_EQ(p->buckets[0].ready_ms, 2);
  EXPECT_DOUBLE_EQ(p->buckets[0].end_ms, 2.725);     // 2 + 0.1 + 0.625
  EXPECT_DOUBLE_EQ(p->buckets[1].start_ms, 4);
  EXPECT_DOUBLE_EQ(p->buckets[1].end_ms, 6.6);       // 4 + 0.1 + 2.5
  EXPECT_DOUBLE_EQ(p->buckets[2].ready_ms, 6);
  EXPECT_DOUBLE_EQ(p->buckets[2].start_ms, 6.6);     // waits for the one before
  EXPECT_DOUBLE_EQ(p->buckets[2].end_ms, 9.2);
  EXPECT_DOUBLE_EQ(p->CommunicationEndMs(), 9.2);
  EXPECT_DOUBLE_EQ(p->communication_ms, 0.725 + 2.6 + 2.6);
  EXPECT_DOUBLE_EQ(p->backward_ms, 6);
  EXPECT_DOUBLE_EQ(p->slowdown_ms, 0);
  EXPECT_NEAR(p->exposed_ms, 3.2, 1e-12);
  EXPECT_DOUBLE_EQ(p->optimizer_ms, 1);
  EXPECT_NEAR(p->step_ms, 3 + 6 + 3.2 + 1, 1e-12);
}

TEST(StepModelTest, WireFactorScalesTheBytesOnTheWire) {
  Levers bf16;
  bf16.wire_factor = 0.5;
  absl::StatusOr<StepPrediction> p = PredictStep(SixGradients(), HalfMsPerMiB(), bf16, OneBucket(6));
  ASSERT_TRUE(p.ok()) << p.status();
  // 11.25 MiB as 5.625 MiB on the wire: 0.1 + 2.8125 ms after the last gradient at 6 ms.
  EXPECT_EQ(p->buckets[0].bytes, 45 * kMiB / 4);
  EXPECT_NEAR(p->exposed_ms, 2.9125, 1e-12);
  EXPECT_NEAR(p->step_ms, 3 + 6 + 2.9125 + 1, 1e-12);
}

TEST(StepModelTest, BackwardSlowsWhileACollectiveIsInFlight) {
  // Gradient 0 at 1 ms of backward's compute, gradient 1 at 4 ms (its end). Bucket 0's
  // collective takes 2 ms, bucket 1's 1 ms. With s = 1, compute runs at half speed
  // during [1, 3]: 1 ms of compute done by 3, the other 2 ms by 5.
  StepInputs in;
  in.forward_ms = 2;
  in.backward_ms = 4;
  in.optimizer_ms = 0.5;
  in.gradients = {{1, 2000}, {4, 1000}};
  Levers levers;
  levers.overlap_slowdown = 1;
  absl::StatusOr<StepPrediction> p = PredictStep(in, Line(0, 1), levers, OneBucketPerGradient(2));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->buckets[0].end_ms, 3);
  EXPECT_DOUBLE_EQ(p->buckets[1].ready_ms, 5);
  EXPECT_DOUBLE_EQ(p->buckets[1].end_ms, 6);
  EXPECT_DOUBLE_EQ(p->backward_ms, 5);
  EXPECT_DOUBLE_EQ(p->slowdown_ms, 1);
  EXPECT_DOUBLE_EQ(p->exposed_ms, 1);
  EXPECT_DOUBLE_EQ(p->step_ms, 2 + 5 + 1 + 0.5);
  // Collectives that end before compute resumes at full speed, then backward past them:
  // s = 0.5, a collective over [1, 2.5] of 1.5 ms gives 1 ms of compute in it.
  in.gradients = {{1, 1500}, {4, 1}};
  levers.overlap_slowdown = 0.5;
  p = PredictStep(in, Line(0, 1), levers, OneBucketPerGradient(2));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->backward_ms, 4.5);
  EXPECT_NEAR(p->buckets[1].end_ms, 4.501, 1e-12);
}

TEST(StepModelTest, OptimizerOverlapRunsEachBucketsShareAfterItsCollective) {
  Levers levers;
  levers.overlap_optimizer = true;
  absl::StatusOr<StepPrediction> p = PredictStep(SixGradients(), HalfMsPerMiB(), levers, Partition{{2, 4, 6}});
  ASSERT_TRUE(p.ok()) << p.status();
  // Shares 1.25, 5 and 5 of 11.25: after 6 (backward) + 1/9, then from 6.6 + 4/9,
  // then from 9.2 + 4/9; the last 4/9 ms is what shows after the collectives.
  EXPECT_NEAR(p->optimizer_ms, 4.0 / 9, 1e-12);
  EXPECT_NEAR(p->step_ms, 3 + 6 + 3.2 + 4.0 / 9, 1e-12);
  // All in one bucket ending before backward: the whole optimizer after backward.
  StepInputs early = SixGradients();
  early.backward_ms = 20;
  p = PredictStep(early, HalfMsPerMiB(), levers, OneBucket(6));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->exposed_ms, 0);
  EXPECT_DOUBLE_EQ(p->optimizer_ms, 1);
}

TEST(StepModelTest, BucketIsReadyAtItsLatestGradient) {
  StepInputs in;
  in.backward_ms = 5;
  in.gradients = {{3, 100}, {1, 100}, {2, 100}};  // out of order
  absl::StatusOr<StepPrediction> p = PredictStep(in, Line(1000, 0), Levers{}, Partition{{2, 3}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->buckets[0].ready_ms, 3);
  EXPECT_DOUBLE_EQ(p->buckets[0].end_ms, 4);
  EXPECT_DOUBLE_EQ(p->buckets[1].start_ms, 4);
  EXPECT_DOUBLE_EQ(p->buckets[1].end_ms, 5);
  EXPECT_EQ((Partition{{2, 3}}).ToString(), "[0,2) [2,3)");
}

TEST(StepModelTest, RejectsWhatItCannotModel) {
  const CostCurve curve = HalfMsPerMiB();
  StepInputs in = SixGradients();
  EXPECT_FALSE(PredictStep(in, curve, Levers{}, Partition{{2, 4}}).ok());     // short of 6
  EXPECT_FALSE(PredictStep(in, curve, Levers{}, Partition{{2, 2, 6}}).ok());  // empty bucket
  EXPECT_FALSE(PredictStep(in, curve, Levers{}, Partition{}).ok());
  Levers zero;
  zero.wire_factor = 0;
  EXPECT_FALSE(PredictStep(in, curve, zero, OneBucket(6)).ok());
  Levers negative;
  negative.overlap_slowdown = -0.1;
  EXPECT_FALSE(PredictStep(in, curve, negative, OneBucket(6)).ok());
  in.gradients[5].ready_ms = 6.5;
  const absl::Status late = PredictStep(in, curve, Levers{}, OneBucket(6)).status();
  EXPECT_NE(late.message().find("gradient 5 is ready at 6.5 ms"), std::string::npos) << late;
  in = SixGradients();
  in.gradients[2].bytes = -1;
  EXPECT_FALSE(PredictStep(in, curve, Levers{}, OneBucket(6)).ok());
  in = SixGradients();
  in.forward_ms = -1;
  EXPECT_FALSE(PredictStep(in, curve, Levers{}, OneBucket(6)).ok());
  in.gradients.clear();
  EXPECT_FALSE(CheckStepInputs(in, Levers{}).ok());
}

}  // namespace
}  // namespace ddplab::tune
