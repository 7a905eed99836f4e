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
#include "core/report/report.h"
#include "studies/repetitions/repetitions.h"
#include "experiments/suite_runner.h"

namespace ddplab {

// Note [Down the list]
// By default the check trains, per race (transport and process count), the fastest lossy
// configuration that beats every exact one there: the would-be recommendation. Where it
// is judged worse, the next lossy one that still beats every exact one would be the
// recommendation, and the check trains it next, and so on down the list, until one is
// within, none is left, or `max_lossy_checked` of the race are checked. The
// recommendation is then the fastest that is exact or judged within
// (core/report/recommend.cc). A job of several processes checks every lossy configuration
// at once instead: its ranks would each have to agree on the verdicts.

// False when the suite must stop.
bool SuiteRunner::RunConvergence(int& exit) {
  if (!plan_.convergence) return true;
  if (plan_.selected != static_cast<int>(plan_.runs.size())) {
    if (Speaks()) std::cout << "\nthe convergence check runs with the whole suite: --only leaves it out\n";
    return true;
  }
  const ConvergenceSettings s = ResolveConvergence(*plan_.convergence);
  const std::vector<ConvergenceCheck>& checks = checks_;
  const bool every = ChecksEveryLossy();
  const std::map<std::string, std::vector<std::string>> contenders = every ? decltype(contenders)() : Contenders();
  std::set<std::string> chosen;  // the lossy origins to check first
  for (const auto& [race, origins] : contenders) chosen.insert(origins.front());  // the would-be recommendation
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
  // The progress line's total: what may still run down the list stays in it until the
  // walk ends.
  int reachable = static_cast<int>(run.size());
  for (const auto& [race, origins] : contenders) {
    reachable += std::min(static_cast<int>(origins.size()), s.max_lossy_checked) - 1;
  }
  if (run.empty()) reachable = 0;
  spared_ += s.seeds * static_cast<int>(checks.size() - reachable);
  if (run.empty()) return SayLeftOut(left);
  if (Speaks()) {
    std::cout << "\n== the convergence check: " << s.seeds * run.size() << " run(s) of " << s.steps
              << " steps on the learnable task (" << s.exact << " with " << s.seeds << " seeds)\n";
  }
  if (!RunChecks(run, s, exit)) return false;
  int checked_count = static_cast<int>(run.size());
  // Down the list, race by race, while the last one checked is judged worse.
  std::map<std::string, size_t> checked;  // by race: how many of its contenders
  for (const auto& [race, origins] : contenders) checked[race] = 1;
  for (;;) {
    const std::map<std::string, bool> worse = JudgedWorse();
    std::vector<ConvergenceCheck> more;
    for (const auto& [race, origins] : contenders) {
      size_t& k = checked[race];
      auto last = worse.find(origins[k - 1]);
      if (last == worse.end() || !last->second || k >= origins.size() || static_cast<int>(k) >= s.max_lossy_checked) {
        continue;
      }
      for (const ConvergenceCheck& c : checks) {
        if (c.exact || c.run->run.origin != origins[k]) continue;
        more.push_back(c);
        left.erase(std::remove(left.begin(), left.end(), origins[k]), left.end());
        if (Speaks()) {
          std::cout << "\n== the convergence check goes down the list: " << origins[k - 1]
                    << " trains worse, and " << origins[k] << " is the next lossy configuration faster than every"
                    << " exact one there: it trains next (" << s.seeds << " run(s))\n";
        }
      }
      ++k;
    }
    if (more.empty()) break;
    checked_count += static_cast<int>(more.size());
    if (!RunChecks(more, s, exit)) return false;
  }
  spared_ += s.seeds * (reachable - checked_count);
  return SayLeftOut(left);
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
