// SuiteRunner's report (Finish): every run of the suite that has a result, this
// invocation's and the earlier ones --only left out, the convergence check's, the failed
// runs, and the tuner's answer; printed, and written as report.{md,json,csv,html}.
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/config/convergence.h"
#include "core/report/report.h"
#include "core/run/run_dir.h"
#include "experiments/suite_runner.h"
#include "suite/study.h"

namespace ddplab {

// The rows of the report, and how many of them are earlier results --only left out.
std::vector<v1::RunResult> SuiteRunner::ReportRows(int& earlier, std::vector<std::string>& stale) const {
  std::vector<v1::RunResult> rows;
  for (const PlannedRun& p : plan_.runs) {
    if (plan_.tune) break;  // the tuner's report has its runs only
    if (auto it = results_.find(p.index); it != results_.end()) {
      rows.push_back(it->second);
      continue;
    }
    if (p.selected) continue;
    const v1::Experiment& e = p.run.experiment;
    absl::StatusOr<v1::RunResult> done = ReadResult(e.output().directory(), plan_.suite, e.name());
    if (!done.ok() || !ResultDiffers(*done, e).empty()) continue;
    // Made with another build of a plugin: not beside this invocation's rows.
    if (std::string why = ChangedPluginBuild(*done, host_); !why.empty()) {
      stale.push_back(absl::StrCat(e.name(), ": ", why));
      continue;
    }
    rows.push_back(*done);
    ++earlier;
  }
  // --only leaves the convergence check out: its runs of before keep the verdicts. (A whole
  // suite's check, even one that trained nothing, stands for itself.)
  std::set<std::string> origins;
  const bool only = plan_.selected != static_cast<int>(plan_.runs.size());
  for (const PlannedRun& p : plan_.runs) {
    if (plan_.tune || !plan_.convergence || !only || !origins.insert(p.run.origin).second) continue;
    for (int k = 1; k <= ResolveConvergence(*plan_.convergence).seeds; ++k) {
      absl::StatusOr<v1::RunResult> check = ReadResult(p.run.experiment.output().directory(), plan_.suite,
                                                       absl::StrCat(p.run.origin, "-convergence-", k));
      if (check.ok() && check->convergence().of() == p.run.origin) rows.push_back(*check);
    }
  }
  for (const std::vector<PlannedRun>* more : {&convergence_runs_, &tune_runs_}) {
    for (const PlannedRun& p : *more) {
      auto it = results_.find(p.index);
      // The tuner's probe exchanges nothing: its ready times and sweep are in its own
      // file, not a row to compare.
      if (it != results_.end() && !(p.tuning && it->second.diagnostic())) rows.push_back(it->second);
    }
  }
  return rows;
}

void SuiteRunner::Report() {
  if (results_.empty() && failures_.empty()) return;
  std::string report_dir = plan_.tune ? plan_.tune_dir : "";
  for (const PlannedRun& p : plan_.runs) {
    if (p.selected && report_dir.empty()) report_dir = p.run_dir;
  }
  int earlier = 0;
  std::vector<std::string> stale;
  v1::SuiteReport report = MakeReport(ReportRows(earlier, stale), ReportMachine(in_.device, plan_), RegisteredStudies());
  if (report.suite().empty()) report.set_suite(plan_.tune ? plan_.tune_suite : plan_.suite);
  for (const auto& [name, why] : failures_) {
    v1::FailedRun* f = report.add_failed();
    f->set_experiment(name);
    f->set_reason(why);
  }
  if (tuning_) {
    *report.mutable_tuning() = *tuning_;
    report.clear_recommendations();  // the tuner's answer is the recommendation
    report.set_suite(plan_.tune_suite);
  }
  std::cout << "\n" << FormatMarkdown(report);
  if (absl::Status s = WriteReport(report, report_dir); !s.ok()) {
    std::cerr << "vit_ddp: report not written (the one before, if any, is as it was): " << s.message() << "\n";
    ++unwritten_;
  } else {
    std::cout << "report: " << report_dir << "/report.{md,json,csv,html}";
    if (earlier > 0) std::cout << " (with " << earlier << " earlier result(s) of runs --only left out)";
    std::cout << "\n";
  }
  for (const std::string& why : stale) {
    std::cout << "not in the report, made with other plugins than now (run it again): " << why << "\n";
  }
}

}  // namespace ddplab
