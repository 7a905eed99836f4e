#include "tune/model/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/engine/ddp_buckets.h"

namespace ddplab::tune {
namespace {

// The dynamic programme's table: for each prefix of i gradients, the earliest end of its
// last collective, the bucket count that reaches it, and where its last bucket begins.
struct Table {
  std::vector<double> end;
  std::vector<size_t> buckets;
  std::vector<size_t> from;
};

// True when (value, buckets) is better than (best, best_buckets): earlier, or as early
// (to rounding) with fewer buckets.
bool Better(double value, size_t buckets, double best, size_t best_buckets) {
  if (!std::isfinite(best)) return true;  // nothing found yet
  const double tolerance = 1e-12 * std::max(1.0, std::fabs(best));
  if (value < best - tolerance) return true;
  return value <= best + tolerance && buckets < best_buckets;
}

Table FillTable(const StepInputs& in, const CostCurve& curve, double wire_factor) {
  const size_t n = in.gradients.size();
  std::vector<int64_t> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + in.gradients[i].bytes;
  Table t;
  t.end.assign(n + 1, std::numeric_limits<double>::infinity());
  t.buckets.assign(n + 1, 0);
  t.from.assign(n + 1, 0);
  t.end[0] = 0;
  for (size_t i = 1; i <= n; ++i) {
    double ready = 0;  // the latest ready time of gradients j..i-1
    for (size_t j = i; j-- > 0;) {
      ready = std::max(ready, in.gradients[j].ready_ms);
      // As PredictStep computes it, so that both give the same value to the last bit.
      const double bytes = static_cast<double>(prefix[i] - prefix[j]);
      const double value = std::max(ready, t.end[j]) + curve.TimeUs(bytes * wire_factor) / 1000.0;
      if (Better(value, t.buckets[j] + 1, t.end[i], t.buckets[i])) {
        t.end[i] = value;
        t.buckets[i] = t.buckets[j] + 1;
        t.from[i] = j;
      }
    }
  }
  return t;
}

}  // namespace

absl::StatusOr<BestPartition> FindBestPartition(const StepInputs& in, const CostCurve& curve,
                                                const Levers& levers) {
  if (absl::Status s = CheckStepInputs(in, levers); !s.ok()) return s;
  const Table t = FillTable(in, curve, levers.wire_factor);
  BestPartition best;
  for (size_t i = in.gradients.size(); i > 0; i = t.from[i]) best.partition.ends.push_back(i);
  std::reverse(best.partition.ends.begin(), best.partition.ends.end());
  best.communication_end_ms = t.end.back();
  absl::StatusOr<StepPrediction> prediction = PredictStep(in, curve, levers, best.partition);
  if (!prediction.ok()) return prediction.status();
  best.prediction = *std::move(prediction);
  return best;
}

Partition BucketsByCap(const std::vector<Gradient>& gradients, int64_t first_cap_bytes, int64_t cap_bytes) {
  std::vector<int64_t> bytes;
  std::vector<size_t> order;
  for (size_t i = 0; i < gradients.size(); ++i) {
    bytes.push_back(gradients[i].bytes);
    order.push_back(i);
  }
  Partition p;
  for (const std::vector<size_t>& bucket : ddp::AssignBuckets(bytes, order, first_cap_bytes, cap_bytes)) {
    p.ends.push_back(bucket.back() + 1);
  }
  if (p.ends.empty()) p.ends.push_back(gradients.size());
  return p;
}

absl::StatusOr<std::vector<CapPrediction>> SweepBucketCaps(const StepInputs& in, const CostCurve& curve,
                                                           const Levers& levers, const std::vector<double>& caps_mib,
                                                           double first_bucket_mib) {
  if (caps_mib.empty()) return absl::InvalidArgumentError("bucket cap sweep: no caps to try");
  if (!std::isfinite(first_bucket_mib) || first_bucket_mib <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket cap sweep: the first bucket's cap is ", first_bucket_mib, " MiB; it must be > 0"));
  }
  std::vector<CapPrediction> sweep;
  for (double cap : caps_mib) {
    if (!std::isfinite(cap) || cap <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket cap sweep: a cap of ", cap, " MiB; caps (bucket_cap_mb) must be > 0"));
    }
    CapPrediction c;
    c.cap_mib = cap;
    c.first_cap_mib = std::min(first_bucket_mib, cap);
    c.partition = BucketsByCap(in.gradients, ddp::MiBToBytes(c.first_cap_mib), ddp::MiBToBytes(cap));
    absl::StatusOr<StepPrediction> prediction = PredictStep(in, curve, levers, c.partition);
    if (!prediction.ok()) return prediction.status();
    c.prediction = *std::move(prediction);
    sweep.push_back(std::move(c));
  }
  return sweep;
}

size_t FastestCap(const std::vector<CapPrediction>& sweep) {
  size_t best = 0;
  for (size_t i = 1; i < sweep.size(); ++i) {
    if (sweep[i].prediction.step_ms < sweep[best].prediction.step_ms) best = i;
  }
  return best;
}

}  // namespace ddplab::tune
