#include "core/report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/report/report_html.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/report/report_html.h"
#include "core/record/run_files.h"
#include "google/protobuf/util/json_util.h"

namespace ddplab {

// A result's repetitions, or the result itself as its one repetition.
std::vector<v1::Repetition> RepetitionsOf(const v1::RunResult& r) {
  if (r.repetitions_size() > 0) return {r.repetitions().begin(), r.repetitions().end()};
  v1::Repetition one;
  one.set_steps_per_s(r.steps_per_s());
  one.set_exposed_comm_ms(r.exposed_comm_ms());
  *one.mutable_phases() = r.phases();
  one.set_peak_memory_gib(r.peak_memory_gib());
  return {one};
}

namespace {

v1::Spread SpreadOf(const std::vector<double>& values) {
  v1::Spread s;
  if (values.empty()) return s;
  s.set_median(Median(values));
  s.set_min(*std::min_element(values.begin(), values.end()));
  s.set_max(*std::max_element(values.begin(), values.end()));
  s.set_count(static_cast<uint32_t>(values.size()));
  return s;
}


// The median over a result's repetitions of one figure.
template <typename F>
double MedianOf(const v1::RunResult& r, F figure) {
  std::vector<double> values;
  for (const v1::Repetition& rep : RepetitionsOf(r)) values.push_back(figure(rep));
  return Median(values);
}

// The experiment's name without the suffix a transport sweep gave it.
std::string Configuration(const v1::RunResult& r) {
  const std::string suffix = absl::StrCat("_", absl::AsciiStrToLower(r.transport()));
  std::string name = r.experiment();
  if (r.world_size() > 1 && absl::EndsWith(name, suffix) && name.size() > suffix.size()) {
    name.resize(name.size() - suffix.size());
  }
  return name;
}

// Where the step of `r` went, against the single-process run `single` (if any, and only
// where its steps ran as `r`'s did: phases timed as one are not a step's parts).
v1::StepParts PartsOf(const v1::RunResult& r, const v1::RunResult* single) {
  auto phase = [](const v1::RunResult& of, double (v1::PhaseTimes::*f)() const) {
    return MedianOf(of, [f](const v1::Repetition& rep) { return (rep.phases().*f)(); });
  };
  v1::StepParts p;
  const double step = phase(r, &v1::PhaseTimes::step_ms);
  const double exposed = MedianOf(r, [](const v1::Repetition& rep) { return rep.exposed_comm_ms(); });
  const double forward = phase(r, &v1::PhaseTimes::forward_ms);
  const double backward = std::max(0.0, phase(r, &v1::PhaseTimes::backward_ms) - exposed);
  double forward_single = forward, backward_single = backward;
  if (single != nullptr && single != &r && single->step_runner() == r.step_runner()) {
    forward_single = std::min(forward, phase(*single, &v1::PhaseTimes::forward_ms));
    backward_single = std::min(backward, phase(*single, &v1::PhaseTimes::backward_ms));
  }
  p.set_forward_ms(forward_single);
  p.set_backward_single_ms(backward_single);
  p.set_compute_slowdown_ms((forward - forward_single) + (backward - backward_single));
  p.set_exposed_comm_ms(exposed);
  p.set_optimizer_ms(phase(r, &v1::PhaseTimes::optimizer_ms));
  p.set_other_ms(std::max(0.0, step - forward - backward - exposed - p.optimizer_ms()));
  p.set_step_ms(step);
  return p;
}

// Naive DDP on the same processes and transport ("naive_ddp", or "naive_ddp_<suffix>"),
// one whose steps ran as `r`'s did if there is one.
const v1::RunResult* NaiveFor(const v1::RunResult& r, const std::vector<v1::RunResult>& runs) {
  const v1::RunResult* any = nullptr;
  for (const v1::RunResult& n : runs) {
    if ((n.experiment() == "naive_ddp" || absl::StartsWith(n.experiment(), "naive_ddp_")) &&
        n.world_size() == r.world_size() && n.transport() == r.transport()) {
      if (n.step_runner() == r.step_runner()) return &n;
      if (any == nullptr) any = &n;
    }
  }
  return any;
}

v1::ReportRow RowOf(const v1::RunResult& r, const v1::RunResult* single, const v1::RunResult* naive) {
  v1::ReportRow row;
  row.set_experiment(r.experiment());
  row.set_configuration(Configuration(r));
  row.set_origin(r.origin());
  row.set_description(r.resolved().description());
  row.set_gpus(r.world_size());
  row.set_transport(r.world_size() > 1 ? r.transport() : "");
  if (row.transport() == "TRANSPORT_UNSPECIFIED") row.set_transport("default");
  row.set_nccl_transport(r.nccl_transport());
  row.set_step_runner(r.step_runner());
  std::vector<double> rates;
  for (const v1::Repetition& rep : RepetitionsOf(r)) rates.push_back(rep.steps_per_s());
  *row.mutable_steps_per_s() = SpreadOf(rates);
  if (single != nullptr && MedianStepsPerSecond(*single) > 0) {
    std::vector<double> ratios;
    for (double rate : rates) ratios.push_back(rate / MedianStepsPerSecond(*single));
    *row.mutable_vs_single() = SpreadOf(ratios);
  }
  if (naive != nullptr && r.engine() && MedianStepsPerSecond(*naive) > 0) {
    row.set_vs_naive(row.steps_per_s().median() / MedianStepsPerSecond(*naive));
  }
  row.set_tflops_per_gpu(r.tflops_per_gpu());
  row.set_precision(r.precision());
  if (r.has_peak_fraction()) row.set_peak_fraction(r.peak_fraction());
  row.set_exposed_comm_ms(MedianOf(r, [](const v1::Repetition& rep) { return rep.exposed_comm_ms(); }));
  int largest = -1;
  for (int b = 0; b < r.bucket_busbw_gbps_size() && b < r.bucket_bytes_size(); ++b) {
    if (largest < 0 || r.bucket_bytes(b) > r.bucket_bytes(largest)) largest = b;
  }
  if (largest >= 0) row.set_busbw_gbps(r.bucket_busbw_gbps(largest));
  row.set_peak_memory_gib(r.peak_memory_gib());
  if (r.gradient_error_samples() > 0) row.set_gradient_error(r.gradient_error());
  if (r.gradient_error_samples() > 0 && r.effective_error_size() > 0) row.set_gradient_cosine(r.gradient_cosine());
  if (r.effective_error_size() > 1) {  // the longest window, beside one step's
    row.set_effective_error(r.effective_error(r.effective_error_size() - 1).error());
    row.set_effective_error_steps(r.effective_error(r.effective_error_size() - 1).steps());
  }
  row.set_diagnostic(r.diagnostic());
  row.set_lossy(r.lossy() || r.gradient_error_samples() > 0);
  *row.mutable_parts() = PartsOf(r, single);
  *row.mutable_plugins() = r.plugins();
  row.set_pytorch(r.pytorch());
  *row.mutable_ddplab_only() = r.ddplab_only();
  return row;
}

// `v` with `digits` after the point (in scientific notation with `scientific`); `none`
// when there is no value.
std::string Fixed(std::optional<double> v, int digits, bool scientific = false, const char* none = "-") {
  if (!v) return none;
  return scientific ? absl::StrFormat("%.*e", digits, *v) : absl::StrFormat("%.*f", digits, *v);
}

constexpr int kColumns = 11;
// The columns, in a machine's words: GPUs where there are, processes on CPUs.
std::vector<std::string> Headers(const v1::Machine& m) {
  const bool gpus = !OnCpus(m);
  return {"experiment", gpus ? "GPUs" : "processes", "transport", "steps/s", gpus ? "vs 1 GPU" : "vs 1 process",
          "vs naive", "exposed comm ms", "busbw GB/s", "peak GiB", "grad error", gpus ? "TFLOP/s/GPU (of peak)" : "TFLOP/s"};
}

// A cell of report.md: medians with [min-max] and the count over repetitions.
std::string MarkdownCell(const v1::ReportRow& r, int column) {
  const v1::Spread& s = r.steps_per_s();
  switch (column) {
    case 0: return r.experiment();
    case 1: return absl::StrCat(r.gpus());
    case 2: {
      const std::string transport = r.transport().empty() ? "-" : r.transport();
      return r.nccl_transport().empty() ? transport : absl::StrCat(transport, " (", r.nccl_transport(), ")");
    }
    case 3:
      return s.count() > 1 ? absl::StrFormat("%.3f [%.3f-%.3f] ×%d", s.median(), s.min(), s.max(), s.count())
                           : absl::StrFormat("%.3f", s.median());
    case 4: return r.has_vs_single() ? Fixed(r.vs_single().median(), 3) : "-";
    case 5: return Fixed(r.has_vs_naive() ? std::optional<double>(r.vs_naive()) : std::nullopt, 3);
    case 6: return r.step_runner().empty() ? absl::StrFormat("%.2f", r.exposed_comm_ms()) : "-";  // a replay: unmeasured
    case 7: return Fixed(r.has_busbw_gbps() ? std::optional<double>(r.busbw_gbps()) : std::nullopt, 1);
    case 8: return r.peak_memory_gib() > 0 ? absl::StrFormat("%.2f", r.peak_memory_gib()) : "-";  // CPUs: unmeasured
    case 9:
      if (!r.has_gradient_error() && r.lossy()) return "not sampled";
      return Fixed(r.has_gradient_error() ? std::optional<double>(r.gradient_error()) : std::nullopt, 2, true) +
             (r.has_effective_error()
                  ? absl::StrFormat(" (%d-step %.2e)", r.effective_error_steps(), r.effective_error())
                  : "");
    case 10:
      if (r.tflops_per_gpu() <= 0) return "-";
      return r.has_peak_fraction() ? absl::StrFormat("%.3g (%.1f%%)", r.tflops_per_gpu(), 100 * r.peak_fraction())
                                   : absl::StrFormat("%.3g", r.tflops_per_gpu());
  }
  return "";
}

// A number as CSV holds it: plain digits (NaN and infinities as Python's float() reads
// them), a missing value as an empty cell.
std::string CsvNumber(std::optional<double> v) {
  if (!v) return "";
  if (std::isnan(*v)) return "nan";
  if (std::isinf(*v)) return *v > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.6g", *v);
}

std::string CsvText(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\"", "\"\""}}), "\"");
}

}  // namespace

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double MedianStepsPerSecond(const v1::RunResult& r) {
  return MedianOf(r, [](const v1::Repetition& rep) { return rep.steps_per_s(); });
}

const v1::RunResult* SingleProcessRun(const std::vector<v1::RunResult>& runs, const v1::RunResult* like) {
  const v1::RunResult* first = nullptr;
  for (const v1::RunResult& r : runs) {
    if (r.world_size() != 1 || r.engine() || r.has_convergence()) continue;
    if (like == nullptr || r.step_runner() == like->step_runner()) return &r;
    if (first == nullptr) first = &r;
  }
  return first;
}

v1::SuiteReport MakeReport(const std::vector<v1::RunResult>& all, const v1::Machine& machine,
                           const std::vector<const ReportContribution*>& studies) {
  v1::SuiteReport report;
  *report.mutable_machine() = machine;
  // The convergence check's runs give verdicts, not rows.
  std::vector<v1::RunResult> runs;
  std::vector<const v1::RunResult*> checks;
  for (const v1::RunResult& r : all) {
    if (r.has_convergence()) {
      checks.push_back(&r);
    } else {
      runs.push_back(r);
    }
  }
  for (const v1::RunResult& r : runs) {
    if (report.suite().empty()) report.set_suite(r.suite());
    if (r.date() > report.date()) report.set_date(r.date());
    if (!r.date().empty() && (report.first_date().empty() || r.date() < report.first_date())) {
      report.set_first_date(r.date());
    }
    report.set_repetitions(std::max<uint32_t>(report.repetitions(), std::max(1, r.repetitions_size())));
  }
  for (const v1::RunResult& r : runs) *report.add_rows() = RowOf(r, SingleProcessRun(runs, &r), NaiveFor(r, runs));
  internal_report::AddPluginBuilds(runs, report);
  for (const ReportContribution* study : studies) study->DecideRows(runs, report);
  internal_report::AddConvergenceVerdicts(checks, report);
  // Runs of several processes by transport, in the order they ran; not the diagnostic
  // runs that exchange nothing.
  std::vector<std::pair<std::string, std::vector<const v1::ReportRow*>>> groups;
  for (const v1::ReportRow& r : report.rows()) {
    if (r.gpus() <= 1 || r.diagnostic()) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == r.transport(); });
    if (it == groups.end()) it = groups.insert(groups.end(), {r.transport(), {}});
    it->second.push_back(&r);
  }
  for (const auto& [transport, rows] : groups) {
    *report.add_recommendations() = internal_report::RecommendAmong(rows, transport, OnCpus(machine));
  }
  for (const ReportContribution* study : studies) study->AddToRecommendations(report);
  for (v1::Recommendation& rec : *report.mutable_recommendations()) internal_report::SayDdplabOnly(rec);
  return report;
}

std::string FormatMachine(const v1::Machine& m) {
  std::vector<std::string> parts;
  if (m.device_count() > 0) {
    parts.push_back(absl::StrCat(m.device_count(), "x ", m.device(),
                                 m.topology().empty() ? "" : absl::StrCat(" (", m.topology(), ")")));
  } else if (!m.cpu().empty()) {
    parts.push_back(m.cpu());
  }
  if (!m.driver().empty()) parts.push_back(absl::StrCat("driver ", m.driver()));
  if (!m.cuda_runtime().empty()) parts.push_back(absl::StrCat("CUDA ", m.cuda_runtime()));
  if (!m.nccl_version().empty()) parts.push_back(absl::StrCat("NCCL ", m.nccl_version()));
  if (!m.torch_version().empty()) parts.push_back(absl::StrCat("LibTorch ", m.torch_version()));
  if (m.nodes() > 1) parts.push_back(absl::StrCat(m.nodes(), " nodes"));
  return absl::StrJoin(parts, ", ");
}

std::string FormatMarkdown(const v1::SuiteReport& report) {
  std::string out;
  if (const std::string machine = FormatMachine(report.machine()); !machine.empty()) {
    absl::StrAppend(&out, "Machine: ", machine, "\n");
  }
  if (OnCpus(report.machine())) absl::StrAppend(&out, kCpuNote, "\n");
  if (!report.date().empty()) {
    absl::StrAppend(&out, "Date: ", report.date(),
                    report.first_date().empty() || report.first_date() == report.date()
                        ? ""
                        : absl::StrCat(" (runs measured from ", report.first_date(), ")"),
                    "\n");
  }
  absl::StrAppend(&out, internal_report::FormatPlugins(report));
  absl::StrAppend(&out, "Repetitions: ",
                  report.repetitions() > 1
                      ? absl::StrCat("up to ", report.repetitions(),
                                     " (steps/s as median [min-max] ×repetitions; a run clear of its transport's "
                                     "fastest, and of its fastest exact run, after its first is not repeated)")
                      : "1",
                  "\n\n");
  absl::StrAppend(&out, "| ", absl::StrJoin(Headers(report.machine()), " | "), " |\n|");
  for (int c = 0; c < kColumns; ++c) absl::StrAppend(&out, c == 0 ? " --- |" : " ---: |");
  absl::StrAppend(&out, "\n");
  for (const v1::ReportRow& r : report.rows()) {
    std::vector<std::string> cells;
    for (int c = 0; c < kColumns; ++c) cells.push_back(MarkdownCell(r, c));
    absl::StrAppend(&out, "| ", absl::StrJoin(cells, " | "), " |\n");
  }
  for (const v1::ReportSection& section : report.sections()) {  // the studies' (suite/study.h)
    if (section.lines().empty()) continue;
    absl::StrAppend(&out, "\n", section.heading(), ":\n");
    for (const std::string& line : section.lines()) absl::StrAppend(&out, "- ", line, "\n");
  }
  if (const std::string heading = internal_report::ConvergenceHeading(report); !heading.empty()) {
    absl::StrAppend(&out, "\n", heading, ":\n");
    for (const std::string& line : internal_report::ConvergenceLines(report)) absl::StrAppend(&out, "- ", line, "\n");
  }
  if (report.failed_size() > 0) {
    absl::StrAppend(&out, "\n", report.rows_size() == 0 ? "No run completed; every run failed:" : "Failed runs:",
                    "\n");
    for (const v1::FailedRun& f : report.failed()) absl::StrAppend(&out, "- ", f.experiment(), ": ", f.reason(), "\n");
  }
  // A tuning's answer is its recommendation.
  absl::StrAppend(&out, "\n", report.has_tuning() ? FormatTuning(report.tuning()) : FormatRecommendations(report));
  return out;
}

std::string FormatCsv(const v1::SuiteReport& report) {
  // On CPUs the columns speak of processes, and no memory is measured (an empty cell).
  const bool cpus = OnCpus(report.machine());
  const std::string unit = cpus ? "process" : "gpu";
  std::string out = absl::StrCat(
      "experiment,configuration,", cpus ? "processes" : "gpus",
      ",transport,nccl_transport,steps_per_s,steps_per_s_min,steps_per_s_max,repetitions,vs_single_", unit,
      ",vs_naive,exposed_comm_ms,compute_slowdown_ms,busbw_gbps,peak_memory_gib,gradient_error,tflops_per_", unit,
      ",diagnostic,precision,peak_fraction\n");
  for (const v1::ReportRow& r : report.rows()) {
    const auto opt = [](bool has, double v) { return has ? std::optional<double>(v) : std::nullopt; };
    const std::vector<std::string> cells = {
        CsvText(r.experiment()), CsvText(r.configuration()), absl::StrCat(r.gpus()), CsvText(r.transport()),
        CsvText(r.nccl_transport()), CsvNumber(r.steps_per_s().median()), CsvNumber(r.steps_per_s().min()),
        CsvNumber(r.steps_per_s().max()), absl::StrCat(r.steps_per_s().count()),
        CsvNumber(opt(r.has_vs_single(), r.vs_single().median())), CsvNumber(opt(r.has_vs_naive(), r.vs_naive())),
        // A replay's (step_runner) phases are one: no exposed wait, no slowed compute apart.
        CsvNumber(opt(r.step_runner().empty(), r.exposed_comm_ms())),
        CsvNumber(opt(r.step_runner().empty(), r.parts().compute_slowdown_ms())),
        CsvNumber(opt(r.has_busbw_gbps(), r.busbw_gbps())),
        CsvNumber(opt(!cpus || r.peak_memory_gib() > 0, r.peak_memory_gib())),
        CsvNumber(opt(r.has_gradient_error(), r.gradient_error())), CsvNumber(r.tflops_per_gpu()),
        r.diagnostic() ? "1" : "0", CsvText(r.precision()),
        CsvNumber(opt(r.has_peak_fraction(), r.peak_fraction()))};
    absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
  }
  return out;
}

std::string FormatJson(const v1::SuiteReport& report) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(report, &out, options).ok()) return "{}\n";
  return out;
}

namespace {

// What a recommendation line opens with: the run recommended, where it is not the fastest
// the text then speaks of first (so the line never opens by naming a run it rejects),
// or that none is.
std::string Heading(const v1::Recommendation& r) {
  if (r.recommended().empty()) return "none of these runs. ";
  if (r.recommended() == r.fastest()) return "";
  return absl::StrCat(r.recommended(), ". ");
}

}  // namespace

std::string FormatRecommendations(const v1::SuiteReport& report) {
  if (report.recommendations_size() == 0) {
    return "Recommendation: no run of several processes that communicates completed; nothing to compare.\n";
  }
  if (report.recommendations_size() == 1) {
    const v1::Recommendation& r = report.recommendations(0);
    std::string out = absl::StrCat("Recommendation: ", Heading(r), r.text(), "\n");
    if (!r.pytorch().empty()) absl::StrAppend(&out, "\nIn PyTorch:\n\n```python\n", r.pytorch(), "```\n");
    return out;
  }
  std::string out = "Recommendation, by transport:\n";
  for (const v1::Recommendation& r : report.recommendations()) {
    absl::StrAppend(&out, "- over ", r.transport(), ": ", Heading(r), r.text(), "\n");
    if (!r.pytorch().empty()) absl::StrAppend(&out, "\n```python\n", r.pytorch(), "```\n\n");
  }
  return out;
}

absl::Status WriteReport(const v1::SuiteReport& report, const std::string& directory) {
  const std::pair<const char*, std::string> files[] = {
      {"report.md", absl::StrCat("# ", report.suite(), "\n\n", FormatMarkdown(report))},
      {"report.json", FormatJson(report)},
      {"report.csv", FormatCsv(report)},
      {"report.html", FormatHtml(report)},
  };
  // Every file whole, or none replaced: a report is never half old, half new.
  for (const auto& [name, content] : files) {
    const std::string path = absl::StrCat(directory, "/", name, ".new");
    if (absl::Status s = WriteFileAtomically(path, content); !s.ok()) {
      for (const auto& [written, unused] : files) std::remove(absl::StrCat(directory, "/", written, ".new").c_str());
      return s;
    }
  }
  for (const auto& [name, content] : files) {
    const std::string path = absl::StrCat(directory, "/", name);
    if (std::rename((path + ".new").c_str(), path.c_str()) != 0) {
      return absl::UnavailableError(absl::StrCat("cannot rename ", path, ".new to ", path));
    }
  }
  return absl::OkStatus();
}

}  // namespace ddplab
