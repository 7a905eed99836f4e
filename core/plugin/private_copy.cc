#include "core/plugin/private_copy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/plugin/library_digest.h"
#include "core/record/content_digest.h"

namespace ddplab {
namespace {

// Writes all of `bytes` to `fd`; false on an error.
bool WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// The copies this process made, by the path given and by the file's identity (device and
// inode) when it was read. A library loaded twice registers its .proto twice, which
// protobuf ends the process for; as dlopen does for a path or a file it has already, a
// second load of either gets the first copy, even if the file changed since.
struct Copies {
  std::mutex mu;
  std::map<std::string, PrivateCopy> by_path;
  std::map<std::pair<uint64_t, uint64_t>, PrivateCopy> by_file;
};
Copies& Made() {
  static Copies* copies = new Copies();  // never destroyed: the libraries stay loaded
  return *copies;
}

absl::StatusOr<PrivateCopy> Copy(const std::string& path);

}  // namespace

absl::StatusOr<PrivateCopy> CopyForLoading(const std::string& path) {
  Copies& made = Made();
  {
    std::lock_guard<std::mutex> lock(made.mu);
    if (auto it = made.by_path.find(path); it != made.by_path.end()) return it->second;
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) {
      const std::pair<uint64_t, uint64_t> file(st.st_dev, st.st_ino);
      if (auto it = made.by_file.find(file); it != made.by_file.end()) return it->second;
    }
  }
  return Copy(path);
}

void KeepLoaded(const std::string& path, const PrivateCopy& copy) {
  Copies& made = Made();
  std::lock_guard<std::mutex> lock(made.mu);
  made.by_path.emplace(path, copy);
  if (copy.file_inode != 0) made.by_file.emplace(std::make_pair(copy.file_device, copy.file_inode), copy);
}

namespace {

// Note [A plugin's recorded digest] (library_digest.h): bytes that are not those the
// build recorded beside the library are refused; no record, no check.
absl::Status CheckRecordedDigest(const std::string& path, const std::string& digest) {
  const std::string record_path = RecordedDigestPath(path);
  std::ifstream record(record_path);
  if (!record) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", record_path, ", the digest of ", path, "'s build: ", std::strerror(errno)));
  }
  std::string recorded;
  record >> recorded;
  if (recorded == digest) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      path, ": its bytes are not the build's: they digest to ", digest, ", and its build recorded ",
      recorded.empty() ? "nothing readable" : recorded, " in ", record_path,
      ". The library changed after it was built (bytes appended or edited, a copy cut short), or the two files "
      "come from different builds: copy both from one build (bazel build of the plugin's own target makes "
      "both), or remove ", record_path, " to load it unchecked"));
}

absl::StatusOr<PrivateCopy> Copy(const std::string& path) {
  struct stat st {};
  const bool known = stat(path.c_str(), &st) == 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  const std::string digest = ContentDigest(bytes);
  if (absl::Status s = CheckRecordedDigest(path, digest); !s.ok()) return s;
  PrivateCopy copy{path, digest, -1, known ? static_cast<uint64_t>(st.st_dev) : 0,
                   known ? static_cast<uint64_t>(st.st_ino) : 0};
  const std::string base = path.substr(path.find_last_of('/') + 1);
  const int fd = memfd_create(base.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return copy;  // no memfd here: the file where it lies (the Note)
  if (!WriteAll(fd, bytes) ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    return absl::InternalError(absl::StrCat("cannot copy ", path, " into memory to load it: ", why));
  }
  copy.fd = fd;
  copy.path = absl::StrCat("/proc/self/fd/", fd);
  return copy;
}

}  // namespace
}  // namespace ddplab
