// plugin_digest LIBRARY: prints the digest of LIBRARY's bytes, as the host takes it
// (Note [A plugin's recorded digest], library_digest.h; core/record/content_digest.h). sdk/plugin.bzl runs it on each
// plugin library it builds and writes what it prints beside the library.
#include <iostream>
#include <string>

#include "core/record/content_digest.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: plugin_digest LIBRARY\n";
    return 2;
  }
  absl::StatusOr<std::string> digest = ddplab::FileDigest(argv[1]);
  if (!digest.ok()) {
    std::cerr << "plugin_digest: " << digest.status().message() << "\n";
    return 1;
  }
  std::cout << *digest << "\n";
  return 0;
}
