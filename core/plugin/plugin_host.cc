#include "core/plugin/plugin_host.h"
#include "core/plugin/pytorch_form.h"

#include "core/plugin/elf_check.h"
#include "core/plugin/private_copy.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/config/experiment.h"
#include "google/protobuf/descriptor.h"

namespace ddplab {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Where plugin `name` is in `dir`: <dir>/<name>/lib<name>.so (the layout of plugins/ in
// the binary's runfiles) or <dir>/lib<name>.so; "" if neither is a file.
std::string LibraryPath(const std::string& dir, absl::string_view name) {
  for (std::string path : {absl::StrCat(dir, "/", name, "/lib", name, ".so"), absl::StrCat(dir, "/lib", name, ".so")}) {
    if (IsFile(path)) return path;
  }
  return "";
}

// Whether two paths name one file (a link to it, another path to it).
bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

std::string Describe(const BuildIdentity& id) {
  return absl::StrCat("LibTorch ", id.torch_version, ", _GLIBCXX_USE_CXX11_ABI=", id.cxx11_abi,
                      ", protobuf ", id.protobuf_version, ", ", id.cuda_build ? "CUDA" : "CPU",
                      " build");
}

// Compares the plugin's build identity with the host's; names every difference.
absl::Status CheckIdentity(const std::string& path, const DdplabPluginInfo& info) {
  BuildIdentity host = HostBuildIdentity();
  BuildIdentity plugin{info.torch_version ? info.torch_version : "(null)", info.cxx11_abi,
                       info.protobuf_version, info.cuda_build};
  std::vector<std::string> diffs;
  if (plugin.torch_version != host.torch_version) {
    diffs.push_back(absl::StrCat("LibTorch ", plugin.torch_version, " (host: ",
                                 host.torch_version, ")"));
  }
  if (plugin.cxx11_abi != host.cxx11_abi) {
    diffs.push_back(absl::StrCat("_GLIBCXX_USE_CXX11_ABI=", plugin.cxx11_abi, " (host: ",
                                 host.cxx11_abi, ")"));
  }
  if (plugin.protobuf_version != host.protobuf_version) {
    diffs.push_back(absl::StrCat("protobuf ", plugin.protobuf_version, " (host: ",
                                 host.protobuf_version, ")"));
  }
  if (plugin.cuda_build != host.cuda_build) {
    diffs.push_back(absl::StrCat(plugin.cuda_build ? "CUDA" : "CPU", " build (host: ",
                                 host.cuda_build ? "CUDA" : "CPU", ")"));
  }
  if (diffs.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "plugin ", path, " was built against ", absl::StrJoin(diffs, ", "),
      "; this binary is ", Describe(host), ". Rebuild the plugin with this binary's build."));
}

// What a plugin says of itself against this host: the plugin API's layout, the SDK it was
// built against, the build identity, its name and its status; each refusal names the
// difference.
absl::Status CheckInfo(absl::string_view name, const std::string& path, const DdplabPluginInfo& info) {
  if (info.api_version != DDPLAB_PLUGIN_API_VERSION) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin \"", name, "\": ", path, " uses plugin API version ", info.api_version,
        ", this binary uses version ", DDPLAB_PLUGIN_API_VERSION,
        ". Rebuild the plugin against this binary's core/plugin/plugin_api.h."));
  }
  // Note [The SDK's digest] (sdk/BUILD.bazel): the same API number, another SDK.
  if (info.sdk_digest == nullptr || std::string(info.sdk_digest) != DDPLAB_SDK_DIGEST) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin \"", name, "\": ", path, " was built against plugin SDK ",
        info.sdk_digest ? info.sdk_digest : "(none)", ", and this binary's SDK is ", DDPLAB_SDK_DIGEST,
        " (a digest of sdk/'s headers): rebuild the plugin against this binary's checkout"));
  }
  if (absl::Status s = CheckIdentity(path, info); !s.ok()) return s;
  if (info.name == nullptr || name != info.name) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin \"", name, "\": ", path, " calls itself \"", info.name ? info.name : "(null)",
        "\"; a plugin's library must be named after it"));
  }
  if (info.status < static_cast<int32_t>(PluginStatus::kStable) ||
      info.status > static_cast<int32_t>(PluginStatus::kDiagnostic)) {
    return absl::FailedPreconditionError(absl::StrCat("plugin \"", name, "\": ", path, " has status ", info.status,
                                                      "; expected stable (0), experimental (1) or diagnostic (2)"));
  }
  return absl::OkStatus();
}

const char* StatusName(PluginStatus status) {
  switch (status) {
    case PluginStatus::kStable:
      return "stable";
    case PluginStatus::kExperimental:
      return "experimental";
    default:
      return "diagnostic";
  }
}

}  // namespace

namespace internal_plugin_host {

// The registrar handed to one plugin's register_callbacks: it records into `set`.
class Registrar : public PluginRegistrar {
 public:
  Registrar(const std::string& config, std::string plugin, PluginSet& set)
      : config_(config), plugin_(std::move(plugin)), set_(set) {}

  const std::string& config_bytes() const override { return config_; }
  void Reject(const std::string& message) override {
    if (error_.empty()) error_ = message;
  }
  void RejectField(const std::string& field, const std::string& message) override {
    if (error_.empty()) {
      error_ = message;
      field_ = field;
    }
  }
  void SetBucketPlanner(std::shared_ptr<const BucketPlanner> planner) override {
    Take(ExtensionPoint::kBucketPlanner);
    set_.parts_.planner = std::move(planner);
  }
  void SetMissingGradients(std::shared_ptr<const MissingGradients> policy) override {
    Take(ExtensionPoint::kMissingGradients);
    set_.parts_.missing_gradients = std::move(policy);
  }
  void SetGradientLayout(LayoutFactory factory) override {
    Take(ExtensionPoint::kGradientLayout);
    set_.parts_.layout = std::move(factory);
  }
  void WrapCommHook(ExtensionPoint point, HookWrapper wrapper) override {
    if (point != ExtensionPoint::kCommHook && point != ExtensionPoint::kCodec && point != ExtensionPoint::kHookWrapper) {
      Reject("WrapCommHook takes the role kCommHook, kCodec or kHookWrapper");
      return;
    }
    Take(point);
    set_.hooks_[point].push_back(std::move(wrapper));
  }
  void SetStepRunner(std::shared_ptr<const StepRunnerFactory> factory) override {
    Take(ExtensionPoint::kStepRunner);
    set_.step_runner_ = std::move(factory);
  }
  void Refuse(ExtensionPoint point, const std::string& why) override {
    set_.refusals_.push_back({plugin_, point, why});
  }
  void Lossy(int every) override {
    std::vector<std::string>& lossy = set_.lossy_plugins_;
    if (std::find(lossy.begin(), lossy.end(), plugin_) == lossy.end()) lossy.push_back(plugin_);
    int& current = set_.sample_error_every_;
    if (every > 0 && (current == 0 || every < current)) current = every;
    std::vector<std::string>& sampling = set_.sampling_plugins_;
    if (every > 0 && std::find(sampling.begin(), sampling.end(), plugin_) == sampling.end()) {
      sampling.push_back(plugin_);
    }
  }
  void AddStepCallbacks(std::unique_ptr<StepCallbacks> callbacks) override {
    if (callbacks) set_.step_callbacks_.push_back(std::move(callbacks));
  }
  void DescribeInPyTorch(const PyTorchForm& form) override { set_.pytorch_[plugin_] = form; }

  const std::string& error() const { return error_; }
  const std::string& field() const { return field_; }

 private:
  void Take(ExtensionPoint point) { set_.takers_[point].push_back(plugin_); }
  const std::string& config_;
  std::string plugin_;
  PluginSet& set_;
  std::string error_, field_;
};

}  // namespace internal_plugin_host

BuildIdentity HostBuildIdentity() {
  return BuildIdentity{TORCH_VERSION, _GLIBCXX_USE_CXX11_ABI, GOOGLE_PROTOBUF_VERSION, DDPLAB_CUDA_BUILD};
}

PluginHost::PluginHost(std::vector<std::string> search_dirs)
    : search_dirs_(std::move(search_dirs)) {}

std::vector<std::string> PluginHost::Available() const {
  std::set<std::string> names;
  for (const std::string& dir : search_dirs_) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) continue;
    while (struct dirent* entry = readdir(d)) {
      std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      // lib<name>.so, or a directory <name> holding it.
      if (absl::StartsWith(name, "lib") && absl::EndsWith(name, ".so")) name = name.substr(3, name.size() - 6);
      if (!name.empty() && !LibraryPath(dir, name).empty()) names.insert(name);
    }
    closedir(d);
  }
  return {names.begin(), names.end()};
}

absl::StatusOr<std::string> PluginHost::Find(absl::string_view name, absl::string_view explicit_path) const {
  if (!explicit_path.empty()) {
    if (!IsFile(std::string(explicit_path))) {
      return absl::NotFoundError(absl::StrCat("plugin \"", name, "\": no file at the path given: ", explicit_path));
    }
    return std::string(explicit_path);
  }
  for (const std::string& dir : search_dirs_) {
    if (std::string path = LibraryPath(dir, name); !path.empty()) return path;
  }
  std::vector<std::string> available = Available();
  return absl::NotFoundError(absl::StrCat(
      "unknown plugin \"", name, "\": no lib", name, ".so in ",
      search_dirs_.empty() ? "(no plugin directory)" : absl::StrJoin(search_dirs_, ", "),
      ". Available: ", available.empty() ? "none" : absl::StrJoin(available, ", ")));
}

absl::StatusOr<const LoadedPlugin*> PluginHost::Load(absl::string_view name,
                                                     absl::string_view explicit_path) {
  absl::StatusOr<std::string> found = Find(name, explicit_path);
  if (!found.ok()) return found.status();
  const std::string& path = *found;
  if (auto it = loaded_.find(path); it != loaded_.end()) return it->second.get();
  // Its configuration's .proto would be registered twice, which protobuf does not survive.
  for (const auto& [other_path, other] : loaded_) {
    if (other->name == name && !SameFile(other_path, path)) {
      return absl::FailedPreconditionError(absl::StrCat("plugin \"", name, "\": ", path, ": plugin \"", name,
                                                        "\" is loaded already, from ", other_path,
                                                        "; a process loads one library per plugin"));
    }
  }

  // RTLD_LOCAL keeps one plugin's symbols from another's; the plugin resolves the host's
  // symbols from the executable, which exports them (-rdynamic).
  // Loading registers the library's .proto files with protobuf, which ends the process
  // (it cannot be caught through dlopen) on a file it has already: hence one library per
  // plugin name above, and each plugin's .proto under a path of its own (sdk/plugin.bzl).
  // Note [A private copy] (private_copy.h): the bytes are read once, checked and loaded
  // from memory of our own, so that a rewrite of the file cannot fault the process.
  absl::StatusOr<PrivateCopy> copy = CopyForLoading(path);
  if (!copy.ok()) return absl::FailedPreconditionError(absl::StrCat("plugin \"", name, "\": ", copy.status().message()));
  if (absl::Status whole = CheckElfWhole(copy->path); !whole.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("plugin \"", name, "\": ", absl::StrReplaceAll(whole.message(), {{copy->path, path}})));
  }
  void* handle = dlopen(copy->path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("plugin \"", name, "\": cannot load ", path, ": ",
                     err ? absl::StrReplaceAll(err, {{copy->path, path}}) : "unknown error"));
  }
  KeepLoaded(path, *copy);
  dlerror();
  void* symbol = dlsym(handle, DDPLAB_PLUGIN_ENTRY_SYMBOL);
  if (symbol == nullptr) {
    // Never unloaded: a library's static destructors may have registered with the host.
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin \"", name, "\": ", path, " exports no ", DDPLAB_PLUGIN_ENTRY_SYMBOL,
        "(): not a ddplab plugin (define its entry with DDPLAB_PLUGIN)"));
  }
  if (!IsFunction(symbol)) {
    return absl::FailedPreconditionError(absl::StrCat("plugin \"", name, "\": ", path, ": its ",
                                                      DDPLAB_PLUGIN_ENTRY_SYMBOL,
                                                      " is not a function: not a ddplab plugin (define its entry with "
                                                      "DDPLAB_PLUGIN)"));
  }
  auto get_info = reinterpret_cast<DdplabGetPluginInfoFn>(symbol);
  DdplabPluginInfo info = get_info();
  if (absl::Status s = CheckInfo(name, path, info); !s.ok()) return s;
  const google::protobuf::Descriptor* config = info.config_descriptor ? info.config_descriptor() : nullptr;
  if (info.register_callbacks == nullptr || config == nullptr || info.plugin_version == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin \"", name, "\": ", path,
        " returned an incomplete DdplabPluginInfo (null register_callbacks, config_descriptor or "
        "plugin_version)"));
  }
  auto plugin = std::make_unique<LoadedPlugin>(LoadedPlugin{std::string(name), path, info, config, copy->digest});
  const LoadedPlugin* result = plugin.get();
  loaded_.emplace(path, std::move(plugin));
  return result;
}

v1::PluginBuild BuildRecord(const LoadedPlugin& plugin) {
  v1::PluginBuild b;
  b.set_name(plugin.name);
  b.set_version(plugin.info.plugin_version ? plugin.info.plugin_version : "");
  b.set_status(StatusName(static_cast<PluginStatus>(plugin.info.status)));
  b.set_path(plugin.path);
  b.set_digest(plugin.digest);
  return b;
}

std::string ChangedPluginBuild(const v1::RunResult& recorded, PluginHost& host) {
  if (recorded.plugins_size() > 0 && recorded.plugin_builds_size() == 0) {
    return "it records no plugin builds (an older ddplab wrote it)";
  }
  for (const v1::PluginBuild& was : recorded.plugin_builds()) {
    absl::StatusOr<const LoadedPlugin*> now = host.Load(was.name());
    if (!now.ok()) return absl::StrCat("plugin ", was.name(), " no longer loads: ", now.status().message());
    const v1::PluginBuild is = BuildRecord(**now);
    if (is.version() != was.version()) {
      return absl::StrCat("plugin ", was.name(), " is version ", is.version(), " now, ", was.version(), " then");
    }
    if (is.digest() != was.digest()) {
      return absl::StrCat("plugin ", was.name(), "'s library is another build now (", is.path(), ", ", is.digest(),
                          "; then ", was.path(), ", ", was.digest(), ")");
    }
  }
  return "";
}

std::string RanAnotherBuild(const v1::RunResult& run, PluginHost& host) {
  for (const v1::PluginBuild& ran : run.plugin_builds()) {
    absl::StatusOr<const LoadedPlugin*> loaded = host.Load(ran.name());
    if (!loaded.ok() || (*loaded)->digest == ran.digest()) continue;
    return absl::StrCat("plugin ", ran.name(), ": its workers ran ", ran.path(), " as ", ran.digest(),
                        ", but the suite loaded ", (*loaded)->digest,
                        " at its start: the library changed while the suite ran; run it again once it is built");
  }
  return "";
}

void PluginHost::Want(const std::set<std::string>& names) {
  std::set<std::string> wanted = wanted_.value_or(std::set<std::string>{});
  wanted.insert(names.begin(), names.end());
  const bool more = !wanted_ || wanted.size() > wanted_->size();
  wanted_ = std::move(wanted);
  if (schema_ == nullptr || !more) return;
  earlier_schemas_.push_back(std::move(schema_));  // built again by the next schema()
}

const ExperimentSchema& PluginHost::schema() {
  if (schema_ != nullptr) return *schema_;
  std::vector<PluginSchemaEntry> found;
  std::map<std::string, std::string> unavailable;
  std::set<std::string> not_loaded;
  for (const std::string& name : Available()) {
    if (wanted_ && wanted_->count(name) == 0) {
      not_loaded.insert(name);
      continue;
    }
    absl::StatusOr<const LoadedPlugin*> loaded = Load(name);
    if (loaded.ok()) {
      found.push_back({name, (*loaded)->config});
    } else {
      unavailable[name] = std::string(loaded.status().message());
    }
  }
  const std::string searched = search_dirs_.empty() ? "" : absl::StrJoin(search_dirs_, ", ");
  absl::StatusOr<std::shared_ptr<const ExperimentSchema>> built =
      ExperimentSchema::Build(found, unavailable, searched, not_loaded);
  if (!built.ok()) {
    for (const PluginSchemaEntry& p : found) unavailable[p.name] = std::string(built.status().message());
    built = ExperimentSchema::Build({}, unavailable, searched, not_loaded);
  }
  schema_ = *std::move(built);
  return *schema_;
}

absl::StatusOr<PluginSet> PluginHost::Configure(const v1::Experiment& experiment) {
  PluginSet set;
  for (int i = 0; i < experiment.plugin_size(); ++i) {
    const v1::Plugin& entry = experiment.plugin(i);
    const std::string& name = entry.name();
    const std::string where = absl::StrCat("plugin[", i, "]");
    if (name.empty()) return FieldError(absl::StatusCode::kInvalidArgument, where, "names no plugin");
    absl::StatusOr<const LoadedPlugin*> loaded = Load(name);
    if (!loaded.ok()) {
      return FieldError(loaded.status().code(), where, loaded.status().message());
    }
    const LoadedPlugin& plugin = **loaded;
    internal_plugin_host::Registrar registrar(entry.config(), name, set);
    plugin.info.register_callbacks(registrar);
    if (!registrar.error().empty()) {
      const std::string at = registrar.field().empty() ? where : absl::StrCat(where, ".", name, ".", registrar.field());
      return FieldError(absl::StatusCode::kInvalidArgument, at,
                        absl::StrCat("plugin \"", name, "\" rejected its configuration: ", registrar.error()));
    }
    set.plugins_.push_back(&plugin);
    if (absl::Status s = set.CheckComposition(); !s.ok()) {
      return FieldError(s.code(), where, s.message());
    }
  }
  const auto index_of = [&experiment](const std::string& plugin) {
    int index = 0;
    while (index < experiment.plugin_size() && experiment.plugin(index).name() != plugin) ++index;
    return index;
  };
  if (const std::string why = set.StepRunnerRefusal(experiment); !why.empty()) {
    const std::string& runner = set.takers_[ExtensionPoint::kStepRunner].front();
    return FieldError(absl::StatusCode::kInvalidArgument, absl::StrCat("plugin[", index_of(runner), "]"),
                      absl::StrCat("plugin \"", runner, "\" refuses this experiment: ", why));
  }
  // Every point but the step runner is the engine's.
  const v1::Distributed& dist = experiment.distributed();
  if (dist.gpus_per_node() == 1 && dist.nodes() == 1 && !dist.force_engine()) {
    for (const auto& [point, takers] : set.takers_) {
      if (point == ExtensionPoint::kStepRunner || takers.empty()) continue;
      return FieldError(absl::StatusCode::kInvalidArgument, absl::StrCat("plugin[", index_of(takers.front()), "]"),
                        absl::StrCat("plugin \"", takers.front(),
                                     "\" configures the data-parallel engine, which a run of one process skips: "
                                     "set distributed.force_engine: true or run more processes"));
    }
  }
  for (ExtensionPoint role : {ExtensionPoint::kCommHook, ExtensionPoint::kCodec, ExtensionPoint::kHookWrapper}) {
    for (HookWrapper& wrapper : set.hooks_[role]) set.parts_.hooks.push_back(std::move(wrapper));
  }
  set.hooks_.clear();
  return set;
}

}  // namespace ddplab
