// Helpers for plugin tests: configure plugins through the real host, from the test's
// runfiles, as the vit_ddp binary does.
#ifndef DDPLAB_PLUGINS_TESTING_PLUGIN_TESTUTIL_H_
#define DDPLAB_PLUGINS_TESTING_PLUGIN_TESTUTIL_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/plugin_host.h"

namespace ddplab::testing {

// Parses `plugins_text` (plugin entries in text format, e.g. "plugin { static_graph {} }")
// into a valid two-process experiment, loads the plugins from the test's runfiles and
// returns the engine options they resolve to.
absl::StatusOr<EngineOptions> ResolveWithPlugins(const std::string& plugins_text);

}  // namespace ddplab::testing

#endif  // DDPLAB_PLUGINS_TESTING_PLUGIN_TESTUTIL_H_
