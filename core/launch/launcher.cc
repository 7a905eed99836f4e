#include "core/launch/launcher.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
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

namespace ddplab {
namespace {

std::string Describe(int rank, int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return absl::StrCat("rank ", rank, " was killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return absl::StrCat("rank ", rank, " exited with code ", WEXITSTATUS(status));
}

bool Failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

// The signal that asked the launcher to stop (SIGINT, SIGTERM, SIGHUP), or 0.
volatile sig_atomic_t g_stop_signal = 0;

void OnStopSignal(int sig) { g_stop_signal = sig; }


// A directory of mkdtemp's (mode 0700, a name no one else had) under $TMPDIR or /tmp,
// removed with the files in it when this goes out of scope, however the job ended.
class PrivateDirectory {
 public:
  PrivateDirectory() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string pattern =
        absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/ddplab-rendezvous-XXXXXX");
    std::string name = pattern;  // mkdtemp fills in the Xs, even when it fails
    if (mkdtemp(name.data()) != nullptr) {
      path_ = name;
    } else {
      error_ = absl::StrCat("cannot create a directory for the rendezvous as ", pattern, ": ",
                            std::strerror(errno));
    }
  }
  ~PrivateDirectory() {
    if (path_.empty()) return;
    // Only files: the workers' FileStore (which may have removed it already).
    if (DIR* dir = opendir(path_.c_str())) {
      while (const dirent* entry = readdir(dir)) {
        const std::string name = entry->d_name;
        if (name != "." && name != "..") unlink((path_ + "/" + name).c_str());
      }
      closedir(dir);
    }
    rmdir(path_.c_str());
  }
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;

  const std::string& path() const { return path_; }  // empty when it could not be made
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  std::string error_;
};

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

// In a forked child: this worker's environment, then the worker itself. Never returns.
[[noreturn]] void ExecWorker(std::vector<char*>& args, const LaunchOptions& options, int rank, int local, int world,
                             int port, const std::string& store_file) {
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node).c_str(), 1);
  setenv("MASTER_ADDR", options.master_addr.c_str(), 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  if (!store_file.empty()) {
    setenv("DDPLAB_RENDEZVOUS_FILE", store_file.c_str(), 1);
  } else {
    unsetenv("DDPLAB_RENDEZVOUS_FILE");
  }
  // The workers meet at this launcher's rendezvous, not at the store of a torchrun
  // agent that may have started the launcher.
  unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  // A worker ends with the launcher, even when the launcher is killed outright.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  execv(args[0], args.data());
  std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

// Waits for every worker in `running` (pid -> global rank); on the first failure, stops
// the rest (SIGTERM, then SIGKILL after options.grace). `result` holds a failure to
// start them, if any, and receives the first worker's failure.
void WaitForWorkers(std::map<pid_t, int>& running, const LaunchOptions& options, LaunchResult& result) {
  bool stopping = result.exit_code != 0;
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
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno != EINTR) break;
    if (pid <= 0) {
      if (stopping && std::chrono::steady_clock::now() > deadline) {
        for (const auto& [p, rank] : running) kill(p, SIGKILL);
        deadline = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const int rank = it->second;
    running.erase(it);
    if (Failed(status) && !stopping) {
      result = {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), Describe(rank, status), 0};
      stopping = true;
      for (const auto& [p, r] : running) {
        kill(p, SIGTERM);
        kill(p, SIGCONT);  // a stopped worker acts on SIGTERM only once it runs
      }
      deadline = std::chrono::steady_clock::now() + options.grace;
    }
  }
}

}  // namespace

LaunchResult Launch(const std::vector<std::string>& argv, const LaunchOptions& options) {
  const int world = options.nproc_per_node * options.nnodes;
  const int port = options.master_port > 0 ? options.master_port : FreePort();
  // On one node the workers meet through a file only this user can reach, and nothing
  // listens (c10d's TCPStore server may listen on every interface). Across nodes they
  // need the TCPStore at master_addr.
  std::optional<PrivateDirectory> rendezvous;
  std::string store_file;
  if (options.nnodes == 1) {
    rendezvous.emplace();
    if (rendezvous->path().empty()) return {1, rendezvous->error(), 0};
    store_file = rendezvous->path() + "/store";
  }
  // SIGINT, SIGTERM and SIGHUP are noted instead of ending the launcher, so that it can
  // stop its workers and remove the rendezvous directory first.
  g_stop_signal = 0;
  ScopedStopSignals signals(OnStopSignal);
  std::map<pid_t, int> running;  // pid -> global rank
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  LaunchResult result;
  for (int local = 0; local < options.nproc_per_node; ++local) {
    const int rank = options.node_rank * options.nproc_per_node + local;
    pid_t pid = fork();
    if (pid < 0) {
      result = {1, absl::StrCat("cannot start rank ", rank, ": ", std::strerror(errno)), 0};
      break;
    }
    if (pid == 0) ExecWorker(args, options, rank, local, world, port, store_file);
    running[pid] = rank;
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
