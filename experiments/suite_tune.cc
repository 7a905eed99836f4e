// SuiteRunner's --tune (Note [The tuner], tune/tuner.h): the tuner asks for runs, which
// run as the suite's own do (launched workers, results written, repetitions joined),
// filed under the suite "<suite>_tune" so that the suite's results and report stay as
// they were.
#include <algorithm>
#include <functional>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/plugin/pytorch_form.h"
#include "experiments/suite_runner.h"
#include "tune/tuner.h"

namespace ddplab {
namespace {

// `e`'s levers as PyTorch code to train with (tune::Runner::TrainingCode): its lossy
// plugins (PluginSet::lossy_plugins) are left out and named.
absl::StatusOr<std::string> TrainingCodeOf(PluginHost& host, const v1::Experiment& e, int processes) {
  absl::StatusOr<PluginSet> all = host.Configure(e);
  if (!all.ok()) return all.status();
  v1::Experiment exact = e;
  const std::vector<std::string>& lossy = all->lossy_plugins();
  exact.clear_plugin();
  for (const v1::Plugin& entry : e.plugin()) {
    if (std::find(lossy.begin(), lossy.end(), entry.name()) == lossy.end()) *exact.add_plugin() = entry;
  }
  absl::StatusOr<PluginSet> kept = host.Configure(exact);
  if (!kept.ok()) return kept.status();
  std::vector<std::string> names, ddplab_only;
  for (const LoadedPlugin* p : kept->plugins()) names.push_back(p->name);
  std::string code = PyTorchCode(exact, processes, names, kept->pytorch_forms(), &ddplab_only);
  if (!lossy.empty()) {
    code = absl::StrCat("# left out: ", absl::StrJoin(lossy, ", "),
                        " (lossy: train with it once a suite's convergence check says \"within\")\n", code);
  }
  if (!ddplab_only.empty()) absl::StrAppend(&code, "# ddplab only, not in PyTorch: ", absl::StrJoin(ddplab_only, ", "), "\n");
  return code;
}

// A tune::Runner over the suite's plugin host and a function that runs.
class RunnerOf : public tune::Runner {
 public:
  using RunFn = std::function<absl::StatusOr<std::vector<absl::StatusOr<v1::RunResult>>>(
      const std::vector<v1::Experiment>&, int)>;
  // `processes`: the plan's for the tuned run (the job's, as its runs had it).
  RunnerOf(PluginHost& host, int processes, RunFn run) : host_(host), processes_(processes), run_(std::move(run)) {}
  const ExperimentSchema& schema() override { return host_.schema(); }
  absl::Status Check(const v1::Experiment& e) override { return host_.Configure(e).status(); }
  absl::StatusOr<std::string> TrainingCode(const v1::Experiment& e) override {
    return TrainingCodeOf(host_, e, processes_);
  }
  absl::StatusOr<std::vector<absl::StatusOr<v1::RunResult>>> Run(const std::vector<v1::Experiment>& experiments,
                                                                 int repetitions) override {
    return run_(experiments, repetitions);
  }

 private:
  PluginHost& host_;
  int processes_;
  RunFn run_;
};

}  // namespace

void SuiteRunner::RunTune(int& exit) {
  const PlannedRun& base = plan_.runs[plan_.tune_base];
  tune::TuneRequest request;
  request.base = base.run.experiment;
  request.settings = *plan_.tune;
  request.machine = ReportMachine(in_.device, plan_);
  request.cache_path = absl::StrCat(base.run.experiment.output().directory(), "/tune_cache/",
                                    base.run.experiment.name(), ".json");
  request.answer_path = absl::StrCat(plan_.tune_dir, "/", base.run.experiment.name(), "_tuned.textproto");
  request.say = [](const std::string& line) { std::cout << "\n" << line << "\n" << std::flush; };
  RunnerOf runner(host_, base.processes, [this, &exit](const std::vector<v1::Experiment>& experiments, int repetitions) {
    return RunForTuner(experiments, repetitions, exit);
  });
  std::cout << "\n== tuning " << base.run.experiment.name() << " (" << base.processes << " processes): "
            << plan_.tune->caps_mib.size() << " bucket caps, the " << plan_.tune->verify << " fastest predicted verified "
            << plan_.tune->repetitions << " time(s) each\n";
  absl::StatusOr<v1::Tuning> tuning = tune::Tune(request, runner);
  if (!tuning.ok()) {
    std::cerr << "vit_ddp: --tune: " << tuning.status().message() << "\n";
    if (exit == 0) exit = 1;
    return;
  }
  tuning_ = *std::move(tuning);
}

absl::StatusOr<std::vector<absl::StatusOr<v1::RunResult>>> SuiteRunner::RunForTuner(
    const std::vector<v1::Experiment>& experiments, int repetitions, int& exit) {
  const PlannedRun& base = plan_.runs[plan_.tune_base];
  const size_t first = tune_runs_.size();
  for (const v1::Experiment& e : experiments) {
    PlannedRun p = base;
    p.run.experiment = e;
    p.run.sweep.clear();
    p.index = static_cast<int>(plan_.runs.size() + convergence_runs_.size() + tune_runs_.size()) + 1;
    p.selected = true;
    p.tuning = true;
    p.suite = plan_.tune_suite;
    p.run_dir = plan_.tune_dir;
    tune_runs_.push_back(std::move(p));
  }
  for (repetition_ = 1; repetition_ <= repetitions; ++repetition_) {
    for (size_t i = first; i < tune_runs_.size(); ++i) {
      if (!Run(tune_runs_[i], exit)) return absl::AbortedError("the tuning was stopped");
    }
  }
  std::vector<absl::StatusOr<v1::RunResult>> results;
  for (size_t i = first; i < tune_runs_.size(); ++i) {
    auto it = results_.find(tune_runs_[i].index);
    if (it == results_.end()) {
      results.push_back(absl::UnavailableError(absl::StrCat(tune_runs_[i].run.experiment.name(), " did not finish")));
    } else {
      results.push_back(it->second);
    }
  }
  return results;
}

}  // namespace ddplab
