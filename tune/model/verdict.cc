#include "tune/model/verdict.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddplab::tune {
namespace {

absl::Status CheckFraction(const char* name, double value) {
  if (std::isfinite(value) && value >= 0 && value < 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("verdict option ", name, " is ", value, "; it must be in [0, 1)"));
}

// The judged buckets' predicted step with the wire's bytes scaled by `scale`: the best
// partition found again, or the buckets given.
absl::StatusOr<double> StepWithWireScaled(const StepInputs& in, const CostCurve& curve, Levers levers, double scale,
                                          const VerdictOptions& options) {
  levers.wire_factor *= scale;
  if (options.buckets) {
    absl::StatusOr<StepPrediction> p = PredictStep(in, curve, levers, *options.buckets);
    if (!p.ok()) return p.status();
    return p->step_ms + options.other_ms;
  }
  absl::StatusOr<BestPartition> best = FindBestPartition(in, curve, levers);
  if (!best.ok()) return best.status();
  return best->prediction.step_ms + options.other_ms;
}

// "12.3% less" or "4.5% more": a change in a step, signed by its word.
std::string LessOrMore(double fraction) {
  return absl::StrFormat("%.1f%% %s", 100 * std::abs(fraction), fraction >= 0 ? "less" : "more");
}

std::string BoundSentence(const Verdict& v, const VerdictOptions& options) {
  const int n = v.best.partition.buckets();
  const std::string buckets =
      options.buckets ? absl::StrFormat("with %s (%d bucket%s)", options.buckets_name, n, n == 1 ? "" : "s")
                      : absl::StrFormat("with the best partition (%d bucket%s)", n, n == 1 ? "" : "s");
  const std::string cost =
      absl::StrFormat("%s, communication adds %.3g ms (%.1f%% of the predicted %.3g ms step)", buckets, v.overhead_ms,
                      100 * v.overhead_fraction, v.step_ms);
  switch (v.bound) {
    case Boundedness::kCompute:
      return absl::StrCat("Compute-bound: ", cost, "; the collectives hide behind backward.");
    case Boundedness::kLatency:
      return absl::StrFormat(
          "Latency-bound: %s, and latency (%s per all-reduce) is %.0f%% of the collectives' time, so fewer "
          "all-reduces help more than fewer bytes.",
          cost, FormatMicros(v.line.alpha_us), 100 * v.latency_share);
    case Boundedness::kBandwidth:
      return absl::StrFormat(
          "Bandwidth-bound: %s, and bytes (at %.3g GB/s) are %.0f%% of the collectives' time, so fewer bytes on "
          "the wire help.",
          cost, v.line.BandwidthGBps(), 100 * (1 - v.latency_share));
  }
  return "";
}

std::string CompressionSentence(const Verdict& v, const VerdictOptions& options) {
  const double step = v.step_ms;
  const double gain = step > 0 ? (step - v.quarter_bytes_step_ms) / step : 0;
  const std::string numbers =
      absl::StrFormat("a quarter of the bytes on the wire would take the step from %.3g to %.3g ms (%s; "
                      "half the bytes: %.3g ms)",
                      step, v.quarter_bytes_step_ms, LessOrMore(gain), v.half_bytes_step_ms);
  if (v.compression_can_pay) {
    return absl::StrCat("Compression can pay: ", numbers, ", before the codec's own compute.");
  }
  std::string why;
  switch (v.bound) {
    case Boundedness::kCompute:
      why = "communication already hides behind backward";
      break;
    case Boundedness::kLatency:
      why = "the collectives' time is mostly latency, which fewer bytes do not remove";
      break;
    case Boundedness::kBandwidth:
      why = "too little of the bytes' time is exposed";
      break;
  }
  return absl::StrFormat("Compression cannot pay here: %s; %s, under the %.0f%% worth a codec.", why, numbers,
                         100 * options.compression_gain_fraction);
}

}  // namespace

absl::string_view BoundednessName(Boundedness b) {
  switch (b) {
    case Boundedness::kCompute:
      return "compute-bound";
    case Boundedness::kLatency:
      return "latency-bound";
    case Boundedness::kBandwidth:
      return "bandwidth-bound";
  }
  return "unknown";
}

absl::StatusOr<Verdict> Judge(const StepInputs& in, const CostCurve& curve, const Levers& levers,
                              const VerdictOptions& options) {
  for (absl::Status s : {CheckFraction("compute_bound_fraction", options.compute_bound_fraction),
                         CheckFraction("compression_gain_fraction", options.compression_gain_fraction)}) {
    if (!s.ok()) return s;
  }
  Verdict v;
  if (options.buckets) {
    absl::StatusOr<StepPrediction> given = PredictStep(in, curve, levers, *options.buckets);
    if (!given.ok()) return given.status();
    v.best.partition = *options.buckets;
    v.best.prediction = *std::move(given);
  } else {
    absl::StatusOr<BestPartition> best = FindBestPartition(in, curve, levers);
    if (!best.ok()) return best.status();
    v.best = *std::move(best);
  }
  const StepPrediction& p = v.best.prediction;
  v.step_ms = p.step_ms + options.other_ms;
  v.overhead_ms = p.exposed_ms + p.slowdown_ms;
  v.overhead_fraction = v.step_ms > 0 ? v.overhead_ms / v.step_ms : 0;
  v.line = curve.Fit();
  double wire_bytes = 0;
  for (const Gradient& g : in.gradients) wire_bytes += static_cast<double>(g.bytes) * levers.wire_factor;
  const double latency = static_cast<double>(v.best.partition.buckets()) * v.line.alpha_us;
  const double bandwidth = v.line.beta_us_per_byte * wire_bytes;
  v.latency_share = latency + bandwidth > 0 ? latency / (latency + bandwidth) : 0;
  if (v.overhead_fraction < options.compute_bound_fraction) {
    v.bound = Boundedness::kCompute;
  } else {
    v.bound = v.latency_share > 0.5 ? Boundedness::kLatency : Boundedness::kBandwidth;
  }
  absl::StatusOr<double> half = StepWithWireScaled(in, curve, levers, 0.5, options);
  if (!half.ok()) return half.status();
  absl::StatusOr<double> quarter = StepWithWireScaled(in, curve, levers, 0.25, options);
  if (!quarter.ok()) return quarter.status();
  v.half_bytes_step_ms = *half;
  v.quarter_bytes_step_ms = *quarter;
  const double gain = v.step_ms > 0 ? (v.step_ms - *quarter) / v.step_ms : 0;
  v.compression_can_pay = gain >= options.compression_gain_fraction && gain > 0;
  v.sentence = absl::StrCat(BoundSentence(v, options), " ", CompressionSentence(v, options));
  return v;
}

std::string FormatMicros(double us) {
  return us < 1000 ? absl::StrFormat("%.3g us", us) : absl::StrFormat("%.3g ms", us / 1000);
}

}  // namespace ddplab::tune
