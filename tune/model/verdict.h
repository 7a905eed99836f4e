// What bounds a data-parallel step on this machine, from the step model with the best
// bucket partition (or the buckets given, a cap's): compute (communication hides behind backward), latency (collectives'
// time is mostly their fixed cost per all-reduce) or bandwidth (mostly bytes); and
// whether compressing gradients can pay at all here, from what the model predicts with
// a half and a quarter of the bytes on the wire.
//
//   absl::StatusOr<ddplab::tune::Verdict> v = ddplab::tune::Judge(inputs, curve, levers);
//   if (v.ok()) std::cout << ddplab::tune::BoundednessName(v->bound) << ": " << v->sentence;
//   // "Bandwidth-bound: with the best partition (7 buckets), communication adds ..."
#ifndef DDPLAB_TUNE_MODEL_VERDICT_H_
#define DDPLAB_TUNE_MODEL_VERDICT_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tune/model/cost_curve.h"
#include "tune/model/partition.h"
#include "tune/model/step_model.h"

namespace ddplab::tune {

enum class Boundedness {
  kCompute,    // communication adds under `compute_bound_fraction` of the step
  kLatency,    // otherwise, and alpha is most of the collectives' time
  kBandwidth,  // otherwise, and beta * bytes is most of it
};

// A time given in microseconds, in the unit that reads best: "813 us", "4.08 ms".
std::string FormatMicros(double us);

// "compute-bound", "latency-bound", "bandwidth-bound".
absl::string_view BoundednessName(Boundedness b);

struct VerdictOptions {
  // Compute-bound when communication's cost to the step (time exposed after backward
  // plus backward's slowdown beside collectives) is under this fraction of the step.
  double compute_bound_fraction = 0.05;
  // Compression can pay when a quarter of the bytes on the wire would shorten the
  // predicted step by at least this fraction (before the codec's own compute).
  double compression_gain_fraction = 0.03;
  // Judge these buckets (those a bucket_cap_mb makes), said as `buckets_name`
  // ("bucket_cap_mb 25"), instead of the best partition; none: the best partition.
  std::optional<Partition> buckets;
  std::string buckets_name;
  // Step time the model leaves out (the run's own outside forward, backward and the
  // optimizer), added to every step said, so that they are the steps a tuner predicts.
  double other_ms = 0;
};

struct Verdict {
  Boundedness bound = Boundedness::kCompute;
  bool compression_can_pay = false;
  BestPartition best;            // with the levers as given (or the buckets given)
  double overhead_ms = 0;        // exposed + slowdown with the best partition
  double step_ms = 0;            // the predicted step, other_ms included
  double overhead_fraction = 0;  // of the predicted step
  LatencyBandwidth line;         // fitted to the cost curve
  // alpha's share of the best partition's collectives by the fitted line:
  // buckets * alpha / (buckets * alpha + beta * wire bytes); 0 where both are 0.
  double latency_share = 0;
  double half_bytes_step_ms = 0;     // best partition's step with half the wire bytes
  double quarter_bytes_step_ms = 0;  // and with a quarter
  // Two sentences for people: the bound and why, then whether compression can pay and why.
  std::string sentence;
};

// The verdict for `in` under `levers` (wire_factor the one in use; compression would
// scale it further). Errors where CheckStepInputs fails or the options are out of
// [0, 1).
absl::StatusOr<Verdict> Judge(const StepInputs& in, const CostCurve& curve, const Levers& levers,
                              const VerdictOptions& options = {});

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_MODEL_VERDICT_H_
