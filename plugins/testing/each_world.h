// A plugin's own check over several Gloo processes, at several world sizes in one job
// (plugin_testutil.h's RunOnRanks starts it): a process start costs more than a check.
//
// The job has as many ranks as the largest world of --worlds. Each world in turn, largest
// first, the ranks below it meet in a Gloo group of that size (under a store prefix of
// its own) and run the check; a rank above every world left exits. Rank 0 writes the
// world's values to --out.<world>.
//
//   int CheckAt(ddplab::PluginHost& host, ddplab::compat::CollectiveGroup& group, int rank,
//               int world, const std::string& out);  // 0, or the check's exit code
//   int main(int argc, char** argv) { return ddplab::testing::RunAtEachWorld(argc, argv, CheckAt); }
//
// Exit codes: the check's; 13 where the job, a world or a group cannot be set up.
#ifndef DDPLAB_PLUGINS_TESTING_EACH_WORLD_H_
#define DDPLAB_PLUGINS_TESTING_EACH_WORLD_H_

#include <functional>
#include <string>

#include "core/plugin/plugin_host.h"
#include "core/torch_compat.h"

namespace ddplab::testing {

// A check at one world: the plugin host (the plugins of the runfiles, as vit_ddp loads
// them), the world's group, this rank, the world's size, and where rank 0 writes.
using WorldCheck = std::function<int(PluginHost& host, compat::CollectiveGroup& group, int rank, int world,
                                     const std::string& out)>;

// Parses the command line and runs `check` at each world of --worlds (see the top of this
// file); the job's world alone where --worlds is empty. Returns the first code other than
// 0.
int RunAtEachWorld(int argc, char** argv, const WorldCheck& check);

}  // namespace ddplab::testing

#endif  // DDPLAB_PLUGINS_TESTING_EACH_WORLD_H_
