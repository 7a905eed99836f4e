// What one invocation of vit_ddp works with, as each of its runs needs it: the flags'
// and the environment's answers (experiments/command.cc fills it in).
//
//   ddplab::Invocation in;
//   in.argv0 = argv[0];
//   in.worker = ddplab::WorkerFromEnvironment();   // this process's place in a job, if any
//   ddplab::OneRun runs(in, host);                 // core/run/one_run.h
#ifndef DDPLAB_CORE_RUN_INVOCATION_H_
#define DDPLAB_CORE_RUN_INVOCATION_H_

#include <optional>
#include <string>
#include <vector>

#include "core/launch/distributed.h"
#include "core/launch/launcher.h"
#include "core/record/device_report.h"
#include "core/training/trainer.h"

namespace ddplab {

// The environment variable through which the launcher hands a worker its run.
inline constexpr char kWorkerTaskVariable[] = "DDPLAB_WORKER_TASK";

struct Invocation {
  const char* argv0 = nullptr;
  std::string self;                 // this executable, to start workers from
  std::optional<WorkerEnv> worker;  // this process's place in a job, if it is in one
  DeviceReport device;
  std::string nsys;                 // --profile=nsys: its path
  bool torch_profile = false;
  int profile_steps = 3;
  bool skip_completed = false;
  bool all_repetitions = false;  // not only where they decide (Note [Repetitions that decide])
  std::vector<std::string> plugin_dirs;
  LaunchOptions launch;             // nnodes, node_rank, master_addr, master_port
  // What a run whose profiling.allreduce_sweep is set calls after its steps
  // (TrainOptions::after_steps): the tuner's sweep, which core does not know by name.
  decltype(TrainOptions::after_steps) allreduce_sweep;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_RUN_INVOCATION_H_
