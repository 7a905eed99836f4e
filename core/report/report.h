// The suite report: what each lever bought on this machine, with its noise, as one
// message (ddplab.v1.SuiteReport, proto/ddplab/v1/report.proto) written as report.json
// through protobuf's JSON, and drawn from it as report.md, report.csv and report.html;
// with a recommendation that names a winner only when it is ahead by more than the noise
// and gives it as PyTorch code.
//
//   std::vector<ddplab::v1::RunResult> runs = ...;   // one per completed experiment
//   ddplab::v1::SuiteReport report = ddplab::MakeReport(runs, machine);
//   std::cout << ddplab::FormatMarkdown(report);
//   ddplab::WriteReport(report, "ddplab_results/seed_study");  // report.{md,json,csv,html}

#ifndef DDPLAB_CORE_REPORT_REPORT_H_
#define DDPLAB_CORE_REPORT_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ddplab/v1/report.pb.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab {

// The median of `values` (not empty).
double Median(std::vector<double> values);

// The median steps/s over a result's repetitions (its own figure if it records none).
double MedianStepsPerSecond(const v1::RunResult& r);

// What a study adds to the report (suite/study.h): its decision on each row, made before
// the recommendations are (they may read it), and what it says after them. The report
// knows no study by name; the suite hands it those registered.
class ReportContribution {
 public:
  virtual ~ReportContribution() = default;
  // `runs`: the results the rows were made from, in the rows' order (not the convergence
  // check's runs). May set fields of the rows and add a section (SuiteReport.sections).
  virtual void DecideRows(const std::vector<v1::RunResult>& /*runs*/, v1::SuiteReport& /*report*/) const {}
  // Once every recommendation is made: may add to their words.
  virtual void AddToRecommendations(v1::SuiteReport& /*report*/) const {}
};

// Rows in the order given, and the recommendations. Each row's single-process baseline is
// SingleProcessRun(runs, &row's run): the one-process run whose steps ran as the row's
// did; "naive" is the run named naive_ddp (or naive_ddp_<suffix>) on the same processes
// and transport, preferring one whose steps ran as the row's did. Runs of
// the convergence check (RunResult.convergence) are not rows: they give the lossy rows
// their verdicts. Each of `studies` decides on the rows in turn, before the
// recommendations.
v1::SuiteReport MakeReport(const std::vector<v1::RunResult>& runs, const v1::Machine& machine = {},
                           const std::vector<const ReportContribution*>& studies = {});

// A result's repetitions, or the result itself as its one repetition.
std::vector<v1::Repetition> RepetitionsOf(const v1::RunResult& r);

// The rows' baseline among `runs`: the first run of one process without the engine, or null.
// Given `like`, the first such run whose steps ran as `like`'s did (the same
// RunResult.step_runner: a row whose step is one CUDA graph is measured against one GPU's
// graph), and the first such run where none did.
const v1::RunResult* SingleProcessRun(const std::vector<v1::RunResult>& runs, const v1::RunResult* like = nullptr);

// The machine as one line: "2x NVIDIA H200 (NV18), driver 580.159.04, CUDA 13.0, ...".
std::string FormatMachine(const v1::Machine& machine);

// The table (medians, with [min-max] over repetitions), then the recommendations.
std::string FormatMarkdown(const v1::SuiteReport& report);
// One row per run, numbers as plain numbers and missing values as empty cells.
std::string FormatCsv(const v1::SuiteReport& report);
// protobuf's JSON of the message.
std::string FormatJson(const v1::SuiteReport& report);

// The recommendations as report.md prints them.
std::string FormatRecommendations(const v1::SuiteReport& report);

// Writes report.md, report.json, report.csv and report.html into `directory`: every one
// whole, or none replaced.
absl::Status WriteReport(const v1::SuiteReport& report, const std::string& directory);


namespace internal_report {
// The recommendation over `rows` (runs of several processes on one transport); `on_cpus`:
// in the words of processes, not GPUs.
v1::Recommendation RecommendAmong(const std::vector<const v1::ReportRow*>& rows, const std::string& transport,
                                  bool on_cpus = false);
// The recommendation's last sentence, once the studies have added theirs: what of the
// recommended row's gain has no PyTorch form (Recommendation.ddplab_only).
void SayDdplabOnly(v1::Recommendation& rec);
// Each lossy row's verdict from the convergence check's runs `checks` (report_convergence.cc).
void AddConvergenceVerdicts(const std::vector<const v1::RunResult*>& checks, v1::SuiteReport& report);
// The plugin builds `runs` used, once each (report_plugins.cc); and report.md's lines on
// them: where each came from, its version and status.
void AddPluginBuilds(const std::vector<v1::RunResult>& runs, v1::SuiteReport& report);
std::string FormatPlugins(const v1::SuiteReport& report);
}  // namespace internal_report

}  // namespace ddplab

#endif  // DDPLAB_CORE_REPORT_REPORT_H_
