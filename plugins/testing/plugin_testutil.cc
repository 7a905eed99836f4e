#include "plugins/testing/plugin_testutil.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include <torch/cuda.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/build_flags.h"
#include "core/engine/allreduce_hook.h"
#include "core/config/experiment.h"
#include "core/launch/launcher.h"
#include "core/launch/worker_pool.h"
#include "core/plugin/pytorch_form.h"
#include "core/testing/worker_flags.h"
#include "google/protobuf/util/json_util.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace ddplab::testing {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

Runfiles& TestRunfiles() {
  static Runfiles* runfiles = [] {
    std::string error;
    return Runfiles::CreateForTest(&error);
  }();
  return *runfiles;
}

// One host for the process, as in the binary: each library is loaded once, and every
// Configure call registers its callbacks afresh.
PluginHost& Host() {
  static PluginHost* host = new PluginHost({TestRunfiles().Rlocation("ddplab/plugins")});
  return *host;
}

}  // namespace

namespace {

// A valid experiment of `plugins_text` (plugin entries, and the experiment's precision
// and optimizer where it gives them: SGD otherwise) on `distributed`.
// Whether `text` sets the experiment's optimizer: "optimizer {" as a field of its own, not
// the end of a plugin's name ("sharded_optimizer {").
bool SetsOptimizer(const std::string& text) {
  for (size_t at = text.find("optimizer {"); at != std::string::npos; at = text.find("optimizer {", at + 1)) {
    if (at == 0 || !(std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_')) return true;
  }
  return false;
}

std::string ExperimentText(const std::string& plugins_text, const std::string& distributed) {
  return absl::StrCat("name: \"plugin_test\" model { preset: VIT_TINY_TEST } data { batch_size: 2 } "
                      "steps { measured: 1 } ",
                      SetsOptimizer(plugins_text) ? "" : "optimizer { sgd { learning_rate: 0.1 } } ",
                      "distributed { ", distributed, " } ", plugins_text);
}

}  // namespace

absl::StatusOr<PluginSet> ConfigureWithPlugins(const std::string& plugins_text, const std::string& distributed) {
  absl::StatusOr<v1::Suite> suite =
      ParseExperimentText(ExperimentText(plugins_text, distributed), "plugin_test", Host().schema());
  if (!suite.ok()) return suite.status();
  return Host().Configure(suite->experiment(0));
}

std::string PyTorchCodeFor(const std::string& plugins_text, const std::string& distributed) {
  absl::StatusOr<PluginSet> set = ConfigureWithPlugins(plugins_text, distributed);
  if (!set.ok()) return std::string(set.status().message());
  absl::StatusOr<v1::Suite> suite =
      ParseExperimentText(ExperimentText(plugins_text, distributed), "x", Host().schema());
  if (!suite.ok()) return std::string(suite.status().message());
  std::vector<std::string> names, ddplab_only;
  for (const LoadedPlugin* p : set->plugins()) names.push_back(p->name);
  const std::string code = PyTorchCode(suite->experiment(0), /*processes=*/2, names, set->pytorch_forms(), &ddplab_only);
  return absl::StrCat(code, "ddplab only: ", absl::StrJoin(ddplab_only, ", "));
}

absl::Status LoadWithPlugins(const std::string& text) {
  return ParseExperimentText(text, "test.textproto", Host().schema(),
                             [](const v1::Experiment& e) { return Host().Configure(e).status(); })
      .status();
}

absl::StatusOr<PluginSet> ConfigureText(const std::string& text, v1::Experiment* experiment) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(text, "test.textproto", Host().schema());
  if (!suite.ok()) return suite.status();
  *experiment = suite->experiment(0);
  return Host().Configure(*experiment);
}

std::string RefusedTogether(const std::string& mine, const std::string& theirs) {
  const std::string a = "plugin { " + mine + " }", b = "plugin { " + theirs + " }";
  for (const std::string& plugins : {a + " " + b, b + " " + a}) {
    absl::StatusOr<PluginSet> set = ConfigureWithPlugins(plugins);
    if (set.ok()) return plugins + ": accepted";
    const std::string message(set.status().message());
    for (const std::string& entry : {mine, theirs}) {
      const std::string name = entry.substr(0, entry.find(' '));
      if (message.find("plugin \"" + name + "\"") == std::string::npos) {
        return plugins + ": the message does not name " + name + ": " + message;
      }
    }
    if (message.find("list one of them") == std::string::npos) {
      return plugins + ": the message does not say to list one of them: " + message;
    }
  }
  return "";
}

std::unique_ptr<CommHook> MakeHook(const PluginSet& set) {
  static ProcessGroupPtr* group = [] {
    WorkerEnv env;
    env.master_port = FreePort();
    return new ProcessGroupPtr(CreateProcessGroup(env, false, std::chrono::seconds(30)).value());
  }();
  return MakeHookChain(set.engine_parts().hooks, CommContext{group->get(), 0, 1, false, {}, nullptr, {}, {}});
}

Packing PackOneGradient(const CommHook& hook) {
  const std::shared_ptr<const BucketCodec> codec = hook.Codec();
  const at::Tensor grad = at::randn({2, 3});
  const at::Tensor buffer = codec->Buffer(grad.numel(), grad.options());
  buffer.fill_(std::nan(""));
  const std::vector<at::Tensor> out = codec->Pack({grad}, {buffer.view(grad.sizes())});
  Packing packing;
  packing.buffer_dtype = buffer.scalar_type();
  const at::Tensor in_buffer = buffer.to(at::kFloat).view(grad.sizes());
  packing.packed = out.size() == 1 && out[0].is_alias_of(buffer) &&
                   at::allclose(in_buffer, grad, /*rtol=*/1e-2, /*atol=*/1e-2);
  packing.handed_as_is = out.size() == 1 && out[0].is_same(grad) && in_buffer.isnan().all().item<bool>();
  return packing;
}

GradBucket OneGradientBucket(const at::Tensor& values, int64_t step) {
  GradBucket bucket;
  bucket.buffer = values.reshape(-1).clone();
  bucket.gradients = {bucket.buffer.view(values.sizes())};
  bucket.offsets = {0};
  bucket.sizes = {values.sizes().vec()};
  bucket.parameters = {0};
  bucket.is_last = true;
  bucket.step = step;
  return bucket;
}

GradBucket BucketOfGradients(const std::vector<at::Tensor>& gradients, int64_t step, double fill) {
  GradBucket bucket;
  int64_t offset = 0;
  for (size_t k = 0; k < gradients.size(); ++k) {
    bucket.offsets.push_back(offset);
    bucket.sizes.push_back(gradients[k].sizes().vec());
    bucket.parameters.push_back(k);
    offset += gradients[k].numel();
  }
  bucket.buffer = at::full({offset}, fill);
  bucket.gradients = gradients;
  bucket.is_last = true;
  bucket.step = step;
  return bucket;
}

std::string TrainAndCompare(int ranks, const std::string& plugins_text, const std::vector<std::string>& flags) {
  // One pool of workers for the test binary's life: a worker costs more to start than a
  // run of the tiny ViT (Note [Persistent workers]). It has 3 ranks (more where a run asks
  // for more), and a run of fewer takes the first ones (engine_worker's --world). A failed
  // run ends the pool; the next run starts another.
  static std::unique_ptr<WorkerPool> pool;  // idle at exit: it ends
  static int pool_ranks = 0;
  if (pool == nullptr || pool->ended() || pool_ranks < ranks) {
    pool.reset();
    LaunchOptions options;
    options.nproc_per_node = std::max(3, ranks);
    absl::StatusOr<std::unique_ptr<WorkerPool>> started =
        WorkerPool::Start({TestRunfiles().Rlocation("ddplab/core/testing/engine_worker")}, options);
    if (!started.ok()) return absl::StrCat("cannot start the workers: ", started.status().message());
    pool = *std::move(started);
    pool_ranks = options.nproc_per_node;
  }
  std::vector<std::string> task{absl::StrCat("--plugins=", plugins_text), absl::StrCat("--world=", ranks)};
  task.insert(task.end(), flags.begin(), flags.end());
  const LaunchResult r = pool->Run(EncodeWorkerFlags(task));
  if (r.exit_code == 0) return "";
  return absl::StrCat("exit ", r.exit_code, ": ", r.message);
}

absl::StatusOr<v1::RunResult> TrainAndMeasure(int ranks, const std::string& plugins_text,
                                              const std::vector<std::string>& flags) {
  static int calls = 0;
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : ".", "/train_and_measure_", ++calls);
  std::vector<std::string> with_result = flags;
  with_result.push_back("--result_dir=" + dir);
  if (std::string failed = TrainAndCompare(ranks, plugins_text, with_result); !failed.empty()) {
    return absl::InternalError(failed);
  }
  std::ifstream in(dir + "/engine_worker.json");
  std::stringstream json;
  json << in.rdbuf();
  v1::RunResult result;
  if (auto s = google::protobuf::util::JsonStringToMessage(json.str(), &result); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot read ", dir, "/engine_worker.json: ", s.ToString()));
  }
  return result;
}

std::string TrainAndCompareOnGpus(const std::string& plugins_text, const std::vector<std::string>& flags) {
  std::vector<std::string> gpu_flags{"--cuda", "--grad_tolerance=1e-3"};
  gpu_flags.insert(gpu_flags.end(), flags.begin(), flags.end());  // a later flag wins
  return TrainAndCompare(2, plugins_text, gpu_flags);
}

bool HasTwoGpus() { return DDPLAB_CUDA_BUILD && torch::cuda::device_count() >= 2; }

const std::map<int, RanksRun>& RunOnRanks(const std::string& worker, const std::vector<int>& worlds) {
  static std::map<std::pair<std::string, std::vector<int>>, std::map<int, RanksRun>> done;
  if (auto it = done.find({worker, worlds}); it != done.end()) return it->second;
  std::map<int, RanksRun>& runs = done[{worker, worlds}];
  auto fail_all = [&](const std::string& failure) -> const std::map<int, RanksRun>& {
    for (int world : worlds) runs[world].failure = failure;
    return runs;
  };
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  if (runfiles == nullptr || worlds.empty()) return fail_all("no runfiles, or no worlds: " + error);
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string out = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/ranks_run_", done.size());
  LaunchOptions options;
  options.nproc_per_node = *std::max_element(worlds.begin(), worlds.end());
  const LaunchResult launched =
      Launch({runfiles->Rlocation(worker), "--worlds=" + absl::StrJoin(worlds, ","), "--out=" + out}, options);
  if (launched.exit_code != 0) {
    return fail_all(absl::StrCat("exit ", launched.exit_code, " (the job of worlds ", absl::StrJoin(worlds, ", "),
                                 "): ", launched.message));
  }
  for (int world : worlds) {
    std::ifstream in(absl::StrCat(out, ".", world));
    std::string name;
    double value;
    while (in >> name >> value) runs[world].values[name] = value;
    if (runs[world].values.empty()) runs[world].failure = "rank 0 wrote no values";
  }
  return runs;
}

}  // namespace ddplab::testing
