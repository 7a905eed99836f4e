#include "core/run_files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"

namespace ddplab {

absl::Status MakeDirectories(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::UnavailableError(
          absl::StrCat("cannot create directory ", prefix, ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status MergeTraces(const std::vector<std::string>& parts, const std::string& path) {
  std::string events;
  for (const std::string& part : parts) {
    std::ifstream in(part);
    std::stringstream text;
    text << in.rdbuf();
    std::string body = text.str();
    size_t open = body.find('['), close = body.rfind(']');
    if (!in || open == std::string::npos || close == std::string::npos || close < open) {
      return absl::DataLossError(absl::StrCat("trace part ", part, " is missing or not a JSON array"));
    }
    std::string inner(absl::StripAsciiWhitespace(body.substr(open + 1, close - open - 1)));
    if (inner.empty()) continue;
    absl::StrAppend(&events, events.empty() ? "" : ",\n", inner);
  }
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n" << events << "\n]}\n";
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  for (const std::string& part : parts) std::remove(part.c_str());
  return absl::OkStatus();
}

absl::StatusOr<std::string> WriteRunResult(const v1::RunResult& result, const std::string& directory) {
  std::string dir = result.suite().empty() ? directory : absl::StrCat(directory, "/", result.suite());
  if (absl::Status s = MakeDirectories(dir); !s.ok()) return s;
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.preserve_proto_field_names = true;
  print.always_print_primitive_fields = true;
  if (auto s = google::protobuf::util::MessageToJsonString(result, &json, print); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot encode result: ", s.ToString()));
  }
  std::string path = absl::StrCat(dir, "/", result.experiment(), ".json");
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json;
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, " to ", path, ": ",
                                               std::strerror(errno)));
  }
  return path;
}

}  // namespace ddplab
