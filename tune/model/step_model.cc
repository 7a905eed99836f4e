#include "tune/model/step_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ddplab::tune {
namespace {

// Maps positions in backward's compute (ms of backward alone) to wall time, given the
// intervals during which a collective is in flight; compute runs at 1 / slow of its
// speed in them. Asked for nondecreasing positions, with each interval added before a
// position past its start is asked for (a bucket's collective starts no earlier than the
// bucket is ready), it walks the intervals once.
class ComputeClock {
 public:
  explicit ComputeClock(double slow) : slow_(slow) {}

  void AddBusy(double start, double end) { busy_.emplace_back(start, end); }

  double WallAt(double position) {
    if (slow_ == 1.0) return position;  // no slowdown: wall time is compute time, exactly
    while (work_ < position) {
      if (next_ == busy_.size()) {
        wall_ += position - work_;
        work_ = position;
        break;
      }
      const auto [start, end] = busy_[next_];
      if (wall_ < start) {  // a gap without collectives: full speed
        if (work_ + (start - wall_) >= position) {
          wall_ += position - work_;
          work_ = position;
          break;
        }
        work_ += start - wall_;
        wall_ = start;
      }
      const double can = (end - wall_) / slow_;  // compute done until the collective ends
      if (work_ + can >= position) {
        wall_ += (position - work_) * slow_;
        work_ = position;
        break;
      }
      work_ += can;
      wall_ = end;
      ++next_;
    }
    return wall_;
  }

 private:
  double slow_;
  std::vector<std::pair<double, double>> busy_;
  size_t next_ = 0;
  double wall_ = 0, work_ = 0;
};

absl::Status CheckTime(const char* name, double ms) {
  if (std::isfinite(ms) && ms >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, " is ", ms, " ms; it must be finite and >= 0"));
}

// The optimizer's part when it runs per bucket (see step_model.h).
double OverlappedOptimizerMs(const StepPrediction& p, double optimizer_ms) {
  double total = 0;
  for (const BucketTiming& b : p.buckets) total += static_cast<double>(b.bytes);
  double done = p.backward_ms;
  for (const BucketTiming& b : p.buckets) {
    const double share = total > 0 ? static_cast<double>(b.bytes) / total : 1.0 / p.buckets.size();
    done = std::max(done, b.end_ms) + optimizer_ms * share;
  }
  return done - std::max(p.backward_ms, p.CommunicationEndMs());
}

}  // namespace

std::string Partition::ToString() const {
  std::string out;
  for (size_t b = 0; b < ends.size(); ++b) absl::StrAppend(&out, b ? " " : "", "[", begin(b), ",", ends[b], ")");
  return out;
}

absl::Status CheckPartition(const Partition& p, size_t n) {
  if (p.ends.empty()) return absl::InvalidArgumentError(absl::StrCat("partition: no buckets for ", n, " gradients"));
  for (size_t b = 0; b < p.ends.size(); ++b) {
    if (p.ends[b] <= p.begin(b)) {
      return absl::InvalidArgumentError(absl::StrCat("partition ", p.ToString(), ": bucket ", b,
                                                     " is empty or ends before it begins"));
    }
  }
  if (p.ends.back() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition ", p.ToString(), ": ends at gradient ", p.ends.back(), ", not at ", n));
  }
  return absl::OkStatus();
}

Partition OneBucket(size_t n) { return Partition{{n}}; }

Partition OneBucketPerGradient(size_t n) {
  Partition p;
  for (size_t i = 1; i <= n; ++i) p.ends.push_back(i);
  return p;
}

absl::Status CheckStepInputs(const StepInputs& in, const Levers& levers) {
  for (absl::Status s : {CheckTime("forward", in.forward_ms), CheckTime("backward", in.backward_ms),
                         CheckTime("optimizer", in.optimizer_ms)}) {
    if (!s.ok()) return s;
  }
  if (in.gradients.empty()) return absl::InvalidArgumentError("no gradients to bucket");
  for (size_t i = 0; i < in.gradients.size(); ++i) {
    const Gradient& g = in.gradients[i];
    if (!std::isfinite(g.ready_ms) || g.ready_ms < 0 || g.ready_ms > in.backward_ms) {
      return absl::InvalidArgumentError(absl::StrCat("gradient ", i, " is ready at ", g.ready_ms,
                                                     " ms, outside backward [0, ", in.backward_ms,
                                                     "] ms; backward's time must cover every gradient"));
    }
    if (g.bytes < 0) return absl::InvalidArgumentError(absl::StrCat("gradient ", i, " has ", g.bytes, " bytes"));
  }
  if (!std::isfinite(levers.wire_factor) || levers.wire_factor <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("wire_factor is ", levers.wire_factor, "; it must be > 0 (1 for float32, 0.5 for bf16)"));
  }
  if (!std::isfinite(levers.overlap_slowdown) || levers.overlap_slowdown < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("overlap_slowdown is ", levers.overlap_slowdown, "; it must be >= 0 (0: no slowdown)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepPrediction> PredictStep(const StepInputs& in, const CostCurve& curve, const Levers& levers,
                                           const Partition& partition) {
  if (absl::Status s = CheckStepInputs(in, levers); !s.ok()) return s;
  if (absl::Status s = CheckPartition(partition, in.gradients.size()); !s.ok()) return s;
  StepPrediction p;
  ComputeClock clock(1.0 + levers.overlap_slowdown);
  double ready_position = 0;  // in backward's compute; the latest of the buckets so far
  double previous_end = 0;
  for (size_t b = 0; b < partition.buckets(); ++b) {
    BucketTiming t;
    t.begin = partition.begin(b);
    t.end = partition.ends[b];
    for (size_t i = t.begin; i < t.end; ++i) {
      t.bytes += in.gradients[i].bytes;
      ready_position = std::max(ready_position, in.gradients[i].ready_ms);
    }
    t.ready_ms = clock.WallAt(ready_position);
    t.start_ms = std::max(t.ready_ms, previous_end);
    const double cost_ms = curve.TimeUs(static_cast<double>(t.bytes) * levers.wire_factor) / 1000.0;
    t.end_ms = t.start_ms + cost_ms;
    clock.AddBusy(t.start_ms, t.end_ms);
    previous_end = t.end_ms;
    p.communication_ms += cost_ms;
    p.buckets.push_back(t);
  }
  p.forward_ms = in.forward_ms;
  p.backward_ms = clock.WallAt(in.backward_ms);
  p.slowdown_ms = p.backward_ms - in.backward_ms;
  p.exposed_ms = std::max(0.0, p.CommunicationEndMs() - p.backward_ms);
  p.optimizer_ms = levers.overlap_optimizer ? OverlappedOptimizerMs(p, in.optimizer_ms) : in.optimizer_ms;
  p.step_ms = p.forward_ms + p.backward_ms + p.exposed_ms + p.optimizer_ms;
  return p;
}

}  // namespace ddplab::tune
