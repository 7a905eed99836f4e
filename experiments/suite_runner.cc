#include "experiments/suite_runner.h"

#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <cstring>
#include <csignal>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/config/convergence.h"
#include "core/config/experiment.h"  // kDefaultTimeoutSeconds
#include "core/launch/launcher.h"
#include "core/report/report.h"
#include "core/training/trainer.h"
#include "experiments/cli.h"  // Printable
#include "core/run/run_dir.h"
#include "studies/repetitions/repetitions.h"
#include "experiments/suite_progress.h"
#include "experiments/worker.h"
#include "google/protobuf/text_format.h"

namespace ddplab {
namespace {

// steps.repetitions, at least 1.
int Repetitions(const PlannedRun& p) { return std::max<int>(1, p.run.experiment.steps().repetitions()); }

std::string Label(const PlannedRun& p, size_t runs, size_t checks, int repetition) {
  // The convergence check's runs come after the plan's own: "[check 2/5] ...".
  if (p.tuning) {
    return absl::StrCat("[tune] ", p.run.experiment.name(),
                        Repetitions(p) > 1 ? absl::StrCat(" (", repetition, "/", Repetitions(p), ")") : "");
  }
  std::string label = p.convergence ? absl::StrCat("[check ", p.index - runs, "/", checks, "] ", p.run.experiment.name())
                                    : absl::StrCat("[", p.index, "/", runs, "] ", p.run.experiment.name());
  if (Repetitions(p) > 1) absl::StrAppend(&label, " (", repetition, "/", Repetitions(p), ")");
  return label;
}

}  // namespace

v1::Machine ReportMachine(const DeviceReport& d, const Plan& plan) {
  v1::Machine m;
  m.set_device(d.gpus.empty() ? "cpu" : d.gpus[0].name);
  m.set_device_count(static_cast<int>(d.gpus.size()));
  m.set_driver(d.driver_version);
  m.set_cuda_runtime(d.cuda_runtime);
  m.set_nccl_version(d.nccl_version);
  m.set_torch_version(d.torch_version);
  std::vector<std::string> links;
  for (size_t i = 0; i < d.links.size(); ++i) {
    for (size_t j = 0; j < d.links[i].size(); ++j) {
      if (i != j && std::find(links.begin(), links.end(), d.links[i][j]) == links.end()) links.push_back(d.links[i][j]);
    }
  }
  m.set_topology(absl::StrJoin(links, ", "));
  m.set_cpu(absl::StrCat(d.cpu_model, ", ", d.cpu_cores, " cores"));
  int nodes = 1;
  for (const PlannedRun& p : plan.runs) nodes = std::max<int>(nodes, p.run.experiment.distributed().nodes());
  m.set_nodes(nodes);
  return m;
}

namespace {

void OnSuiteStopSignal(int sig) { RequestStop(sig); }

}  // namespace

int SuiteRunner::RunAll() {
  // While the suite runs, SIGINT, SIGTERM and SIGHUP ask it to stop (RequestStop) instead
  // of ending the process: between runs it stops there, a run of one process at its next
  // step, and the report of what completed is written. The launcher takes them over while
  // workers run (it stops them). A second signal ends at once. In a job, its launcher
  // (torchrun, srun) stops the ranks.
  std::optional<ScopedStopSignals> signals;
  if (!InJob()) signals.emplace(OnSuiteStopSignal, SA_RESETHAND);
  if (InJob()) {
    // Said before the wait, so that variables left from another job do not wait in silence.
    const WorkerEnv& w = *in_.worker;
    std::cerr << "vit_ddp: rank " << w.rank << " of " << w.world_size << " (" << w.launcher
              << "'s variables are set): meeting the other ranks at " << w.master_addr << ":" << w.master_port
              << ", for up to " << kDefaultTimeoutSeconds << " s. Not started by " << w.launcher
              << "? Unset RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT.\n";
    absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store =
        OpenRendezvousStore(*in_.worker, std::chrono::seconds(kDefaultTimeoutSeconds));
    if (!store.ok()) {
      std::cerr << "vit_ddp: " << store.status().message() << "\n";
      return 1;
    }
    runs_.SetJobStore(*store);
  }
  checks_ = ConvergenceChecks(plan_, [this](const PlannedRun& p) { return Lossy(p); });
  if (Speaks()) planned_ = PlannedRuns(plan_, checks_);
  checks_spared_ = !ChecksEveryLossy() && checks_.size() > 1;
  int exit = 0;
  bool go_on = true;
  if (plan_.tune) {
    RunTune(exit);  // instead of the suite's runs
  } else {
    // The runs by transport, in the order each first appears: one pool of workers each.
    std::vector<std::string> keys;
    std::map<std::string, std::vector<const PlannedRun*>> transports;
    for (const PlannedRun& p : plan_.runs) {
      if (!p.selected) continue;
      const std::string key = InJob() ? "job" : runs_.TransportOf(RequestOf(p));
      if (transports[key].empty()) keys.push_back(key);
      transports[key].push_back(&p);
    }
    for (const std::string& key : keys) {
      if (!(go_on = RunTransport(transports[key], exit))) break;
    }
    if (go_on) RunConvergence(exit);
  }
  runs_.EndWorkers();
  const int finished = Finish();
  if (stopped_by_ != 0) return 128 + stopped_by_;
  return exit != 0 ? exit : finished;
}

// The runs of one transport, in the rounds the repetitions study hands out
// (RepetitionRounds, Note [Repetitions that decide], repetitions.h): every run once, then
// further repetitions, interleaved, for those a repetition still decides; all of them
// with --all_repetitions, and in a job or across nodes, whose processes would have to
// agree on which. False when the suite must stop.
bool SuiteRunner::RunTransport(const std::vector<const PlannedRun*>& runs, int& exit) {
  std::vector<int> wanted;
  for (const PlannedRun* p : runs) wanted.push_back(Repetitions(*p));
  RepetitionRounds rounds(std::move(wanted), SparesRepetitions());
  const int spared_before = spared_;
  bool go_on = true;
  for (std::vector<size_t> round = rounds.Next({}, {}); !round.empty();
       round = rounds.Next(StepsPerSecond(runs), KeptOf(runs), ExactOf(runs))) {
    repetition_ = rounds.repetition();
    spared_ = spared_before + rounds.spared();
    for (size_t i = 0; i < round.size() && go_on; ++i) go_on = Run(*runs[round[i]], exit);
    if (!go_on) break;
  }
  spared_ = spared_before + rounds.spared();
  runs_.EndWorkers();  // the next transport's workers are others
  return go_on;
}

bool SuiteRunner::SparesRepetitions() const { return !InJob() && in_.launch.nnodes == 1 && !in_.all_repetitions; }

// In a job or across nodes every rank must train the same check runs, and only rank 0
// holds the results that would choose them.
bool SuiteRunner::ChecksEveryLossy() const {
  return !plan_.convergence || plan_.convergence->every_lossy() || InJob() || in_.launch.nnodes > 1;
}

std::string SuiteRunner::RaceOf(const PlannedRun& p) {
  const v1::Distributed& d = p.run.experiment.distributed();
  return absl::StrCat(p.processes, " ", d.device(), " ", d.transport());
}

bool SuiteRunner::UpTo() const {
  if (plan_.tune) return false;
  if (checks_spared_) return true;  // the convergence check's lossy runs go where they decide
  if (!SparesRepetitions()) return false;
  for (const PlannedRun& p : plan_.runs) {
    if (p.selected && Repetitions(p) > 1) return true;
  }
  return false;
}

// What RepetitionRounds compares: the pool's runs' repetitions so far, then those of the
// other runs of their transport and process count, whichever pool ran them (Note
// [Repetitions that decide], repetitions.h).
std::vector<const PlannedRun*> SuiteRunner::FieldOf(const std::vector<const PlannedRun*>& runs) const {
  std::vector<const PlannedRun*> field = runs;
  for (const PlannedRun& p : plan_.runs) {
    if (p.selected && results_.count(p.index) > 0 && !runs.empty() && RaceOf(p) == RaceOf(*runs.front()) &&
        std::find(runs.begin(), runs.end(), &p) == runs.end()) {
      field.push_back(&p);
    }
  }
  return field;
}

std::vector<std::vector<double>> SuiteRunner::StepsPerSecond(const std::vector<const PlannedRun*>& runs) const {
  std::vector<std::vector<double>> rates;
  for (const PlannedRun* p : FieldOf(runs)) {
    std::vector<double>& r = rates.emplace_back();
    // A diagnostic run (no communication, say) leads nothing: it gets no more either.
    if (auto it = results_.find(p->index); it != results_.end() && !it->second.diagnostic()) {
      for (const v1::Repetition& rep : it->second.repetitions()) r.push_back(rep.steps_per_s());
    }
  }
  return rates;
}

// Per entry of StepsPerSecond's, whether its run measured with no lossy plugin: the
// recommendation's race until the convergence check has judged (Note [Repetitions that
// decide]).
std::vector<bool> SuiteRunner::ExactOf(const std::vector<const PlannedRun*>& runs) const {
  std::vector<bool> exact;
  for (const PlannedRun* p : FieldOf(runs)) {
    const auto it = results_.find(p->index);
    exact.push_back(it != results_.end() && !it->second.lossy());
  }
  return exact;
}

std::vector<int> SuiteRunner::KeptOf(const std::vector<const PlannedRun*>& runs) const {
  std::vector<int> kept;
  for (const PlannedRun* p : runs) kept.push_back(Kept(*p));
  return kept;
}

// Runs `p`; false when the suite must stop, with `exit` its code.
bool SuiteRunner::Run(const PlannedRun& p, int& exit) {
  const v1::Experiment& e = p.run.experiment;
  if (const int sig = StopRequested(); sig != 0) {  // between runs: stop here
    if (Speaks()) std::cerr << "vit_ddp: stopped by signal " << sig << " (" << strsignal(sig) << ") before " << e.name() << "\n";
    stopped_by_ = sig;
    return false;
  }
  absl::StatusOr<PluginSet> plugins = TakeConfigured(p);
  if (!plugins.ok()) {
    std::cerr << "vit_ddp: experiment \"" << e.name() << "\": " << plugins.status().message() << "\n";
    exit = 2;
    return false;
  }
  if (Speaks()) Announce(p, *plugins);
  const RunRequest request = RequestOf(p);
  const auto start = std::chrono::steady_clock::now();
  RunOutcome done = runs_.Run(request, *plugins);
  if (done.kept > 0) {
    kept_[p.index] = done.kept;
    if (done.result) {
      results_[p.index] = *std::move(done.result);
      ran_ += std::min(done.kept, Repetitions(p));
    }
    return true;
  }
  ran_ += done.ran;
  if (done.result) results_[p.index] = *std::move(done.result);
  if (done.failed) Failed(e.name(), done.failure);
  unwritten_ += done.unwritten;
  if (done.stopped_by != 0) stopped_by_ = done.stopped_by;
  if (done.exit != 0) exit = done.exit;
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++timed_;
  return done.go_on;
}

// What the run of `p` now due asks of core (core/run/one_run.h).
RunRequest SuiteRunner::RequestOf(const PlannedRun& p) const {
  RunRequest r;
  r.experiment = &p.run.experiment;
  r.suite = SuiteOf(p);
  r.run_dir = p.run_dir;
  r.label = Label(p, plan_.runs.size(), convergence_runs_.size(), repetition_);
  r.index = p.index;
  r.repetition = repetition_;
  r.repetitions = Repetitions(p);
  r.processes = p.processes;
  r.per_node = p.per_node;
  r.launch = p.launch;
  r.here = p.here;
  r.resume = repetition_ == 1 && !p.tuning;
  r.spares_repetitions = SparesRepetitions();
  r.origin = p.run.origin;
  r.convergence = p.convergence;
  if (auto before = results_.find(p.index); before != results_.end()) r.before = &before->second;
  return r;
}

absl::StatusOr<PluginSet>& SuiteRunner::Configured(const PlannedRun& p) {
  auto it = configured_.find(p.index);
  if (it == configured_.end()) it = configured_.emplace(p.index, host_.Configure(p.run.experiment)).first;
  return it->second;
}

absl::StatusOr<PluginSet> SuiteRunner::TakeConfigured(const PlannedRun& p) {
  auto it = configured_.find(p.index);
  if (it == configured_.end()) return host_.Configure(p.run.experiment);
  absl::StatusOr<PluginSet> taken = std::move(it->second);
  configured_.erase(it);
  return taken;
}

// Prints what is about to run, with the suite's time left as far as the runs so far tell.
void SuiteRunner::Announce(const PlannedRun& p, const PluginSet& plugins) {
  if (repetition_ > 1 && !p.tuning) {  // its plugins and engine were said at its first repetition
    std::cout << "\n== " << p.run.experiment.name() << ", repetition " << repetition_ << " of " << Repetitions(p)
              << "\n" << SuiteProgressLine(ran_ + failed_, planned_ - spared_, seconds_, timed_, UpTo()) << std::flush;
    return;
  }
  std::vector<std::string> names;
  for (const LoadedPlugin* plugin : plugins.plugins()) names.push_back(plugin->name);
  std::cout << "\n== " << p.run.experiment.name() << " (" << p.processes << " process"
            << (p.processes == 1 ? "" : "es") << (p.here || p.launch ? "" : ", on rank 0") << ")\n"
            << "  plugins: " << (names.empty() ? "none" : absl::StrJoin(names, ", ")) << "\n";
  if (p.processes > 1 || p.run.experiment.distributed().force_engine()) {
    std::cout << "  engine:  " << DescribeEngine(plugins.engine_parts()) << "\n";
  }
  if (!p.tuning) std::cout << SuiteProgressLine(ran_ + failed_, planned_ - spared_, seconds_, timed_, UpTo());
  std::cout.flush();
}

int SuiteRunner::Kept(const PlannedRun& p) const {
  auto it = kept_.find(p.index);
  return it == kept_.end() ? 0 : it->second;
}

// A run that failed: said now, and listed in the report.
void SuiteRunner::Failed(const std::string& name, const std::string& why) {
  const std::string printable = Printable(why);
  std::cerr << "vit_ddp: " << name << ": " << printable << "\n";
  failures_.emplace_back(name, printable);
  ++failed_;
}

// The sweeps' fastest, the report and the count of runs; the exit code so far.
int SuiteRunner::Finish() {
  if (!Speaks()) return failed_ + unwritten_ > 0 ? 1 : 0;
  std::map<std::string, std::pair<std::string, double>> fastest;  // per sweep: name, median steps/s
  for (const PlannedRun& p : plan_.runs) {
    auto it = results_.find(p.index);
    if (p.run.sweep.empty() || it == results_.end()) continue;
    const double median = MedianStepsPerSecond(it->second);
    if (median > fastest[p.run.sweep].second) fastest[p.run.sweep] = {p.run.experiment.name(), median};
  }
  for (const auto& [sweep, best] : fastest) {
    std::cout << "\nsweep " << sweep << ": fastest " << best.first << " at " << best.second << " steps/s (median)\n";
  }
  Report();
  int completed = 0;
  for (const PlannedRun& p : plan_.runs) completed += p.selected && results_.count(p.index) > 0;
  for (const PlannedRun& p : tune_runs_) completed += results_.count(p.index) > 0;
  std::cout << "\n" << completed << " of " << (plan_.tune ? tune_runs_.size() : plan_.selected) << " run(s) completed";
  if (failed_ > 0) std::cout << ", " << failed_ << " failed";
  // A run whose result or report could not be written ran all the same: it is said
  // apart, not counted as a failed run.
  if (unwritten_ > 0) std::cout << "; " << unwritten_ << " result or report file(s) not written";
  if (stopped_by_ != 0) std::cout << "; stopped by signal " << stopped_by_;
  std::cout << "\n";
  return failed_ + unwritten_ > 0 ? 1 : 0;
}

}  // namespace ddplab
