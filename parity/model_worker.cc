// One rank of ddplab's side of the model parity test (model_parity_test.py), started as
// one of N ranks over Gloo (RANK, WORLD_SIZE, ... and DDPLAB_RENDEZVOUS_FILE, as ddplab's
// launcher sets them).
//
// For each file of --experiments in turn (a suite of one experiment: a module the user
// brings, its file's path absolute, and the run's plugins), it configures the plugins
// through the plugin host as vit_ddp does, trains the run as one of vit_ddp's pooled
// workers would (the trainer, the engine, the plugins' hooks), and writes the parameters
// after the last step, then the buffers, to --out_dir/dl_<experiment>_r<rank>.f32: raw
// little-endian float32, the tensors one after another in the module's order. One process
// a rank for every run: a process start costs more than a run (under the sanitizers most).
//
// Exit codes: 0 done, 13 setup error, 22 the run failed, 23 the file could not be
// written.
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/marshalling.h"
#include "absl/strings/str_cat.h"
#include "core/config/experiment.h"
#include "core/launch/distributed.h"
#include "core/plugin/plugin_host.h"
#include "core/training/trainer.h"
#include "tools/cpp/runfiles/runfiles.h"

ABSL_FLAG(std::vector<std::string>, experiments, {}, "the suites of one experiment to train, in turn");
ABSL_FLAG(std::string, out_dir, "", "where to write this rank's trained parameters and buffers (float32)");

namespace ddplab {
namespace {

// Trains the experiment of the suite at `file` on this rank; the exit code.
int TrainOne(PluginHost& host, const WorkerEnv& env, const std::string& file) {
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(text, file, host.schema());
  absl::StatusOr<PluginSet> plugins =
      suite.ok() ? host.Configure(suite->experiment(0)) : absl::StatusOr<PluginSet>(suite.status());
  if (!plugins.ok()) {
    std::cerr << "rank " << env.rank << ": " << plugins.status() << "\n";
    return 13;
  }
  const v1::Experiment& e = suite->experiment(0);
  std::vector<at::Tensor> trained;
  TrainOptions options;
  options.worker = env;
  options.plugins = &*plugins;
  options.trained_state = &trained;
  absl::StatusOr<v1::RunResult> result = Train(e, options);
  if (!result.ok()) {
    std::cerr << e.name() << ": rank " << env.rank << ": " << result.status() << "\n";
    return 22;
  }
  std::ofstream out(absl::StrCat(absl::GetFlag(FLAGS_out_dir), "/dl_", e.name(), "_r", env.rank, ".f32"),
                    std::ios::binary);
  for (const at::Tensor& t : trained) {
    const at::Tensor f = t.to(at::kFloat).contiguous();
    out.write(static_cast<const char*>(f.data_ptr()), static_cast<std::streamsize>(f.numel() * sizeof(float)));
  }
  return out ? 0 : 23;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  at::set_num_threads(1);  // as the reference's ranks: the same kernels' sums, in the same order
  absl::StatusOr<std::optional<WorkerEnv>> env = WorkerEnvFromEnvironment();
  if (!env.ok() || !env->has_value()) {
    std::cerr << "not started as a rank of a job: " << env.status() << "\n";
    return 13;
  }
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::Create(argv[0], &error));
  PluginHost host({runfiles ? runfiles->Rlocation("ddplab/plugins") : ""});
  for (const std::string& file : absl::GetFlag(FLAGS_experiments)) {
    if (const int code = TrainOne(host, **env, file); code != 0) return code;
  }
  return 0;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::Main(argc, argv); }
