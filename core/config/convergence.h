// The convergence check of a suite: which runs it adds, and their settings.
//
// Note [The convergence check]
// A lossy lever (bf16, PowerSGD) is worth its speed only if training converges as well
// with it. A suite asks for the check with `convergence { exact: "naive_ddp" }`: after its
// runs, the exact reference and every lossy configuration (PluginSet::lossy: a plugin
// that says its reduction is lossy) train the learnable task (data.task LEARNABLE) for
// `steps` steps once per seed (data.seed, then the next ones: the seed fixes the weights
// and the order of the batches). A run's final loss is the mean training loss of its last
// `final_steps` steps. The lossy run of a seed is compared with the exact run of the same
// seed, the same weights and the same batches: what differs is the lever alone. Their
// relative difference, averaged over the seeds, is "within" the tolerance
// (tolerance_percent, 2% by default) or "worse by X%".
// Why paired and not against the seeds' spread: the seeds' own spread of final losses
// measures what other weights and batches do, not what the lever does; on the CPU suite it
// was 31% of the loss, so a lever 4% worse passed (bench/NOTES.md, "The convergence check,
// paired"). An exact lever's paired difference is 0 up to the order of float sums.
// The report's recommendation names a lossy configuration only with a verdict of within
// (core/report/recommend.cc).
//
//   ddplab::ConvergenceSettings s = ddplab::ResolveConvergence(suite.convergence());
//   v1::ConvergenceRun record;
//   for (int k = 0; k < s.seeds; ++k) run(ddplab::ConvergenceExperiment(e, "naive_ddp", s, k, true, &record));
#ifndef DDPLAB_CORE_CONFIG_CONVERGENCE_H_
#define DDPLAB_CORE_CONFIG_CONVERGENCE_H_

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
  double tolerance = 0.02;  // tolerance_percent / 100
  int max_lossy_checked = 3;  // per transport and process count, going down the list
};
ConvergenceSettings ResolveConvergence(const v1::Convergence& c);

// Whether `suite` (its experiments resolved) asks for the check, and asks it rightly: an
// error at the field's file:line:column through `at` (the suite's locator).
absl::Status ValidateConvergence(const v1::Suite& suite, const Locator& at);

// A run of the check: `e` (a run of the suite's experiment `origin`) on the learnable
// task for s.steps steps, all measured, once, from the seed `seed_index` after e's own
// data.seed; named "<origin>-convergence-<seed_index + 1>". `record` gets what the run
// records of itself (RunResult.convergence).
v1::Experiment ConvergenceExperiment(const v1::Experiment& e, const std::string& origin, const ConvergenceSettings& s,
                                     int seed_index, bool exact, v1::ConvergenceRun* record);

}  // namespace ddplab

#endif  // DDPLAB_CORE_CONFIG_CONVERGENCE_H_
