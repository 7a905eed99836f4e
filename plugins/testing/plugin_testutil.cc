#include "plugins/testing/plugin_testutil.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "core/experiment.h"
#include "core/launcher.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace ddplab::testing {

absl::StatusOr<PluginSet> ConfigureWithPlugins(const std::string& plugins_text,
                                               const std::string& distributed) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(
      absl::StrCat(R"pb(
        name: "plugin_test"
        model { preset: VIT_TINY_TEST }
        data { batch_size: 2 }
        steps { measured: 1 }
        optimizer { sgd { learning_rate: 0.1 } }
      )pb",
                   "distributed { ", distributed, " } ", plugins_text),
      "plugin_test");
  if (!suite.ok()) return suite.status();
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  if (runfiles == nullptr) return absl::InternalError(error);
  // One host for the process, as in the binary: each library is loaded once, and every
  // Configure call registers its callbacks afresh.
  static PluginHost* host = new PluginHost({runfiles->Rlocation("ddplab/plugins")});
  return host->Configure(suite->experiment(0));
}

absl::StatusOr<EngineOptions> ResolveWithPlugins(const std::string& plugins_text,
                                                 const std::string& distributed) {
  absl::StatusOr<PluginSet> set = ConfigureWithPlugins(plugins_text, distributed);
  if (!set.ok()) return set.status();
  return set->ResolveEngineOptions();
}

std::string RefusedTogether(const std::string& mine, const std::string& theirs) {
  const std::string a = "plugin { " + mine + " }", b = "plugin { " + theirs + " }";
  for (const std::string& plugins : {a + " " + b, b + " " + a}) {
    absl::StatusOr<EngineOptions> options = ResolveWithPlugins(plugins);
    if (options.ok()) return plugins + ": accepted";
    const std::string message(options.status().message());
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

std::unique_ptr<CommHook> MakeHook(const PluginSet& set, const EngineOptions& options) {
  static ProcessGroupPtr* group = [] {
    WorkerEnv env;
    env.master_port = FreePort();
    return new ProcessGroupPtr(CreateProcessGroup(env, false, std::chrono::seconds(30)).value());
  }();
  CommContext context;
  context.process_group = group->get();
  context.rank = 0;
  context.world_size = 1;
  context.options = &options;
  return set.comm_hook_factory()(context);
}

GradBucket OneGradientBucket(const at::Tensor& values, int64_t step) {
  GradBucket bucket;
  bucket.buffer = values.reshape(-1).clone();
  bucket.offsets = {0};
  bucket.sizes = {values.sizes().vec()};
  bucket.parameters = {0};
  bucket.is_last = true;
  bucket.step = step;
  return bucket;
}

}  // namespace ddplab::testing
