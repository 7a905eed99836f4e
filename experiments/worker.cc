#include "experiments/worker.h"

#include <chrono>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/config/experiment.h"  // kDefaultTimeoutSeconds
#include "core/training/trainer.h"
#include "experiments/run_paths.h"
#include "google/protobuf/text_format.h"
#include "tune/allreduce_sweep.h"

namespace ddplab {

absl::StatusOr<v1::RunResult> TrainAndWrite(const Invocation& in, const PluginSet& plugins, const v1::Experiment& e,
                                            const std::string& suite, const std::string& label,
                                            const std::optional<WorkerEnv>& worker,
                                            c10::intrusive_ptr<c10d::Store> store) {
  const int rank = worker ? worker->rank : 0;
  const bool speaks = rank == 0;
  const std::string run_dir = absl::StrCat(e.output().directory(), "/", suite);
  TrainOptions train;
  train.suite = suite;
  train.plugins = &plugins;
  train.worker = worker;
  train.store = std::move(store);
  if (speaks) train.progress_label = label;
  train.trace_path = TracePart(run_dir, e.name(), rank);
  if (e.profiling().allreduce_sweep()) train.after_steps = tune::SweepIntoResult;
  if (in.torch_profile) {
    // A folder per run, holding its ranks' traces alone: HTA reads every trace in a folder.
    const std::string traces = absl::StrCat(run_dir, "/", e.name(), ".torch_traces");
    if (absl::Status s = MakeDirectories(traces); !s.ok()) return s;
    train.torch_profile_path = absl::StrCat(traces, "/rank", rank, ".json");
    train.torch_profile_steps = in.profile_steps;
  }
  absl::StatusOr<v1::RunResult> result = Train(e, train);
  if (!result.ok() || !speaks) return result;
  std::cout << FormatRunSummary(*result);
  absl::StatusOr<std::string> written = WriteRunResult(*result, e.output().directory());
  if (!written.ok()) return absl::Status(written.status().code(), absl::StrCat("result not written: ", written.status().message()));
  std::cout << "  result: " << *written << "\n";
  std::cout.flush();
  return result;
}

namespace {

// Trains the run `text` holds; 0, or the exit code of its failure (said on stderr).
int TrainTask(const Invocation& in, PluginHost& host, const std::string& text, c10::intrusive_ptr<c10d::Store> store) {
  v1::WorkerTask task;
  if (!google::protobuf::TextFormat::ParseFromString(text, &task)) {
    std::cerr << "vit_ddp: " << kWorkerTaskVariable << " holds no run (it is set by vit_ddp for its workers)\n";
    return 2;
  }
  const v1::Experiment& e = task.experiment();
  absl::StatusOr<PluginSet> plugins = host.Configure(e);
  if (!plugins.ok()) {
    std::cerr << "vit_ddp: experiment \"" << e.name() << "\": " << plugins.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<v1::RunResult> result =
      TrainAndWrite(in, *plugins, e, task.suite(), task.progress_label(), in.worker, std::move(store));
  if (!result.ok()) {
    std::cerr << "vit_ddp: " << e.name() << ": " << result.status().message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int RunWorkerTask(const Invocation& in, PluginHost& host, const std::string& text) {
  return TrainTask(in, host, text, {});
}

int ServeTasks(const Invocation& in, PluginHost& host, TaskChannel& channel) {
  c10::intrusive_ptr<c10d::Store> store;  // a pool of one process meets no one
  if (in.worker) {
    absl::StatusOr<c10::intrusive_ptr<c10d::Store>> opened =
        OpenRendezvousStore(*in.worker, std::chrono::seconds(kDefaultTimeoutSeconds));
    if (!opened.ok()) {
      std::cerr << "vit_ddp: " << opened.status().message() << "\n";
      return 1;
    }
    store = *opened;
  }
  for (int task = 1;; ++task) {
    absl::StatusOr<std::optional<std::string>> text = channel.Next();
    if (!text.ok()) {
      std::cerr << "vit_ddp: " << text.status().message() << "\n";
      return 1;
    }
    if (!text->has_value()) return 0;
    // Every rank gets the same tasks in the same order: the task's number keys its meeting.
    if (const int exit = TrainTask(in, host, **text, store ? PrefixedStore(absl::StrCat("ddplab_task_", task, "/"), store)
                                                           : c10::intrusive_ptr<c10d::Store>());
        exit != 0) {
      return exit;
    }
    if (absl::Status done = channel.Done(); !done.ok()) {
      std::cerr << "vit_ddp: " << done.message() << "\n";
      return 1;
    }
  }
}

}  // namespace ddplab
