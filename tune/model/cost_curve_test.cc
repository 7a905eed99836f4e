#include "tune/model/cost_curve.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ddplab::tune {
namespace {

TEST(CostCurveTest, InterpolatesLinearlyBetweenPoints) {
  absl::StatusOr<CostCurve> curve = CostCurve::FromPoints({{1000, 20}, {0, 10}, {3000, 60}});  // any order
  ASSERT_TRUE(curve.ok()) << curve.status();
  EXPECT_DOUBLE_EQ(curve->TimeUs(0), 10);
  EXPECT_DOUBLE_EQ(curve->TimeUs(500), 15);
  EXPECT_DOUBLE_EQ(curve->TimeUs(1000), 20);
  EXPECT_DOUBLE_EQ(curve->TimeUs(1500), 30);  // 20 + (60 - 20) * 500 / 2000
  EXPECT_DOUBLE_EQ(curve->TimeUs(3000), 60);
  ASSERT_EQ(curve->points().size(), 3u);
  EXPECT_EQ(curve->points()[0].bytes, 0);  // sorted
}

TEST(CostCurveTest, ExtrapolatesWithTheNearestTwoPoints) {
  absl::StatusOr<CostCurve> curve = CostCurve::FromPoints({{100, 10}, {200, 12}, {1000, 20}, {2000, 40}});
  ASSERT_TRUE(curve.ok()) << curve.status();
  // Below: the line through (100, 10) and (200, 12), slope 0.02 us/byte.
  EXPECT_DOUBLE_EQ(curve->TimeUs(0), 8);
  EXPECT_DOUBLE_EQ(curve->TimeUs(50), 9);
  // Above: the line through (1000, 20) and (2000, 40), slope 0.02 us/byte.
  EXPECT_DOUBLE_EQ(curve->TimeUs(4000), 80);
}

TEST(CostCurveTest, NeverNegativeAndNeverCheaperBeyondTheLargest) {
  // The line through the two smallest points falls below 0 at small sizes.
  absl::StatusOr<CostCurve> steep = CostCurve::FromPoints({{100, 10}, {200, 30}});
  ASSERT_TRUE(steep.ok());
  EXPECT_DOUBLE_EQ(steep->TimeUs(60), 2);
  EXPECT_EQ(steep->TimeUs(0), 0);
  EXPECT_EQ(steep->TimeUs(10), 0);
  // Noise: the largest size measured faster than the one before it. Beyond, flat.
  absl::StatusOr<CostCurve> noisy = CostCurve::FromPoints({{1000, 50}, {2000, 40}});
  ASSERT_TRUE(noisy.ok());
  EXPECT_DOUBLE_EQ(noisy->TimeUs(1e9), 40);
  EXPECT_DOUBLE_EQ(noisy->TimeUs(0), 50);  // and flat below too
}

TEST(CostCurveTest, LineIsExactEverywhere) {
  const double alpha = 25, beta = 1.0 / 50000;  // 25 us, 50 GB/s
  absl::StatusOr<CostCurve> line = CostCurve::Line(alpha, beta);
  ASSERT_TRUE(line.ok()) << line.status();
  for (double bytes : {0.0, 8.0, 4096.0, 1e6, 3.3e7, 1e10}) {
    EXPECT_NEAR(line->TimeUs(bytes), alpha + beta * bytes, 1e-9 * (alpha + beta * bytes)) << bytes;
  }
  EXPECT_FALSE(CostCurve::Line(-1, 0).ok());
  EXPECT_FALSE(CostCurve::Line(1, NAN).ok());
}

TEST(CostCurveTest, FitRecoversAnExactLine) {
  const double alpha = 30, beta = 2.5e-5;  // 40 GB/s
  std::vector<CostPoint> points;
  for (double bytes = 8; bytes <= 1 << 30; bytes *= 4) points.push_back({bytes, alpha + beta * bytes});
  absl::StatusOr<CostCurve> curve = CostCurve::FromPoints(points);
  ASSERT_TRUE(curve.ok());
  const LatencyBandwidth fit = curve->Fit();
  EXPECT_NEAR(fit.alpha_us, alpha, 1e-9 * alpha);
  EXPECT_NEAR(fit.beta_us_per_byte, beta, 1e-9 * beta);
  EXPECT_NEAR(fit.BandwidthGBps(), 40, 1e-6);
  EXPECT_NEAR(fit.HalfLatencyBytes(), alpha / beta, 1e-3);
  EXPECT_NEAR(fit.TimeUs(1e6), alpha + beta * 1e6, 1e-6);
}

TEST(CostCurveTest, FitWeighsSmallSizesLikeLargeOnes) {
  // A line with 1% noise alternating up and down: plain least squares would let the
  // gigabyte points decide alpha; relative error keeps it near 30 us.
  const double alpha = 30, beta = 1e-5;
  std::vector<CostPoint> points;
  int sign = 1;
  for (double bytes = 8; bytes <= 1 << 30; bytes *= 2, sign = -sign) {
    points.push_back({bytes, (alpha + beta * bytes) * (1 + 0.01 * sign)});
  }
  absl::StatusOr<CostCurve> curve = CostCurve::FromPoints(points);
  ASSERT_TRUE(curve.ok());
  const LatencyBandwidth fit = curve->Fit();
  EXPECT_NEAR(fit.alpha_us, alpha, 0.02 * alpha);
  EXPECT_NEAR(fit.beta_us_per_byte, beta, 0.02 * beta);
}

TEST(CostCurveTest, FitKeepsAlphaAndBetaAtLeastZero) {
  // Through the origin's far side: the unconstrained line has alpha < 0.
  absl::StatusOr<CostCurve> curve = CostCurve::FromPoints({{1000, 5}, {2000, 15}, {3000, 25}});
  ASSERT_TRUE(curve.ok());
  LatencyBandwidth fit = curve->Fit();
  EXPECT_EQ(fit.alpha_us, 0);
  EXPECT_GT(fit.beta_us_per_byte, 0);
  // Times falling with size: beta 0, alpha the weighted mean of the times.
  curve = CostCurve::FromPoints({{1000, 20}, {2000, 20}, {3000, 10}});
  ASSERT_TRUE(curve.ok());
  fit = curve->Fit();
  EXPECT_EQ(fit.beta_us_per_byte, 0);
  // Weights 1/400, 1/400, 1/100: (20/400 + 20/400 + 10/100) / (1/400 + 1/400 + 1/100) = 40/3.
  EXPECT_NEAR(fit.alpha_us, 40.0 / 3, 1e-12);
  EXPECT_TRUE(std::isinf(fit.BandwidthGBps()));
}

TEST(CostCurveTest, RejectsCurvesItCannotUse) {
  EXPECT_FALSE(CostCurve::FromPoints({}).ok());
  const absl::Status one = CostCurve::FromPoints({{8, 10}}).status();
  EXPECT_NE(one.message().find("at least two sizes"), std::string::npos) << one;
  const absl::Status twice = CostCurve::FromPoints({{8, 10}, {8, 11}}).status();
  EXPECT_NE(twice.message().find("measured twice"), std::string::npos) << twice;
  EXPECT_FALSE(CostCurve::FromPoints({{8, -1}, {16, 2}}).ok());
  EXPECT_FALSE(CostCurve::FromPoints({{-8, 1}, {16, 2}}).ok());
  EXPECT_FALSE(CostCurve::FromPoints({{8, INFINITY}, {16, 2}}).ok());
}

}  // namespace
}  // namespace ddplab::tune
