// Prints the PyTorch code that the report gives for each configuration on the command
// line (plugin entries in text format, e.g. 'plugin { static_graph {} }'), for tests
// outside C++ (bench/ddp_wrap_test.py): per argument, a line "=== <argument>", the code's
// lines, and a line "ddplab only: <levers PyTorch has no form of>". Exit code 2 when a
// configuration is refused (its error is printed in place of the code).
#include <iostream>
#include <string>

#include "absl/strings/match.h"
#include "plugins/testing/plugin_testutil.h"

int main(int argc, char** argv) {
  int code = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string text = ddplab::testing::PyTorchCodeFor(argv[i]);
    if (!absl::StrContains(text, "ddplab only: ")) code = 2;
    std::cout << "=== " << argv[i] << "\n" << text << "\n";
  }
  return code;
}
