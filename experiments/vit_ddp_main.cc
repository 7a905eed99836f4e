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

// `bazel run` starts the binary in its runfiles; users name files relative to where
// they typed the command, which Bazel passes as BUILD_WORKING_DIRECTORY.
std::string UserPath(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/') return path;
  if (cwd != nullptr && *cwd != '\0') return absl::StrCat(cwd, "/", path);
  char buffer[4096];
  return getcwd(buffer, sizeof(buffer)) ? absl::StrCat(buffer, "/", path) : path;
}

// Where `path` (relative to the workspace, e.g. "experiments/x.textproto") stands in
// this binary's runfiles, or "" when the binary runs without them.
std::string RunfilesPath(const std::string& argv0, const std::string& path) {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::Create(argv0, &error));
  if (runfiles == nullptr) return "";
  std::string found = runfiles->Rlocation("ddplab/" + path);
  struct stat st;
  return stat(found.c_str(), &st) == 0 ? found : "";
}

// This executable, to start workers from.
std::string SelfPath(const char* argv0) {
  char buffer[4096];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return argv0;
  buffer[n] = '\0';
  return buffer;
}

// The seed study on GPUs; on a machine (or build) without them, its CPU miniature.
std::string DefaultExperiment(const DeviceReport& device) {
  return device.gpus.empty() ? "experiments/cpu_smoke.textproto" : "experiments/seed_study.textproto";
}

// `program` found on PATH, or "".
std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "", ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", program);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The transports NCCL's logs for one run name (files <prefix>*), or "".
std::string NcclTransport(const std::string& dir, const std::string& prefix) {
  std::string all;
  if (DIR* d = opendir(dir.c_str())) {
    while (struct dirent* entry = readdir(d)) {
      if (!absl::StartsWith(entry->d_name, prefix)) continue;
      std::string path = absl::StrCat(dir, "/", entry->d_name);
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      all += text.str();
    }
    closedir(d);
  }
  return NcclTransportFromLog(all);
}

// gpus_per_node, where 0 means one process per local GPU (2 on a machine without GPUs).
int ProcessesPerNode(const v1::Experiment& experiment, const DeviceReport& device) {
  if (absl::GetFlag(FLAGS_nproc_per_node) > 0) return absl::GetFlag(FLAGS_nproc_per_node);
  if (experiment.distributed().gpus_per_node() > 0) return experiment.distributed().gpus_per_node();
  bool cpu = experiment.distributed().device() == v1::Distributed::CPU || device.gpus.empty();
  return cpu ? 2 : static_cast<int>(device.gpus.size());
}

// The result rank 0 wrote for `experiment`.
absl::StatusOr<v1::RunResult> ReadResult(const std::string& directory, const std::string& suite,
                                         const std::string& experiment) {
  std::string path = absl::StrCat(directory, "/", suite, "/", experiment, ".json");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  v1::RunResult result;
  if (!in || !google::protobuf::util::JsonStringToMessage(text.str(), &result).ok()) {
    return absl::NotFoundError(absl::StrCat("no result at ", path));
  }
  return result;
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
  const bool is_worker = worker->has_value();
  const bool speaks = !is_worker || (*worker)->rank == 0;

  const DeviceReport device = CollectDeviceReport();
  std::string nsys;
  if (absl::GetFlag(FLAGS_profile) == "nsys") {
    nsys = FindOnPath("nsys");
    if (nsys.empty() && !is_worker) {
      std::cerr << "vit_ddp: --profile=nsys needs Nsight Systems, and there is no nsys on PATH. "
                   "Install Nsight Systems (or put its bin directory on PATH), or run without "
                   "--profile; every run writes a Chrome trace of its measured steps anyway.\n";
      return 2;
    }
  } else if (absl::GetFlag(FLAGS_profile) != "none" && absl::GetFlag(FLAGS_profile) != "torch") {
    std::cerr << "vit_ddp: --profile=" << absl::GetFlag(FLAGS_profile) << ": expected none, nsys or torch\n";
    return 2;
  }
  const bool torch_profile = absl::GetFlag(FLAGS_profile) == "torch";
  if (torch_profile && (absl::GetFlag(FLAGS_profile_steps) < 1 || absl::GetFlag(FLAGS_profile_steps) > 100)) {
    std::cerr << "vit_ddp: --profile_steps=" << absl::GetFlag(FLAGS_profile_steps) << ": expected 1 to 100\n";
    return 2;
  }

  std::string file = absl::GetFlag(FLAGS_experiment);
  std::string path = file.empty() ? DefaultExperiment(device) : UserPath(file);
  if (file.empty()) {
    // The default suite ships in the runfiles, beside the binary.
    if (std::string shipped = RunfilesPath(argv[0], path); !shipped.empty()) path = shipped;
    if (device.gpus.empty() && !is_worker) {
      std::cout << "No GPU here: running the CPU suite (a tiny ViT on 2 Gloo processes).\n";
    }
  }
  std::vector<std::string> dirs;
  for (const std::string& dir : absl::GetFlag(FLAGS_plugin_dir)) dirs.push_back(UserPath(dir));
  if (std::string built = RunfilesPath(argv[0], "plugins"); !built.empty()) dirs.push_back(built);
  PluginHost host(dirs);
  // Each experiment's plugins are loaded and configured as the file is read, so that a
  // value a plugin refuses is reported at its place in the file.
  absl::StatusOr<v1::Suite> suite = LoadExperimentFile(
      path, [&host](const v1::Experiment& e) { return host.Configure(e).status(); });
  if (!suite.ok()) {
    std::cerr << "vit_ddp: " << suite.status().message() << "\n";
    return 2;
  }

  if (!is_worker) std::cout << FormatDeviceReport(device) << "\n";

  std::vector<SuiteRun> experiments = ExpandSweeps(*suite);
  const std::string only = absl::GetFlag(FLAGS_only);
  if (!is_worker) {
    std::cout << "Suite \"" << suite->name() << "\" from " << (file.empty() ? DefaultExperiment(device) : file)
              << ": " << experiments.size() << " run(s)\n";
  }
  if (!only.empty() && std::none_of(experiments.begin(), experiments.end(), [&](const SuiteRun& run) {
        return run.experiment.name() == only;
      })) {
    // A name the suite does not have runs nothing: say so, with the names it has (a
    // swept experiment's runs are named after the sweep, e.g. <name>_nvlink).
    std::vector<std::string> names;
    for (const SuiteRun& run : experiments) names.push_back(run.experiment.name());
    std::cerr << "vit_ddp: --only=" << only << ": " << path << " has no run of that name; its runs: "
              << absl::StrJoin(names, ", ") << "\n";
    return 2;
  }
  int ran = 0, failed = 0;
  // Per sweep: the fastest run and its steps/s.
  std::map<std::string, std::pair<std::string, double>> fastest;
  std::vector<v1::RunResult> results;  // for the report, in order
  std::string report_dir;
  int index = 0;
  for (SuiteRun& run : experiments) {
    v1::Experiment& experiment = run.experiment;
    ++index;
    if (!only.empty() && experiment.name() != only) continue;
    // Relative output directories are taken from where the user ran the command.
    const std::string& output_dir = absl::GetFlag(FLAGS_output_dir);
    experiment.mutable_output()->set_directory(
        UserPath(output_dir.empty() ? experiment.output().directory() : output_dir));
    if (experiment.distributed().device() == v1::Distributed::CUDA && !DDPLAB_CUDA_BUILD) {
      std::cerr << "vit_ddp: " << path << ": experiment \"" << experiment.name()
                << "\" asks for distributed.device CUDA, but this is a CPU build (LibTorch "
                << TORCH_VERSION << " without CUDA, or --config=cpu)\n";
      return 2;
    }
    absl::StatusOr<PluginSet> plugins = host.Configure(experiment);
    if (!plugins.ok()) {
      std::cerr << "vit_ddp: " << path << ": experiment \"" << experiment.name() << "\": "
                << plugins.status().message() << "\n";
      return 2;
    }
    const int per_node = ProcessesPerNode(experiment, device);
    const int processes = per_node * absl::GetFlag(FLAGS_nnodes);
    if (!is_worker) {
      std::vector<std::string> names;
      for (const LoadedPlugin* p : plugins->plugins()) names.push_back(p->name);
      std::cout << "\n== " << experiment.name() << " (" << processes << " process"
                << (processes == 1 ? "" : "es") << ")\n"
                << "  plugins: " << (names.empty() ? "none" : absl::StrJoin(names, ", ")) << "\n";
      if (processes > 1 || experiment.distributed().force_engine()) {
        std::cout << "  engine:  " << DescribeEngine(plugins->engine_parts()) << "\n";
      }
      if (absl::GetFlag(FLAGS_print_experiments)) {
        std::string text;
        google::protobuf::TextFormat::PrintToString(experiment, &text);
        std::cout << text;
      }
      std::cout.flush();
    }

    const std::string run_dir = absl::StrCat(experiment.output().directory(), "/", suite->name());
    if (!is_worker && report_dir.empty()) report_dir = run_dir;
    const std::string label = absl::StrCat("[", index, "/", experiments.size(), "] ", experiment.name());
    if (!is_worker && absl::GetFlag(FLAGS_skip_completed)) {
      absl::StatusOr<v1::RunResult> done =
          ReadResult(experiment.output().directory(), suite->name(), experiment.name());
      if (done.ok()) {
        std::cout << "  skipped: completed before (" << run_dir << "/" << experiment.name() << ".json)\n";
        results.push_back(*done);
        ++ran;
        continue;
      }
    }
    if (!is_worker && (processes > 1 || !nsys.empty())) {
      // Start the workers: this binary again, for this experiment only.
      if (absl::Status made = MakeDirectories(run_dir); !made.ok()) {
        std::cerr << "vit_ddp: " << made.message() << "\n";
        return 1;
      }
      std::vector<std::string> args;
      if (!nsys.empty()) {
        args = {nsys, "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
                "--trace=cuda,nvtx,osrt,nccl", absl::StrCat("--output=", run_dir, "/", experiment.name(), "_rank%q{RANK}")};
      }
      for (const std::string& a : {SelfPath(argv[0]), absl::StrCat("--experiment=", path),
                                   absl::StrCat("--only=", experiment.name()),
                                   absl::StrCat("--output_dir=", experiment.output().directory()),
                                   absl::StrCat("--progress_label=", label)}) {
        args.push_back(a);
      }
      for (const std::string& dir : dirs) args.push_back(absl::StrCat("--plugin_dir=", dir));
      if (torch_profile) {
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
      if (std::getenv("NCCL_DEBUG") == nullptr && !device.gpus.empty()) {
        env = {{"NCCL_DEBUG", "INFO"},
               {"NCCL_DEBUG_FILE", absl::StrCat(run_dir, "/", nccl_log_prefix, "%h.%p.log")}};
      }
      LaunchResult result;
      {
        ScopedEnvironment scoped(env);
        result = Launch(args, launch);
      }
      std::vector<std::string> parts;
      for (int r = 0; r < processes; ++r) {
        parts.push_back(absl::StrCat(run_dir, "/", experiment.name(), ".trace.rank", r, ".json"));
      }
      if (absl::Status merged = MergeTraces(parts, absl::StrCat(run_dir, "/", experiment.name(), ".trace.json"));
          !merged.ok() && result.exit_code == 0) {
        std::cerr << "vit_ddp: " << merged.message() << "\n";
      }
      if (result.exit_code != 0) {
        std::cerr << "vit_ddp: " << experiment.name() << ": " << result.message << "\n";
        ++failed;
        continue;
      }
      ++ran;
      absl::StatusOr<v1::RunResult> r = ReadResult(experiment.output().directory(), suite->name(), experiment.name());
      if (r.ok()) {
        if (std::string used = NcclTransport(run_dir, nccl_log_prefix); !used.empty()) {
          r->set_nccl_transport(used);
          (void)WriteRunResult(*r, experiment.output().directory());
        }
        if (!run.sweep.empty() && r->steps_per_s() > fastest[run.sweep].second) {
          fastest[run.sweep] = {experiment.name(), r->steps_per_s()};
        }
        results.push_back(*r);
      }
      continue;
    }

    TrainOptions train;
    train.suite = suite->name();
    train.plugins = &*plugins;
    if (is_worker) train.worker = **worker;
    if (speaks) train.progress_label = is_worker ? absl::GetFlag(FLAGS_progress_label) : label;
    if (absl::Status made = MakeDirectories(run_dir); !made.ok()) {
      std::cerr << "vit_ddp: " << made.message() << "\n";
      return 1;
    }
    train.trace_path = absl::StrCat(run_dir, "/", experiment.name(), ".trace.rank",
                                    is_worker ? (*worker)->rank : 0, ".json");
    if (torch_profile) {
      train.torch_profile_path = absl::StrCat(run_dir, "/", experiment.name(), ".torch_trace.rank",
                                              is_worker ? (*worker)->rank : 0, ".json");
      train.torch_profile_steps = absl::GetFlag(FLAGS_profile_steps);
    }
    absl::StatusOr<v1::RunResult> result = Train(experiment, train);
    if (!result.ok()) {
      std::cerr << "vit_ddp: " << experiment.name() << ": " << result.status().message() << "\n";
      ++failed;
      if (is_worker) return 1;  // the launcher ends the other ranks
      continue;
    }
    ++ran;
    if (!speaks) continue;
    std::cout << FormatRunSummary(*result);
    absl::StatusOr<std::string> written = WriteRunResult(*result, experiment.output().directory());
    if (!written.ok()) {
      std::cerr << "vit_ddp: " << written.status().message() << "\n";
      ++failed;
      continue;
    }
    std::cout << "  result: " << *written << "\n";
    std::cout.flush();
    if (!is_worker) {
      if (absl::Status merged = MergeTraces({train.trace_path}, absl::StrCat(run_dir, "/", experiment.name(), ".trace.json"));
          !merged.ok()) {
        std::cerr << "vit_ddp: " << merged.message() << "\n";
      }
      results.push_back(*result);
    }
    if (!run.sweep.empty() && result->steps_per_s() > fastest[run.sweep].second) {
      fastest[run.sweep] = {experiment.name(), result->steps_per_s()};
    }
  }
  for (const auto& [sweep, best] : fastest) {
    std::cout << "\nsweep " << sweep << ": fastest " << best.first << " at " << best.second
              << " steps/s\n";
  }
  if (!is_worker && !results.empty()) {
    SuiteReport report = MakeReport(results);
    std::cout << "\n" << FormatMarkdown(report) << "\n" << Recommend(report);
    if (absl::Status s = WriteReport(report, report_dir); !s.ok()) {
      std::cerr << "vit_ddp: " << s.message() << "\n";
      ++failed;
    } else {
      std::cout << "report: " << report_dir << "/report.{md,json,csv,png}\n";
    }
  }
  if (!is_worker) {
    std::cout << "\n" << ran << " of " << experiments.size() << " run(s) completed";
    if (failed > 0) std::cout << ", " << failed << " failed";
    std::cout << "\n";
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::Main(argc, argv); }
