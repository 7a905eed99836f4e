// vit_ddp's command line: its flags, and a parser that reports instead of exiting.
//
//   absl::StatusOr<ddplab::CommandLine> line = ddplab::ParseCommandLine({argv, argv + argc});
//   if (!line.ok()) { std::cerr << "vit_ddp: " << line.status().message() << "\n"; return 2; }
//   if (line->action == ddplab::CommandLine::kHelp) { std::cout << ddplab::HelpText(); return 0; }
//   int n = absl::GetFlag(FLAGS_nproc_per_node);
//
// Flags are Abseil flags (--name=value, --name value, --bool, --nobool), and torchrun's
// dashed spellings (--nproc-per-node=2) name the same flags as the underscored ones, with
// torchrun's values where vit_ddp has their meaning (--nproc_per_node=auto|gpu|cpu,
// --nnodes=2:2, --standalone) and a refusal naming the accepted ones where it has not
// (an elastic --nnodes=1:2). A mistyped flag gets "did you mean". --help (-h, --helpfull)
// and --version are actions, not errors.
#ifndef DDPLAB_EXPERIMENTS_CLI_H_
#define DDPLAB_EXPERIMENTS_CLI_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

ABSL_DECLARE_FLAG(std::string, experiment);
ABSL_DECLARE_FLAG(std::vector<std::string>, plugin_dir);
ABSL_DECLARE_FLAG(std::string, output_dir);
ABSL_DECLARE_FLAG(bool, print_experiments);
ABSL_DECLARE_FLAG(int, nproc_per_node);
ABSL_DECLARE_FLAG(int, nnodes);
ABSL_DECLARE_FLAG(int, node_rank);
ABSL_DECLARE_FLAG(std::string, master_addr);
ABSL_DECLARE_FLAG(int, master_port);
ABSL_DECLARE_FLAG(std::string, only);
ABSL_DECLARE_FLAG(bool, skip_completed);
ABSL_DECLARE_FLAG(bool, all_repetitions);
ABSL_DECLARE_FLAG(std::string, profile);
ABSL_DECLARE_FLAG(int, profile_steps);
ABSL_DECLARE_FLAG(bool, tune);

namespace ddplab {

struct CommandLine {
  enum Action { kRun, kHelp, kVersion };
  Action action = kRun;
  std::vector<std::string> positional;  // arguments that are not flags (vit_ddp takes none)
  // torchrun's words for --nproc_per_node: "auto", "gpu" or "cpu" (the flag is then 0 and
  // the caller counts them on the machine: NprocFromWord); "" for a number.
  std::string nproc_word;
  // --standalone, as torchrun's: one node, a local rendezvous (vit_ddp's way already).
  bool standalone = false;
};

// Processes per node for torchrun's `word` on a machine of `gpus` GPUs and `cpu_cores`
// cores: auto is the GPUs where there are, else the cores (as torchrun); gpu the GPUs
// (an error without any); cpu the cores.
absl::StatusOr<int> NprocFromWord(const std::string& word, int gpus, int cpu_cores);

// Parses `args` (args[0] is the program) into vit_ddp's flags; an error names the
// argument. Never exits.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

// What --help prints: usage and vit_ddp's flags with their defaults.
std::string HelpText();

// ddplab's version: the newest in docs/changes.md, whose changes it lists (the test of
// --version checks that they agree).
inline constexpr char kVersion[] = "0.12.0";

// `text` safe to print to a terminal: control characters other than newline and tab
// (ANSI escapes, NUL) from input echoed in a message are written as \xNN.
std::string Printable(absl::string_view text);

// What --version prints: ddplab's version and `build` (what it was built with).
std::string VersionText(const std::string& build);

}  // namespace ddplab

#endif  // DDPLAB_EXPERIMENTS_CLI_H_
