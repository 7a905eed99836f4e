#include "tune/model/cost_curve.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ddplab::tune {
namespace {

// The time at `bytes` on the line through `near` and `far` (different sizes), its slope
// taken as 0 where negative, measured from `near`.
double OnLine(const CostPoint& near, const CostPoint& far, double bytes) {
  const double slope = std::max(0.0, (far.time_us - near.time_us) / (far.bytes - near.bytes));
  return near.time_us + slope * (bytes - near.bytes);
}

// Weighted least squares of time = alpha + beta * bytes over `points`, weights `w`.
LatencyBandwidth WeightedLine(const std::vector<CostPoint>& points, const std::vector<double>& w) {
  double sw = 0, sx = 0, st = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    sw += w[i];
    sx += w[i] * points[i].bytes;
    st += w[i] * points[i].time_us;
  }
  const double mx = sx / sw, mt = st / sw;
  double sxx = 0, sxt = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const double dx = points[i].bytes - mx;
    sxx += w[i] * dx * dx;
    sxt += w[i] * dx * (points[i].time_us - mt);
  }
  LatencyBandwidth line;
  line.beta_us_per_byte = sxx > 0 ? sxt / sxx : 0;
  line.alpha_us = mt - line.beta_us_per_byte * mx;
  if (line.beta_us_per_byte < 0) {  // time falling with size: noise; a flat line
    line.beta_us_per_byte = 0;
    line.alpha_us = mt;
  } else if (line.alpha_us < 0) {  // through the origin: beta = sum(w x t) / sum(w x^2)
    double num = 0, den = 0;
    for (size_t i = 0; i < points.size(); ++i) {
      num += w[i] * points[i].bytes * points[i].time_us;
      den += w[i] * points[i].bytes * points[i].bytes;
    }
    line.alpha_us = 0;
    line.beta_us_per_byte = den > 0 ? num / den : 0;
  }
  return line;
}

}  // namespace

double LatencyBandwidth::HalfLatencyBytes() const {
  return beta_us_per_byte > 0 ? alpha_us / beta_us_per_byte : std::numeric_limits<double>::infinity();
}

double LatencyBandwidth::BandwidthGBps() const {
  // bytes per microsecond = 1 / beta; GB/s = bytes/us * 1e6 / 1e9.
  return beta_us_per_byte > 0 ? 1e-3 / beta_us_per_byte : std::numeric_limits<double>::infinity();
}

absl::StatusOr<CostCurve> CostCurve::FromPoints(std::vector<CostPoint> points) {
  for (size_t i = 0; i < points.size(); ++i) {
    const CostPoint& p = points[i];
    if (!std::isfinite(p.bytes) || p.bytes < 0 || !std::isfinite(p.time_us) || p.time_us < 0) {
      return absl::InvalidArgumentError(absl::StrCat("cost curve point ", i, " (", p.bytes, " bytes, ", p.time_us,
                                                     " us): sizes and times must be finite and >= 0"));
    }
  }
  std::sort(points.begin(), points.end(),
            [](const CostPoint& a, const CostPoint& b) { return a.bytes < b.bytes; });
  for (size_t i = 1; i < points.size(); ++i) {
    if (points[i].bytes == points[i - 1].bytes) {
      return absl::InvalidArgumentError(absl::StrCat("cost curve: the size ", points[i].bytes,
                                                     " bytes is measured twice; keep one time per size"));
    }
  }
  if (points.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cost curve: needs at least two sizes to interpolate and extrapolate, got ", points.size()));
  }
  return CostCurve(std::move(points));
}

absl::StatusOr<CostCurve> CostCurve::Line(double alpha_us, double beta_us_per_byte) {
  if (!std::isfinite(alpha_us) || alpha_us < 0 || !std::isfinite(beta_us_per_byte) || beta_us_per_byte < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cost line: alpha (", alpha_us, " us) and beta (",
                                                   beta_us_per_byte, " us/byte) must be finite and >= 0"));
  }
  // Two points on the line; extrapolation beyond them follows the same line.
  const double a = 1 << 20, b = 1 << 21;
  return FromPoints({{a, alpha_us + beta_us_per_byte * a}, {b, alpha_us + beta_us_per_byte * b}});
}

double CostCurve::TimeUs(double bytes) const {
  const std::vector<CostPoint>& p = points_;
  double t;
  if (bytes <= p.front().bytes) {
    t = OnLine(p[0], p[1], bytes);
  } else if (bytes >= p.back().bytes) {
    t = OnLine(p.back(), p[p.size() - 2], bytes);
  } else {
    auto hi = std::upper_bound(p.begin(), p.end(), bytes,
                               [](double x, const CostPoint& q) { return x < q.bytes; });
    const CostPoint& b = *hi;
    const CostPoint& a = *(hi - 1);
    t = a.time_us + (b.time_us - a.time_us) * (bytes - a.bytes) / (b.bytes - a.bytes);
  }
  return std::max(0.0, t);
}

LatencyBandwidth CostCurve::Fit() const {
  // Relative error: weight 1 / time^2, times floored at the smallest positive time so
  // that a point measured at 0 does not take all the weight.
  double floor = std::numeric_limits<double>::infinity();
  for (const CostPoint& p : points_) {
    if (p.time_us > 0) floor = std::min(floor, p.time_us);
  }
  if (!std::isfinite(floor)) return LatencyBandwidth{};  // every time is 0
  std::vector<double> w;
  w.reserve(points_.size());
  for (const CostPoint& p : points_) {
    const double t = std::max(p.time_us, floor);
    w.push_back(1.0 / (t * t));
  }
  return WeightedLine(points_, w);
}

}  // namespace ddplab::tune
