// The files a run leaves: its result as JSON, its ranks' timelines joined into one
// Chrome trace, and the directories they go in.
//
//   absl::StatusOr<std::string> path = ddplab::WriteRunResult(result, "ddplab_results");
#ifndef DDPLAB_CORE_RECORD_RUN_FILES_H_
#define DDPLAB_CORE_RECORD_RUN_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab {

// RunResult.schema of the results this build writes: what the fields of the experiment
// it records mean. 1: bucket_cap_mb in MiB, PowerSGD's fields under PyTorch's names.
inline constexpr uint32_t kResultSchema = 1;

// Writes `content` to `path` whole or not at all: into <path>.tmp, flushed to the disk,
// then renamed over `path`. Any failure (a full disk included) is an error, the .tmp is
// removed and what was at `path` before stays as it was.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view content);

// Creates `path` and its missing parents (mkdir -p).
absl::Status MakeDirectories(const std::string& path);

// Joins per-rank trace files (JSON arrays of Chrome trace events) into one Chrome trace
// (a JSON object with "traceEvents"), one track per rank, at `path`; deletes the parts.
absl::Status MergeTraces(const std::vector<std::string>& parts, const std::string& path);

// Writes `result` as JSON to <directory>/<suite>/<experiment>.json (atomically: a
// temporary file renamed into place); returns the path.
absl::StatusOr<std::string> WriteRunResult(const v1::RunResult& result, const std::string& directory);

}  // namespace ddplab

#endif  // DDPLAB_CORE_RECORD_RUN_FILES_H_
