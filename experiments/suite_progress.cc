#include "experiments/suite_progress.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/config/convergence.h"

namespace ddplab {

std::vector<ConvergenceCheck> ConvergenceChecks(const Plan& plan, const LossyRun& lossy) {
  std::vector<ConvergenceCheck> checks;
  if (!plan.convergence || plan.tune || plan.selected != static_cast<int>(plan.runs.size())) return checks;
  const std::string& exact = plan.convergence->exact();
  std::set<std::string> checked;  // one run per experiment, the first (a sweep makes several)
  for (const PlannedRun& p : plan.runs) {
    if (p.run.origin == exact && checked.insert(p.run.origin).second) checks.push_back({&p, true});
  }
  for (const PlannedRun& p : plan.runs) {
    if (!p.selected || checked.count(p.run.origin) > 0) continue;
    if (lossy(p) && checked.insert(p.run.origin).second) checks.push_back({&p, false});
  }
  return checks;
}

int PlannedRuns(const Plan& plan, const std::vector<ConvergenceCheck>& checks) {
  int n = 0;
  for (const PlannedRun& p : plan.runs) n += p.selected ? std::max<int>(1, p.run.experiment.steps().repetitions()) : 0;
  if (checks.empty()) return n;
  return n + ResolveConvergence(*plan.convergence).seeds * static_cast<int>(checks.size());
}

std::string Duration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  if (s < 90) return absl::StrCat(s, " s");
  if (s < 3600) return absl::StrCat((s + 30) / 60, " min");
  const long m = (s + 30) / 60;
  return absl::StrFormat("%d h %02d min", m / 60, m % 60);
}

std::string SuiteProgressLine(int done, int total, double seconds, int timed, bool up_to) {
  const std::string of = up_to ? "up to " : "";
  if (timed == 0) return absl::StrCat("  suite:   ", of, total, " run", total == 1 ? "" : "s", " planned\n");
  const int left = std::max(0, total - done);
  return absl::StrCat("  suite:   ", done, " of ", of, total, " runs done, ", Duration(seconds), " so far, ",
                      up_to ? "at most " : "", "about ", Duration(seconds / timed * left), " left\n");
}

}  // namespace ddplab
