// The suite's convergence check (Note [The convergence check], core/config/convergence.h):
// after every other run, the exact reference and the lossy configurations whose verdict
// decides the recommendation (Note [Checks that decide], repetitions.h), or each of them,
// as the study's walk hands them over (studies/convergence/check_walk.h).

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
#include "core/report/report.h"
#include "studies/convergence/check_walk.h"
#include "studies/repetitions/repetitions.h"
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
  // Which to train, and in which order, is the study's (Note [Down the list]).
  std::vector<CheckCandidate> candidates;
  for (const ConvergenceCheck& c : checks_) candidates.push_back({c.run->run.origin, c.exact});
  const bool every = ChecksEveryLossy();
  CheckWalk walk(std::move(candidates), every ? std::map<std::string, std::vector<std::string>>() : Contenders(), every,
                 s.max_lossy_checked);
  std::vector<size_t> batch = walk.First();
  spared_ += s.seeds * static_cast<int>(checks_.size() - walk.reachable());
  if (batch.empty()) return SayLeftOut(walk.left());
  if (Speaks()) {
    std::cout << "\n== the convergence check: " << s.seeds * batch.size() << " run(s) of " << s.steps
              << " steps on the learnable task (" << s.exact << " with " << s.seeds << " seeds)\n";
  }
  for (; !batch.empty(); batch = walk.Next(JudgedWorse())) {
    for (const std::string& why : walk.TakeSaid()) {
      if (Speaks()) {
        std::cout << "\n== the convergence check goes down the list: " << why << ": it trains next (" << s.seeds
                  << " run(s))\n";
      }
    }
    std::vector<ConvergenceCheck> run;
    for (size_t i : batch) run.push_back(checks_[i]);
    if (!RunChecks(run, s, exit)) return false;
  }
  spared_ += s.seeds * (walk.reachable() - walk.checked());
  return SayLeftOut(walk.left());
}

// Trains `checks` once per seed; false when the suite must stop.
bool SuiteRunner::RunChecks(const std::vector<ConvergenceCheck>& checks, const ConvergenceSettings& s, int& exit) {
  const size_t first = convergence_runs_.size();
  for (const ConvergenceCheck& check : checks) {
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
  repetition_ = 1;
  for (size_t i = first; i < convergence_runs_.size(); ++i) {
    if (!Run(convergence_runs_[i], exit)) return false;
  }
  return true;
}

// The checked lossy configurations judged so far, by origin: true where worse, false
// where within; one the reference cannot judge is absent.
std::map<std::string, bool> SuiteRunner::JudgedWorse() const {
  std::vector<const v1::RunResult*> runs;
  std::set<std::string> origins;
  for (const PlannedRun& p : convergence_runs_) {
    auto it = results_.find(p.index);
    if (it == results_.end()) continue;
    runs.push_back(&it->second);
    if (!p.convergence->exact()) origins.insert(p.run.origin);
  }
  v1::SuiteReport report;
  for (const std::string& origin : origins) report.add_rows()->set_origin(origin);
  internal_report::AddConvergenceVerdicts(runs, report);
  std::map<std::string, bool> worse;
  for (const v1::ReportRow& row : report.rows()) {
    if (row.has_convergence() && !row.convergence().not_compared()) worse[row.origin()] = !row.convergence().within();
  }
  return worse;
}

// Says which lossy configurations the check left out; true.
bool SuiteRunner::SayLeftOut(const std::vector<std::string>& left) const {
  if (Speaks() && !left.empty()) {
    std::cout << "\n== the convergence check leaves out " << absl::StrJoin(left, ", ")
              << ": none is the fastest lossy configuration of a transport where it is faster than every exact one"
              << " there beyond " << 100 * kDrift << "%, or the next one down the list where the one above trains"
              << " worse (convergence { every_lossy: true } checks each)\n";
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
