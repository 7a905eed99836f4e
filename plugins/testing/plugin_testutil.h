// Helpers for plugin tests: configure plugins through the real host, from the test's
// runfiles, as the vit_ddp binary does.
#ifndef DDPLAB_PLUGINS_TESTING_PLUGIN_TESTUTIL_H_
#define DDPLAB_PLUGINS_TESTING_PLUGIN_TESTUTIL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/distributed.h"
#include "core/plugin_host.h"

namespace ddplab::testing {

// The experiment's `distributed` fields the helpers below use unless told otherwise.
inline constexpr char kCpuProcesses[] = "device: CPU gpus_per_node: 2";

// Parses `plugins_text` (plugin entries in text format, e.g. "plugin { static_graph {} }")
// into a valid two-process experiment (its distributed fields `distributed`), loads the
// plugins from the test's runfiles and returns the engine options they resolve to.
absl::StatusOr<EngineOptions> ResolveWithPlugins(const std::string& plugins_text,
                                                 const std::string& distributed = kCpuProcesses);

// As ResolveWithPlugins, returning everything the plugins registered.
absl::StatusOr<PluginSet> ConfigureWithPlugins(const std::string& plugins_text,
                                               const std::string& distributed = kCpuProcesses);

// Whether the plugin entries `mine` and `theirs` (each e.g. "zero_copy {}") are refused
// together when loaded, in either order, each time with a message that names both plugins
// and says to list one of them: "" if so, else what went otherwise.
std::string RefusedTogether(const std::string& mine, const std::string& theirs);

// A communication hook from `set` over a one-process Gloo group of its own, as the engine
// would make it (the group lives as long as the process).
std::unique_ptr<CommHook> MakeHook(const PluginSet& set, const EngineOptions& options);

// A bucket of one gradient of `sizes`, holding `values`.
GradBucket OneGradientBucket(const at::Tensor& values, int64_t step);

}  // namespace ddplab::testing

#endif  // DDPLAB_PLUGINS_TESTING_PLUGIN_TESTUTIL_H_
