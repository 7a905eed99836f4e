// vit_ddp: runs ddplab experiments.
//
//   bazel run //experiments:vit_ddp                        # the default suite
//   bazel run //experiments:vit_ddp -- --experiment=experiments/naive_ddp.textproto
//   bazel run //experiments:vit_ddp -- --experiment=FILE --nproc_per_node=4
//
// It loads and validates the experiment file, configures each experiment's plugins,
// prints the device report and runs the experiments in order. An experiment of one
// process runs here. One of several processes is started as that many workers of this
// binary (one per GPU), which meet through c10d's TCPStore; when one fails the others
// are ended and the run reports which rank failed and how. The same binary runs as one
// worker under torchrun, Slurm or mpirun, which set RANK, WORLD_SIZE, MASTER_ADDR, ...
//
// Rank 0 prints each run's summary and writes its result as JSON under the output
// directory. A bucket_sizing sweep runs once per cap and names the fastest; a transport
// sweep (distributed.sweep_transport) runs each experiment once per transport.

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/device_report.h"
#include "core/distributed.h"
#include "core/experiment.h"
#include "core/launcher.h"
#include "core/plugin_host.h"
#include "core/report.h"
#include "core/trainer.h"
#include "experiments/run_paths.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "tools/cpp/runfiles/runfiles.h"

ABSL_FLAG(std::string, experiment, "",
          "Experiment or suite file (.textproto). Default: experiments/seed_study.textproto "
          "in a CUDA build, experiments/cpu_smoke.textproto in a CPU build.");
ABSL_FLAG(std::vector<std::string>, plugin_dir, {},
          "More directories to find plugins in (each holding <name>/lib<name>.so), searched "
          "before the plugins built with this binary.");
ABSL_FLAG(std::string, output_dir, "",
          "Directory for results; overrides each experiment's output.directory.");
ABSL_FLAG(bool, print_experiments, false, "Print each resolved experiment in text format.");
ABSL_FLAG(int, nproc_per_node, 0,
          "Processes (GPUs) per node for every experiment; 0: as each experiment says.");
ABSL_FLAG(int, nnodes, 1, "Nodes in the job (as torchrun's --nnodes).");
ABSL_FLAG(int, node_rank, 0, "This node's rank, 0 to nnodes-1 (as torchrun's --node_rank).");
ABSL_FLAG(std::string, master_addr, "127.0.0.1",
          "Address of node 0, where rank 0 serves the rendezvous store.");
ABSL_FLAG(int, master_port, 0, "Port of the rendezvous store; 0: a free port (one node only).");
ABSL_FLAG(std::string, only, "", "Run only the experiment of this name.");
ABSL_FLAG(bool, skip_completed, false,
          "Skip experiments whose result is already in the output directory (a rerun after a "
          "crash picks up where the suite stopped).");
ABSL_FLAG(std::string, profile, "none",
          "nsys: run every worker under Nsight Systems, capturing the measured steps "
          "(cudaProfilerApi range) with CUDA, NVTX, OS runtime and NCCL traces, one report per rank. "
          "torch: LibTorch's own profiler (Kineto, CUPTI on GPUs) over --profile_steps steps run "
          "after the measured ones, one Chrome trace per rank (<experiment>.torch_trace.rank<R>.json "
          "beside the results): the operators of the main and autograd threads, and every kernel on the "
          "stream that ran it.");
ABSL_FLAG(int, profile_steps, 3, "With --profile=torch: how many steps to profile (1 to 100).");
ABSL_FLAG(std::string, progress_label, "", "Shown before the progress line (workers get this).");

namespace ddplab {
namespace {




// The seed study on GPUs; on a machine (or build) without them, its CPU miniature.
std::string DefaultExperiment(const DeviceReport& device) {
  return device.gpus.empty() ? "experiments/cpu_smoke.textproto" : "experiments/seed_study.textproto";
}



// gpus_per_node, where 0 means one process per local GPU (2 on a machine without GPUs).
int ProcessesPerNode(const v1::Experiment& experiment, const DeviceReport& device) {
  if (absl::GetFlag(FLAGS_nproc_per_node) > 0) return absl::GetFlag(FLAGS_nproc_per_node);
  if (experiment.distributed().gpus_per_node() > 0) return experiment.distributed().gpus_per_node();
  bool cpu = experiment.distributed().device() == v1::Distributed::CPU || device.gpus.empty();
  return cpu ? 2 : static_cast<int>(device.gpus.size());
}


// What one invocation works with: the flags' and the environment's answers.
struct Invocation {
  const char* argv0 = nullptr;
  std::optional<WorkerEnv> worker;  // set when this process is one worker of a job
  bool speaks = true;               // prints and writes results: not a worker, or rank 0
  DeviceReport device;
  std::string nsys;                 // --profile=nsys: its path
  bool torch_profile = false;
  std::string file, path;           // the experiment file as given, and where it is
  std::vector<std::string> plugin_dirs;
};

// Checks the flags that need no file; an exit code when they are wrong.
std::optional<int> CheckFlags(Invocation& in) {
  if (absl::GetFlag(FLAGS_nnodes) > 1 && absl::GetFlag(FLAGS_master_port) == 0) {
    std::cerr << "vit_ddp: --nnodes=" << absl::GetFlag(FLAGS_nnodes)
              << " needs --master_port (and --master_addr): every node must meet rank 0 at the "
                 "same address\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_node_rank) < 0 || absl::GetFlag(FLAGS_node_rank) >= absl::GetFlag(FLAGS_nnodes)) {
    std::cerr << "vit_ddp: --node_rank=" << absl::GetFlag(FLAGS_node_rank) << " must be in [0, --nnodes="
              << absl::GetFlag(FLAGS_nnodes) << ")\n";
    return 2;
  }
  absl::StatusOr<std::optional<WorkerEnv>> worker = WorkerEnvFromEnvironment();
  if (!worker.ok()) {
    std::cerr << "vit_ddp: " << worker.status().message() << "\n";
    return 2;
  }
  in.worker = *worker;
  in.speaks = !in.worker || in.worker->rank == 0;
  in.device = CollectDeviceReport();
  const std::string profile = absl::GetFlag(FLAGS_profile);
  if (profile == "nsys") {
    in.nsys = FindOnPath("nsys");
    if (in.nsys.empty() && !in.worker) {
      std::cerr << "vit_ddp: --profile=nsys needs Nsight Systems, and there is no nsys on PATH. "
                   "Install Nsight Systems (or put its bin directory on PATH), or run without "
                   "--profile; every run writes a Chrome trace of its measured steps anyway.\n";
      return 2;
    }
  } else if (profile != "none" && profile != "torch") {
    std::cerr << "vit_ddp: --profile=" << profile << ": expected none, nsys or torch\n";
    return 2;
  }
  in.torch_profile = profile == "torch";
  if (in.torch_profile && (absl::GetFlag(FLAGS_profile_steps) < 1 || absl::GetFlag(FLAGS_profile_steps) > 100)) {
    std::cerr << "vit_ddp: --profile_steps=" << absl::GetFlag(FLAGS_profile_steps) << ": expected 1 to 100\n";
    return 2;
  }
  return std::nullopt;
}

// Finds the experiment file (the default suite ships in the runfiles) and the plugins.
void Locate(Invocation& in) {
  in.file = absl::GetFlag(FLAGS_experiment);
  in.path = in.file.empty() ? DefaultExperiment(in.device) : UserPath(in.file);
  if (in.file.empty()) {
    if (std::string shipped = RunfilesPath(in.argv0, in.path); !shipped.empty()) in.path = shipped;
    if (in.device.gpus.empty() && !in.worker) {
      std::cout << "No GPU here: running the CPU suite (a tiny ViT on 2 Gloo processes).\n";
    }
  }
  for (const std::string& dir : absl::GetFlag(FLAGS_plugin_dir)) in.plugin_dirs.push_back(UserPath(dir));
  if (std::string built = RunfilesPath(in.argv0, "plugins"); !built.empty()) in.plugin_dirs.push_back(built);
}

// Runs a suite's runs one after another and reports them.
class SuiteRunner {
 public:
  SuiteRunner(const Invocation& in, PluginHost& host, const v1::Suite& suite, size_t runs)
      : in_(in), host_(host), suite_(suite), runs_(runs) {}
  // Runs `run`, the `index`th (from 1); false when the whole invocation must stop, with
  // `exit` its code.
  bool Run(SuiteRun& run, int index, int& exit);
  // The sweeps' fastest, the report and the count of runs; the invocation's exit code.
  int Finish();

 private:
  bool Announce(const v1::Experiment& experiment, const PluginSet& plugins, int processes);
  bool SkipCompleted(const v1::Experiment& experiment, const std::string& run_dir);
  void LaunchWorkers(const SuiteRun& run, const std::string& run_dir, const std::string& label, int per_node);
  bool TrainHere(const SuiteRun& run, const PluginSet& plugins, const std::string& run_dir,
                 const std::string& label, int& exit);
  void Keep(const SuiteRun& run, const v1::RunResult& result);

  const Invocation& in_;
  PluginHost& host_;
  const v1::Suite& suite_;
  const size_t runs_;
  int ran_ = 0, failed_ = 0;
  std::map<std::string, std::pair<std::string, double>> fastest_;  // per sweep: name, steps/s
  std::vector<v1::RunResult> results_;  // for the report, in order
  std::string report_dir_;
};

bool SuiteRunner::Run(SuiteRun& run, int index, int& exit) {
  v1::Experiment& experiment = run.experiment;
  // Relative output directories are taken from where the user ran the command.
  const std::string& output_dir = absl::GetFlag(FLAGS_output_dir);
  experiment.mutable_output()->set_directory(UserPath(output_dir.empty() ? experiment.output().directory() : output_dir));
  if (experiment.distributed().device() == v1::Distributed::CUDA && !DDPLAB_CUDA_BUILD) {
    std::cerr << "vit_ddp: " << in_.path << ": experiment \"" << experiment.name()
              << "\" asks for distributed.device CUDA, but this is a CPU build (LibTorch " << TORCH_VERSION
              << " without CUDA, or --config=cpu)\n";
    exit = 2;
    return false;
  }
  absl::StatusOr<PluginSet> plugins = host_.Configure(experiment);
  if (!plugins.ok()) {
    std::cerr << "vit_ddp: " << in_.path << ": experiment \"" << experiment.name() << "\": "
              << plugins.status().message() << "\n";
    exit = 2;
    return false;
  }
  const int per_node = ProcessesPerNode(experiment, in_.device);
  if (!Announce(experiment, *plugins, per_node * absl::GetFlag(FLAGS_nnodes))) return true;
  const std::string run_dir = absl::StrCat(experiment.output().directory(), "/", suite_.name());
  if (!in_.worker && report_dir_.empty()) report_dir_ = run_dir;
  if (!in_.worker && SkipCompleted(experiment, run_dir)) return true;
  if (absl::Status made = MakeDirectories(run_dir); !made.ok()) {
    std::cerr << "vit_ddp: " << made.message() << "\n";
    exit = 1;
    return false;
  }
  const std::string label = absl::StrCat("[", index, "/", runs_, "] ", experiment.name());
  if (!in_.worker && (per_node * absl::GetFlag(FLAGS_nnodes) > 1 || !in_.nsys.empty())) {
    LaunchWorkers(run, run_dir, label, per_node);
    return true;
  }
  return TrainHere(run, *plugins, run_dir, label, exit);
}

// Prints what is about to run; false when there is nothing more to do for it.
bool SuiteRunner::Announce(const v1::Experiment& experiment, const PluginSet& plugins, int processes) {
  if (in_.worker) return true;
  std::vector<std::string> names;
  for (const LoadedPlugin* p : plugins.plugins()) names.push_back(p->name);
  std::cout << "\n== " << experiment.name() << " (" << processes << " process" << (processes == 1 ? "" : "es")
            << ")\n"
            << "  plugins: " << (names.empty() ? "none" : absl::StrJoin(names, ", ")) << "\n";
  if (processes > 1 || experiment.distributed().force_engine()) {
    std::cout << "  engine:  " << DescribeEngine(plugins.engine_parts()) << "\n";
  }
  if (absl::GetFlag(FLAGS_print_experiments)) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(experiment, &text);
    std::cout << text;
  }
  std::cout.flush();
  return true;
}

bool SuiteRunner::SkipCompleted(const v1::Experiment& experiment, const std::string& run_dir) {
  if (!absl::GetFlag(FLAGS_skip_completed)) return false;
  absl::StatusOr<v1::RunResult> done = ReadResult(experiment.output().directory(), suite_.name(), experiment.name());
  if (!done.ok()) return false;
  std::cout << "  skipped: completed before (" << run_dir << "/" << experiment.name() << ".json)\n";
  results_.push_back(*done);
  ++ran_;
  return true;
}

// Starts the workers: this binary again, for this experiment only.
void SuiteRunner::LaunchWorkers(const SuiteRun& run, const std::string& run_dir, const std::string& label,
                                int per_node) {
  const v1::Experiment& experiment = run.experiment;
  std::vector<std::string> args;
  if (!in_.nsys.empty()) {
    args = {in_.nsys, "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
            "--trace=cuda,nvtx,osrt,nccl", absl::StrCat("--output=", run_dir, "/", experiment.name(), "_rank%q{RANK}")};
  }
  for (const std::string& a : {SelfPath(in_.argv0), absl::StrCat("--experiment=", in_.path),
                               absl::StrCat("--only=", experiment.name()),
                               absl::StrCat("--output_dir=", experiment.output().directory()),
                               absl::StrCat("--progress_label=", label)}) {
    args.push_back(a);
  }
  for (const std::string& dir : in_.plugin_dirs) args.push_back(absl::StrCat("--plugin_dir=", dir));
  if (in_.torch_profile) {
    args.push_back("--profile=torch");
    args.push_back(absl::StrCat("--profile_steps=", absl::GetFlag(FLAGS_profile_steps)));
  }
  LaunchOptions launch;
  launch.nproc_per_node = per_node;
  launch.nnodes = absl::GetFlag(FLAGS_nnodes);
  launch.node_rank = absl::GetFlag(FLAGS_node_rank);
  launch.master_addr = absl::GetFlag(FLAGS_master_addr);
  launch.master_port = absl::GetFlag(FLAGS_master_port);
  // NCCL's log says which transport its channels used; keep it beside the results.
  // (Each worker sets the experiment's own NCCL variables: NcclEnvironment.)
  const std::string nccl_log_prefix = absl::StrCat(experiment.name(), ".nccl.");
  EnvironmentList env;
  if (std::getenv("NCCL_DEBUG") == nullptr && !in_.device.gpus.empty()) {
    env = {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_FILE", absl::StrCat(run_dir, "/", nccl_log_prefix, "%h.%p.log")}};
  }
  LaunchResult result;
  {
    ScopedEnvironment scoped(env);
    result = Launch(args, launch);
  }
  std::vector<std::string> parts;
  for (int r = 0; r < per_node * launch.nnodes; ++r) {
    parts.push_back(absl::StrCat(run_dir, "/", experiment.name(), ".trace.rank", r, ".json"));
  }
  if (absl::Status merged = MergeTraces(parts, absl::StrCat(run_dir, "/", experiment.name(), ".trace.json"));
      !merged.ok() && result.exit_code == 0) {
    std::cerr << "vit_ddp: " << merged.message() << "\n";
  }
  if (result.exit_code != 0) {
    std::cerr << "vit_ddp: " << experiment.name() << ": " << result.message << "\n";
    ++failed_;
    return;
  }
  ++ran_;
  absl::StatusOr<v1::RunResult> r = ReadResult(experiment.output().directory(), suite_.name(), experiment.name());
  if (!r.ok()) return;
  if (std::string used = NcclTransport(run_dir, nccl_log_prefix); !used.empty()) {
    r->set_nccl_transport(used);
    (void)WriteRunResult(*r, experiment.output().directory());
  }
  Keep(run, *r);
}

// Trains `run` in this process (one process, or one worker of a job).
bool SuiteRunner::TrainHere(const SuiteRun& run, const PluginSet& plugins, const std::string& run_dir,
                            const std::string& label, int& exit) {
  const v1::Experiment& experiment = run.experiment;
  const int rank = in_.worker ? in_.worker->rank : 0;
  TrainOptions train;
  train.suite = suite_.name();
  train.plugins = &plugins;
  train.worker = in_.worker;
  if (in_.speaks) train.progress_label = in_.worker ? absl::GetFlag(FLAGS_progress_label) : label;
  train.trace_path = absl::StrCat(run_dir, "/", experiment.name(), ".trace.rank", rank, ".json");
  if (in_.torch_profile) {
    train.torch_profile_path = absl::StrCat(run_dir, "/", experiment.name(), ".torch_trace.rank", rank, ".json");
    train.torch_profile_steps = absl::GetFlag(FLAGS_profile_steps);
  }
  absl::StatusOr<v1::RunResult> result = Train(experiment, train);
  if (!result.ok()) {
    std::cerr << "vit_ddp: " << experiment.name() << ": " << result.status().message() << "\n";
    ++failed_;
    exit = 1;
    return !in_.worker;  // a worker stops: the launcher ends the other ranks
  }
  ++ran_;
  if (!in_.speaks) return true;
  std::cout << FormatRunSummary(*result);
  absl::StatusOr<std::string> written = WriteRunResult(*result, experiment.output().directory());
  if (!written.ok()) {
    std::cerr << "vit_ddp: " << written.status().message() << "\n";
    ++failed_;
    return true;
  }
  std::cout << "  result: " << *written << "\n";
  std::cout.flush();
  if (!in_.worker) {
    if (absl::Status merged = MergeTraces({train.trace_path}, absl::StrCat(run_dir, "/", experiment.name(), ".trace.json"));
        !merged.ok()) {
      std::cerr << "vit_ddp: " << merged.message() << "\n";
    }
  }
  Keep(run, *result);
  return true;
}

void SuiteRunner::Keep(const SuiteRun& run, const v1::RunResult& result) {
  if (!in_.worker) results_.push_back(result);
  if (!run.sweep.empty() && result.steps_per_s() > fastest_[run.sweep].second) {
    fastest_[run.sweep] = {run.experiment.name(), result.steps_per_s()};
  }
}

int SuiteRunner::Finish() {
  for (const auto& [sweep, best] : fastest_) {
    std::cout << "\nsweep " << sweep << ": fastest " << best.first << " at " << best.second << " steps/s\n";
  }
  if (!in_.worker && !results_.empty()) {
    SuiteReport report = MakeReport(results_);
    std::cout << "\n" << FormatMarkdown(report) << "\n" << Recommend(report);
    if (absl::Status s = WriteReport(report, report_dir_); !s.ok()) {
      std::cerr << "vit_ddp: " << s.message() << "\n";
      ++failed_;
    } else {
      std::cout << "report: " << report_dir_ << "/report.{md,json,csv,png}\n";
    }
  }
  if (!in_.worker) {
    std::cout << "\n" << ran_ << " of " << runs_ << " run(s) completed";
    if (failed_ > 0) std::cout << ", " << failed_ << " failed";
    std::cout << "\n";
  }
  return failed_ > 0 ? 1 : 0;
}

// The suite's runs, after --only: none when --only names no run (said, with the names).
std::optional<std::vector<SuiteRun>> SelectRuns(const v1::Suite& suite, const std::string& path) {
  std::vector<SuiteRun> runs = ExpandSweeps(suite);
  const std::string only = absl::GetFlag(FLAGS_only);
  if (only.empty() || std::any_of(runs.begin(), runs.end(), [&](const SuiteRun& r) { return r.experiment.name() == only; })) {
    return runs;
  }
  // A swept experiment's runs are named after the sweep, e.g. <name>_nvlink.
  std::vector<std::string> names;
  for (const SuiteRun& run : runs) names.push_back(run.experiment.name());
  std::cerr << "vit_ddp: --only=" << only << ": " << path << " has no run of that name; its runs: "
            << absl::StrJoin(names, ", ") << "\n";
  return std::nullopt;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs ddplab experiments: data-parallel ViT training, measured.\n"
      "  vit_ddp [--experiment=FILE] [--nproc_per_node=N] [--output_dir=DIR] ...");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::cerr << "vit_ddp: unexpected argument \"" << positional[1] << "\"; see --help\n";
    return 2;
  }
  Invocation in;
  in.argv0 = argv[0];
  if (std::optional<int> exit = CheckFlags(in)) return *exit;
  Locate(in);
  PluginHost host(in.plugin_dirs);
  // Each experiment's plugins are loaded and configured as the file is read, so that a
  // value a plugin refuses is reported at its place in the file.
  absl::StatusOr<v1::Suite> suite =
      LoadExperimentFile(in.path, [&host](const v1::Experiment& e) { return host.Configure(e).status(); });
  if (!suite.ok()) {
    std::cerr << "vit_ddp: " << suite.status().message() << "\n";
    return 2;
  }
  if (!in.worker) std::cout << FormatDeviceReport(in.device) << "\n";
  std::optional<std::vector<SuiteRun>> runs = SelectRuns(*suite, in.path);
  if (!runs) return 2;
  if (!in.worker) {
    std::cout << "Suite \"" << suite->name() << "\" from " << (in.file.empty() ? DefaultExperiment(in.device) : in.file)
              << ": " << runs->size() << " run(s)\n";
  }
  SuiteRunner runner(in, host, *suite, runs->size());
  const std::string only = absl::GetFlag(FLAGS_only);
  int index = 0, exit = 0;
  for (SuiteRun& run : *runs) {
    ++index;
    if (!only.empty() && run.experiment.name() != only) continue;
    if (!runner.Run(run, index, exit)) return exit;
  }
  const int finished = runner.Finish();
  return exit != 0 ? exit : finished;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::Main(argc, argv); }
