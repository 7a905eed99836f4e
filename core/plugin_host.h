// Finds, loads and checks plugins, and collects what they register.
//
//   ddplab::PluginHost host({runfiles_plugins_dir});
//   absl::StatusOr<ddplab::PluginSet> plugins = host.Configure(experiment);
//   if (!plugins.ok()) { ... }        // unknown name, bad build, rejected config
//   ddplab::EngineOptions options = plugins->ResolveEngineOptions();
//
// A plugin named N is the file <dir>/N/libN.so in one of the search directories (the
// layout of plugins/ in the binary's runfiles), or the path its experiment entry gives.

#ifndef DDPLAB_CORE_PLUGIN_HOST_H_
#define DDPLAB_CORE_PLUGIN_HOST_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/plugin_api.h"
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
};

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

  // The engine's defaults with each plugin's changes applied in order.
  EngineOptions ResolveEngineOptions() const;

  // The communication hook's factory, or an empty function for the engine's own
  // all-reduce.
  const std::function<std::unique_ptr<CommHook>(const CommContext&)>& comm_hook_factory() const {
    return comm_hook_factory_;
  }
  const std::vector<std::unique_ptr<StepCallbacks>>& step_callbacks() const {
    return step_callbacks_;
  }
  // The plugins in the order they were configured.
  const std::vector<const LoadedPlugin*>& plugins() const { return plugins_; }

 private:
  friend class PluginHost;
  friend class internal_plugin_host::Registrar;
  // Refuses engine options that cannot hold together, naming the plugins that set them.
  absl::Status CheckComposition() const;
  // A plugin and the range of engine_options_ it registered.
  struct OptionOwner {
    std::string plugin;
    size_t begin, end;
  };
  std::vector<OptionOwner> option_owners_;
  std::vector<const LoadedPlugin*> plugins_;
  std::vector<std::function<void(EngineOptions&)>> engine_options_;
  std::function<std::unique_ptr<CommHook>(const CommContext&)> comm_hook_factory_;
  std::string comm_hook_owner_;
  std::vector<std::unique_ptr<StepCallbacks>> step_callbacks_;
};

class PluginHost {
 public:
  // `search_dirs` are tried in order for plugins found by name.
  explicit PluginHost(std::vector<std::string> search_dirs);
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  // Loads the plugin `name`: from `explicit_path` when given, else from the search
  // directories. Loading the same plugin twice returns the first load.
  absl::StatusOr<const LoadedPlugin*> Load(absl::string_view name,
                                           absl::string_view explicit_path = "");

  // Loads every plugin the experiment lists, hands each its configuration and collects
  // what they register. Errors name the experiment and the plugin.
  absl::StatusOr<PluginSet> Configure(const v1::Experiment& experiment);

  // The names of the plugins found in the search directories, sorted.
  std::vector<std::string> Available() const;

  const std::vector<std::string>& search_dirs() const { return search_dirs_; }

 private:
  std::vector<std::string> search_dirs_;
  std::map<std::string, std::unique_ptr<LoadedPlugin>> loaded_;  // by path
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_PLUGIN_HOST_H_
