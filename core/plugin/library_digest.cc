#include "core/plugin/library_digest.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace ddplab {

std::string LibraryDigest(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ULL;
  return absl::StrFormat("fnv1a64:%016x", hash);
}

}  // namespace ddplab
