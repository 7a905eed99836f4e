// A run of several processes on this node's workers (OneRun::Launch): started for the
// run, or handed to a pool of workers that runs every run of its transport (Note
// [Persistent workers], core/launch/worker_pool.h).
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/launch/distributed.h"
#include "core/launch/launcher.h"
#include "core/record/run_files.h"  // WriteRunResult
#include "core/run/one_run.h"
#include "core/run/run_dir.h"
#include "google/protobuf/text_format.h"

namespace ddplab {

OneRun::WorkerLaunch OneRun::LaunchOf(const RunRequest& r) const {
  const v1::Experiment& e = *r.experiment;
  WorkerLaunch w;
  if (!in_.nsys.empty()) {
    w.args = {in_.nsys, "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
              "--trace=cuda,nvtx,osrt,nccl", absl::StrCat("--output=", r.run_dir, "/", e.name(), "_rank%q{RANK}")};
  }
  w.args.push_back(in_.self);
  // One flag: a repeated --plugin_dir replaces the one before it.
  if (!in_.plugin_dirs.empty()) w.args.push_back(absl::StrCat("--plugin_dir=", absl::StrJoin(in_.plugin_dirs, ",")));
  if (in_.torch_profile) {
    w.args.push_back("--profile=torch");
    w.args.push_back(absl::StrCat("--profile_steps=", in_.profile_steps));
  }
  // NCCL reads most of its variables once a process: a pool's runs share them. (Each
  // run sets them again as it makes its communicator.)
  if (!in_.device.gpus.empty()) w.env = NcclEnvironment(e.distributed());
  w.options = in_.launch;
  w.options.nproc_per_node = r.per_node;
  // nsys profiles one run a process; a pool is of one node.
  w.pooled = in_.nsys.empty() && w.options.nnodes == 1;
  w.key = absl::StrCat(absl::StrJoin(w.args, " "), "\n", r.run_dir, "\n", w.options.nproc_per_node, "\n");
  for (const auto& [name, value] : w.env) absl::StrAppend(&w.key, name, "=", value, "\n");
  return w;
}

std::string OneRun::TransportOf(const RunRequest& r) const { return r.launch ? LaunchOf(r).key : "here"; }

// Starts the workers of `r` (or hands `r` to its pool): this binary again, with the run
// handed over. The suite stops when the launcher was signalled.
void OneRun::Launch(const RunRequest& r, RunOutcome& out) {
  const v1::Experiment& e = *r.experiment;
  const WorkerLaunch w = LaunchOf(r);
  v1::WorkerTask task;
  task.set_suite(r.suite);
  *task.mutable_experiment() = e;
  task.set_progress_label(r.label);
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string text;
  printer.PrintToString(task, &text);
  EnvironmentList env = w.env;
  // NCCL's log says which transport its channels used; keep it beside the results (a
  // pool's, under its first run's name).
  std::string nccl_log_prefix = absl::StrCat(e.name(), ".nccl.");
  if (w.pooled && pool_ && !pool_->ended() && pool_key_ == w.key) nccl_log_prefix = pool_nccl_prefix_;
  if (std::getenv("NCCL_DEBUG") == nullptr && !in_.device.gpus.empty()) {
    env.emplace_back("NCCL_DEBUG", "INFO");
    env.emplace_back("NCCL_DEBUG_FILE", absl::StrCat(r.run_dir, "/", nccl_log_prefix, "%h.%p.log"));
  }
  LaunchResult result;
  if (w.pooled) {
    if (!pool_ || pool_->ended() || pool_key_ != w.key) {
      pool_.reset();  // another transport's workers end first
      ScopedEnvironment scoped(env);
      absl::StatusOr<std::unique_ptr<WorkerPool>> started = WorkerPool::Start(w.args, w.options);
      if (!started.ok()) {
        out.failed = true;
        out.failure = std::string(started.status().message());
        return;
      }
      pool_ = *std::move(started);
      pool_key_ = w.key;
      pool_nccl_prefix_ = nccl_log_prefix;
    }
    result = pool_->Run(text);
  } else {
    env.emplace_back(kWorkerTaskVariable, text);
    ScopedEnvironment scoped(env);
    result = ddplab::Launch(w.args, w.options);
  }
  MergeRunTraces(r.run_dir, e.name(), r.per_node * w.options.nnodes);
  if (result.signal != 0) {
    std::cerr << "vit_ddp: " << e.name() << ": " << result.message << "; the suite stops here\n";
    out.stopped_by = result.signal;
    out.go_on = false;
    // A worker may have written its own result over the repetitions before it: they go
    // back, for --skip_completed to keep.
    if (r.before != nullptr) (void)WriteRunResult(*r.before, e.output().directory());
    return;
  }
  if (result.exit_code != 0) {
    out.failed = true;
    out.failure = result.message;
    return;
  }
  absl::StatusOr<v1::RunResult> written = ReadResult(e.output().directory(), r.suite, e.name());
  if (!written.ok()) {
    if (w.options.node_rank == 0) {
      out.failed = true;
      out.failure = std::string(written.status().message());
    }
    return;
  }
  // Each worker reads its plugins' files anew: a rebuild during the suite is refused here,
  // not mixed into its rows.
  if (std::string other = RanAnotherBuild(*written, host_); !other.empty()) {
    out.failed = true;
    out.failure = other;
    return;
  }
  out.ran = true;
  if (std::string used = NcclTransport(r.run_dir, nccl_log_prefix); !used.empty()) written->set_nccl_transport(used);
  Keep(r, *written, /*fresh=*/true, out);
}

}  // namespace ddplab
