// Workers that stay: the processes of one launch, handed one task after another over a
// channel of each worker's own, instead of being started again for each run (Note
// [Persistent workers]).
//
//   // The launcher's side:
//   absl::StatusOr<std::unique_ptr<ddplab::WorkerPool>> pool =
//       ddplab::WorkerPool::Start({"/path/to/vit_ddp"}, options);   // as Launch's
//   ddplab::LaunchResult r = (*pool)->Run("experiment { ... }");   // every worker runs it
//   if (r.exit_code != 0) std::cerr << r.message;   // "rank 1 was killed by signal 9 (Killed)"
//
//   // A worker's side:
//   absl::StatusOr<std::optional<ddplab::TaskChannel>> channel = ddplab::TaskChannel::FromEnvironment();
//   for (;;) {
//     absl::StatusOr<std::optional<std::string>> task = (*channel)->Next();
//     if (!task.ok() || !task->has_value()) break;   // the launcher closed the channel: end
//     ... run **task ...; a failed task ends the worker with a non-zero code
//     (*channel)->Done();
//   }
//
// Each worker gets Launch's variables (launcher.h), and DDPLAB_WORKER_CHANNEL, the
// descriptor of its end of a Unix socket pair; a task is one line (no newline in it),
// "done" the worker's answer. A task has failed when any worker ends (whatever its
// code) or its channel closes before every worker said done: the pool then stops the
// others (SIGTERM, SIGKILL after `grace`) and has ended; a new one runs what is left.
// SIGINT, SIGTERM or SIGHUP while a task runs stop the workers as Launch's do and are
// reported in LaunchResult::signal.
//
// Note [Persistent workers]
// Starting a worker costs more than a short run's steps: the dynamic linker over
// LibTorch's libraries, its operator registry, a CUDA context, cuBLAS and cuDNN, the
// rendezvous. A suite's runs that would start the same workers (the same program,
// flags, environment and processes: vit_ddp's runs of one transport) share one pool, so
// they pay it once. Each run still meets the other ranks under a store prefix of its
// own and makes its process group there, shuts it down at its end and releases what it
// cached, so that a run's figures and peak memory are its own; its model is built from
// its seed as in a fresh process.
#ifndef DDPLAB_CORE_LAUNCH_WORKER_POOL_H_
#define DDPLAB_CORE_LAUNCH_WORKER_POOL_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/launch/launcher.h"
#include "core/launch/spawn.h"

namespace ddplab {

// The variable through which a worker of a pool learns its channel.
inline constexpr char kWorkerChannelVariable[] = "DDPLAB_WORKER_CHANNEL";

class WorkerPool {
 public:
  // Starts options.nproc_per_node workers of `argv` on this node (one node only).
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Start(const std::vector<std::string>& argv,
                                                           const LaunchOptions& options);
  // Closes the channels: idle workers end; those still running after `grace` are stopped.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Hands `task` to every worker and waits until each has said done (exit_code 0), or
  // one failed, or a stop signal came (the pool has ended then).
  LaunchResult Run(const std::string& task);
  bool ended() const { return workers_.empty(); }
  // The workers' process ids, by rank (empty once the pool has ended).
  std::vector<pid_t> pids() const;

 private:
  struct Worker {
    pid_t pid = -1;
    int rank = 0;
    int fd = -1;          // the launcher's end of the worker's channel
    std::string received;
    bool done = false;
  };
  explicit WorkerPool(const LaunchOptions& options) : options_(options) {}
  // Reads what `w` said; false when its channel closed.
  bool Receive(Worker& w);
  // Ends the pool after a failure (or a signal): stops every worker; where the channel of
  // workers_[culprit] closed, how that worker ended, as Launch says it.
  LaunchResult Fail(LaunchResult result, int culprit = -1);

  LaunchOptions options_;
  std::optional<launch_internal::RendezvousDirectory> rendezvous_;
  std::vector<Worker> workers_;
};

// A worker's end of its pool's channel.
class TaskChannel {
 public:
  // The channel DDPLAB_WORKER_CHANNEL names; none where it is not set; an error where it
  // is not an open descriptor.
  static absl::StatusOr<std::optional<TaskChannel>> FromEnvironment();
  // The next task; none once the launcher closed the channel.
  absl::StatusOr<std::optional<std::string>> Next();
  // Tells the launcher the task is done.
  absl::Status Done();

 private:
  explicit TaskChannel(int fd) : fd_(fd) {}
  int fd_;
  std::string buffered_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_LAUNCH_WORKER_POOL_H_
