// A suite's progress line: a total of runs fixed when the suite starts (repetitions and
// the convergence check included), the time spent so far and the time left at the rate
// measured, in seconds, minutes or hours as they read best.
//
//   const int total = ddplab::PlannedRuns(plan, host);       // before the first run
//   std::cout << ddplab::SuiteProgressLine(done, total, seconds_so_far, timed);
//   // "  suite:   3 of 15 runs done, 41 s so far, about 2 min left"
#ifndef DDPLAB_EXPERIMENTS_SUITE_PROGRESS_H_
#define DDPLAB_EXPERIMENTS_SUITE_PROGRESS_H_

#include <string>

#include "core/plugin/plugin_host.h"
#include "experiments/plan.h"

namespace ddplab {

// Every run the suite will launch: each selected run times its repetitions, and the
// convergence check's (the exact reference and each lossy configuration, once per seed).
int PlannedRuns(const Plan& plan, PluginHost& host);

// "45 s", "3 min", "1 h 05 min".
std::string Duration(double seconds);

// The line above; `timed` runs took `seconds` in all (the rate for the time left). Before
// any run: the total alone.
std::string SuiteProgressLine(int done, int total, double seconds, int timed);

}  // namespace ddplab

#endif  // DDPLAB_EXPERIMENTS_SUITE_PROGRESS_H_
