#include "core/launch/worker_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ddplab {
namespace {

volatile sig_atomic_t g_pool_stop_signal = 0;
void OnPoolStopSignal(int sig) { g_pool_stop_signal = sig; }

constexpr char kDone[] = "done\n";

// Writes all of `data` to the socket `fd`; false where the other end has gone (no
// SIGPIPE: a worker or launcher gone is a failure to report, not a signal to die of).
bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerPool>> WorkerPool::Start(const std::vector<std::string>& argv,
                                                               const LaunchOptions& options) {
  if (options.nnodes != 1) return absl::InvalidArgumentError("a pool of workers is of one node");
  std::unique_ptr<WorkerPool> pool(new WorkerPool(options));
  pool->rendezvous_.emplace();
  if (pool->rendezvous_->path().empty()) return absl::InternalError(pool->rendezvous_->error());
  launch_internal::WorkerPlace place;
  place.world_size = options.nproc_per_node;
  place.local_world_size = options.nproc_per_node;
  place.master_addr = options.master_addr;
  place.master_port = options.master_port > 0 ? options.master_port : FreePort();
  place.store_file = pool->rendezvous_->path() + "/store";
  for (int rank = 0; rank < options.nproc_per_node; ++rank) {
    int ends[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
      return absl::InternalError(absl::StrCat("cannot make rank ", rank, "'s channel: ", std::strerror(errno)));
    }
    place.rank = place.local_rank = rank;
    absl::StatusOr<pid_t> pid =
        launch_internal::SpawnWorker(argv, place, {{kWorkerChannelVariable, std::to_string(ends[1])}}, {ends[1]});
    close(ends[1]);
    if (!pid.ok()) {
      close(ends[0]);
      return pid.status();  // the destructor ends those started
    }
    pool->workers_.push_back({*pid, rank, ends[0], "", false});
  }
  return pool;
}

WorkerPool::~WorkerPool() {
  std::map<pid_t, int> running;
  for (Worker& w : workers_) {
    close(w.fd);  // an idle worker reads the end of its channel and ends
    if (w.pid > 0) running[w.pid] = w.rank;
  }
  // Idle workers end at once; a worker still in a task is stopped after the grace.
  launch_internal::ReapWithin(running, options_.grace);
  launch_internal::StopWorkers(running, options_.grace);
}

std::vector<pid_t> WorkerPool::pids() const {
  std::vector<pid_t> out;
  for (const Worker& w : workers_) out.push_back(w.pid);
  return out;
}

bool WorkerPool::Receive(Worker& w) {
  char buffer[256];
  const ssize_t n = read(w.fd, buffer, sizeof(buffer));
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  w.received.append(buffer, static_cast<size_t>(n));
  if (w.received.find(kDone) != std::string::npos) w.done = true;
  return true;
}

LaunchResult WorkerPool::Run(const std::string& task) {
  if (ended()) return {1, "the pool of workers has ended", 0};
  if (task.find('\n') != std::string::npos) return {1, "a task is one line", 0};
  g_pool_stop_signal = 0;
  ScopedStopSignals signals(OnPoolStopSignal);
  for (Worker& w : workers_) {
    w.done = false;
    w.received.clear();
  }
  for (Worker& w : workers_) {
    if (!SendAll(w.fd, task + "\n")) return Fail({1, absl::StrCat("rank ", w.rank, " took no task"), 0});
  }
  std::vector<pollfd> fds(workers_.size());
  while (true) {
    size_t done = 0;
    for (size_t i = 0; i < workers_.size(); ++i) {
      fds[i] = {workers_[i].fd, static_cast<short>(workers_[i].done ? 0 : POLLIN), 0};
      done += workers_[i].done;
    }
    if (done == workers_.size()) return {0, "", 0};
    if (const int sig = g_pool_stop_signal; sig != 0) {
      return Fail({128 + sig, absl::StrCat("stopped by signal ", sig, " (", strsignal(sig), ")"), sig});
    }
    if (poll(fds.data(), fds.size(), 20) < 0 && errno != EINTR) return Fail({1, std::strerror(errno), 0});
    for (size_t i = 0; i < workers_.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !Receive(workers_[i])) {
        return Fail({1, absl::StrCat("rank ", workers_[i].rank, " ended its task unfinished"), 0}, static_cast<int>(i));
      }
    }
    // A worker may end without its channel closing first (its children hold it open).
    for (Worker& w : workers_) {
      int status = 0;
      struct rusage usage {};
      if (launch_internal::WaitNoHang(w.pid, &status, &usage) == w.pid) {
        LaunchResult failed{launch_internal::ExitCodeOf(status), launch_internal::DescribeExit(w.rank, status, &usage),
                            0};
        if (failed.exit_code == 0) failed = {1, absl::StrCat("rank ", w.rank, " ended before its task did"), 0};
        w.pid = -1;  // reaped
        return Fail(failed);
      }
    }
  }
}

LaunchResult WorkerPool::Fail(LaunchResult result, int culprit) {
  std::map<pid_t, int> running;
  for (const Worker& w : workers_) {
    close(w.fd);
    if (w.pid > 0) running[w.pid] = w.rank;
  }
  // The worker whose channel closed says how it ended, where it has (the others may
  // end only because it did).
  if (culprit >= 0 && workers_[culprit].pid > 0) {
    const Worker& w = workers_[culprit];
    for (int waited = 0; waited < 100; ++waited) {
      int status = 0;
      struct rusage usage {};
      if (launch_internal::WaitNoHang(w.pid, &status, &usage) == w.pid) {
        running.erase(w.pid);
        if (launch_internal::ExitFailed(status)) {
          result = {launch_internal::ExitCodeOf(status), launch_internal::DescribeExit(w.rank, status, &usage), 0};
        }
        break;
      }
      usleep(5000);
    }
  }
  for (const std::string& killed : launch_internal::StopWorkers(running, options_.grace)) {
    absl::StrAppend(&result.message, "; meanwhile ", killed);
  }
  // A stop asked for as a worker failed: the caller stops as well.
  launch_internal::NoteLateStop(g_pool_stop_signal, result.signal, result.message);
  workers_.clear();
  rendezvous_.reset();
  return result;
}

absl::StatusOr<std::optional<TaskChannel>> TaskChannel::FromEnvironment() {
  const char* value = std::getenv(kWorkerChannelVariable);
  if (value == nullptr) return std::optional<TaskChannel>();
  int fd = -1;
  if (!absl::SimpleAtoi(value, &fd) || fd < 0 || fcntl(fd, F_GETFD) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(kWorkerChannelVariable, "=", value,
                                                   " is no open descriptor (it is set by vit_ddp for its workers)"));
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);  // not for the worker's own children
  return std::optional<TaskChannel>(TaskChannel(fd));
}

absl::StatusOr<std::optional<std::string>> TaskChannel::Next() {
  while (true) {
    if (size_t end = buffered_.find('\n'); end != std::string::npos) {
      std::string line = buffered_.substr(0, end);
      buffered_.erase(0, end + 1);
      return std::optional<std::string>(std::move(line));
    }
    char buffer[65536];
    const ssize_t n = read(fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("reading the next task: ", std::strerror(errno)));
    if (n == 0) return std::optional<std::string>();
    buffered_.append(buffer, static_cast<size_t>(n));
  }
}

absl::Status TaskChannel::Done() {
  if (SendAll(fd_, kDone)) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("telling the launcher a task is done: ", std::strerror(errno)));
}

}  // namespace ddplab
