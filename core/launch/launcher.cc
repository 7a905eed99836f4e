#include "core/launch/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/launch/spawn.h"

namespace ddplab {
namespace {

// The signal that asked the launcher to stop (SIGINT, SIGTERM, SIGHUP), or 0.
volatile sig_atomic_t g_stop_signal = 0;

void OnStopSignal(int sig) { g_stop_signal = sig; }

}  // namespace

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 29500;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

namespace {

// Waits for every worker in `running` (pid -> global rank); on the first failure, stops
// the rest (SIGTERM, then SIGKILL after options.grace). `result` holds a failure to
// start them, if any, and receives the first worker's failure; a worker killed by
// another signal while they stop is added to its message.
void WaitForWorkers(std::map<pid_t, int>& running, const LaunchOptions& options, LaunchResult& result) {
  bool stopping = result.exit_code != 0;
  bool escalated = false;  // SIGKILL sent to the workers left
  auto deadline = std::chrono::steady_clock::time_point::max();
  if (stopping) {
    for (const auto& [pid, rank] : running) {
      kill(pid, SIGTERM);
      kill(pid, SIGCONT);
    }
    deadline = std::chrono::steady_clock::now() + options.grace;
  }
  while (!running.empty()) {
    if (const int sig = g_stop_signal; sig != 0 && !stopping) {
      result = {128 + sig, absl::StrCat("stopped by signal ", sig, " (", strsignal(sig), ")"), sig};
      stopping = true;
      for (const auto& [p, r] : running) {
        kill(p, SIGTERM);
        kill(p, SIGCONT);
      }
      deadline = std::chrono::steady_clock::now() + options.grace;
    }
    int status = 0;
    struct rusage usage {};
    pid_t pid = launch_internal::WaitNoHang(-1, &status, &usage);
    if (pid < 0 && errno != EINTR) break;
    if (pid <= 0) {
      if (stopping && std::chrono::steady_clock::now() > deadline) {
        for (const auto& [p, rank] : running) kill(p, SIGKILL);
        escalated = true;
        deadline = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const int rank = it->second;
    running.erase(it);
    if (stopping && !escalated && WIFSIGNALED(status) && WTERMSIG(status) != SIGTERM) {
      // Killed by a signal the launcher did not send (yet): said beside the stop.
      absl::StrAppend(&result.message, "; meanwhile ", launch_internal::DescribeExit(rank, status, &usage));
      continue;
    }
    if (launch_internal::ExitFailed(status) && !stopping) {
      result = {launch_internal::ExitCodeOf(status), launch_internal::DescribeExit(rank, status, &usage), 0};
      stopping = true;
      for (const auto& [p, r] : running) {
        kill(p, SIGTERM);
        kill(p, SIGCONT);  // a stopped worker acts on SIGTERM only once it runs
      }
      deadline = std::chrono::steady_clock::now() + options.grace;
    }
  }
  // A stop asked for after a worker's failure: the caller stops as well.
  launch_internal::NoteLateStop(g_stop_signal, result.signal, result.message);
}

}  // namespace

LaunchResult Launch(const std::vector<std::string>& argv, const LaunchOptions& options) {
  // On one node the workers meet through a file only this user can reach, and nothing
  // listens (c10d's TCPStore server may listen on every interface). Across nodes they
  // need the TCPStore at master_addr.
  std::optional<launch_internal::RendezvousDirectory> rendezvous;
  launch_internal::WorkerPlace place;
  place.world_size = options.nproc_per_node * options.nnodes;
  place.local_world_size = options.nproc_per_node;
  place.master_addr = options.master_addr;
  place.master_port = options.master_port > 0 ? options.master_port : FreePort();
  if (options.nnodes == 1) {
    rendezvous.emplace();
    if (rendezvous->path().empty()) return {1, rendezvous->error(), 0};
    place.store_file = rendezvous->path() + "/store";
  }
  // SIGINT, SIGTERM and SIGHUP are noted instead of ending the launcher, so that it can
  // stop its workers and remove the rendezvous directory first.
  g_stop_signal = 0;
  ScopedStopSignals signals(OnStopSignal);
  std::map<pid_t, int> running;  // pid -> global rank
  LaunchResult result;
  for (int local = 0; local < options.nproc_per_node; ++local) {
    place.local_rank = local;
    place.rank = options.node_rank * options.nproc_per_node + local;
    absl::StatusOr<pid_t> pid = launch_internal::SpawnWorker(argv, place, {}, {});
    if (!pid.ok()) {
      result = {1, std::string(pid.status().message()), 0};
      break;
    }
    running[*pid] = place.rank;
  }
  WaitForWorkers(running, options, result);
  if (result.exit_code != 0 && result.message.empty()) result.message = "a worker failed";
  return result;
}

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

ScopedStopSignals::ScopedStopSignals(void (*handler)(int), int flags) {
  struct sigaction action {};
  action.sa_handler = handler;
  action.sa_flags = flags;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < kCount; ++i) sigaction(kStopSignals[i], &action, &saved_[i]);
}

ScopedStopSignals::~ScopedStopSignals() {
  for (int i = 0; i < kCount; ++i) sigaction(kStopSignals[i], &saved_[i], nullptr);
}

}  // namespace ddplab
