#include "plugins/testing/each_world.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/launch/distributed.h"
#include "tools/cpp/runfiles/runfiles.h"

ABSL_FLAG(std::string, worlds, "", "the world sizes to check at, e.g. 2,3,5 (empty: the job's)");
ABSL_FLAG(std::string, out, "", "rank 0 writes a world's values to <out>.<world>");

namespace ddplab::testing {

int RunAtEachWorld(int argc, char** argv, const WorldCheck& check) {
  absl::ParseCommandLine(argc, argv);
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::Create(argv[0], &error));
  PluginHost host({runfiles ? runfiles->Rlocation("ddplab/plugins") : ""});
  absl::StatusOr<std::optional<WorkerEnv>> env = WorkerEnvFromEnvironment();
  if (!env.ok() || !env->has_value()) {
    std::cerr << "not started as a rank of a job: " << env.status() << "\n";
    return 13;
  }
  const WorkerEnv& job = **env;
  std::vector<int> worlds;
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_worlds), ',', absl::SkipEmpty())) {
    int size = 0;
    if (!absl::SimpleAtoi(w, &size) || size < 1 || size > job.world_size) {
      std::cerr << "--worlds=" << absl::GetFlag(FLAGS_worlds) << ": " << w << " is not a world of 1 to "
                << job.world_size << " ranks\n";
      return 13;
    }
    worlds.push_back(size);
  }
  if (worlds.empty()) worlds.push_back(job.world_size);
  std::sort(worlds.rbegin(), worlds.rend());  // largest first: no rank waits for another world
  const std::chrono::seconds timeout(120);
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = OpenRendezvousStore(job, timeout);
  if (!store.ok()) {
    std::cerr << "rank " << job.rank << ": " << store.status() << "\n";
    return 13;
  }
  for (const int world : worlds) {
    if (job.rank >= world) break;
    WorkerEnv sub = job;
    sub.world_size = world;
    sub.local_world_size = world;
    absl::StatusOr<std::vector<ProcessGroupPtr>> groups = CreateProcessGroups(
        sub, /*nccl=*/false, timeout, {GroupOptions()}, PrefixedStore(absl::StrCat("world_", world, "/"), *store));
    if (!groups.ok()) {
      std::cerr << "rank " << job.rank << " of " << world << ": " << groups.status() << "\n";
      return 13;
    }
    const std::string out = absl::StrCat(absl::GetFlag(FLAGS_out), ".", world);
    if (const int code = check(host, *groups->front(), job.rank, world, out); code != 0) {
      std::cerr << "rank " << job.rank << " of " << world << ": exit " << code << "\n";
      return code;
    }
  }
  return 0;
}

}  // namespace ddplab::testing
