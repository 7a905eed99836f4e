// The digest that names a file's contents in a result: a plugin library's build
// (PluginBuild.digest; Note [A plugin's recorded digest], core/plugin/library_digest.h) or
// a module's file (RunResult.model_digest), so that a result made from other bytes is told
// apart (--skip_completed runs it again).
//
//   std::string d = ddplab::ContentDigest(bytes);  // "fnv1a64:0123456789abcdef"
#ifndef DDPLAB_CORE_RECORD_CONTENT_DIGEST_H_
#define DDPLAB_CORE_RECORD_CONTENT_DIGEST_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ddplab {

// "fnv1a64:<16 hex digits>": 64-bit FNV-1a of `bytes`. It tells builds and files apart;
// it is no defence against someone who means to forge it.
std::string ContentDigest(std::string_view bytes);

// The digest of the file at `path`, or an error that names it.
absl::StatusOr<std::string> FileDigest(const std::string& path);

}  // namespace ddplab

#endif  // DDPLAB_CORE_RECORD_CONTENT_DIGEST_H_
