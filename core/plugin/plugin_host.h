// Finds, loads and checks plugins, and collects what they register.
//
//   ddplab::PluginHost host({runfiles_plugins_dir});
//   absl::StatusOr<ddplab::v1::Suite> suite = ddplab::LoadExperimentFile(path, host.schema());
//   absl::StatusOr<ddplab::PluginSet> plugins = host.Configure(suite->experiment(0));
//   if (!plugins.ok()) { ... }   // unknown name, bad build, rejected config, refused pair
//   ddplab::DataParallelEngine engine(params, group, plugins->engine_parts());
//
// A plugin named N is the file <dir>/N/libN.so (the layout of plugins/ in the binary's
// runfiles) or <dir>/libN.so in one of the search directories. Its library carries its
// configuration message, which joins the experiment schema (host.schema(); Note [Plugin
// configs by name], core/config/plugin_schema.h).
// Composition is checked once, here, from what each plugin registered: two plugins that
// take the same extension point, or one that refuses a point another takes
// (PluginRegistrar::Refuse), are refused with both named.

#ifndef DDPLAB_CORE_PLUGIN_PLUGIN_HOST_H_
#define DDPLAB_CORE_PLUGIN_PLUGIN_HOST_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/engine/engine.h"
#include "core/plugin/plugin_api.h"
#include "ddplab/v1/result.pb.h"
#include "core/config/plugin_schema.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {
namespace internal_plugin_host {
class Registrar;
}  // namespace internal_plugin_host

// A loaded plugin library. The library stays loaded for the life of the process.
struct LoadedPlugin {
  std::string name;
  std::string path;
  DdplabPluginInfo info;
  const google::protobuf::Descriptor* config;  // its configuration message
  std::string digest;                          // of its library's bytes (PluginBuild.digest)
};

// `plugin` as a result records it (RunResult.plugin_builds).
v1::PluginBuild BuildRecord(const LoadedPlugin& plugin);

// This binary's build identity, as a plugin must match it.
struct BuildIdentity {
  std::string torch_version;
  int cxx11_abi;
  int protobuf_version;
  int cuda_build;
};
BuildIdentity HostBuildIdentity();

// What the plugins of one experiment registered.
class PluginSet {
 public:
  PluginSet() = default;
  PluginSet(PluginSet&&) = default;
  PluginSet& operator=(PluginSet&&) = default;

  // The engine's parts: the defaults where no plugin took a point.
  const EngineParts& engine_parts() const { return parts_; }
  const std::vector<std::unique_ptr<StepCallbacks>>& step_callbacks() const { return step_callbacks_; }
  // What runs the training steps; none: the trainer, eagerly.
  const std::shared_ptr<const StepRunnerFactory>& step_runner() const { return step_runner_; }
  // The step runner's verdict on a run of `experiment` once its optimizer is built, where
  // `optimizer_capturable` is the built one's (Optimizer::capturable): what the file
  // cannot say, such as a LibTorch without AdamW's fused kernels. OK, or the plugin's
  // refusal by name. PluginHost::Configure vetted the rest before anything ran.
  absl::Status VetStepRunner(const v1::Experiment& experiment, bool optimizer_capturable) const;
  // The plugins in the order they were configured.
  const std::vector<const LoadedPlugin*>& plugins() const { return plugins_; }
  // A plugin of diagnostic status is listed: the run is not a way to train.
  bool diagnostic() const;
  // A plugin's reduction is lossy (PluginRegistrar::Lossy), which ones, and how often the
  // error is sampled (0: never).
  bool lossy() const { return !lossy_plugins_.empty(); }
  const std::vector<std::string>& lossy_plugins() const { return lossy_plugins_; }
  int sample_error_every() const { return sample_error_every_; }
  // Each plugin's PyTorch form, by plugin name; a plugin that gave none is absent.
  const std::map<std::string, PyTorchForm>& pytorch_forms() const { return pytorch_; }

 private:
  friend class PluginHost;
  friend class internal_plugin_host::Registrar;
  // Refuses points taken twice, or taken where another plugin refuses them.
  absl::Status CheckComposition() const;
  // The step runner's verdict on `experiment` with these plugins: "" or why not. Without
  // `optimizer_capturable`, the optimizer as the file asks for it (its foreach form or not).
  std::string StepRunnerRefusal(const v1::Experiment& experiment,
                                std::optional<bool> optimizer_capturable = std::nullopt) const;
  struct Refusal {
    std::string plugin;
    ExtensionPoint point;
    std::string why;
  };
  EngineParts parts_;
  std::map<ExtensionPoint, std::vector<std::string>> takers_;  // by point, in order
  std::vector<Refusal> refusals_;
  std::vector<const LoadedPlugin*> plugins_;
  std::vector<std::unique_ptr<StepCallbacks>> step_callbacks_;
  std::shared_ptr<const StepRunnerFactory> step_runner_;
  std::vector<std::string> sampling_plugins_;  // lossy plugins that sample their error
  std::map<std::string, PyTorchForm> pytorch_;
  // The hook chain by role, in listing order (engine_parts() has them in chain order).
  std::map<ExtensionPoint, std::vector<HookWrapper>> hooks_;
  std::vector<std::string> lossy_plugins_;  // in listing order
  int sample_error_every_ = 0;
};

class PluginHost;

// Why a result's plugins are not the ones `host` loads now: a plugin of another version,
// a library whose bytes changed, one that no longer loads, or a result that records no
// builds although it used plugins (an older ddplab wrote it); "" where they are the same.
std::string ChangedPluginBuild(const v1::RunResult& recorded, PluginHost& host);

// Where a run's workers loaded another build of a plugin than `host` did (a library
// rewritten while a suite ran: the launcher keeps the bytes it read, Note [A private
// copy], and each worker reads the file anew), what differs, naming the plugin, both
// digests and what to do; "" where every build is the host's.
std::string RanAnotherBuild(const v1::RunResult& run, PluginHost& host);

class PluginHost {
 public:
  // `search_dirs` are tried in order for plugins found by name.
  explicit PluginHost(std::vector<std::string> search_dirs);
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  // Loads the plugin `name` from the search directories (`explicit_path` instead, when
  // given). Loading the same plugin twice returns the first load.
  absl::StatusOr<const LoadedPlugin*> Load(absl::string_view name, absl::string_view explicit_path = "");

  // Loads only these plugins for the schema (those found among them): the plugins an
  // experiment file names (PluginNamesIn, Note [Only the plugins named]) and any a caller
  // sets itself. Without it the schema loads every plugin found. Called after schema(),
  // the names not loaded yet are loaded and the schema built again (the earlier one stays
  // valid for whoever holds it).
  void Want(const std::set<std::string>& names);

  // The experiment schema with the plugins found in the search directories, all of them
  // or those wanted (Want): the first call loads them (one that fails to load is left
  // out, its error kept for a file that names it).
  const ExperimentSchema& schema();

  // Loads every plugin the experiment lists, hands each its configuration and collects
  // what they register. Errors start with the field at fault, "plugin[1]" or
  // "plugin[1].bucket_sizing.first_bucket_cap_mb", then ": " and what is wrong, so that the
  // experiment loader can point at the text (ConfigCheck, core/config/experiment.h).
  absl::StatusOr<PluginSet> Configure(const v1::Experiment& experiment);

  // The names of the plugins found in the search directories, sorted.
  std::vector<std::string> Available() const;

  const std::vector<std::string>& search_dirs() const { return search_dirs_; }

 private:
  // The library of plugin `name`: `explicit_path`, else the first in the search directories.
  absl::StatusOr<std::string> Find(absl::string_view name, absl::string_view explicit_path) const;

  std::vector<std::string> search_dirs_;
  std::map<std::string, std::unique_ptr<LoadedPlugin>> loaded_;  // by path
  std::shared_ptr<const ExperimentSchema> schema_;
  std::vector<std::shared_ptr<const ExperimentSchema>> earlier_schemas_;  // still held by callers
  std::optional<std::set<std::string>> wanted_;  // none: every plugin found
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_PLUGIN_PLUGIN_HOST_H_
