// A worker for //core:launcher_test. Checks the environment the launcher gives it; the
// rank named by $FAIL_RANK exits with $FAIL_CODE after a moment, the others exit 0 at
// once, or, with $HANG=1, wait to be stopped.
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace {
int Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}
}  // namespace

int main() {
  int rank = Env("RANK"), local = Env("LOCAL_RANK"), world = Env("WORLD_SIZE");
  if (rank < 0 || local != rank || world < 1 || Env("LOCAL_WORLD_SIZE") != world ||
      Env("MASTER_PORT") <= 0 || std::getenv("MASTER_ADDR") == nullptr) {
    return 4;
  }
  if (rank == Env("FAIL_RANK")) {
    usleep(200 * 1000);
    return Env("FAIL_CODE");
  }
  if (Env("HANG") == 1) {
    for (int i = 0; i < 600; ++i) sleep(1);
  }
  return 0;
}
