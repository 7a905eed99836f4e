#include "core/run/run_dir.h"

#include <dirent.h>
#include <sys/stat.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/record/run_files.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"

namespace ddplab {

std::string NcclTransportFromLog(absl::string_view log) {
  bool p2p = false, shm = false, net = false;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    size_t via = line.find(" via ");
    if (via == absl::string_view::npos || !absl::StrContains(line, "Channel")) continue;
    absl::string_view how = line.substr(via + 5);
    p2p |= absl::StartsWith(how, "P2P");
    shm |= absl::StartsWith(how, "SHM");
    net |= absl::StartsWith(how, "NET");
  }
  std::vector<std::string> used;
  if (p2p) used.push_back("P2P");
  if (shm) used.push_back("SHM");
  if (net) used.push_back("NET");
  return absl::StrJoin(used, "+");
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
