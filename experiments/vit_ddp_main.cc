// vit_ddp: runs ddplab experiments.
//
//   bazel run //experiments:vit_ddp                        # the default suite
//   bazel run //experiments:vit_ddp -- --experiment=experiments/naive_ddp.textproto
//
// It loads and validates the experiment file, loads and configures each experiment's
// plugins, prints the device report, and runs each experiment of one process: trains,
// measures, prints a summary and writes the result as JSON under the output directory.
// Experiments of several processes need the data-parallel engine, which this build does
// not have yet: they are listed as skipped.

#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/device_report.h"
#include "core/experiment.h"
#include "core/plugin_host.h"
#include "core/trainer.h"
#include "google/protobuf/text_format.h"
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

namespace ddplab {
namespace {

// `bazel run` starts the binary in its runfiles; users name files relative to where
// they typed the command, which Bazel passes as BUILD_WORKING_DIRECTORY.
std::string UserPath(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || cwd == nullptr || *cwd == '\0') return path;
  return absl::StrCat(cwd, "/", path);
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

std::string DefaultExperiment() {
  return DDPLAB_CUDA_BUILD ? "experiments/seed_study.textproto" : "experiments/cpu_smoke.textproto";
}

std::string Describe(const EngineOptions& o) {
  std::string out = absl::StrCat("bucket_cap ", o.bucket_cap_bytes / 1e6, " MB, first bucket ",
                                 o.first_bucket_cap_bytes / 1e6, " MB, static_graph ",
                                 o.static_graph ? "on" : "off", ", gradient_as_bucket_view ",
                                 o.gradient_as_bucket_view ? "on" : "off");
  if (!o.sweep_bucket_cap_bytes.empty()) {
    std::vector<std::string> caps;
    for (int64_t b : o.sweep_bucket_cap_bytes) caps.push_back(absl::StrCat(b / 1e6));
    absl::StrAppend(&out, ", sweep ", absl::StrJoin(caps, "/"), " MB");
  }
  return out;
}

// gpus_per_node, where 0 means one process per local GPU (2 on a machine without GPUs).
int ProcessesPerNode(const v1::Experiment& experiment, const DeviceReport& device) {
  if (experiment.distributed().gpus_per_node() > 0) return experiment.distributed().gpus_per_node();
  bool cpu = experiment.distributed().device() == v1::Distributed::CPU || device.gpus.empty();
  return cpu ? 2 : static_cast<int>(device.gpus.size());
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs ddplab experiments: data-parallel ViT training, measured.\n"
      "  vit_ddp [--experiment=FILE] [--plugin_dir=DIR,...] [--output_dir=DIR]");
  absl::ParseCommandLine(argc, argv);

  std::string file = absl::GetFlag(FLAGS_experiment);
  // The default suite ships in the runfiles, beside the binary.
  std::string path = file.empty() ? DefaultExperiment() : UserPath(file);
  if (file.empty()) {
    if (std::string shipped = RunfilesPath(argv[0], path); !shipped.empty()) path = shipped;
  }
  absl::StatusOr<v1::Suite> suite = LoadExperimentFile(path);
  if (!suite.ok()) {
    std::cerr << "vit_ddp: " << suite.status().message() << "\n";
    return 2;
  }

  std::vector<std::string> dirs;
  for (const std::string& dir : absl::GetFlag(FLAGS_plugin_dir)) dirs.push_back(UserPath(dir));
  if (std::string built = RunfilesPath(argv[0], "plugins"); !built.empty()) dirs.push_back(built);
  PluginHost host(dirs);

  const DeviceReport device = CollectDeviceReport();
  std::cout << FormatDeviceReport(device) << "\n";

  int trained = 0, skipped = 0, failed = 0;
  std::cout << "Suite \"" << suite->name() << "\" from " << (file.empty() ? DefaultExperiment() : file) << ": "
            << suite->experiment_size() << " experiment(s)\n";
  for (v1::Experiment& experiment : *suite->mutable_experiment()) {
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
      std::cerr << "vit_ddp: " << path << ": " << plugins.status().message() << "\n";
      return 2;
    }
    std::vector<std::string> names;
    for (const LoadedPlugin* p : plugins->plugins()) {
      names.push_back(absl::StrCat(p->name, " ", p->info.plugin_version));
    }
    std::cout << "\n== " << experiment.name() << "\n"
              << "  plugins: " << (names.empty() ? "none" : absl::StrJoin(names, ", ")) << "\n"
              << "  engine:  " << Describe(plugins->ResolveEngineOptions()) << "\n";
    if (absl::GetFlag(FLAGS_print_experiments)) {
      std::string text;
      google::protobuf::TextFormat::PrintToString(experiment, &text);
      std::cout << text;
    }
    int processes = ProcessesPerNode(experiment, device) * experiment.distributed().nodes();
    if (processes > 1 || experiment.distributed().force_engine()) {
      std::cout << "  skipped: " << processes << " process(es) with the data-parallel engine\n";
      ++skipped;
      continue;
    }
    absl::StatusOr<v1::RunResult> result = Train(experiment, {.suite = suite->name()});
    if (!result.ok()) {
      std::cerr << "vit_ddp: " << experiment.name() << ": " << result.status().message() << "\n";
      ++failed;
      continue;
    }
    std::cout << FormatRunSummary(*result);
    absl::StatusOr<std::string> written = WriteRunResult(*result, experiment.output().directory());
    if (!written.ok()) {
      std::cerr << "vit_ddp: " << written.status().message() << "\n";
      ++failed;
      continue;
    }
    std::cout << "  result: " << *written << "\n";
    ++trained;
  }
  std::cout << "\n" << trained << " of " << suite->experiment_size() << " experiment(s) run";
  if (skipped > 0) {
    std::cout << "; " << skipped
              << " skipped: runs of several processes need the data-parallel engine, which "
                 "this build does not have yet";
  }
  std::cout << "\n";
  if (failed > 0) return 1;
  return 0;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::Main(argc, argv); }
