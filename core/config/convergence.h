// The convergence check of a suite: which runs it adds, and their settings.
//
// Note [The convergence check]
// A lossy lever (bf16, PowerSGD) is worth its speed only if training converges as well
// with it. A suite asks for the check with `convergence { exact: "naive_ddp" }`: after its
// runs, the exact reference trains the learnable task (data.task LEARNABLE) for `steps`
// steps once per seed (data.seed, then the next ones: the seed fixes the weights and the
// order of the batches), and every lossy configuration (one whose plugins sample the
// gradient error, PluginSet::lossy) trains the same task from the first seed: the same
// weights, the same batches. A lossy run's final loss (the mean training loss of the last
// `final_steps` steps) is compared with the exact run's from the same seed: "within the
// exact runs' spread" when it is above that by no more than the seeds' own spread of final
// losses (max - min: what changing only the seed does), else "worse by X%" than that run.
// The report's recommendation names a lossy configuration only with a verdict of within
// (core/report/recommend.cc).
//
//   ddplab::ConvergenceSettings s = ddplab::ResolveConvergence(suite.convergence());
//   v1::ConvergenceRun record;
//   for (int k = 0; k < s.seeds; ++k) run(ddplab::ConvergenceExperiment(e, "naive_ddp", s, k, true, &record));
#ifndef DDPLAB_CORE_CONVERGENCE_H_
#define DDPLAB_CORE_CONVERGENCE_H_

#include <string>

#include "absl/status/status.h"
#include "core/config/text_location.h"
#include "ddplab/v1/experiment.pb.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab {

// A suite's convergence field with its defaults applied.
struct ConvergenceSettings {
  std::string exact;
  int steps = 200;
  int seeds = 3;
  int final_steps = 20;
};
ConvergenceSettings ResolveConvergence(const v1::Convergence& c);

// Whether `suite` (its experiments resolved) asks for the check, and asks it rightly: an
// error at the field's file:line:column through `at` (the suite's locator).
absl::Status ValidateConvergence(const v1::Suite& suite, const Locator& at);

// A run of the check: `e` (a run of the suite's experiment `origin`) on the learnable
// task for s.steps steps, all measured, once, from the seed `seed_index` after e's own
// data.seed; named "<origin>-convergence-<seed_index + 1>" (the exact reference's runs)
// or "<origin>-convergence" (a lossy one's). `record` gets what the run records of itself
// (RunResult.convergence).
v1::Experiment ConvergenceExperiment(const v1::Experiment& e, const std::string& origin, const ConvergenceSettings& s,
                                     int seed_index, bool exact, v1::ConvergenceRun* record);

}  // namespace ddplab

#endif  // DDPLAB_CORE_CONVERGENCE_H_
