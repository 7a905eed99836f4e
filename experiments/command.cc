#include "experiments/command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/build_flags.h"
#include "core/record/device_report.h"
#include "core/launch/distributed.h"
#include "core/config/experiment.h"
#include "core/config/plugin_names.h"
#include "core/config/validate.h"
#include "core/model/torchscript/scripted_model.h"
#include "core/plugin/plugin_host.h"
#include "experiments/cli.h"
#include "experiments/plan.h"
#include "experiments/run_paths.h"
#include "experiments/suite_runner.h"
#include "experiments/worker.h"
#include "torch/version.h"
#include "tune/allreduce_sweep.h"
#include "tune/tuner.h"

namespace ddplab {
namespace {

// A module's file as the experiment file at `experiment_path` names it: relative to that
// file's directory, made absolute and normal, so that the check and every worker read
// the same file wherever they start.
std::string ModuleFile(const std::string& experiment_path, const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path experiment = fs::absolute(fs::path(experiment_path), error);
  if (error) experiment = fs::path(experiment_path);
  const fs::path module(file);
  return (module.is_absolute() ? module : experiment.parent_path() / module).lexically_normal().string();
}

// A TorchScript model (#65) is loaded and checked where the file names it: its file, the
// arguments of forward, a first batch and the memory its parameters need, against the GPU's
// where it runs on GPUs, else the host's.
absl::Status CheckScriptedModel(const v1::Experiment& e, const std::string& path, const DeviceReport& device) {
  if (!e.model().has_torchscript()) return absl::OkStatus();
  v1::ScriptedModel spec = e.model().torchscript();
  spec.set_file(ModuleFile(path, spec.file()));
  const bool gpus = e.distributed().device() == v1::Distributed::CUDA ||
                    (e.distributed().device() == v1::Distributed::DEVICE_UNSPECIFIED && !device.gpus.empty());
  const int64_t memory = gpus && !device.gpus.empty() ? device.gpus.front().memory_bytes
                                                      : static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  return ScriptedModel::Load(spec, "", at::kCPU, memory).status();
}

// Each module's file as ModuleFile makes it, for the runs.
void ResolveModuleFiles(const std::string& path, v1::Suite& suite) {
  for (v1::Experiment& e : *suite.mutable_experiment()) {
    if (!e.model().has_torchscript()) continue;
    v1::ScriptedModel* m = e.mutable_model()->mutable_torchscript();
    if (!m->file().empty()) m->set_file(ModuleFile(path, m->file()));
  }
}

// The seed study on GPUs; on a machine (or build) without them, its CPU miniature.
std::string DefaultExperiment(const DeviceReport& device) {
  return device.gpus.empty() ? "experiments/cpu_smoke.textproto" : "experiments/seed_study.textproto";
}

// Checks the flags that need no file and reads the environment; an exit code when
// something is wrong.
std::optional<int> CheckFlags(Invocation& in) {
  const int nnodes = absl::GetFlag(FLAGS_nnodes), node_rank = absl::GetFlag(FLAGS_node_rank);
  if (nnodes < 1 || (nnodes > 1 && absl::GetFlag(FLAGS_master_port) == 0)) {
    std::cerr << "vit_ddp: --nnodes=" << nnodes
              << " needs to be at least 1, and above 1 needs --master_port (and --master_addr): every node must "
                 "meet rank 0 at the same address\n";
    return 2;
  }
  if (node_rank < 0 || node_rank >= nnodes) {
    std::cerr << "vit_ddp: --node_rank=" << node_rank << " must be in [0, --nnodes=" << nnodes << ")\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_nproc_per_node) < 0) {
    std::cerr << "vit_ddp: --nproc_per_node=" << absl::GetFlag(FLAGS_nproc_per_node) << " must be at least 0\n";
    return 2;
  }
  absl::StatusOr<std::optional<WorkerEnv>> worker = WorkerEnvFromEnvironment();
  if (!worker.ok()) {
    std::cerr << "vit_ddp: " << worker.status().message() << "\n";
    return 2;
  }
  in.worker = *worker;
  if (in.worker && std::getenv(kWorkerTaskVariable) == nullptr &&
      (absl::GetFlag(FLAGS_nproc_per_node) > 0 || nnodes > 1)) {
    std::cerr << "vit_ddp: started by " << in.worker->launcher
              << " (its variables are set): the job's processes are its, not --nproc_per_node's or --nnodes'\n";
    return 2;
  }
  in.device = CollectDeviceReport();
  const std::string profile = absl::GetFlag(FLAGS_profile);
  if (profile == "nsys") {
    in.nsys = FindOnPath("nsys");
    if (in.nsys.empty() && std::getenv(kWorkerTaskVariable) == nullptr) {
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
  in.profile_steps = absl::GetFlag(FLAGS_profile_steps);
  if (in.torch_profile && (in.profile_steps < 1 || in.profile_steps > 100)) {
    std::cerr << "vit_ddp: --profile_steps=" << in.profile_steps << ": expected 1 to 100\n";
    return 2;
  }
  in.skip_completed = absl::GetFlag(FLAGS_skip_completed);
  in.all_repetitions = absl::GetFlag(FLAGS_all_repetitions);
  in.launch.nnodes = nnodes;
  in.launch.node_rank = node_rank;
  in.launch.master_addr = absl::GetFlag(FLAGS_master_addr);
  in.launch.master_port = absl::GetFlag(FLAGS_master_port);
  for (const std::string& dir : absl::GetFlag(FLAGS_plugin_dir)) {
    // A directory that is not there finds nothing: said now, not as a plugin missing later.
    std::error_code error;
    if (!std::filesystem::is_directory(UserPath(dir), error)) {
      std::cerr << "vit_ddp: --plugin_dir=" << Printable(dir) << ": no such directory\n";
      return 2;
    }
    in.plugin_dirs.push_back(UserPath(dir));
  }
  if (std::string built = RunfilesPath(in.argv0, "plugins"); !built.empty()) in.plugin_dirs.push_back(built);
  return std::nullopt;
}

Machine MachineOf(const DeviceReport& device) {
  Machine m;
  m.cuda_build = DDPLAB_CUDA_BUILD;
  m.gpus = static_cast<int>(device.gpus.size());
  for (const GpuInfo& gpu : device.gpus) {
    if (m.gpu_memory_bytes == 0 || gpu.memory_bytes < m.gpu_memory_bytes) m.gpu_memory_bytes = gpu.memory_bytes;
  }
  m.cpu_cores = device.cpu_cores;
  m.host_memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  return m;
}

// Reads, resolves and checks the suite at `path`, its experiments' plugins configured as
// the file is read. Only the plugins the file names are loaded (Note [Only the plugins
// named]), and those the tuner sets; a value a plugin refuses is reported at its place
// in the file.
absl::StatusOr<v1::Suite> ReadSuite(const Invocation& in, PluginHost& host, const std::string& path) {
  absl::StatusOr<std::string> text = ReadExperimentFile(path);
  if (!text.ok()) return text.status();
  std::set<std::string> named = PluginNamesIn(*text);
  if (absl::GetFlag(FLAGS_tune)) named.merge(tune::TunerPlugins());
  host.Want(named);
  // Where distributed.device is left out it is this machine's: on CPUs, a setting only a
  // GPU run uses is reported where the file has it (#64), not silently ignored.
  const std::string why_cpu = !DDPLAB_CUDA_BUILD ? "a CPU build" : in.device.gpus.empty() ? "a machine without GPUs" : "";
  std::map<std::string, std::vector<std::string>> lossy;  // experiment: its lossy plugins
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(*text, path, host.schema(), [&](const v1::Experiment& e) {
    if (!why_cpu.empty()) {
      if (absl::Status s = CheckLeftToCpus(e, why_cpu); !s.ok()) return s;
    }
    if (absl::Status s = CheckScriptedModel(e, path, in.device); !s.ok()) return s;
    absl::StatusOr<PluginSet> configured = host.Configure(e);
    if (configured.ok() && configured->lossy()) lossy[e.name()] = configured->lossy_plugins();
    return configured.status();
  });
  if (!suite.ok()) return suite.status();
  // The convergence check measures lossy runs against an exact one: a lossy reference
  // would be found out only after its runs trained, as "not compared".
  if (suite->has_convergence() && lossy.count(suite->convergence().exact()) > 0) {
    return ErrorAtField(*text, path, host.schema(), "convergence.exact",
                        absl::StrCat("\"", suite->convergence().exact(), "\" is lossy (",
                                     absl::StrJoin(lossy[suite->convergence().exact()], ", "),
                                     "): the check's reference must be exact, an experiment without a lossy plugin"));
  }
  ResolveModuleFiles(path, *suite);
  return suite;
}

// The plan's options, from the flags.
PlanOptions PlanOptionsOf(const Invocation& in, PluginHost& host) {
  PlanOptions options;
  options.only = absl::GetFlag(FLAGS_only);
  options.nproc_per_node = absl::GetFlag(FLAGS_nproc_per_node);
  options.nnodes = in.launch.nnodes;
  options.node_rank = in.launch.node_rank;
  options.output_dir = absl::GetFlag(FLAGS_output_dir);
  options.profiling_with_nsys = !in.nsys.empty();
  options.tune = absl::GetFlag(FLAGS_tune);
  options.listing = absl::GetFlag(FLAGS_print_experiments);
  options.schema = &host.schema();
  return options;
}

// Loads, plans and checks the suite; an exit code when it cannot run (or was only to be
// printed).
std::optional<int> Prepare(const Invocation& in, PluginHost& host, Plan& plan) {
  const std::string file = absl::GetFlag(FLAGS_experiment);
  std::string path = file.empty() ? DefaultExperiment(in.device) : UserPath(file);
  if (file.empty()) {
    if (std::string shipped = RunfilesPath(in.argv0, path); !shipped.empty()) path = shipped;
  }
  absl::StatusOr<v1::Suite> suite = ReadSuite(in, host, path);
  if (!suite.ok()) {
    std::cerr << "vit_ddp: " << Printable(suite.status().message()) << "\n";
    return 2;
  }
  const bool speaks = !in.worker || in.worker->rank == 0;
  if (speaks) std::cout << FormatDeviceReport(in.device) << "\n";
  const PlanOptions options = PlanOptionsOf(in, host);
  std::optional<JobPlace> place;
  if (in.worker) {
    place = JobPlace{in.worker->launcher, in.worker->rank, in.worker->world_size, in.worker->local_world_size};
  }
  absl::StatusOr<Plan> planned = MakePlan(*suite, MachineOf(in.device), place, options);
  if (!planned.ok()) {
    std::cerr << "vit_ddp: " << Printable(absl::StrCat(path, ": ", planned.status().message())) << "\n";
    return 2;
  }
  plan = *std::move(planned);
  if (const std::vector<std::string> missing = OnlyNamesNotFound(plan, options.only);
      (plan.selected == 0 || !missing.empty()) && !plan.tune) {
    std::vector<std::string> names, experiments;
    for (const PlannedRun& p : plan.runs) {
      names.push_back(p.run.experiment.name());
      const std::string& origin = p.run.origin.empty() ? p.run.experiment.name() : p.run.origin;
      if (std::find(experiments.begin(), experiments.end(), origin) == experiments.end()) experiments.push_back(origin);
    }
    std::cerr << "vit_ddp: --only=" << Printable(options.only) << ": " << path << " has no experiment or run named "
              << Printable(absl::StrJoin(missing, ", ")) << "; its experiments: " << absl::StrJoin(experiments, ", ")
              << "; its runs: " << absl::StrJoin(names, ", ") << "\n";
    return 2;
  }
  if (speaks) {
    for (const std::string& note : PlanNotes(plan, MachineOf(in.device), options)) std::cout << note << "\n\n";
  }
  if (absl::GetFlag(FLAGS_print_experiments)) {
    std::cout << FormatPlan(plan, host.schema());
    return 0;
  }
  if (speaks) {
    if (file.empty() && in.device.gpus.empty()) std::cout << "No GPU here: running the CPU suite (a tiny ViT on 2 Gloo processes).\n";
    std::cout << "Suite \"" << plan.suite << "\" from " << (file.empty() ? DefaultExperiment(in.device) : file) << ": ";
    if (plan.tune) {
      std::cout << "tuning " << plan.runs[plan.tune_base].run.experiment.name() << "\n";
    } else {
      std::cout << plan.selected << " run(s)\n";
    }
  }
  return std::nullopt;
}

}  // namespace

int RunVitDdp(int argc, char** argv) {
  absl::StatusOr<CommandLine> line = ParseCommandLine(std::vector<std::string>(argv, argv + argc));
  if (!line.ok()) {
    std::cerr << "vit_ddp: " << Printable(line.status().message()) << "\n";
    return 2;
  }
  if (line->action == CommandLine::kHelp) {
    std::cout << HelpText();
    return 0;
  }
  if (line->action == CommandLine::kVersion) {
    std::cout << VersionText(absl::StrCat("LibTorch ", TORCH_VERSION, DDPLAB_CUDA_BUILD ? ", CUDA build" : ", CPU build"));
    return 0;
  }
  if (!line->positional.empty()) {
    std::cerr << "vit_ddp: unexpected argument \"" << line->positional[0] << "\"; see --help\n";
    return 2;
  }
  Invocation in;
  in.argv0 = argv[0];
  in.self = SelfPath(argv[0]);
  in.allreduce_sweep = tune::SweepIntoResult;
  if (std::optional<int> exit = CheckFlags(in)) return *exit;
  if (!line->nproc_word.empty()) {  // torchrun's auto, gpu or cpu, counted here
    absl::StatusOr<int> n =
        NprocFromWord(line->nproc_word, static_cast<int>(in.device.gpus.size()), in.device.cpu_cores);
    if (!n.ok()) {
      std::cerr << "vit_ddp: " << n.status().message() << "\n";
      return 2;
    }
    absl::SetFlag(&FLAGS_nproc_per_node, *n);
  }
  if (line->standalone && absl::GetFlag(FLAGS_nnodes) > 1) {
    std::cerr << "vit_ddp: --standalone is one node (as torchrun's), and --nnodes=" << absl::GetFlag(FLAGS_nnodes)
              << " asks for more: leave one of them out\n";
    return 2;
  }
  PluginHost host(in.plugin_dirs);
  // A worker of ddplab's launcher: the run it was handed, or its pool's runs; nothing else.
  if (const char* task = std::getenv(kWorkerTaskVariable)) return RunWorkerTask(in, host, task);
  absl::StatusOr<std::optional<TaskChannel>> channel = TaskChannel::FromEnvironment();
  if (!channel.ok()) {
    std::cerr << "vit_ddp: " << channel.status().message() << "\n";
    return 2;
  }
  if (channel->has_value()) return ServeTasks(in, host, **channel);
  Plan plan;
  if (std::optional<int> exit = Prepare(in, host, plan)) return *exit;
  // One job per output directory: a second is refused before it runs anything.
  std::vector<std::unique_ptr<DirectoryLock>> locks;
  if (!in.worker || in.worker->rank == 0) {
    std::set<std::string> dirs;
    for (size_t i = 0; i < plan.runs.size(); ++i) {
      const PlannedRun& p = plan.runs[i];
      const bool tuned = plan.tune && i == plan.tune_base;
      const std::string dir = tuned ? plan.tune_dir : p.run_dir;
      if ((!p.selected && !tuned) || !dirs.insert(dir).second) continue;
      absl::StatusOr<std::unique_ptr<DirectoryLock>> lock = DirectoryLock::Take(dir);
      if (!lock.ok()) {
        std::cerr << "vit_ddp: " << lock.status().message() << "\n";
        return 2;
      }
      locks.push_back(*std::move(lock));
    }
  }
  return SuiteRunner(in, host, plan).RunAll();
}

}  // namespace ddplab
