// Starts the worker processes of one node and watches them, as torchrun does.
//
//   ddplab::LaunchOptions options;
//   options.nproc_per_node = 4;
//   ddplab::LaunchResult r = ddplab::Launch({"/path/to/vit_ddp", "--experiment=x"}, options);
//   if (r.exit_code != 0) std::cerr << r.message;   // "rank 1 exited with code 3"
//
// Each worker gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT; on one node (nnodes == 1) also DDPLAB_RENDEZVOUS_FILE, a file in a
// directory that the launcher makes for the job (mkdtemp under $TMPDIR or /tmp, mode
// 0700) and removes when it ends, through which the workers meet without listening on
// any port (see core/launch/distributed.h). When one worker fails (non-zero exit or a signal),
// the launcher sends the others SIGTERM, then SIGKILL after `grace`, and reports which
// rank failed and how. SIGINT, SIGTERM or SIGHUP to the launcher while workers run
// stops them the same way, removes the rendezvous directory, and is reported in
// LaunchResult::signal (the caller should stop too).

#ifndef DDPLAB_CORE_LAUNCH_LAUNCHER_H_
#define DDPLAB_CORE_LAUNCH_LAUNCHER_H_

#include <csignal>
#include <chrono>
#include <string>
#include <vector>

namespace ddplab {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port on this machine (one node only)
  std::chrono::milliseconds grace{5000};
};

struct LaunchResult {
  int exit_code = 0;    // 0 when every worker exited 0
  std::string message;  // what failed, for a person
  int signal = 0;       // the signal that stopped the launcher, if one did
};

LaunchResult Launch(const std::vector<std::string>& argv, const LaunchOptions& options);

// A TCP port nothing listens on now (bound and released).
int FreePort();

// While it lives, SIGINT, SIGTERM and SIGHUP call `handler` (which must be
// async-signal-safe) instead of ending the process; the dispositions before are restored
// after. `flags` are sigaction's (SA_RESETHAND: a second signal acts as before).
//
//   ScopedStopSignals signals(OnStop);   // OnStop(int sig) notes sig in a sig_atomic_t
class ScopedStopSignals {
 public:
  explicit ScopedStopSignals(void (*handler)(int), int flags = 0);
  ~ScopedStopSignals();
  ScopedStopSignals(const ScopedStopSignals&) = delete;
  ScopedStopSignals& operator=(const ScopedStopSignals&) = delete;

 private:
  static constexpr int kCount = 3;
  struct sigaction saved_[kCount];
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_LAUNCH_LAUNCHER_H_
