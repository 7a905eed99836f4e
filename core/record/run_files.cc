#include "core/record/run_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

namespace {

// Writes all of `content` to `fd`, then flushes it to the disk; what failed, if anything.
absl::Status WriteAll(int fd, absl::string_view content, const std::string& path) {
  while (!content.empty()) {
    ssize_t n = write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    content.remove_prefix(static_cast<size_t>(n));
  }
  if (fsync(fd) != 0) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, absl::string_view content) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  absl::Status written = WriteAll(fd, content, tmp);
  if (close(fd) != 0 && written.ok()) {
    written = absl::UnavailableError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  if (written.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    written = absl::UnavailableError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno)));
  }
  if (!written.ok()) unlink(tmp.c_str());
  return written;
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
  if (absl::Status s = WriteFileAtomically(
          path, absl::StrCat("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", events, "\n]}\n"));
      !s.ok()) {
    return s;
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
  if (absl::Status s = WriteFileAtomically(path, json); !s.ok()) return s;
  return path;
}

}  // namespace ddplab
