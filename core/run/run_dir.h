// What a run leaves in its directory (<output.directory>/<suite>): its result, its
// ranks' timelines and NCCL's logs, read back.
//
//   absl::StatusOr<v1::RunResult> done = ddplab::ReadResult(e.output().directory(), suite, e.name());
//   if (done.ok() && ddplab::ResultDiffers(*done, e).empty()) ...   // a result of `e`, from before
//   ddplab::MergeRunTraces(run_dir, e.name(), processes);            // <name>.trace.json
#ifndef DDPLAB_CORE_RUN_RUN_DIR_H_
#define DDPLAB_CORE_RUN_RUN_DIR_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/config/plugin_schema.h"
#include "ddplab/v1/experiment.pb.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab {

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

// Which transports NCCL's channels used, from its log (NCCL_DEBUG=INFO): "P2P", "SHM",
// "NET", or several joined by "+" ("P2P+SHM"), or "" when the log names none. Channel
// lines read like "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read".
std::string NcclTransportFromLog(absl::string_view log);

}  // namespace ddplab

#endif  // DDPLAB_CORE_RUN_RUN_DIR_H_
