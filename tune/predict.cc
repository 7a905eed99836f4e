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

namespace {

// The name of the plugin an entry configures (the one field set besides `path`).
std::string PluginName(const v1::Plugin& entry) {
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  entry.GetReflection()->ListFields(entry, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->name() != "path") return f->name();
  }
  return "";
}

// `ran` with bucket_cap_mb `cap` in place of its bucket sizing, and communicating.
std::string TunedExperiment(const v1::Experiment& ran, double cap) {
  v1::Experiment e = ran;
  e.set_name(absl::StrCat(ran.name(), "_tuned"));
  e.set_description(absl::StrCat(ran.name(), " with the bucket_cap_mb //tune:predict chose"));
  e.clear_output();  // where results go is the command line's
  e.clear_plugin();
  google::protobuf::TextFormat::ParseFromString(absl::StrCat("bucket_sizing { bucket_cap_mb: ", cap, " }"),
                                                e.add_plugin());
  for (const v1::Plugin& entry : ran.plugin()) {
    const std::string name = PluginName(entry);
    if (name != "bucket_sizing" && name != "no_communication") *e.add_plugin() = entry;
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(e, &text);
  return absl::StrCat("# proto-message: ddplab.v1.Experiment\n", text);
}

}  // namespace

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
  p.experiment_textproto = TunedExperiment(r.resolved(), cap);
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
