// plugin_digest LIBRARY: prints the digest of LIBRARY's bytes, as the host takes it
// (Note [A plugin's recorded digest], library_digest.h). sdk/plugin.bzl runs it on each
// plugin library it builds and writes what it prints beside the library.
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "core/plugin/library_digest.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: plugin_digest LIBRARY\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "plugin_digest: cannot read " << argv[1] << "\n";
    return 1;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    std::cerr << "plugin_digest: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::cout << ddplab::LibraryDigest(bytes) << "\n";
  return 0;
}
