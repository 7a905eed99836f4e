#include "core/launch/spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddplab::launch_internal {

RendezvousDirectory::RendezvousDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/ddplab-rendezvous-XXXXXX");
  std::string name = pattern;  // mkdtemp fills in the Xs, even when it fails
  if (mkdtemp(name.data()) != nullptr) {
    path_ = name;
  } else {
    error_ = absl::StrCat("cannot create a directory for the rendezvous as ", pattern, ": ", std::strerror(errno));
  }
}

RendezvousDirectory::~RendezvousDirectory() {
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

namespace {

// In a forked child: the worker's environment, then the worker itself. Never returns.
[[noreturn]] void ExecWorker(std::vector<char*>& args, const WorkerPlace& place,
                             const std::vector<std::pair<std::string, std::string>>& variables,
                             const std::vector<int>& inherited) {
  setenv("RANK", std::to_string(place.rank).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(place.local_rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(place.world_size).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(place.local_world_size).c_str(), 1);
  setenv("MASTER_ADDR", place.master_addr.c_str(), 1);
  setenv("MASTER_PORT", std::to_string(place.master_port).c_str(), 1);
  if (!place.store_file.empty()) {
    setenv("DDPLAB_RENDEZVOUS_FILE", place.store_file.c_str(), 1);
  } else {
    unsetenv("DDPLAB_RENDEZVOUS_FILE");
  }
  // The workers meet at this launcher's rendezvous, not at the store of a torchrun
  // agent that may have started the launcher.
  unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  for (const auto& [name, value] : variables) setenv(name.c_str(), value.c_str(), 1);
  for (int fd : inherited) fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) & ~FD_CLOEXEC);
  // A worker ends with the launcher, even when the launcher is killed outright.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  execv(args[0], args.data());
  std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

}  // namespace

absl::StatusOr<pid_t> SpawnWorker(const std::vector<std::string>& argv, const WorkerPlace& place,
                                  const std::vector<std::pair<std::string, std::string>>& variables,
                                  const std::vector<int>& inherited) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("cannot start rank ", place.rank, ": ", std::strerror(errno)));
  if (pid == 0) ExecWorker(args, place, variables, inherited);
  return pid;
}

std::string DescribeExit(int rank, int wait_status, const struct rusage* usage) {
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    std::string out = absl::StrCat("rank ", rank, " was killed by signal ", sig, " (", strsignal(sig), ")");
    if (sig == SIGKILL) {
      absl::StrAppend(&out, ": probably out of memory (the kernel's out-of-memory killer sends SIGKILL");
      // ru_maxrss: kibibytes on Linux.
      if (usage != nullptr && usage->ru_maxrss > 0) {
        absl::StrAppendFormat(&out, "; it held up to %.1f GiB", static_cast<double>(usage->ru_maxrss) / (1 << 20));
      }
      absl::StrAppend(&out, "); see the kernel's log (dmesg), and the memory check's figures (--print_experiments)");
    }
    return out;
  }
  return absl::StrCat("rank ", rank, " exited with code ", WEXITSTATUS(wait_status));
}

pid_t WaitNoHang(pid_t pid, int* status, struct rusage* usage) { return wait4(pid, status, WNOHANG, usage); }

bool ExitFailed(int wait_status) { return !WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0; }

int ExitCodeOf(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

void ReapWithin(std::map<pid_t, int>& running, std::chrono::milliseconds wait, std::vector<std::string>* killed) {
  const bool forever = wait == std::chrono::milliseconds::max();  // now() + max overflows
  const auto deadline = std::chrono::steady_clock::now() + (forever ? std::chrono::milliseconds(0) : wait);
  while (true) {
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      struct rusage usage {};
      const pid_t done = WaitNoHang(it->first, &status, &usage);
      if (done == it->first && killed != nullptr && WIFSIGNALED(status) && WTERMSIG(status) != SIGTERM) {
        killed->push_back(DescribeExit(it->second, status, &usage));
      }
      it = done == it->first || (done < 0 && errno == ECHILD) ? running.erase(it) : std::next(it);
    }
    if (running.empty() || (!forever && std::chrono::steady_clock::now() >= deadline)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<std::string> StopWorkers(std::map<pid_t, int>& running, std::chrono::milliseconds grace) {
  std::vector<std::string> killed;
  for (const auto& [pid, rank] : running) {
    kill(pid, SIGTERM);
    kill(pid, SIGCONT);
  }
  ReapWithin(running, grace, &killed);
  for (const auto& [pid, rank] : running) kill(pid, SIGKILL);
  ReapWithin(running, std::chrono::milliseconds::max());
  return killed;
}

void NoteLateStop(int sig, int& signal, std::string& message) {
  if (sig == 0 || signal != 0) return;
  signal = sig;
  absl::StrAppend(&message, "; then stopped by signal ", sig, " (", strsignal(sig), ")");
}

}  // namespace ddplab::launch_internal
