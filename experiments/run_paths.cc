#include "experiments/run_paths.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/report/report.h"
#include "core/record/run_files.h"
#include "google/protobuf/util/message_differencer.h"
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

std::string ResultDiffers(const v1::RunResult& recorded, const v1::Experiment& asked, const ExperimentSchema* schema) {
  if (!recorded.has_resolved()) return "the result records no experiment (an older ddplab wrote it)";
  if (recorded.schema() != kResultSchema) {
    return absl::StrCat("an older ddplab wrote it, whose bucket_cap_mb counted 10^6 bytes (schema ", recorded.schema(),
                        ", now ", kResultSchema, ")");
  }
  v1::Experiment before = recorded.resolved(), now = asked;
  before.clear_output();
  now.clear_output();
  google::protobuf::util::MessageDifferencer differ;
  std::string report;
  differ.ReportDifferencesToString(&report);
  if (differ.Compare(before, now)) return "";
  // The plugins' configurations, readable: their fields by name instead of their bytes.
  std::unique_ptr<google::protobuf::Message> readable_before, readable_now;
  if (schema != nullptr) {
    readable_before = schema->ToReadable(before);
    readable_now = schema->ToReadable(now);
  }
  if (readable_before != nullptr && readable_now != nullptr) {
    google::protobuf::util::MessageDifferencer by_field;
    std::string readable_report;
    by_field.ReportDifferencesToString(&readable_report);
    if (!by_field.Compare(*readable_before, *readable_now)) report = readable_report;
  }
  std::string first = report.substr(0, report.find('\n'));
  return first.empty() ? "the experiment differs" : first;
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

std::string TracePart(const std::string& run_dir, const std::string& name, int rank) {
  return absl::StrCat(run_dir, "/", name, ".trace.rank", rank, ".json");
}

// Joins the ranks' timelines of a run into <name>.trace.json: those that are here (a job
// across nodes leaves each node's on its own disk).
void MergeRunTraces(const std::string& run_dir, const std::string& name, int processes) {
  std::vector<std::string> parts;
  struct stat st;
  for (int r = 0; r < processes; ++r) {
    if (std::string part = TracePart(run_dir, name, r); stat(part.c_str(), &st) == 0) parts.push_back(part);
  }
  if (parts.empty()) return;
  if (absl::Status merged = MergeTraces(parts, absl::StrCat(run_dir, "/", name, ".trace.json")); !merged.ok()) {
    std::cerr << "vit_ddp: " << merged.message() << "\n";
  }
}

}  // namespace ddplab
