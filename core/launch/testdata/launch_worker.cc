// A worker for //core:launcher_test. Checks the environment the launcher gives it (exit
// 4: ranks and rendezvous address; 5: the rendezvous file); the rank named by $FAIL_RANK
// exits with $FAIL_CODE after a moment, the others exit 0 at once, or, with $HANG=1,
// wait to be stopped. With $FAIL_CODE=-9 the failing rank asks the launcher to stop
// (SIGINT, as Ctrl-C) and is killed (SIGKILL) in the same moment.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace {
int Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

// On one node: a file not made yet, in a directory of its own under $TMPDIR (or /tmp),
// of this user, mode 0700. Across nodes: none.
bool RendezvousFileIsPrivate(bool one_node) {
  const char* file = std::getenv("DDPLAB_RENDEZVOUS_FILE");
  if (!one_node) return file == nullptr;
  if (file == nullptr) return false;
  const std::string path = file;
  const std::string dir = path.substr(0, path.rfind('/'));
  const std::string parent = dir.substr(0, dir.rfind('/'));
  const char* tmp = std::getenv("TMPDIR");
  struct stat st;
  return parent == (tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") && stat(dir.c_str(), &st) == 0 &&
         S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700 && st.st_uid == getuid();
}
}  // namespace

int main() {
  int rank = Env("RANK"), local = Env("LOCAL_RANK"), world = Env("WORLD_SIZE");
  int local_world = Env("LOCAL_WORLD_SIZE");
  if (rank < 0 || local < 0 || local_world < 1 || world < local_world || world % local_world != 0 ||
      rank >= world || rank % local_world != local || Env("MASTER_PORT") <= 0 ||
      std::getenv("MASTER_ADDR") == nullptr || std::getenv("TORCHELASTIC_USE_AGENT_STORE") != nullptr) {
    return 4;
  }
  if (!RendezvousFileIsPrivate(world == local_world)) return 5;
  if (rank == Env("FAIL_RANK")) {
    usleep(200 * 1000);
    if (Env("FAIL_CODE") == -9) {
      sigset_t term;  // the launcher's SIGTERM must not come first
      sigemptyset(&term);
      sigaddset(&term, SIGTERM);
      sigprocmask(SIG_BLOCK, &term, nullptr);
      kill(getppid(), SIGINT);
      raise(SIGKILL);
    }
    return Env("FAIL_CODE");
  }
  if (Env("HANG") == 1) {
    for (int i = 0; i < 600; ++i) sleep(1);
  }
  return 0;
}
