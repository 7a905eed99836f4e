// Runs a planned suite (experiments/plan.h): each run here or as workers started by
// ddplab's launcher, results written whole, a report of the suite's runs at the end.
//
//   ddplab::SuiteRunner runner(invocation, host, plan);
//   int exit_code = runner.RunAll();
//
// Rank 0 (or the launcher) prints each run's summary and writes its result as JSON under
// the run's output directory, and the report of every run of the suite: this
// invocation's results, and for runs --only left out, their earlier results (where they
// record the same experiment). A bucket_sizing sweep names its fastest. A worker that
// ddplab's launcher starts gets its run handed over (RunWorkerTask), never the file.
#ifndef DDPLAB_EXPERIMENTS_SUITE_RUNNER_H_
#define DDPLAB_EXPERIMENTS_SUITE_RUNNER_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/convergence.h"
#include "core/record/device_report.h"
#include "core/plugin/plugin_host.h"
#include "core/run/invocation.h"
#include "core/run/one_run.h"
#include "ddplab/v1/experiment.pb.h"
#include "ddplab/v1/report.pb.h"
#include "ddplab/v1/result.pb.h"
#include "experiments/plan.h"
#include "experiments/suite_progress.h"  // ConvergenceCheck

namespace ddplab {

class SuiteRunner {
 public:
  SuiteRunner(const Invocation& in, PluginHost& host, const Plan& plan)
      : in_(in), host_(host), plan_(plan), runs_(in, host) {}
  // Runs every run the plan selects; the invocation's exit code (0: all ran and were
  // written; 128 + N: stopped by signal N).
  int RunAll();

 private:
  bool Run(const PlannedRun& p, int& exit);
  // Note [Configured once]
  // The launcher configures a run's plugins once (besides the file's check of each
  // experiment as written): the first question about a run (is it lossy, for the
  // convergence check) configures them, and its first repetition takes that set to
  // announce and, in this process, to train. A later repetition is a run of its own and
  // configures its own. (The convergence check's list of runs, made once, serves three
  // questions: the progress line's total, whether it may spare checks, which to train.)
  absl::StatusOr<PluginSet>& Configured(const PlannedRun& p);
  absl::StatusOr<PluginSet> TakeConfigured(const PlannedRun& p);
  bool Lossy(const PlannedRun& p) { return Configured(p).ok() && Configured(p)->lossy(); }
  bool RunConvergence(int& exit);  // suite_convergence.cc
  bool RunChecks(const std::vector<ConvergenceCheck>& checks, const ConvergenceSettings& s, int& exit);
  std::map<std::string, bool> JudgedWorse() const;
  bool SayLeftOut(const std::vector<std::string>& left) const;
  void RunTune(int& exit);  // suite_tune.cc
  // The tuner's runs (tune::Runner::Run): each experiment `repetitions` times, as
  // the base run of the plan is run.
  absl::StatusOr<std::vector<absl::StatusOr<v1::RunResult>>> RunForTuner(const std::vector<v1::Experiment>& experiments,
                                                                         int repetitions, int& exit);
  const std::string& SuiteOf(const PlannedRun& p) const { return p.suite.empty() ? plan_.suite : p.suite; }
  int Kept(const PlannedRun& p) const;  // repetitions of `p` kept from before
  // The runs of one transport with their repetitions; false when the suite must stop.
  bool RunTransport(const std::vector<const PlannedRun*>& runs, int& exit);
  std::vector<const PlannedRun*> FieldOf(const std::vector<const PlannedRun*>& runs) const;
  std::vector<std::vector<double>> StepsPerSecond(const std::vector<const PlannedRun*>& runs) const;
  std::vector<bool> ExactOf(const std::vector<const PlannedRun*>& runs) const;
  std::vector<int> KeptOf(const std::vector<const PlannedRun*>& runs) const;
  std::map<std::string, std::vector<std::string>> Contenders() const;
  // Whether repetitions go only where they decide: not with --all_repetitions, in a job
  // or across nodes (whose processes would have to agree on which).
  bool SparesRepetitions() const;
  bool ChecksEveryLossy() const;  // the convergence check trains every lossy configuration
  // The runs compared for repetitions and the convergence check: processes, device, transport.
  static std::string RaceOf(const PlannedRun& p);
  bool UpTo() const;  // the progress line's total is the most that may run
  RunRequest RequestOf(const PlannedRun& p) const;  // what its run now due asks of core
  void Announce(const PlannedRun& p, const PluginSet& plugins);
  bool InJob() const { return in_.worker.has_value(); }
  bool Speaks() const { return !in_.worker || in_.worker->rank == 0; }
  int Finish();
  void Report();  // suite_report.cc
  // The report's rows; `earlier`: results of before that --only left out, kept; `stale`:
  // those not kept, made with other plugins than now (ChangedPluginBuild), and why.
  std::vector<v1::RunResult> ReportRows(int& earlier, std::vector<std::string>& stale) const;
  void Failed(const std::string& name, const std::string& why);

  const Invocation& in_;
  PluginHost& host_;
  const Plan& plan_;
  int ran_ = 0, failed_ = 0, stopped_by_ = 0;
  int unwritten_ = 0;  // results and reports that could not be written (their runs ran)
  double seconds_ = 0;  // spent in the runs timed_ counts (not skipped), for the ETA
  int timed_ = 0;
  int planned_ = 0;     // every run the suite will launch (PlannedRuns), for the progress line
  std::map<int, v1::RunResult> results_;                          // by run index
  std::vector<std::pair<std::string, std::string>> failures_;     // runs that failed, and why
  std::vector<PlannedRun> convergence_runs_;  // the convergence check's, once they are known
  std::vector<PlannedRun> tune_runs_;         // the tuner's, as it asks for them
  std::optional<v1::Tuning> tuning_;          // the tuner's answer
  std::map<int, int> kept_;  // by run index: repetitions --skip_completed kept from before
  int repetition_ = 1;     // of the runs now running, from 1
  int spared_ = 0;         // repetitions planned that decided nothing (not run)
  bool checks_spared_ = false;  // the convergence check may leave lossy runs out
  std::vector<ConvergenceCheck> checks_;  // what the convergence check may train, asked once
  std::map<int, absl::StatusOr<PluginSet>> configured_;  // by run index (Note [Configured once])
  OneRun runs_;  // each run, top to bottom (core/run/one_run.h)
};

// The machine a report describes: this node's, and the most nodes a run of `plan` used.
v1::Machine ReportMachine(const DeviceReport& d, const Plan& plan);

}  // namespace ddplab

#endif  // DDPLAB_EXPERIMENTS_SUITE_RUNNER_H_
