#include "experiments/run_paths.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/record/run_files.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace ddplab {

// `bazel run` starts the binary in its runfiles; users name files relative to where
// they typed the command, which Bazel passes as BUILD_WORKING_DIRECTORY.
std::string UserPath(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/') return path;
  if (cwd != nullptr && *cwd != '\0') return absl::StrCat(cwd, "/", path);
  char buffer[4096];
  return getcwd(buffer, sizeof(buffer)) ? absl::StrCat(buffer, "/", path) : path;
}

// Where `path` (relative to the workspace, e.g. "experiments/x.textproto") stands in
// this binary's runfiles, or "" when the binary runs without them.
std::string RunfilesPath(const std::string& argv0, const std::string& path) {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::Create(argv0, &error));
  if (runfiles == nullptr) return "";
  std::string found = runfiles->Rlocation("ddplab/" + path);
  struct stat st;
  return stat(found.c_str(), &st) == 0 ? found : "";
}

// This executable, to start workers from.
std::string SelfPath(const char* argv0) {
  char buffer[4096];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return argv0;
  buffer[n] = '\0';
  return buffer;
}

// `program` found on PATH, or "".
std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "", ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", program);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<DirectoryLock>> DirectoryLock::Take(const std::string& directory) {
  if (absl::Status made = MakeDirectories(directory); !made.ok()) return made;
  const std::string path = directory + "/.vit_ddp.lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
    close(fd);
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "?";
    holder.erase(holder.find_last_not_of(" \n") + 1);
    return absl::FailedPreconditionError(absl::StrCat(
        "output directory ", directory, " is in use by another vit_ddp (pid ", holder, ", holding ", path,
        "): give this one another --output_dir, or wait for that one to finish"));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<DirectoryLock>(new DirectoryLock(fd));
}

DirectoryLock::~DirectoryLock() { close(fd_); }

}  // namespace ddplab
