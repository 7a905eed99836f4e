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
  std::map<std::string, const ConvergenceCheck*> lossy;  // by origin
  for (const ConvergenceCheck& c : checks) {
    if (!c.exact) lossy[c.run->run.origin] = &c;
  }
  const bool every = plan_.convergence->every_lossy();
  const std::map<std::string, std::vector<std::string>> contenders = every ? decltype(contenders)() : Contenders();
  if (lossy.empty() || (!every && contenders.empty())) {
    if (Speaks() && !lossy.empty()) {
      std::cout << "\n== the convergence check: no lossy configuration is faster than every exact one of its transport"
                << " beyond " << 100 * kDrift << "%: nothing for it to decide (convergence { every_lossy: true } checks"
                << " each)\n";
    }
    return true;
  }
  if (Speaks()) {
    std::cout << "\n== the convergence check: " << s.steps << " steps on the learnable task, " << s.exact << " with "
              << s.seeds << " seeds, then "
              << (every ? "each lossy configuration" : "the fastest lossy configuration of each transport where it is"
                                                       " faster than every exact one")
              << "\n";
  }
  repetition_ = 1;
  for (const ConvergenceCheck& c : checks) {
    if (c.exact && !RunCheck(c, exit)) return false;
  }
  std::set<std::string> ran;
  if (every) {
    for (const auto& [origin, check] : lossy) {
      if (!RunCheck(*check, exit)) return false;
      ran.insert(origin);
    }
    return true;
  }
  for (const auto& [race, origins] : contenders) {
    auto it = lossy.find(origins.front());  // the one the recommendation would be
    if (it != lossy.end() && ran.insert(it->first).second && !RunCheck(*it->second, exit)) return false;
  }
  std::vector<std::string> left;
  for (const auto& [origin, check] : lossy) {
    if (ran.count(origin) == 0) left.push_back(origin);
  }
  if (Speaks() && !left.empty()) {
    std::cout << "  the convergence check left out " << absl::StrJoin(left, ", ")
              << ": none is the fastest lossy configuration of a transport that beats its exact ones; if the checked"
              << " one is worse, the recommendation is exact (convergence { every_lossy: true } checks each)\n";
  }
  return true;
}

// Trains `check`'s configuration from every seed. False when the suite must stop.
bool SuiteRunner::RunCheck(const ConvergenceCheck& check, int& exit) {
  const ConvergenceSettings s = ResolveConvergence(*plan_.convergence);
  const PlannedRun& p = *check.run;
  const size_t first = convergence_runs_.size();
  for (int seed = 0; seed < s.seeds; ++seed) {
    PlannedRun c = p;
    c.run.experiment = ConvergenceExperiment(p.run.experiment, p.run.origin, s, seed, check.exact, &c.convergence.emplace());
    c.run.sweep.clear();
    c.index = static_cast<int>(plan_.runs.size() + convergence_runs_.size()) + 1;
    c.selected = true;
    convergence_runs_.push_back(std::move(c));
  }
  for (size_t i = first; i < convergence_runs_.size(); ++i) {
    if (!Run(convergence_runs_[i], exit)) return false;
  }
  return true;
}

// By race (transport and process count), the lossy experiments faster than its exact ones.
std::map<std::string, std::vector<std::string>> SuiteRunner::Contenders() const {
  std::vector<RacedRun> raced;
  for (const PlannedRun& p : plan_.runs) {
    auto it = results_.find(p.index);
    if (!p.selected || it == results_.end()) continue;
    const v1::Distributed& d = p.run.experiment.distributed();
    RacedRun& r = raced.emplace_back();
    r.race = absl::StrCat(p.processes, " ", d.device(), " ", d.transport());
    r.origin = p.run.origin;
    r.lossy = it->second.lossy();
    for (const v1::Repetition& rep : it->second.repetitions()) r.steps_per_s.push_back(rep.steps_per_s());
  }
  return LossyContenders(raced);
}

}  // namespace ddplab
