// Where a plugin library's build records its digest (ContentDigest of its bytes,
// core/record/content_digest.h): beside the library (Note [A plugin's recorded digest]).
//
//   std::ifstream recorded(ddplab::RecordedDigestPath("/plugins/libfp8.so"));  // libfp8.so.digest
//
// Note [A plugin's recorded digest]
// sdk/plugin.bzl writes lib<name>.so.digest beside each plugin library it builds: the
// digest of the library's bytes, made by plugin_digest (this package). The host reads a
// library once (Note [A private copy], private_copy.h) and, where that file stands beside
// it, refuses bytes that are not the ones the build recorded: a library with bytes
// appended, a version string edited in place, a copy cut short or mixed from two builds.
// A library with no such file (one built by hand, or copied without it) loads unchecked,
// as before, and its digest is still recorded in each result. The digest tells builds
// apart; it is no defence against someone who rewrites both files.
#ifndef DDPLAB_CORE_PLUGIN_LIBRARY_DIGEST_H_
#define DDPLAB_CORE_PLUGIN_LIBRARY_DIGEST_H_

#include <string>

namespace ddplab {

// The file the build writes beside the library at `library_path` (Note [A plugin's
// recorded digest]).
inline std::string RecordedDigestPath(const std::string& library_path) { return library_path + ".digest"; }

}  // namespace ddplab

#endif  // DDPLAB_CORE_PLUGIN_LIBRARY_DIGEST_H_
