// libFuzzer target: vit_ddp's command line and its experiment file together. The input
// is the arguments, one per line, then a line "---", then the file's text. Parsing the
// flags, loading the file, planning the runs (for a plain launch and for rank 1 of a
// torchrun job) and printing the plan give a result or an error, never a crash, a hang
// or undefined behaviour; nothing runs.
//
//   bazel build --config=fuzz //experiments/fuzz:cli_fuzzer
//   bazel-bin/experiments/fuzz/cli_fuzzer -max_total_time=60 NEW_CORPUS experiments/fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_split.h"
#include "core/config/experiment.h"
#include "plugins/testing/shipped_schema.h"
#include "experiments/cli.h"
#include "experiments/plan.h"

namespace {

void PlanAll(const ddplab::v1::Suite& suite) {
  ddplab::Machine machine;
  machine.cuda_build = true;
  machine.gpus = 2;
  machine.gpu_memory_bytes = int64_t{80} << 30;
  machine.cpu_cores = 4;
  machine.host_memory_bytes = int64_t{16} << 30;
  ddplab::PlanOptions options;
  options.only = absl::GetFlag(FLAGS_only);
  options.nproc_per_node = absl::GetFlag(FLAGS_nproc_per_node);
  options.nnodes = absl::GetFlag(FLAGS_nnodes);
  options.node_rank = absl::GetFlag(FLAGS_node_rank);
  options.output_dir = absl::GetFlag(FLAGS_output_dir);
  options.schema = &ddplab::testing::ShippedSchema();
  for (const std::optional<ddplab::JobPlace>& place :
       {std::optional<ddplab::JobPlace>(), std::optional<ddplab::JobPlace>(ddplab::JobPlace{"torchrun", 1, 2, 2})}) {
    absl::StatusOr<ddplab::Plan> plan = ddplab::MakePlan(suite, machine, place, options);
    if (plan.ok()) (void)ddplab::FormatPlan(*plan, ddplab::testing::ShippedSchema());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find("\n---\n");
  const std::string head = input.substr(0, split);
  const std::string text = split == std::string::npos ? "" : input.substr(split + 5);
  std::vector<std::string> args = {"vit_ddp"};
  for (absl::string_view arg : absl::StrSplit(head, '\n')) args.emplace_back(arg);
  absl::FlagSaver saver;  // every input starts from the defaults
  absl::StatusOr<ddplab::CommandLine> line = ddplab::ParseCommandLine(args);
  if (!line.ok()) {
    if (line.status().message().empty()) __builtin_trap();  // every error says what
    return 0;
  }
  if (line->action != ddplab::CommandLine::kRun) {
    (void)ddplab::HelpText();
    return 0;
  }
  absl::StatusOr<ddplab::v1::Suite> suite =
      ddplab::ParseExperimentText(text, "fuzz.textproto", ddplab::testing::ShippedSchema());
  if (suite.ok()) PlanAll(*suite);
  return 0;
}
