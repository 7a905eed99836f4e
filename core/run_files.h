// The files a run leaves: its result as JSON, its ranks' timelines joined into one
// Chrome trace, and the directories they go in.
//
//   absl::StatusOr<std::string> path = ddplab::WriteRunResult(result, "ddplab_results");
#ifndef DDPLAB_CORE_RUN_FILES_H_
#define DDPLAB_CORE_RUN_FILES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab {

// Creates `path` and its missing parents (mkdir -p).
absl::Status MakeDirectories(const std::string& path);

// Joins per-rank trace files (JSON arrays of Chrome trace events) into one Chrome trace
// (a JSON object with "traceEvents"), one track per rank, at `path`; deletes the parts.
absl::Status MergeTraces(const std::vector<std::string>& parts, const std::string& path);

// Writes `result` as JSON to <directory>/<suite>/<experiment>.json (atomically: a
// temporary file renamed into place); returns the path.
absl::StatusOr<std::string> WriteRunResult(const v1::RunResult& result, const std::string& directory);

}  // namespace ddplab

#endif  // DDPLAB_CORE_RUN_FILES_H_
