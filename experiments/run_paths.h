// Where vit_ddp's files are: the user's paths under `bazel run`, the runfiles, the
// executable itself, a program on PATH, and what a run left behind (its result, NCCL's
// logs).
#ifndef DDPLAB_EXPERIMENTS_RUN_PATHS_H_
#define DDPLAB_EXPERIMENTS_RUN_PATHS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/config/plugin_schema.h"
#include "ddplab/v1/experiment.pb.h"
#include "ddplab/v1/result.pb.h"

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

// Where rank `rank` writes its timeline of run `name` (MergeTraces joins them).
std::string TracePart(const std::string& run_dir, const std::string& name, int rank);

// Joins the ranks' timelines of a run into <run_dir>/<name>.trace.json: those that are
// here (a job across nodes leaves each node's on its own disk); a failure is said on
// stderr.
void MergeRunTraces(const std::string& run_dir, const std::string& name, int processes);

// The transports NCCL's logs for one run name (files <dir>/<prefix>*), or "".
std::string NcclTransport(const std::string& dir, const std::string& prefix);

// The result rank 0 wrote for `experiment`.
absl::StatusOr<v1::RunResult> ReadResult(const std::string& directory, const std::string& suite,
                                         const std::string& experiment);

// Why `recorded` (a result read back) is not a result of `asked` (a resolved
// experiment): the first difference, e.g. "data.batch_size: 4 -> 16"; "" when it is.
// The output directory is left out of the comparison. With `schema`, a plugin's
// configuration is compared field by field, as its file writes it
// ("plugin[0].bucket_sizing.bucket_cap_mb: 2000 -> 1000"), not as bytes.
std::string ResultDiffers(const v1::RunResult& recorded, const v1::Experiment& asked,
                          const ExperimentSchema* schema = nullptr);

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
