// One rank of ddplab's side of the model parity test (model_parity_test.py), started as
// one of N ranks over Gloo (RANK, WORLD_SIZE, ... and DDPLAB_RENDEZVOUS_FILE, as ddplab's
// launcher sets them).
//
// It reads --experiment (a suite of one experiment: a module the user brings, its file's
// path absolute, and the run's plugins), loads and configures the plugins through the
// plugin host as vit_ddp does, trains the run as one of vit_ddp's workers would (the
// trainer, the engine, the plugins' hooks), and writes the parameters after the last step
// to --out: raw little-endian float32, the tensors one after another in the module's
// order.
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
#include "absl/strings/str_cat.h"
#include "core/config/experiment.h"
#include "core/launch/distributed.h"
#include "core/plugin/plugin_host.h"
#include "core/training/trainer.h"
#include "tools/cpp/runfiles/runfiles.h"

ABSL_FLAG(std::string, experiment, "", "the suite of one experiment to train");
ABSL_FLAG(std::string, out, "", "where to write this rank's trained parameters (float32)");

namespace ddplab {
namespace {

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  at::set_num_threads(1);  // as the reference's ranks: the same kernels' sums, in the same order
  absl::StatusOr<std::optional<WorkerEnv>> env = WorkerEnvFromEnvironment();
  if (!env.ok() || !env->has_value()) {
    std::cerr << "not started as a rank of a job: " << env.status() << "\n";
    return 13;
  }
  const int rank = (*env)->rank;
  std::ifstream in(absl::GetFlag(FLAGS_experiment));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::Create(argv[0], &error));
  PluginHost host({runfiles ? runfiles->Rlocation("ddplab/plugins") : ""});
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(text, absl::GetFlag(FLAGS_experiment), host.schema());
  absl::StatusOr<PluginSet> plugins =
      suite.ok() ? host.Configure(suite->experiment(0)) : absl::StatusOr<PluginSet>(suite.status());
  if (!plugins.ok()) {
    std::cerr << "rank " << rank << ": " << plugins.status() << "\n";
    return 13;
  }
  std::vector<at::Tensor> trained;
  TrainOptions options;
  options.worker = **env;
  options.plugins = &*plugins;
  options.trained_parameters = &trained;
  absl::StatusOr<v1::RunResult> result = Train(suite->experiment(0), options);
  if (!result.ok()) {
    std::cerr << "rank " << rank << ": " << result.status() << "\n";
    return 22;
  }
  std::ofstream out(absl::GetFlag(FLAGS_out), std::ios::binary);
  for (const at::Tensor& t : trained) {
    const at::Tensor f = t.to(at::kFloat).contiguous();
    out.write(static_cast<const char*>(f.data_ptr()), static_cast<std::streamsize>(f.numel() * sizeof(float)));
  }
  return out ? 0 : 23;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::Main(argc, argv); }
