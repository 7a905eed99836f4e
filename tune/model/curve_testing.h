// For the tune/ tests: exact cost lines without the StatusOr, and MiB.
//
//   ddplab::tune::CostCurve curve = ddplab::tune::test_curves::Line(30, 1e-4);  // 30 us + 0.1 ns/byte
#ifndef DDPLAB_TUNE_MODEL_CURVE_TESTING_H_
#define DDPLAB_TUNE_MODEL_CURVE_TESTING_H_

#include <cstdint>

#include "gtest/gtest.h"
#include "tune/model/cost_curve.h"

namespace ddplab::tune::test_curves {

inline constexpr int64_t kMiB = int64_t{1} << 20;

// CostCurve::Line(alpha_us, beta_us_per_byte), failing the test where it is refused.
inline CostCurve Line(double alpha_us, double beta_us_per_byte) {
  absl::StatusOr<CostCurve> curve = CostCurve::Line(alpha_us, beta_us_per_byte);
  EXPECT_TRUE(curve.ok()) << curve.status();
  return curve.ok() ? *curve : *CostCurve::Line(0, 0);
}

}  // namespace ddplab::tune::test_curves

#endif  // DDPLAB_TUNE_MODEL_CURVE_TESTING_H_
