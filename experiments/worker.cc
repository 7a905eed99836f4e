#include "experiments/worker.h"

#include <chrono>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/config/experiment.h"  // kDefaultTimeoutSeconds
#include "core/run/one_run.h"  // TrainAndWrite
#include "google/protobuf/text_format.h"

namespace ddplab {

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
