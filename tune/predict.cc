#include "tune/predict.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/text_format.h"

namespace ddplab::tune {

absl::StatusOr<StepInputs> InputsFromResult(const v1::RunResult& r) {
  if (r.gradient_ready_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the result of \"", r.experiment(), "\" has no gradient ready times: they are recorded by runs with the "
        "engine (several processes, or distributed.force_engine)"));
  }
  StepInputs in;
  in.forward_ms = r.phases().forward_ms();
  in.optimizer_ms = r.phases().optimizer_ms();
  in.backward_ms = r.phases().backward_ms();
  for (const v1::GradientReady& g : r.gradient_ready()) {
    in.gradients.push_back({std::max(0.0, g.ready_ms()), g.bytes()});
    in.backward_ms = std::max(in.backward_ms, g.ready_ms());
  }
  return in;
}

v1::Experiment WithCap(const v1::Experiment& e, double cap, const std::string& name, const ExperimentSchema& schema) {
  v1::Experiment out = e;
  out.set_name(name);
  out.clear_plugin();
  *out.add_plugin() = CapEntry(cap, schema);
  for (const v1::Plugin& entry : e.plugin()) {
    if (entry.name() != kBucketSizing && entry.name() != kNoCommunication) *out.add_plugin() = entry;
  }
  return out;
}

std::string TunedExperimentText(const v1::Experiment& ran, double cap, const std::string& why,
                                const ExperimentSchema& schema) {
  v1::Experiment e = WithCap(ran, cap, absl::StrCat(ran.name(), "_tuned"), schema);
  e.set_description(why);
  e.clear_output();  // where results go is the command line's
  e.mutable_steps()->clear_repetitions();
  return absl::StrCat("# proto-message: ddplab.v1.Experiment\n", schema.Print(e));
}

absl::StatusOr<CostCurve> CurveFromResult(const v1::RunResult& r, const std::string& type) {
  std::vector<CostPoint> points;
  for (const v1::AllReduceRow& row : r.allreduce_sweep()) {
    if ((row.type().empty() ? "float" : row.type()) == type) {
      points.push_back({static_cast<double>(row.bytes()), row.time_us()});
    }
  }
  absl::StatusOr<CostCurve> curve = CostCurve::FromPoints(std::move(points));
  if (!curve.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the ", type, " all-reduce sweep of \"", r.experiment(), "\": ",
                                                   curve.status().message()));
  }
  return curve;
}

absl::StatusOr<Prediction> Predict(const v1::RunResult& r, const CostCurve& curve, const PredictOptions& options) {
  absl::StatusOr<StepInputs> in = InputsFromResult(r);
  if (!in.ok()) return in.status();
  Prediction p;
  absl::StatusOr<std::vector<CapPrediction>> caps = SweepBucketCaps(*in, curve, options.levers, options.caps_mib);
  if (!caps.ok()) return caps.status();
  if (caps->empty()) return absl::InvalidArgumentError("no bucket_cap_mb to predict");
  p.caps = *std::move(caps);
  p.fastest = FastestCap(p.caps);
  absl::StatusOr<Verdict> verdict = Judge(*in, curve, options.levers);
  if (!verdict.ok()) return verdict.status();
  p.verdict = *std::move(verdict);
  const double cap = p.caps[p.fastest].cap_mib;
  p.experiment_lines = absl::StrCat("plugin { bucket_sizing { bucket_cap_mb: ", cap, " } }");
  p.pytorch = absl::StrCat("model = DDP(model, device_ids=[local_rank], bucket_cap_mb=", cap, ")");
  // The file sets bucket_sizing's cap: only where the plugins found have it.
  if (options.schema != nullptr && CanSetCaps(*options.schema).ok()) {
    p.experiment_textproto = TunedExperimentText(
        r.resolved(), cap, absl::StrCat(r.experiment(), " with the bucket_cap_mb //tune:predict chose"), *options.schema);
  }
  return p;
}

std::string FormatPrediction(const Prediction& p) {
  std::string out = "| bucket_cap_mb | buckets | predicted step ms | exposed ms | communication ms |\n"
                    "| ---: | ---: | ---: | ---: | ---: |\n";
  for (size_t i = 0; i < p.caps.size(); ++i) {
    const CapPrediction& c = p.caps[i];
    absl::StrAppendFormat(&out, "| %g%s | %d | %.2f | %.2f | %.2f |\n", c.cap_mib, i == p.fastest ? " (fastest)" : "",
                          c.partition.buckets(), c.prediction.step_ms, c.prediction.exposed_ms,
                          c.prediction.communication_ms);
  }
  absl::StrAppend(&out, "\n", p.verdict.sentence, "\n\nIn an experiment:\n  ",
                  p.experiment_lines, "\nIn PyTorch:\n  ", p.pytorch, "\n");
  return out;
}

}  // namespace ddplab::tune
