// The suite's convergence check (Note [The convergence check], core/config/convergence.h):
// after every other run, the exact reference and the lossy configurations whose verdict
// decides the recommendation (Note [Checks that decide], repetitions.h), or each of them.

#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/config/convergence.h"
#include "experiments/repetitions.h"
#include "experiments/suite_runner.h"

namespace ddplab {

// False when the suite must stop.
bool SuiteRunner::RunConvergence(int& exit) {
  if (!plan_.convergence) return true;
  if (plan_.selected != static_cast<int>(plan_.runs.size())) {
    if (Speaks()) std::cout << "\nthe convergence check runs with the whole suite: --only leaves it out\n";
    return true;
  }
  const ConvergenceSettings s = ResolveConvergence(*plan_.convergence);
  const std::vector<ConvergenceCheck> checks = ConvergenceChecks(plan_, host_);
  const bool every = ChecksEveryLossy();
  std::set<std::string> chosen;  // the lossy origins to check
  if (!every) {
    for (const auto& [race, origins] : Contenders()) chosen.insert(origins.front());  // the would-be recommendation
  }
  std::vector<ConvergenceCheck> run;
  std::vector<std::string> left;
  for (const ConvergenceCheck& c : checks) {
    if (c.exact || every || chosen.count(c.run->run.origin) > 0) {
      run.push_back(c);
    } else {
      left.push_back(c.run->run.origin);
    }
  }
  if (run.size() == 1 && run.front().exact) run.clear();  // nothing to compare with the reference
  spared_ += s.seeds * static_cast<int>(checks.size() - run.size());
  if (Speaks() && !left.empty()) {
    std::cout << "\n== the convergence check leaves out " << absl::StrJoin(left, ", ")
              << ": none is the fastest lossy configuration of a transport where it is faster than every exact one"
              << " there beyond " << 100 * kDrift << "%; where the one checked is worse, the recommendation is exact"
              << " (convergence { every_lossy: true } checks each)\n";
  }
  if (run.empty()) return true;
  for (const ConvergenceCheck& check : run) {
    const PlannedRun& p = *check.run;
    for (int seed = 0; seed < s.seeds; ++seed) {
      PlannedRun c = p;
      c.run.experiment =
          ConvergenceExperiment(p.run.experiment, p.run.origin, s, seed, check.exact, &c.convergence.emplace());
      c.run.sweep.clear();
      c.index = static_cast<int>(plan_.runs.size() + convergence_runs_.size()) + 1;
      c.selected = true;
      convergence_runs_.push_back(std::move(c));
    }
  }
  if (Speaks()) {
    std::cout << "\n== the convergence check: " << convergence_runs_.size() << " run(s) of " << s.steps
              << " steps on the learnable task (" << s.exact << " with " << s.seeds << " seeds)\n";
  }
  repetition_ = 1;
  for (const PlannedRun& p : convergence_runs_) {
    if (!Run(p, exit)) return false;
  }
  return true;
}

// By race (transport and process count), the lossy experiments faster than its exact ones.
std::map<std::string, std::vector<std::string>> SuiteRunner::Contenders() const {
  std::vector<RacedRun> raced;
  for (const PlannedRun& p : plan_.runs) {
    auto it = results_.find(p.index);
    if (!p.selected || it == results_.end() || it->second.diagnostic()) continue;  // no_communication, say
    RacedRun& r = raced.emplace_back();
    r.race = RaceOf(p);
    r.origin = p.run.origin;
    r.lossy = it->second.lossy();
    for (const v1::Repetition& rep : it->second.repetitions()) r.steps_per_s.push_back(rep.steps_per_s());
  }
  return LossyContenders(raced);
}

}  // namespace ddplab
