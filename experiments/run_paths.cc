#include "experiments/run_paths.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/report.h"
#include "google/protobuf/util/json_util.h"
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

// The transports NCCL's logs for one run name (files <prefix>*), or "".
std::string NcclTransport(const std::string& dir, const std::string& prefix) {
  std::string all;
  if (DIR* d = opendir(dir.c_str())) {
    while (struct dirent* entry = readdir(d)) {
      if (!absl::StartsWith(entry->d_name, prefix)) continue;
      std::string path = absl::StrCat(dir, "/", entry->d_name);
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      all += text.str();
    }
    closedir(d);
  }
  return NcclTransportFromLog(all);
}

// The result rank 0 wrote for `experiment`.
absl::StatusOr<v1::RunResult> ReadResult(const std::string& directory, const std::string& suite,
                                         const std::string& experiment) {
  std::string path = absl::StrCat(directory, "/", suite, "/", experiment, ".json");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  v1::RunResult result;
  if (!in || !google::protobuf::util::JsonStringToMessage(text.str(), &result).ok()) {
    return absl::NotFoundError(absl::StrCat("no result at ", path));
  }
  return result;
}

}  // namespace ddplab
