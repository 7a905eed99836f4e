#include "core/run/one_run.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/launch/distributed.h"
#include "core/record/content_digest.h"
#include "core/record/run_files.h"
#include "core/run/run_dir.h"
#include "core/training/trainer.h"

namespace ddplab {
namespace {

// What `r` measured, as one repetition.
v1::Repetition RepetitionOf(const v1::RunResult& r) {
  v1::Repetition rep;
  rep.set_steps_per_s(r.steps_per_s());
  rep.set_exposed_comm_ms(r.exposed_comm_ms());
  *rep.mutable_phases() = r.phases();
  rep.set_peak_memory_gib(r.peak_memory_gib());
  rep.set_date(r.date());
  return rep;
}

// Why `done` is not of the module file `e` names as it is now; "" where it is (or for a ViT).
std::string ChangedModule(const v1::RunResult& done, const v1::Experiment& e) {
  if (!e.model().has_torchscript()) return "";
  const std::string& file = e.model().torchscript().file();
  absl::StatusOr<std::string> now = FileDigest(file);
  if (!now.ok()) return std::string(now.status().message());
  if (*now == done.model_digest()) return "";
  return absl::StrCat(file, " is ", *now, " now, ", done.model_digest().empty() ? "unrecorded" : done.model_digest(),
                      " then");
}

}  // namespace

RunOutcome OneRun::Run(const RunRequest& r, const PluginSet& plugins) {
  RunOutcome out;
  if (r.resume) {
    // The repetitions a result from before holds (--skip_completed): kept, not run again.
    int kept = Speaks() ? Resume(r, out) : 0;
    if (InJob()) {  // every rank goes the way rank 0 decided
      const std::string key = absl::StrCat("ddplab_run_", r.index, "/kept");
      if (Speaks()) job_store_->set(key, std::vector<uint8_t>{static_cast<uint8_t>(std::min(kept, 255))});
      kept = job_store_->get(key).at(0);
    }
    if (kept > 0) {
      out.kept = kept;
      return out;
    }
  }
  if (absl::Status made = MakeDirectories(r.run_dir); Speaks() && !made.ok()) {
    std::cerr << "vit_ddp: " << made.message() << "\n";
    out.exit = 1;
    out.go_on = false;
    return out;
  }
  if (r.launch) {
    Launch(r, out);
  } else if (r.here) {
    TrainHere(r, plugins, out);
  }
  if (InJob() && out.go_on) {
    absl::Status all = StoreBarrier(*job_store_, absl::StrCat("ddplab_run_", r.index, "_", r.repetition, "/done"),
                                    in_.worker->world_size, std::chrono::hours(24));
    if (!all.ok()) {
      std::cerr << "vit_ddp: rank " << in_.worker->rank << ": " << all.message() << "\n";
      out.exit = 1;
      out.go_on = false;
      return out;
    }
    if (Speaks() && r.processes > 1) MergeRunTraces(r.run_dir, r.experiment->name(), r.processes);
  }
  return out;
}

// How many repetitions of `r` a result from before holds, kept for the report
// (--skip_completed): 0 where there is none, or it records another experiment.
int OneRun::Resume(const RunRequest& r, RunOutcome& out) {
  if (!in_.skip_completed) return 0;
  const v1::Experiment& e = *r.experiment;
  absl::StatusOr<v1::RunResult> done = ReadResult(e.output().directory(), r.suite, e.name());
  if (!done.ok()) return 0;
  const std::string path = absl::StrCat(r.run_dir, "/", e.name(), ".json");
  if (std::string why = ResultDiffers(*done, e, &host_.schema()); !why.empty()) {
    std::cout << "  rerun: the result at " << path << " is of another experiment (" << why << ")\n";
    return 0;
  }
  if (std::string why = ChangedModule(*done, e); !why.empty()) {
    std::cout << "  rerun: the result at " << path << " was made from another module (" << why << ")\n";
    return 0;
  }
  if (std::string why = ChangedPluginBuild(*done, host_); !why.empty()) {
    std::cout << "  rerun: the result at " << path << " was made with other plugins (" << why << ")\n";
    return 0;
  }
  // A worker's own result, not yet joined to the repetitions before it, is one.
  if (done->repetitions_size() == 0) *done->add_repetitions() = RepetitionOf(*done);
  const int kept = done->repetitions_size();
  if (kept < r.repetitions) {
    // Where repetitions go only where they decide, the others may not run (#64).
    std::cout << "  kept: " << kept << " of " << r.repetitions << " repetitions from " << path << "; "
              << (r.spares_repetitions ? "up to " : "the other ") << r.repetitions - kept
              << (r.spares_repetitions ? " more run where they can change the recommendation (--all_repetitions: all)"
                                       : " run")
              << "\n";
  } else {
    std::cout << "  skipped: completed before (" << path << ")\n";
  }
  Keep(r, *done, /*fresh=*/false, out);
  return kept;
}

// Trains `r` in this process: alone, or as this rank of a job another launcher started.
void OneRun::TrainHere(const RunRequest& r, const PluginSet& plugins, RunOutcome& out) {
  const v1::Experiment& e = *r.experiment;
  const bool together = InJob() && r.processes > 1;
  c10::intrusive_ptr<c10d::Store> store;
  if (together) store = PrefixedStore(absl::StrCat("ddplab_run_", r.index, "_", r.repetition, "/"), job_store_);
  absl::StatusOr<v1::RunResult> result =
      TrainAndWrite(in_, plugins, e, r.suite, r.label, together ? in_.worker : std::nullopt, store);
  if (!result.ok() && StopRequested() != 0 && absl::IsCancelled(result.status())) {
    std::cerr << "vit_ddp: " << e.name() << ": " << result.status().message() << "\n";
    out.stopped_by = StopRequested();
    out.go_on = false;
    return;
  }
  if (!result.ok()) {
    out.failed = true;
    out.failure = std::string(result.status().message());
    out.exit = 1;
    out.go_on = !together;  // a rank of a job stops: its launcher ends the others
    return;
  }
  out.ran = true;
  if (!Speaks()) return;
  if (!together) MergeRunTraces(r.run_dir, e.name(), 1);
  Keep(r, *result, /*fresh=*/true, out);
}

// A `fresh` result (just run) joins the repetitions before it and is written again with them.
void OneRun::Keep(const RunRequest& r, v1::RunResult result, bool fresh, RunOutcome& out) const {
  const v1::Experiment& e = *r.experiment;
  result.set_origin(r.origin);
  if (r.convergence) *result.mutable_convergence() = *r.convergence;
  if (fresh) {
    result.clear_repetitions();
    if (r.before != nullptr) *result.mutable_repetitions() = r.before->repetitions();
    *result.add_repetitions() = RepetitionOf(result);
    if (absl::StatusOr<std::string> written = WriteRunResult(result, e.output().directory()); !written.ok()) {
      std::cerr << "vit_ddp: " << e.name() << ": result not updated: " << written.status().message() << "\n";
      out.unwritten = true;
    }
  }
  out.result = std::move(result);
}

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
  if (e.profiling().allreduce_sweep()) train.after_steps = in.allreduce_sweep;
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

}  // namespace ddplab
