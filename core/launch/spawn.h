// Starting and ending the worker processes of one node: what launcher.h's Launch and
// worker_pool.h's WorkerPool share.
//
//   launch_internal::RendezvousDirectory dir;      // where the workers meet (one node)
//   launch_internal::WorkerPlace place{/*rank=*/1, /*local_rank=*/1, /*world_size=*/2, 2,
//                                      "127.0.0.1", port, dir.path() + "/store"};
//   absl::StatusOr<pid_t> pid = launch_internal::SpawnWorker(argv, place, {}, {});
#ifndef DDPLAB_CORE_LAUNCH_SPAWN_H_
#define DDPLAB_CORE_LAUNCH_SPAWN_H_

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ddplab::launch_internal {

// A directory of mkdtemp's (mode 0700, a name no one else had) under $TMPDIR or /tmp,
// removed with the files in it when this goes out of scope, however the job ended.
class RendezvousDirectory {
 public:
  RendezvousDirectory();
  ~RendezvousDirectory();
  RendezvousDirectory(const RendezvousDirectory&) = delete;
  RendezvousDirectory& operator=(const RendezvousDirectory&) = delete;

  const std::string& path() const { return path_; }  // empty when it could not be made
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  std::string error_;
};

// A worker's place in the job: the variables it gets (launcher.h lists them).
struct WorkerPlace {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string store_file;  // DDPLAB_RENDEZVOUS_FILE; empty: unset
};

// Forks and executes `argv` as the worker at `place`, with `variables` set besides, and
// `inherited` (descriptors of this process) left open in it; every other descriptor
// keeps its close-on-exec. The worker ends with this process, even one killed outright.
absl::StatusOr<pid_t> SpawnWorker(const std::vector<std::string>& argv, const WorkerPlace& place,
                                  const std::vector<std::pair<std::string, std::string>>& variables,
                                  const std::vector<int>& inherited);

// How a worker ended, for a person: "rank 1 exited with code 3", "rank 0 was killed by
// signal 9 (Killed)"; and whether that is a failure (a non-zero code or a signal). Killed
// by SIGKILL, with `usage` (wait4's) the most memory it held: the kernel's out-of-memory
// killer ends a process so, and says so only in its own log.
std::string DescribeExit(int rank, int wait_status, const struct rusage* usage = nullptr);
// waitpid(pid, status, WNOHANG) that also keeps the child's resource usage (wait4).
pid_t WaitNoHang(pid_t pid, int* status, struct rusage* usage);
bool ExitFailed(int wait_status);
// The exit code a launcher reports for a worker that ended so: its code, or 128 + signal.
int ExitCodeOf(int wait_status);

// Reaps the workers of `running` (pid -> rank) that end within `wait` (max: until all
// have), removing them. Where `killed` is given, each reaped worker that a signal other
// than SIGTERM ended is described there (DescribeExit).
void ReapWithin(std::map<pid_t, int>& running, std::chrono::milliseconds wait,
                std::vector<std::string>* killed = nullptr);

// Asks every worker of `running` (pid -> rank) to stop (SIGTERM, and SIGCONT so that a
// stopped one acts on it), waits up to `grace` for them, kills those left (SIGKILL) and
// reaps them all; `running` is empty after. Returns how the workers ended that another
// signal had ended first (a rank killed as the stop began): for the caller to name.
std::vector<std::string> StopWorkers(std::map<pid_t, int>& running, std::chrono::milliseconds grace);

// A stop signal `sig` (0: none) that came after a worker's failure: where `signal` is still
// 0, it becomes `sig` (so that the caller stops as well) and `message` says so.
void NoteLateStop(int sig, int& signal, std::string& message);

}  // namespace ddplab::launch_internal

#endif  // DDPLAB_CORE_LAUNCH_SPAWN_H_
