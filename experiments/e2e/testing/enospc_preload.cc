// A disk that fills up, for tests: loaded with LD_PRELOAD, it makes write(2) to files
// under $ENOSPC_DIR fail with ENOSPC once this process has written $ENOSPC_AFTER bytes
// there (0: at once). Other files are written as usual.
#include <dlfcn.h>
#include <errno.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using WriteFn = ssize_t (*)(int, const void*, size_t);

std::atomic<long long> g_written{0};

bool UnderDirectory(int fd, const char* dir) {
  char link[64], target[4096];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  return std::strncmp(target, dir, std::strlen(dir)) == 0;
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buffer, size_t count) {
  static WriteFn real = reinterpret_cast<WriteFn>(dlsym(RTLD_NEXT, "write"));
  const char* dir = std::getenv("ENOSPC_DIR");
  const char* after = std::getenv("ENOSPC_AFTER");
  if (dir != nullptr && *dir != '\0' && after != nullptr && UnderDirectory(fd, dir)) {
    const long long budget = std::atoll(after);
    if (g_written.load() + static_cast<long long>(count) > budget) {
      errno = ENOSPC;
      return -1;
    }
    g_written += static_cast<long long>(count);
  }
  return real(fd, buffer, count);
}
