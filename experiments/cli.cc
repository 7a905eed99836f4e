#include "experiments/cli.h"

#include <algorithm>
#include <optional>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/string_view.h"
#include "core/config/plugin_config.h"

ABSL_FLAG(std::string, experiment, "",
          "Experiment or suite file (.textproto). Default: experiments/seed_study.textproto "
          "in a CUDA build, experiments/cpu_smoke.textproto in a CPU build.");
ABSL_FLAG(std::vector<std::string>, plugin_dir, {},
          "More directories to find plugins in (each holding lib<name>.so or <name>/lib<name>.so), "
          "searched before the plugins built with this binary; only the plugins an experiment "
          "file names are loaded.");
ABSL_FLAG(std::string, output_dir, "", "Directory for results; overrides each experiment's output.directory.");
ABSL_FLAG(bool, print_experiments, false,
          "Print each run as resolved (defaults applied, sweeps expanded) and exit: runs nothing, "
          "writes nothing. A run this machine cannot run (a GPU run on a CPU build) is listed with why.");
ABSL_FLAG(int, nproc_per_node, 0,
          "Processes (GPUs) per node for each experiment of several processes; 0: as each "
          "experiment says. Experiments of one process stay one process.");
ABSL_FLAG(int, nnodes, 1, "Nodes in the job (as torchrun's --nnodes).");
ABSL_FLAG(int, node_rank, 0, "This node's rank, 0 to nnodes-1 (as torchrun's --node-rank).");
ABSL_FLAG(std::string, master_addr, "127.0.0.1", "Address of node 0, where rank 0 serves the rendezvous store.");
ABSL_FLAG(int, master_port, 0, "Port of the rendezvous store; 0: a free port (one node only).");
ABSL_FLAG(std::string, only, "",
          "Run only the experiments of these names (comma-separated): an experiment's name as the "
          "file gives it selects every run its sweeps make of it (bucket_caps: bucket_caps_25mb_nvlink, "
          "...), a run's own name that run alone. The suite's report keeps the other runs' earlier "
          "results.");
ABSL_FLAG(bool, skip_completed, false,
          "Keep the repetitions a result already in the output directory holds, where it records "
          "the same experiment, and run only the missing ones (a rerun after a crash or Ctrl-C "
          "picks up where the suite stopped).");
ABSL_FLAG(bool, all_repetitions, false,
          "Run every run steps.repetitions times; by default a run clear of its transport's fastest, "
          "and of its fastest exact run, after its first repetition is not repeated.");
ABSL_FLAG(std::string, profile, "none",
          "nsys: run every worker under Nsight Systems, capturing the measured steps "
          "(cudaProfilerApi range) with CUDA, NVTX, OS runtime and NCCL traces, one report per rank. "
          "torch: LibTorch's own profiler (Kineto, CUPTI on GPUs) over --profile_steps steps run "
          "after the measured ones, one Chrome trace per rank with its distributedInfo, in a folder per run "
          "(<experiment>.torch_traces/rank<R>.json: HTA's trace_dir).");
ABSL_FLAG(bool, tune, false,
          "Instead of the suite's runs, find the fastest bucket_cap_mb for one experiment on this "
          "machine (--only's, the suite's tune.experiment, or its first of several processes): "
          "measure, model, verify the few fastest predicted, and write the answer as an experiment "
          "file and PyTorch code. Measurements are cached per machine under <output>/tune_cache.");
ABSL_FLAG(int, profile_steps, 3, "With --profile=torch: how many steps to profile (1 to 100).");

namespace ddplab {
namespace {

// vit_ddp's own flags (not the ones Abseil defines for itself, such as --flagfile).
bool IsOurs(const absl::CommandLineFlag& flag) { return absl::StrContains(flag.Filename(), "experiments/cli.cc"); }

absl::CommandLineFlag* Find(const std::string& name) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag != nullptr && IsOurs(*flag) ? flag : nullptr;
}

// "unknown flag --nproc; did you mean --nproc_per_node?"
absl::Status UnknownFlag(const std::string& arg, const std::string& name) {
  std::vector<std::string> names = {"help", "version", "standalone"};
  for (const auto& [n, flag] : absl::GetAllFlags()) {
    if (IsOurs(*flag)) names.push_back(std::string(n));
  }
  std::string closest = Closest(name, names);
  for (const std::string& n : names) {  // a flag cut short: --nproc
    if (closest.empty() && name.size() >= 3 && absl::StartsWith(n, name)) closest = n;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown flag ", arg, closest.empty() ? "; see --help" : absl::StrCat("; did you mean --", closest, "? (see --help)")));
}

// torchrun's values for the flags vit_ddp shares with it, turned into vit_ddp's; false
// when `value` was consumed (a word for --nproc_per_node).
absl::StatusOr<bool> TorchrunValue(const std::string& name, std::string& value, CommandLine& line) {
  if (name == "nproc_per_node" && (value == "auto" || value == "gpu" || value == "cpu")) {
    line.nproc_word = value;
    return false;
  }
  if (name == "nnodes" && absl::StrContains(value, ':')) {
    const std::pair<std::string, std::string> range = absl::StrSplit(value, absl::MaxSplits(':', 1));
    if (range.first != range.second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nnodes=", value, ": an elastic range of nodes is torchrun's; vit_ddp runs a fixed number: --nnodes=N"));
    }
    value = range.first;
  }
  return true;
}

// What the parser of `name` says of `value`, with the values accepted.
std::string BadValue(const std::string& name, const std::string& value, const std::string& error) {
  if (name == "nproc_per_node") {
    return absl::StrCat("--nproc_per_node=", value, ": expected a number of processes per node, or auto, gpu or cpu "
                        "(as torchrun's)");
  }
  if (name == "nnodes") return absl::StrCat("--nnodes=", value, ": expected a number of nodes (N or N:N)");
  return absl::StrCat("--", name, "=", value, ": ", error);
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine line;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      line.positional.insert(line.positional.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      line.positional.push_back(arg);
      continue;
    }
    absl::string_view body = absl::StripPrefix(absl::StripPrefix(arg, "-"), "-");
    const size_t eq = body.find('=');
    // torchrun's spellings: --nproc-per-node is --nproc_per_node.
    const std::string name = absl::StrReplaceAll(body.substr(0, eq), {{"-", "_"}});
    std::optional<std::string> value;
    if (eq != absl::string_view::npos) value = std::string(body.substr(eq + 1));
    if (name == "help" || name == "helpfull" || name == "helpshort" || name == "h") {
      line.action = CommandLine::kHelp;
      continue;
    }
    if (name == "version") {
      line.action = CommandLine::kVersion;
      continue;
    }
    if (name == "standalone" && !value) {
      line.standalone = true;
      continue;
    }
    absl::CommandLineFlag* flag = Find(name);
    if (flag == nullptr && absl::StartsWith(name, "no") && !value) {
      if (absl::CommandLineFlag* negated = Find(name.substr(2)); negated && negated->IsOfType<bool>()) {
        flag = negated;
        value = "false";
      }
    }
    if (flag == nullptr) return UnknownFlag(arg, name);
    if (!value) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag ", arg, " needs a value; see --help"));
      }
    }
    absl::StatusOr<bool> parse = TorchrunValue(name, *value, line);
    if (!parse.ok()) return parse.status();
    std::string error;
    if (*parse && !flag->ParseFrom(*value, &error)) return absl::InvalidArgumentError(BadValue(name, *value, error));
  }
  return line;
}

std::string HelpText() {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsOurs(*flag)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) { return a->Name() < b->Name(); });
  std::string out =
      "vit_ddp: runs ddplab experiments: data-parallel ViT training, measured.\n\n"
      "  bazel run //experiments:vit_ddp                      # the default suite\n"
      "  bazel run //experiments:vit_ddp -- --experiment=FILE [--only=NAME[,NAME]] [--output_dir=DIR]\n"
      "  bazel run //experiments:vit_ddp -- --experiment=FILE --tune [--only=NAME]\n\n"
      "Flags (torchrun's dashed spellings and values work too: --nproc-per-node=auto, --nnodes=1:1, "
      "--standalone):\n";
  for (const absl::CommandLineFlag* flag : flags) {
    const std::string def = flag->DefaultValue();
    absl::StrAppend(&out, "  --", flag->Name(), def.empty() ? "" : absl::StrCat(" (default ", def, ")"), "\n      ",
                    flag->Help(), "\n");
  }
  absl::StrAppend(&out, "  --help, --version\n");
  return out;
}

absl::StatusOr<int> NprocFromWord(const std::string& word, int gpus, int cpu_cores) {
  if (word == "gpu" && gpus == 0) {
    return absl::FailedPreconditionError("--nproc_per_node=gpu: this machine has no GPU (cpu or a number work here)");
  }
  if (word == "gpu" || (word == "auto" && gpus > 0)) return gpus;
  if (word == "auto" || word == "cpu") return std::max(1, cpu_cores);
  return absl::InvalidArgumentError(absl::StrCat("--nproc_per_node=", word, ": expected auto, gpu or cpu"));
}

std::string Printable(absl::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\t' || (u >= 0x20 && u != 0x7f)) {
      out += c;
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", u);
    }
  }
  return out;
}

std::string VersionText(const std::string& build) { return absl::StrCat("vit_ddp (ddplab) ", kVersion, "; ", build, "\n"); }

}  // namespace ddplab
