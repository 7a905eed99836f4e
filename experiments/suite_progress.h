// A suite's progress line: a total of runs fixed when the suite starts (repetitions and
// the convergence check included; the most it may run where repetitions are spared), the time spent so far and the time left at the rate
// measured, in seconds, minutes or hours as they read best.
//
//   const int total = ddplab::PlannedRuns(plan, checks);     // before the first run
//   std::cout << ddplab::SuiteProgressLine(done, total, seconds_so_far, timed);
//   // "  suite:   3 of 15 runs done, 41 s so far, about 2 min left"
#ifndef DDPLAB_EXPERIMENTS_SUITE_PROGRESS_H_
#define DDPLAB_EXPERIMENTS_SUITE_PROGRESS_H_

#include <functional>
#include <string>
#include <vector>

#include "experiments/plan.h"

namespace ddplab {

// A run of the suite the convergence check trains from, once per seed.
struct ConvergenceCheck {
  const PlannedRun* run;  // the first run of its experiment
  bool exact;             // the exact reference, or a lossy configuration
};

// Whether a run's plugins make it lossy, as its configured plugins say (PluginSet::lossy).
using LossyRun = std::function<bool(const PlannedRun&)>;

// What the convergence check (Note [The convergence check]) trains: the exact reference,
// then each selected lossy configuration; none without the check, with --tune, or with
// --only (which leaves it out). `lossy` is asked about each selected run at most once.
std::vector<ConvergenceCheck> ConvergenceChecks(const Plan& plan, const LossyRun& lossy);

// Every run the suite will launch: each selected run times its repetitions, and the
// convergence check's `checks` (ConvergenceChecks), once per seed.
int PlannedRuns(const Plan& plan, const std::vector<ConvergenceCheck>& checks);

// "45 s", "3 min", "1 h 05 min".
std::string Duration(double seconds);

// The line above; `timed` runs took `seconds` in all (the rate for the time left). Before
// any run: the total alone. `up_to`: the total is the most the suite may run, as where
// repetitions go only to runs they decide (Note [Repetitions that decide]):
// "  suite:   3 of up to 15 runs done, 41 s so far, at most about 2 min left".
std::string SuiteProgressLine(int done, int total, double seconds, int timed, bool up_to = false);

}  // namespace ddplab

#endif  // DDPLAB_EXPERIMENTS_SUITE_PROGRESS_H_
