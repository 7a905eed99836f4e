#include "plugins/testing/plugin_testutil.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "core/experiment.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace ddplab::testing {

absl::StatusOr<EngineOptions> ResolveWithPlugins(const std::string& plugins_text) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(
      absl::StrCat(R"pb(
        name: "plugin_test"
        model { preset: VIT_TINY_TEST }
        data { batch_size: 2 }
        steps { measured: 1 }
        optimizer { sgd { learning_rate: 0.1 } }
        distributed { device: CPU gpus_per_node: 2 }
      )pb",
                   plugins_text),
      "plugin_test");
  if (!suite.ok()) return suite.status();
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  if (runfiles == nullptr) return absl::InternalError(error);
  // One host for the process, as in the binary: each library is loaded once, and every
  // Configure call registers its callbacks afresh.
  static PluginHost* host = new PluginHost({runfiles->Rlocation("ddplab/plugins")});
  absl::StatusOr<PluginSet> set = host->Configure(suite->experiment(0));
  if (!set.ok()) return set.status();
  return set->ResolveEngineOptions();
}

}  // namespace ddplab::testing
