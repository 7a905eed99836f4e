// Where vit_ddp's files are: the user's paths under `bazel run`, the runfiles, the
// executable itself, a program on PATH, and the lock on an output directory. What a run
// leaves in its directory is core/run/run_dir.h's.
#ifndef DDPLAB_EXPERIMENTS_RUN_PATHS_H_
#define DDPLAB_EXPERIMENTS_RUN_PATHS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

// `path` as the user meant it: `bazel run` starts the binary in its runfiles, and users
// name files relative to where they typed the command (BUILD_WORKING_DIRECTORY).
std::string UserPath(const std::string& path);

// Where `path` (relative to the workspace, e.g. "experiments/x.textproto") stands in this
// binary's runfiles, or "" when the binary runs without them.
std::string RunfilesPath(const std::string& argv0, const std::string& path);

// This executable, to start workers from.
std::string SelfPath(const char* argv0);

// `program` found on PATH, or "".
std::string FindOnPath(const std::string& program);

// Holds <directory>/.vit_ddp.lock (an flock, the holder's pid written in it) while it
// lives, so that two jobs never write into one output directory: the second is refused,
// with the first's pid. The kernel lets go of the lock when the holder ends, however it
// ends; the file stays.
class DirectoryLock {
 public:
  static absl::StatusOr<std::unique_ptr<DirectoryLock>> Take(const std::string& directory);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  explicit DirectoryLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace ddplab

#endif  // DDPLAB_EXPERIMENTS_RUN_PATHS_H_
