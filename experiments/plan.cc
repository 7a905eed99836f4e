#include "experiments/plan.h"

#include <algorithm>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_format.h"
#include "core/build_flags.h"
#include "core/model/vit_config.h"
#include "experiments/run_paths.h"
#include "google/protobuf/text_format.h"

namespace ddplab {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

bool OnCpu(const v1::Experiment& e, const Machine& machine) {
  return e.distributed().device() == v1::Distributed::CPU || machine.gpus == 0;
}

// A run of one process: the experiment asks for exactly one.
bool OneProcess(const v1::Experiment& e) { return e.distributed().gpus_per_node() == 1; }

// Processes per node when vit_ddp launches them: the flag, else the experiment, else one
// per GPU (2 on a machine without GPUs).
int PerNode(const v1::Experiment& e, const Machine& machine, const PlanOptions& options) {
  if (OneProcess(e)) return 1;
  if (options.nproc_per_node > 0) return options.nproc_per_node;
  if (e.distributed().gpus_per_node() > 0) return static_cast<int>(e.distributed().gpus_per_node());
  return OnCpu(e, machine) ? 2 : machine.gpus;
}

absl::Status Refuse(const v1::Experiment& e, const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat("experiment \"", e.name(), "\": ", why));
}

// More processes on a node than it has GPUs (or, on CPUs, cores) is refused.
absl::Status CheckProcesses(const v1::Experiment& e, const Machine& machine, int per_node) {
  if (e.distributed().device() == v1::Distributed::CUDA && !machine.cuda_build) {
    return Refuse(e, "asks for distributed.device CUDA, but this is a CPU build (LibTorch without CUDA, or --config=cpu)");
  }
  if (!OnCpu(e, machine) && per_node > machine.gpus) {
    return Refuse(e, absl::StrCat(per_node, " processes per node, but this machine has ", machine.gpus,
                                  " GPU", machine.gpus == 1 ? "" : "s", " (one process per GPU)"));
  }
  if (OnCpu(e, machine) && machine.cpu_cores > 0 && per_node > machine.cpu_cores) {
    return Refuse(e, absl::StrCat(per_node, " CPU processes per node, but this machine has ", machine.cpu_cores,
                                  " core", machine.cpu_cores == 1 ? "" : "s"));
  }
  return absl::OkStatus();
}

// A model that cannot fit is refused before it runs, with the figures.
absl::Status CheckMemory(const v1::Experiment& e, const Machine& machine, int per_node) {
  // A module the user brings was checked when the file was read, its parameters against
  // the device's memory (ScriptedModel::Load): its activations are not known beforehand.
  if (e.model().has_torchscript()) return absl::OkStatus();
  absl::StatusOr<VitConfig> config = VitConfigForModel(e.model(), e.data().image_size());
  if (!config.ok()) return Refuse(e, std::string(config.status().message()));
  // float32 copies of the parameters the optimizer keeps: AdamW's two moments, SGD's momentum.
  const int states = e.optimizer().has_adamw() ? 2 : (e.optimizer().sgd().momentum() != 0 ? 1 : 0);
  TrainingMemory need = VitTrainingMemory(*config, e.data().batch_size(), states);
  const bool cpu = OnCpu(e, machine);
  // Note [Memory on CPUs]: measured on ViT-L/32 (8.1 GiB at batch 32, 4.8 at batch 8, one
  // process, float32 SGD), a CPU process holds twice the activations the GPU's caching
  // allocator peaks at, a float32 copy of the initial weights and about 0.3 GiB of its
  // own; with the engine, one float32 copy of the gradients in its buckets.
  double more = 0;
  if (cpu) {
    const double parameters = 4.0 * static_cast<double>(VitParameterCount(*config));
    need.activation_bytes *= 2;
    more = parameters + 0.3 * kGiB + (OneProcess(e) && !e.distributed().force_engine() ? 0 : parameters);
  }
  // On CPUs the processes of a node share its memory; on GPUs each has its own.
  const int sharing = cpu ? per_node : 1;
  const int64_t have = cpu ? machine.host_memory_bytes : machine.gpu_memory_bytes;
  const double total = need.total() + more;
  if (have <= 0 || total * sharing <= static_cast<double>(have)) return absl::OkStatus();
  return Refuse(e, absl::StrFormat(
                       "cannot fit: each process needs at least %.1f GiB (%d parameters with their "
                       "gradients%s: %.1f GiB; activations of a batch of %d: %.1f GiB%s), and %s has %.1f GiB%s",
                       total / kGiB, VitParameterCount(*config),
                       states == 2 ? " and AdamW's moments" : (states == 1 ? " and momentum" : ""),
                       need.state_bytes / kGiB, e.data().batch_size(), need.activation_bytes / kGiB,
                       cpu ? absl::StrFormat("; on CPUs also the initial weights, the buckets and the runtime: %.1f GiB",
                                             more / kGiB)
                           : "",
                       cpu ? "this machine" : "each GPU", static_cast<double>(have) / kGiB,
                       sharing > 1 ? absl::StrCat(" for its ", sharing, " processes") : ""));
}

// Under torchrun (srun, mpirun) the job's shape is the launcher's: an experiment that
// asks for another number of processes per node is refused.
absl::Status CheckJobShape(const v1::Experiment& e, const JobPlace& worker) {
  const uint32_t asked = e.distributed().gpus_per_node();
  if (asked <= 1 || static_cast<int>(asked) == worker.local_world_size) return absl::OkStatus();
  return Refuse(e, absl::StrCat("asks for distributed.gpus_per_node ", asked, ", but ", worker.launcher,
                                " started ", worker.local_world_size, " processes per node (",
                                worker.world_size, " in all)"));
}

// The nodes an experiment asks for are the job's: distributed.nodes of more than one
// needs as many (--nnodes, or the launcher's job), else it would run on one, unsaid.
absl::Status CheckNodes(const v1::Experiment& e, const std::optional<JobPlace>& worker, const PlanOptions& options) {
  const uint32_t asked = e.distributed().nodes();
  if (asked <= 1 || worker) return absl::OkStatus();
  if (static_cast<int>(asked) == options.nnodes) return absl::OkStatus();
  return Refuse(e, absl::StrCat("asks for distributed.nodes ", asked, ", but this job runs on ", options.nnodes,
                                " node", options.nnodes == 1 ? "" : "s", " (--nnodes=", options.nnodes,
                                "): start vit_ddp on each node with --nnodes=", asked,
                                " --node_rank=R --master_addr --master_port, or leave nodes out"));
}

absl::Status PlanRun(PlannedRun& p, const Machine& machine, const std::optional<JobPlace>& worker,
                     const PlanOptions& options) {
  v1::Experiment& e = p.run.experiment;
  e.mutable_output()->set_directory(UserPath(options.output_dir.empty() ? e.output().directory() : options.output_dir));
  if (worker) {
    if (absl::Status s = CheckJobShape(e, *worker); !s.ok()) return s;
    p.processes = OneProcess(e) ? 1 : worker->world_size;
    p.per_node = OneProcess(e) ? 1 : worker->local_world_size;
    p.here = !OneProcess(e) || worker->rank == 0;
  } else {
    p.per_node = PerNode(e, machine, options);
    p.processes = OneProcess(e) ? 1 : p.per_node * options.nnodes;
    // As torchrun's --nproc_per_node=1 runs DDP code as DDP of one process, so does this:
    // the engine on, its levers doing their work, nothing sent (not one process without
    // them, whose lossy levers would compress nothing).
    if (p.processes == 1 && !OneProcess(e)) e.mutable_distributed()->set_force_engine(true);
    p.here = !OneProcess(e) || options.node_rank == 0;
    p.launch = p.processes > 1 || options.profiling_with_nsys;
  }
  if (absl::Status s = CheckNodes(e, worker, options); !s.ok()) return s;
  absl::Status s = CheckProcesses(e, machine, p.per_node);
  // Where the count came from the flag, the flag is what to change.
  if (!s.ok() && options.nproc_per_node > 0 && !worker && !OneProcess(e)) {
    return absl::FailedPreconditionError(
        absl::StrCat(s.message(), " (--nproc_per_node=", options.nproc_per_node, " asked for them)"));
  }
  if (s.ok()) s = CheckMemory(e, machine, p.per_node);
  // What this machine lacks (a CUDA build, GPUs, memory): --print_experiments lists the run
  // with why, as a file written for another machine is read here; a run is refused.
  if (!s.ok() && options.listing) {
    p.refusal = std::string(s.message());
    return absl::OkStatus();
  }
  return s;
}

// --tune: the run to tune (--only's, the tune field's, or the first of several
// processes), checked; the suite's own runs left out.
absl::Status PlanTune(const v1::Suite& suite, const std::optional<JobPlace>& worker, const PlanOptions& options,
                      const std::vector<absl::Status>& planned, Plan& plan) {
  if (worker) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--tune starts its own workers, one run after another: run vit_ddp --tune plainly, not under ",
        worker->launcher));
  }
  if (options.nnodes > 1) return absl::FailedPreconditionError("--tune tunes on one node: leave out --nnodes");
  plan.tune = ResolveTune(suite.tune());
  if (OnlyNames(options.only).size() > 1) {
    return absl::InvalidArgumentError("--tune tunes one run: give --only one name, not a list");
  }
  std::string name = !options.only.empty() ? options.only : plan.tune->experiment;
  for (size_t i = 0; i < plan.runs.size() && name.empty(); ++i) {
    if (plan.runs[i].processes > 1) name = plan.runs[i].run.experiment.name();
  }
  if (name.empty()) {
    return absl::FailedPreconditionError("--tune: every experiment of the suite runs one process: there is no "
                                         "collective to tune");
  }
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    PlannedRun& p = plan.runs[i];
    p.selected = false;
    if (p.run.experiment.name() != name && p.run.origin != name) continue;
    if (!planned[i].ok()) return planned[i];
    if (p.processes < 2) {
      return Refuse(p.run.experiment, "runs one process: --tune needs several (there is no collective to tune)");
    }
    plan.tune_base = i;
    plan.selected = 0;
    plan.tune_suite = absl::StrCat(suite.name(), "_tune");
    plan.tune_dir = absl::StrCat(p.run.experiment.output().directory(), "/", plan.tune_suite);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("--tune: the suite has no experiment \"", name, "\""));
}

}  // namespace

absl::StatusOr<Plan> MakePlan(const v1::Suite& suite, const Machine& machine, const std::optional<JobPlace>& worker,
                              const PlanOptions& options) {
  Plan plan;
  plan.suite = suite.name();
  if (suite.has_convergence()) plan.convergence = suite.convergence();
  int index = 0;
  std::vector<absl::Status> planned;
  const ExperimentSchema& schema = options.schema ? *options.schema : *ExperimentSchema::WithoutPlugins();
  const std::vector<std::string> only = OnlyNames(options.only);
  std::map<std::string, std::string> origins;  // each run's name: the experiment it came from
  for (SuiteRun& run : ExpandSweeps(suite, schema)) {
    // A run's result file is named after it: two runs of one name would write one file.
    if (auto [it, fresh] = origins.emplace(run.experiment.name(), run.origin); !fresh) {
      return absl::InvalidArgumentError(absl::StrCat(
          "experiment \"", run.origin, "\" makes a run named \"", run.experiment.name(), "\", as experiment \"",
          it->second, "\" ", it->second == run.origin ? "does already (two sweep values give one name)" : "does",
          ": their results would share one file; rename one, or sweep values that differ in the name"));
    }
    PlannedRun p;
    p.index = ++index;
    p.run = std::move(run);
    p.selected = only.empty() || OnlySelects(only, p.run);
    planned.push_back(PlanRun(p, machine, worker, options));
    if (!planned.back().ok() && p.selected && !options.tune) return planned.back();
    p.run_dir = absl::StrCat(p.run.experiment.output().directory(), "/", suite.name());
    plan.selected += p.selected ? 1 : 0;
    plan.runs.push_back(std::move(p));
  }
  if (options.tune) {
    if (absl::Status s = PlanTune(suite, worker, options, planned, plan); !s.ok()) return s;
  }
  return plan;
}

std::vector<std::string> OnlyNames(const std::string& only) {
  return absl::StrSplit(only, ',', absl::SkipWhitespace());
}

bool OnlySelects(const std::vector<std::string>& names, const SuiteRun& run) {
  return std::any_of(names.begin(), names.end(), [&](const std::string& name) {
    return name == run.experiment.name() || name == run.origin;
  });
}

std::vector<std::string> OnlyNamesNotFound(const Plan& plan, const std::string& only) {
  std::vector<std::string> missing;
  for (const std::string& name : OnlyNames(only)) {
    const bool found = std::any_of(plan.runs.begin(), plan.runs.end(),
                                   [&](const PlannedRun& p) { return OnlySelects({name}, p.run); });
    if (!found) missing.push_back(name);
  }
  return missing;
}

std::string FormatPlan(const Plan& plan, const ExperimentSchema& schema) {
  if (plan.tune) {
    const PlannedRun& p = plan.runs[plan.tune_base];
    const std::string text = schema.Print(p.run.experiment);
    return absl::StrCat("Suite \"", plan.suite, "\": --tune would tune ", p.run.experiment.name(), " (", p.processes,
                        " processes) over ", plan.tune->caps_mib.size(), " bucket caps, verifying ", plan.tune->verify,
                        " with ", plan.tune->repetitions, " run(s) each (nothing runs: --print_experiments)\n\n", text);
  }
  const int refused = static_cast<int>(std::count_if(plan.runs.begin(), plan.runs.end(), [](const PlannedRun& p) {
    return p.selected && !p.refusal.empty();
  }));
  std::string out = absl::StrCat("Suite \"", plan.suite, "\": ", plan.selected, " run(s) would run",
                                 refused > 0 ? absl::StrCat(" on a machine that can (", refused, " cannot here)") : "",
                                 " (nothing runs: --print_experiments)\n");
  for (const PlannedRun& p : plan.runs) {
    if (!p.selected) continue;
    const std::string text = schema.Print(p.run.experiment);
    absl::StrAppend(&out, "\n== [", p.index, "/", plan.runs.size(), "] ", p.run.experiment.name(), " (", p.processes,
                    " process", p.processes == 1 ? "" : "es", ")\n");
    if (!p.refusal.empty()) absl::StrAppend(&out, "# cannot run on this machine: ", p.refusal, "\n");
    absl::StrAppend(&out, text);
  }
  return out;
}


std::vector<std::string> PlanNotes(const Plan& plan, const Machine& machine, const PlanOptions& options) {
  std::vector<std::string> notes, one, engine_alone;
  for (const PlannedRun& p : plan.runs) {
    if (!p.selected) continue;
    if (options.nproc_per_node > 0 && OneProcess(p.run.experiment)) one.push_back(p.run.experiment.name());
    if (options.nproc_per_node > 0 && p.processes == 1 && !OneProcess(p.run.experiment)) {
      engine_alone.push_back(p.run.experiment.name());
    }
    const v1::Experiment& e = p.run.experiment;
    absl::StatusOr<VitConfig> vit = VitConfigForModel(e.model(), e.data().image_size());
    if (!OnCpu(e, machine) || !vit.ok() || VitParameterCount(*vit) <= 50'000'000) continue;
    notes.push_back(absl::StrFormat(
        "%s: a model of %.1fM parameters on CPUs takes minutes per step (%.2g TFLOP per step per process); "
        "VIT_TINY_TEST is the preset for CPUs",
        e.name(), VitParameterCount(*vit) / 1e6, VitTrainingFlopsPerSample(*vit) * e.data().batch_size() / 1e12));
  }
  if (!one.empty()) {
    notes.push_back(absl::StrCat("--nproc_per_node=", options.nproc_per_node,
                                 " applies to experiments of several processes; ", absl::StrJoin(one, ", "), " stay",
                                 one.size() == 1 ? "s" : "", " one process (gpus_per_node: 1)"));
  }
  if (!engine_alone.empty()) {
    notes.push_back(absl::StrCat("--nproc_per_node=", options.nproc_per_node, ": ", absl::StrJoin(engine_alone, ", "),
                                 engine_alone.size() == 1 ? " runs" : " run",
                                 " as data-parallel training of one process, the engine on (as torchrun's "
                                 "--nproc_per_node=1 runs DDP): the levers do their work, nothing is sent"));
  }
  return notes;
}

}  // namespace ddplab
