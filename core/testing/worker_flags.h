// A worker's command-line flags as one line, the task a pool hands it
// (core/launch/worker_pool.h): each flag C-escaped, so that no newline or tab is left in
// it, and the flags joined by tabs.
//
//   pool->Run(EncodeWorkerFlags({"--plugins=plugin { bf16 {} }", "--steps=2"}));
//   // the worker: DecodeWorkerFlags(line) gives the two flags back
#ifndef DDPLAB_CORE_TESTING_WORKER_FLAGS_H_
#define DDPLAB_CORE_TESTING_WORKER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ddplab {

inline std::string EncodeWorkerFlags(const std::vector<std::string>& flags) {
  return absl::StrJoin(flags, "\t", [](std::string* out, const std::string& f) { out->append(absl::CEscape(f)); });
}

inline absl::StatusOr<std::vector<std::string>> DecodeWorkerFlags(const std::string& line) {
  std::vector<std::string> flags;
  if (line.empty()) return flags;
  for (absl::string_view escaped : absl::StrSplit(line, '\t')) {
    std::string& flag = flags.emplace_back();
    if (std::string error; !absl::CUnescape(escaped, &flag, &error)) {
      return absl::InvalidArgumentError(absl::StrCat("flag ", flags.size(), " of the task: ", error));
    }
  }
  return flags;
}

}  // namespace ddplab

#endif  // DDPLAB_CORE_TESTING_WORKER_FLAGS_H_
