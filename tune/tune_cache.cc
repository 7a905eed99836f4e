#include "tune/tune_cache.h"

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/record/run_files.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"

namespace ddplab::tune {

std::string MachineChange(const v1::Machine& then, const v1::Machine& now) {
  const std::vector<std::pair<std::string, std::pair<std::string, std::string>>> fields = {
      {"the GPU", {then.device(), now.device()}},
      {"the GPU count", {absl::StrCat(then.device_count()), absl::StrCat(now.device_count())}},
      {"the driver", {then.driver(), now.driver()}},
      {"CUDA", {then.cuda_runtime(), now.cuda_runtime()}},
      {"NCCL", {then.nccl_version(), now.nccl_version()}},
      {"LibTorch", {then.torch_version(), now.torch_version()}},
      {"the topology", {then.topology(), now.topology()}},
  };
  std::vector<std::string> changed;
  for (const auto& [what, values] : fields) {
    if (values.first != values.second) {
      changed.push_back(absl::StrCat(what, ": ", values.first.empty() ? "none" : values.first, " -> ",
                                     values.second.empty() ? "none" : values.second));
    }
  }
  return absl::StrJoin(changed, "; ");
}

CacheLookup LookUp(const std::string& path, const v1::Machine& machine, const v1::Experiment& probe,
                   const v1::Experiment& base) {
  CacheLookup found;
  std::ifstream in(path);
  if (!in) return found;
  std::stringstream text;
  text << in.rdbuf();
  v1::TuneCache cache;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (auto s = google::protobuf::util::JsonStringToMessage(text.str(), &cache, options); !s.ok()) {
    found.note = absl::StrCat(path, " is no tuning cache (", s.ToString(), "): measuring again");
    return found;
  }
  if (std::string change = MachineChange(cache.machine(), machine); !change.empty()) {
    found.note = absl::StrCat("the machine changed since ", cache.date(), " (", change, "): measuring again");
    return found;
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(cache.probe(), probe)) {
    found.note = absl::StrCat("the experiment changed since ", cache.date(), ": measuring again");
    return found;
  }
  // The probe leaves the bucket cap out; the experiment's own run has it, and the gain is
  // measured against that run.
  if (!google::protobuf::util::MessageDifferencer::Equals(cache.base(), base)) {
    found.note = absl::StrCat("the experiment as given changed since ", cache.date(),
                              " (its bucket cap, say): measuring again");
    return found;
  }
  if (cache.probe_result().gradient_ready_size() == 0 || cache.probe_result().allreduce_sweep_size() < 2) {
    found.note = absl::StrCat(path, " lacks the probe's ready times or sweep: measuring again");
    return found;
  }
  found.cache = std::move(cache);
  return found;
}

absl::Status Store(const std::string& path, const v1::TuneCache& cache) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos) {
    if (absl::Status s = MakeDirectories(path.substr(0, slash)); !s.ok()) return s;
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  if (auto s = google::protobuf::util::MessageToJsonString(cache, &json, options); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot encode the tuning cache: ", s.ToString()));
  }
  return WriteFileAtomically(path, json);
}

}  // namespace ddplab::tune
