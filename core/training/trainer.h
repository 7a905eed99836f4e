// The training step and its measurement, in one process on one device.
//
// Each step: get batch, forward, loss, zero_grad, backward, optimizer step (SGD), inside
// NVTX ranges named as in the seed experiment ("Batch i", "get batch", "forward",
// "backward", "optimizer step"). Warm-up steps run first; the measured steps run between
// cudaProfilerStart and cudaProfilerStop, so that
//   nsys profile --capture-range=cudaProfilerApi --capture-range-end=stop ...
// captures exactly those; cool-down steps follow.
//
//   absl::StatusOr<ddplab::v1::RunResult> result = ddplab::Train(experiment, {});
//   std::cout << ddplab::FormatRunSummary(*result);
//   ddplab::WriteRunResult(*result, experiment.output().directory());

#ifndef DDPLAB_CORE_TRAINING_TRAINER_H_
#define DDPLAB_CORE_TRAINING_TRAINER_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/launch/distributed.h"
#include "core/plugin/plugin_host.h"
#include "ddplab/v1/experiment.pb.h"
#include "ddplab/v1/result.pb.h"
#include "core/record/run_files.h"  // MakeDirectories, MergeTraces, WriteRunResult

namespace ddplab {

struct TrainOptions {
  std::string suite;  // for the result record
  // This process's place in a job of several; none for a run of one process.
  std::optional<WorkerEnv> worker;
  // Where the job's ranks meet for this run; none: the rendezvous of `worker`.
  c10::intrusive_ptr<c10d::Store> store;
  // What the experiment's plugins registered; none: the engine's defaults.
  const PluginSet* plugins = nullptr;
  // Shown before the progress line on standard error ("[2/9] naive_ddp"); empty: no
  // progress line. On a terminal the line is redrawn in place; otherwise (a log file)
  // plain lines, at most one every 30 s. Its rate is over the measured steps so far.
  std::string progress_label;
  // Where to write this rank's timeline of the measured steps (Chrome trace events, one
  // JSON array); empty: none. MergeTraces joins the ranks' files.
  std::string trace_path;
  // Where to write this rank's LibTorch profiler trace (TorchProfile) of
  // `torch_profile_steps` steps run after the measured ones (not measured, and never
  // sampling the gradient error); empty: none.
  std::string torch_profile_path;
  int torch_profile_steps = 3;
  // Called on every rank of a run of several, after its steps, with the run's
  // communicator (a collective: every rank calls it); what it adds to the result is
  // kept. E.g. the tuner's all-reduce sweep (profiling.allreduce_sweep). Empty: none.
  std::function<absl::Status(compat::CollectiveGroup& group, const at::Device& device, v1::RunResult& result)>
      after_steps;
  // Where set, filled after the last step with a host copy of each trained parameter, in
  // the model's order, then of each buffer: what a parity test compares with PyTorch's
  // (parity/model_worker.cc).
  std::vector<at::Tensor>* trained_state = nullptr;
};

// Trains `experiment` (resolved and validated) in this process and measures it. Fails
// with a message when the experiment asks for what this build or machine lacks. Each
// plugin's step callbacks are called around every step.
absl::StatusOr<v1::RunResult> Train(const v1::Experiment& experiment, const TrainOptions& options);

// Asks a run of one process to stop at its next step (Train then fails with "stopped by
// signal N"): async-signal-safe, for a SIGINT or SIGTERM handler. A run of several
// processes is stopped by its launcher, which ends every rank together.
void RequestStop(int signal);
// The signal RequestStop was given, or 0.
int StopRequested();

// A few lines for a person: throughput, phases, memory, data waiting.
std::string FormatRunSummary(const v1::RunResult& result);


}  // namespace ddplab

#endif  // DDPLAB_CORE_TRAINING_TRAINER_H_
