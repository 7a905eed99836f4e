// What one invocation of vit_ddp will run, decided and checked before anything runs.
//
//   ddplab::Machine machine = ...;                   // GPUs, cores, memory
//   ddplab::PlanOptions options;                     // from the flags
//   absl::StatusOr<ddplab::Plan> plan = ddplab::MakePlan(suite, machine, worker, options);
//   if (!plan.ok()) { std::cerr << plan.status().message(); return 2; }   // nothing ran
//   for (const ddplab::PlannedRun& run : plan->runs) ...
//
// Which process runs what:
// - Started plainly, vit_ddp is the launcher: a run of one process (distributed
//   gpus_per_node 1) trains here, on node 0 only; a run of several runs on workers it
//   starts (--nproc_per_node of them per node, or as the experiment says), which on one
//   node stay for the next run of the same transport (Note [Persistent workers]).
// - Started by torchrun, srun or mpirun (`worker` set), every process of the job goes
//   through the suite together: a run of several processes uses the job's, a run of one
//   is trained by rank 0 alone while the others wait.
// Whatever --nproc_per_node says, a run of one process stays one process.
#ifndef DDPLAB_EXPERIMENTS_PLAN_H_
#define DDPLAB_EXPERIMENTS_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/sweeps.h"
#include "core/config/tune_settings.h"
#include "ddplab/v1/experiment.pb.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab {

// What the machine offers, as far as the checks need it.
struct Machine {
  bool cuda_build = false;
  int gpus = 0;
  int64_t gpu_memory_bytes = 0;  // the smallest GPU's
  int cpu_cores = 0;
  int64_t host_memory_bytes = 0;
};

// This process's place in a job that another launcher (torchrun, srun, mpirun) started.
struct JobPlace {
  std::string launcher;  // "torchrun", "srun", "mpirun"
  int rank = 0;
  int world_size = 1;
  int local_world_size = 1;
};

// The flags that shape the plan.
struct PlanOptions {
  std::string only;           // run only these, comma-separated (the others stay in the report)
  int nproc_per_node = 0;     // 0: as each experiment says
  int nnodes = 1;
  int node_rank = 0;
  std::string output_dir;     // overrides each experiment's output.directory
  bool profiling_with_nsys = false;
  bool tune = false;          // --tune: the suite's runs give way to the tuner's
  bool listing = false;       // --print_experiments: a run this machine cannot run is listed, with why
  const ExperimentSchema* schema = nullptr;  // the plugins found; nullptr: none
};

struct PlannedRun {
  SuiteRun run;            // output.directory made absolute
  int index = 0;           // from 1, in the suite
  int processes = 1;       // in the whole job
  int per_node = 1;        // processes this node starts (the launcher), or runs (a job)
  bool selected = true;    // false: left out by --only (its earlier result is reported)
  std::string refusal;     // --print_experiments: why this machine cannot run it ("": it can)
  bool here = true;        // this process takes part (false: another node's or rank's)
  bool launch = false;     // this process starts workers for it
  std::string run_dir;     // <output.directory>/<suite>
  // A run of the convergence check (core/config/convergence.h), added after the plan's own.
  std::optional<v1::ConvergenceRun> convergence;
  bool tuning = false;     // a run the tuner asked for (tune/tuner.h)
  std::string suite;       // the suite its result is filed under; "": the plan's
};

struct Plan {
  std::string suite;
  std::vector<PlannedRun> runs;  // every run of the suite, in order
  int selected = 0;              // runs that --only leaves in
  std::optional<v1::Convergence> convergence;  // the suite's, if it asks for the check
  // --tune: the tuner's settings and the run it tunes (an index into runs); no run of the
  // suite's is selected then.
  std::optional<TuneSettings> tune;
  size_t tune_base = 0;
  std::string tune_suite;  // "<suite>_tune": where the tuner's runs, report and answer go
  std::string tune_dir;    // <output.directory>/<tune_suite>
};

// Plans `suite` on `machine`; `worker` is this process's place in a job that another
// launcher started, if one did. An error says what cannot run and why; nothing has run.
absl::StatusOr<Plan> MakePlan(const v1::Suite& suite, const Machine& machine, const std::optional<JobPlace>& worker,
                              const PlanOptions& options);

// The plan as --print_experiments shows it: each run, its processes and its experiment as
// resolved, in text format.
std::string FormatPlan(const Plan& plan, const ExperimentSchema& schema);

// What a user should know before the plan runs, one line each: the runs --nproc_per_node
// left one process; a model of more than 50M parameters on CPUs (minutes per step).
std::vector<std::string> PlanNotes(const Plan& plan, const Machine& machine, const PlanOptions& options);

// The names --only lists (comma-separated), whether they select `run` (by its own name,
// or by the suite's experiment it comes from: "bucket_caps" selects every run its sweeps
// give, bucket_caps_25mb_nvlink and the rest), and which of them select no run of `plan`.
std::vector<std::string> OnlyNames(const std::string& only);
bool OnlySelects(const std::vector<std::string>& names, const SuiteRun& run);
std::vector<std::string> OnlyNamesNotFound(const Plan& plan, const std::string& only);

}  // namespace ddplab

#endif  // DDPLAB_EXPERIMENTS_PLAN_H_
