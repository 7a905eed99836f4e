// An all-reduce's time as a function of its size on one machine, transport and dtype:
// measured points (bytes -> microseconds), interpolated between the points and
// extrapolated beyond them; and the latency + bandwidth line (alpha + beta * bytes)
// fitted to them, for saying whether a step is latency- or bandwidth-bound.
//
//   absl::StatusOr<ddplab::tune::CostCurve> curve = ddplab::tune::CostCurve::FromPoints(
//       {{8, 30.0}, {1 << 20, 45.0}, {64 << 20, 700.0}});   // bytes, microseconds
//   if (!curve.ok()) return curve.status();
//   double us = curve->TimeUs(25 << 20);                    // a 25 MiB all-reduce
//   ddplab::tune::LatencyBandwidth line = curve->Fit();     // line.alpha_us, line.beta_us_per_byte
//
// nccl_tests.h reads and writes the points as nccl-tests' table.
#ifndef DDPLAB_TUNE_MODEL_COST_CURVE_H_
#define DDPLAB_TUNE_MODEL_COST_CURVE_H_

#include <vector>

#include "absl/status/statusor.h"

namespace ddplab::tune {

// One measured size: an all-reduce of `bytes` (per rank) took `time_us`.
struct CostPoint {
  double bytes = 0;
  double time_us = 0;
};

// The line time = alpha + beta * bytes: alpha is the latency of an all-reduce of nothing,
// beta the time per byte (1 / bandwidth).
struct LatencyBandwidth {
  double alpha_us = 0;
  double beta_us_per_byte = 0;

  double TimeUs(double bytes) const { return alpha_us + beta_us_per_byte * bytes; }
  // The size whose bandwidth time equals the latency: smaller all-reduces are mostly
  // latency, larger ones mostly bandwidth. Infinite where beta is 0.
  double HalfLatencyBytes() const;
  // 1 / beta in GB/s (10^9 bytes per second, as nccl-tests counts); infinite where beta is 0.
  double BandwidthGBps() const;
};

// All-reduce time against size, from measured points. Immutable; cheap to copy.
class CostCurve {
 public:
  // From measured points, in any order. Needs at least two distinct sizes; every size
  // and time finite and >= 0, no size twice.
  static absl::StatusOr<CostCurve> FromPoints(std::vector<CostPoint> points);
  // The exact line alpha + beta * bytes (alpha, beta >= 0): for synthetic costs and tests.
  static absl::StatusOr<CostCurve> Line(double alpha_us, double beta_us_per_byte);

  // The time of an all-reduce of `bytes` in microseconds, never negative. Between two
  // measured sizes, linear in size between them. Below the smallest size, the line
  // through the two smallest points; above the largest, the line through the two largest
  // points; either line's slope taken as 0 where it is negative (measurement noise must
  // not make a huge all-reduce cheaper than the largest measured one).
  double TimeUs(double bytes) const;

  // alpha and beta fitted to the points by least squares on relative error (each point's
  // residual divided by its time): sizes span many decades, and plain least squares would
  // let the largest sizes alone decide alpha. Both are kept >= 0: where the unconstrained
  // fit gives a negative one, it is 0 and the other is refitted. Exact on exact lines.
  LatencyBandwidth Fit() const;

  // The points, sorted by size.
  const std::vector<CostPoint>& points() const { return points_; }

 private:
  explicit CostCurve(std::vector<CostPoint> points) : points_(std::move(points)) {}
  std::vector<CostPoint> points_;
};

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_MODEL_COST_CURVE_H_
