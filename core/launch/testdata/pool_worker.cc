// A worker for //core/launch:worker_pool_test: takes tasks from its pool's channel and
// says done after each. A task is "<file>" (writes "<rank> <pid> <RANK> <WORLD_SIZE>
// <DDPLAB_RENDEZVOUS_FILE set>" to <file>.<rank>), "sleep <ms>", "exit <rank> <code>"
// (that rank exits with the code instead of running it), or "interrupt_and_die <rank>"
// (that rank sends the launcher SIGINT, as Ctrl-C, and is killed by SIGKILL in the same
// moment; the others sleep). Exit 4: no channel.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "core/launch/worker_pool.h"

int main() {
  absl::StatusOr<std::optional<ddplab::TaskChannel>> channel = ddplab::TaskChannel::FromEnvironment();
  if (!channel.ok() || !channel->has_value()) return 4;
  const int rank = std::atoi(std::getenv("RANK"));
  while (true) {
    absl::StatusOr<std::optional<std::string>> task = (*channel)->Next();
    if (!task.ok()) return 5;
    if (!task->has_value()) return 0;
    std::istringstream words(**task);
    std::string first;
    words >> first;
    if (first == "sleep") {
      int ms = 0;
      words >> ms;
      usleep(ms * 1000);
    } else if (first == "exit") {
      int who = -1, code = 0;
      words >> who >> code;
      if (who == rank) return code;
    } else if (first == "interrupt_and_die") {
      int who = -1;
      words >> who;
      if (who == rank) {
        sigset_t term;  // the launcher's SIGTERM must not come first
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigprocmask(SIG_BLOCK, &term, nullptr);
        kill(getppid(), SIGINT);
        raise(SIGKILL);
      }
      sleep(60);
    } else {
      std::ofstream(first + "." + std::to_string(rank))
          << rank << " " << getpid() << " " << std::getenv("RANK") << " " << std::getenv("WORLD_SIZE") << " "
          << (std::getenv("DDPLAB_RENDEZVOUS_FILE") != nullptr) << "\n";
    }
    if (!(*channel)->Done().ok()) return 6;
  }
}
