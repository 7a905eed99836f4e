// A plugin library's bytes, read once into memory of the process's own and loaded from
// there, so that what runs cannot change under the process (Note [A private copy]).
//
//   absl::StatusOr<ddplab::PrivateCopy> copy = ddplab::CopyForLoading("/plugins/libfp8.so");
//   if (!copy.ok()) return copy.status();
//   void* handle = dlopen(copy->path.c_str(), RTLD_NOW | RTLD_LOCAL);  // "/proc/self/fd/7"
//   Record(copy->digest);                                              // of the bytes loaded
//
// Note [A private copy]
// dlopen maps a library's file. Rewriting that file in place while it is loaded (`cp` of
// a new build over it, a build writing into the same path) changes the pages under the
// process, and truncating it pulls them out: the next call into the plugin dies of
// SIGBUS, a suite's launcher with it, and no report is written. So the host reads the
// file once into a sealed memfd (Linux's anonymous file, no writes after sealing) and
// loads that: a rewrite of the file on disk reaches the next process that loads it, never
// one that has. The digest recorded in each result is taken of those same bytes, so it
// names the build that ran even when the file changed just after. Where the kernel has
// no memfd, the file is loaded where it lies, as before.
#ifndef DDPLAB_CORE_PLUGIN_PRIVATE_COPY_H_
#define DDPLAB_CORE_PLUGIN_PRIVATE_COPY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ddplab {

struct PrivateCopy {
  std::string path;    // what to dlopen: the copy (/proc/self/fd/N), or the file itself
  std::string digest;  // "fnv1a64:<16 hex digits>" of the bytes read
  int fd = -1;         // the copy's, kept open for the process's life; -1 without one
  // The file's identity when it was read (0 where stat failed).
  uint64_t file_device = 0, file_inode = 0;
};

// Reads `path` whole (an error names it when it cannot), checks it against the digest its
// build wrote beside it where there is one (Note [A plugin's recorded digest],
// library_digest.h), and returns its private copy; the
// same copy for a path, or a file, this process copied before (as dlopen returns the
// library it has for a path or a file it loaded) once KeepLoaded was told so.
absl::StatusOr<PrivateCopy> CopyForLoading(const std::string& path);

// Records that `copy` of `path` was loaded (dlopen succeeded): later copies of that path,
// or of that file, are this one. A copy that failed to load is never kept: a file
// rewritten after a refusal is read again.
void KeepLoaded(const std::string& path, const PrivateCopy& copy);

}  // namespace ddplab

#endif  // DDPLAB_CORE_PLUGIN_PRIVATE_COPY_H_
