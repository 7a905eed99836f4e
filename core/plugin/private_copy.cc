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
#include "absl/strings/str_format.h"

namespace ddplab {
namespace {

// A digest of the library's bytes (64-bit FNV-1a): enough to tell one build from another,
// which is all a result's record of it is for; it is no defence against a tampered file.
std::string Digest(const std::string& bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ULL;
  return absl::StrFormat("fnv1a64:%016x", hash);
}

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

absl::StatusOr<PrivateCopy> Copy(const std::string& path) {
  struct stat st {};
  const bool known = stat(path.c_str(), &st) == 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  PrivateCopy copy{path, Digest(bytes), -1, known ? static_cast<uint64_t>(st.st_dev) : 0,
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
