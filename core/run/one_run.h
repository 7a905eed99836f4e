// One run of a suite, top to bottom: what a result from before already holds of it
// (--skip_completed), its directory, its training (in this process, or on workers this
// process starts or hands it to), the ranks met after it, their timelines joined, and
// its result joined to the repetitions before it and written. The suite
// (experiments/suite_runner.h) decides what runs and in which order, configures the
// run's plugins and keeps what comes back; everything between is here, in this order.
//
//   ddplab::OneRun runs(invocation, host);
//   ddplab::RunRequest r;                       // the experiment, its suite, its place ...
//   ddplab::RunOutcome done = runs.Run(r, plugins);
//   if (done.result) results[r.index] = *done.result;   // for the report
//   if (!done.go_on) ...                                 // the suite stops here
#ifndef DDPLAB_CORE_RUN_ONE_RUN_H_
#define DDPLAB_CORE_RUN_ONE_RUN_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/launch/launcher.h"
#include "core/launch/worker_pool.h"
#include "core/plugin/plugin_host.h"
#include "core/run/invocation.h"
#include "ddplab/v1/experiment.pb.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab {

// What the suite asks of one run.
struct RunRequest {
  const v1::Experiment* experiment = nullptr;  // resolved; output.directory absolute
  std::string suite;    // the folder of output.directory its files go in
  std::string run_dir;  // <output.directory>/<suite>
  std::string label;    // the progress line's, "[2/9] naive_ddp (1/3)"
  int index = 0;        // the suite's, from 1: keys the ranks' meetings
  int repetition = 1;   // from 1
  int repetitions = 1;  // steps.repetitions, at least 1
  int processes = 1;    // in the whole job
  int per_node = 1;     // processes this node starts, or runs
  bool launch = false;  // this process starts workers for it
  bool here = false;    // this process trains it (alone, or as a rank of a job)
  // --skip_completed, at its first repetition: a result from before of the same
  // experiment, module and plugin builds is kept instead of running it.
  bool resume = false;
  bool spares_repetitions = false;  // further repetitions go only where they decide
  std::string origin;               // the experiment of the suite it comes from
  std::optional<v1::ConvergenceRun> convergence;  // a run of the convergence check
  const v1::RunResult* before = nullptr;  // its repetitions run so far, if any
};

// What came of it.
struct RunOutcome {
  bool go_on = true;    // false: the suite stops (a signal, or a rank of a job failed)
  int exit = 0;         // the invocation's exit code, where this run sets it
  int stopped_by = 0;   // the signal that stopped it, if one did
  int kept = 0;         // repetitions kept from a result from before (it did not run)
  bool ran = false;     // it ran (rank 0 of a job holds its result, the other ranks none)
  std::optional<v1::RunResult> result;  // kept, or run: with its repetitions, as written
  bool failed = false;  // it failed: said, and listed in the report
  std::string failure;  // why
  bool unwritten = false;  // its result could not be written (it ran all the same)
};

class OneRun {
 public:
  OneRun(const Invocation& in, PluginHost& host) : in_(in), host_(host) {}
  // In a job: the store every rank of the suite shares.
  void SetJobStore(c10::intrusive_ptr<c10d::Store> store) { job_store_ = std::move(store); }
  // Runs `r` with its configured `plugins`.
  RunOutcome Run(const RunRequest& r, const PluginSet& plugins);
  // The runs that share `r`'s workers (Note [Repetitions that decide]): their pool's key,
  // or "here".
  std::string TransportOf(const RunRequest& r) const;
  // Ends the workers of the transport now running (the next transport's are others).
  void EndWorkers() { pool_.reset(); }

 private:
  bool InJob() const { return in_.worker.has_value(); }
  bool Speaks() const { return !in_.worker || in_.worker->rank == 0; }
  int Resume(const RunRequest& r, RunOutcome& out);
  void TrainHere(const RunRequest& r, const PluginSet& plugins, RunOutcome& out);
  // How the workers of `r` are started (one_run_launch.cc); runs of the same `key` can
  // share one pool of workers.
  struct WorkerLaunch {
    std::vector<std::string> args;
    EnvironmentList env;  // besides the run itself
    LaunchOptions options;
    bool pooled = false;
    std::string key;
  };
  WorkerLaunch LaunchOf(const RunRequest& r) const;
  void Launch(const RunRequest& r, RunOutcome& out);  // one_run_launch.cc
  // Keeps `result` for the report: one kept from before as it is; a fresh one (just run)
  // joined to the repetitions before it and written whole.
  void Keep(const RunRequest& r, v1::RunResult result, bool fresh, RunOutcome& out) const;

  const Invocation& in_;
  PluginHost& host_;
  c10::intrusive_ptr<c10d::Store> job_store_;  // in a job: every rank's, for the whole suite
  std::unique_ptr<WorkerPool> pool_;  // the workers of the transport now running
  std::string pool_key_, pool_nccl_prefix_;
};

// Trains `e` in this process; where this process speaks (rank 0), prints its summary and
// writes its result. An error says what failed: training, or writing the result.
absl::StatusOr<v1::RunResult> TrainAndWrite(const Invocation& in, const PluginSet& plugins, const v1::Experiment& e,
                                            const std::string& suite, const std::string& label,
                                            const std::optional<WorkerEnv>& worker,
                                            c10::intrusive_ptr<c10d::Store> store);

}  // namespace ddplab

#endif  // DDPLAB_CORE_RUN_ONE_RUN_H_
