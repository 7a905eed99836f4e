// The tuner behind `vit_ddp --tune`: the fastest bucket_cap_mb for one experiment on this
// machine, predicted from measurements, then verified by running the few it ranks first.
//
// Note [The tuner]
// A fixed list of configurations, run once each, names the fastest of that list; an
// exhaustive sweep with repetitions is slow. The tuner measures what decides the step
// instead, and runs only what the measurements cannot settle:
//   1. measure (once per machine: tune/tune_cache.h keeps it):
//      - the probe, the experiment with plugin { no_communication {} }: backward alone,
//        each gradient's ready time (RunResult.gradient_ready), and after its steps an
//        all-reduce sweep over the same processes and transport
//        (profiling.allreduce_sweep): the cost curve;
//      - the experiment as given, `repetitions` times: the step with its collectives,
//        and its spread, against which a candidate's gain is judged.
//   2. model (tune/model/step_model.h, tune/model/partition.h): each cap's buckets as DDP and ddplab
//      make them (a first bucket of at most 1 MiB), over the ready times, its collectives
//      from the cost curve, with the wire's bytes per gradient byte the experiment as
//      given sent (bf16: 0.5; a compressing hook: its compression_ratio), plus the part of
//      the probe's step outside forward, backward and optimizer. Two figures are
//      calibrated on the experiment as given, so that the model gives its measured step:
//      backward's slowdown beside collectives, s (at most 1), and for what s cannot
//      explain, a cost per collective beyond the bare all-reduce's (the engine's copies,
//      hook and wait).
//   3. verify: the `verify` fastest predicted run `repetitions` times each; each is
//      reported predicted against measured (median, min and max), and a miss above 5%
//      is said.
//   4. answer: the fastest measured among them, unless it makes the experiment's own
//      buckets or is no faster beyond the noise (then the experiment's own cap), as an
//      experiment file (the experiment as given with that cap) and as PyTorch code to
//      train with (Runner::TrainingCode: lossy levers left out, their convergence
//      unchecked), its gain over the experiment as given with both spreads, and the
//      verdict on its buckets (tune/model/verdict.h): compute-, latency- or
//      bandwidth-bound, and whether compressing can pay here at all.
// Where every cap makes the experiment's own buckets, that is the answer: nothing is
// verified, and its cap is kept.
// With `exhaustive`, every cap then runs as often, so that the answer and the time it
// took can be checked against the sweep it spares.
//
//   MyRunner runner;   // runs experiments as the suite's runs (experiments/suite_tune.cc)
//   ddplab::tune::TuneRequest request{base, ddplab::ResolveTune(suite.tune()), machine,
//                                     "ddplab_results/tune_cache/vit.json", "ddplab_results/s/vit_tuned.textproto"};
//   absl::StatusOr<ddplab::v1::Tuning> t = ddplab::tune::Tune(request, runner);
//   if (t.ok()) std::cout << t->text();
#ifndef DDPLAB_TUNE_TUNER_H_
#define DDPLAB_TUNE_TUNER_H_

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/config/tune_settings.h"
#include "core/config/plugin_schema.h"
#include "ddplab/v1/experiment.pb.h"
#include "ddplab/v1/report.pb.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab::tune {

// What the tuner asks of whoever runs experiments.
class Runner {
 public:
  virtual ~Runner() = default;
  // The plugins found, whose bucket_sizing and no_communication the tuner sets.
  virtual const ExperimentSchema& schema() = 0;
  // OK when `e`'s plugins configure together (nothing runs).
  virtual absl::Status Check(const v1::Experiment& e) = 0;
  // `e`'s levers as PyTorch code to train with: a lossy lever only with a convergence
  // verdict, which the tuner has none of, so lossy levers are left out and named in a
  // comment (a suite's convergence check judges them).
  virtual absl::StatusOr<std::string> TrainingCode(const v1::Experiment& e) = 0;
  // Runs each experiment `repetitions` times, interleaved; per experiment its result with
  // every repetition (RunResult.repetitions), or why it has none. An error when nothing
  // more may run (the job was stopped).
  virtual absl::StatusOr<std::vector<absl::StatusOr<v1::RunResult>>> Run(const std::vector<v1::Experiment>& experiments,
                                                                         int repetitions) = 0;
};

struct TuneRequest {
  v1::Experiment base;       // the experiment to tune, resolved, of several processes
  TuneSettings settings;
  v1::Machine machine;       // what the cache is keyed by
  std::string cache_path;    // "": no cache
  std::string answer_path;   // where the chosen experiment file is written; "": nowhere
  std::function<void(const std::string&)> say = [](const std::string&) {};  // progress
};

absl::StatusOr<v1::Tuning> Tune(const TuneRequest& request, Runner& runner);

// The plugins the tuner adds to an experiment's own (bucket_sizing, no_communication,
// sharded_optimizer, cuda_graph): a host loading only what a file names loads these too
// for --tune.
std::set<std::string> TunerPlugins();

// The run name of `base` with bucket_cap_mb `cap`: "<base>_<cap>mb" ("vit_2p5mb").
std::string CapRunName(const std::string& base, double cap, const std::string& infix = "");

// The answer's text from `t`'s fields, as report.md prints it.
std::string TuningText(const v1::Tuning& t);

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_TUNER_H_
