// SuiteRunner's runs of several processes on this node's workers: started for the run,
// or handed to a pool of workers that runs every run of its transport (Note [Persistent
// workers], core/launch/worker_pool.h).
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/launch/distributed.h"
#include "core/launch/launcher.h"
#include "core/record/run_files.h"  // WriteRunResult
#include "experiments/run_paths.h"
#include "experiments/suite_runner.h"
#include "google/protobuf/text_format.h"

namespace ddplab {

SuiteRunner::WorkerLaunch SuiteRunner::LaunchOf(const PlannedRun& p) const {
  const v1::Experiment& e = p.run.experiment;
  WorkerLaunch w;
  if (!in_.nsys.empty()) {
    w.args = {in_.nsys, "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
              "--trace=cuda,nvtx,osrt,nccl", absl::StrCat("--output=", p.run_dir, "/", e.name(), "_rank%q{RANK}")};
  }
  w.args.push_back(SelfPath(in_.argv0));
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
  w.options.nproc_per_node = p.per_node;
  // nsys profiles one run a process; a pool is of one node.
  w.pooled = in_.nsys.empty() && w.options.nnodes == 1;
  w.key = absl::StrCat(absl::StrJoin(w.args, " "), "\n", p.run_dir, "\n", w.options.nproc_per_node, "\n");
  for (const auto& [name, value] : w.env) absl::StrAppend(&w.key, name, "=", value, "\n");
  return w;
}

std::string SuiteRunner::TransportOf(const PlannedRun& p) const { return p.launch ? LaunchOf(p).key : "here"; }

// Starts the workers of `p` (or hands `p` to its pool): this binary again, with the run
// handed over. False when the suite must stop (the launcher was signalled).
bool SuiteRunner::Launch(const PlannedRun& p, const std::string& label) {
  const v1::Experiment& e = p.run.experiment;
  const WorkerLaunch w = LaunchOf(p);
  v1::WorkerTask task;
  task.set_suite(SuiteOf(p));
  *task.mutable_experiment() = e;
  task.set_progress_label(label);
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
    env.emplace_back("NCCL_DEBUG_FILE", absl::StrCat(p.run_dir, "/", nccl_log_prefix, "%h.%p.log"));
  }
  LaunchResult result;
  if (w.pooled) {
    if (!pool_ || pool_->ended() || pool_key_ != w.key) {
      pool_.reset();  // another transport's workers end first
      ScopedEnvironment scoped(env);
      absl::StatusOr<std::unique_ptr<WorkerPool>> started = WorkerPool::Start(w.args, w.options);
      if (!started.ok()) {
        Failed(e.name(), std::string(started.status().message()));
        return true;
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
  MergeRunTraces(p.run_dir, e.name(), p.per_node * w.options.nnodes);
  if (result.signal != 0) {
    std::cerr << "vit_ddp: " << e.name() << ": " << result.message << "; the suite stops here\n";
    stopped_by_ = result.signal;
    // A worker may have written its own result over the repetitions before it: they go
    // back, for --skip_completed to keep.
    if (auto before = results_.find(p.index); before != results_.end()) {
      (void)WriteRunResult(before->second, e.output().directory());
    }
    return false;
  }
  if (result.exit_code != 0) {
    Failed(e.name(), result.message);
    return true;
  }
  absl::StatusOr<v1::RunResult> r = ReadResult(e.output().directory(), SuiteOf(p), e.name());
  if (!r.ok()) {
    if (w.options.node_rank == 0) Failed(e.name(), std::string(r.status().message()));
    return true;
  }
  // Each worker reads its plugins' files anew: a rebuild during the suite is refused here,
  // not mixed into its rows.
  if (std::string other = RanAnotherBuild(*r, host_); !other.empty()) {
    Failed(e.name(), other);
    return true;
  }
  ++ran_;
  if (std::string used = NcclTransport(p.run_dir, nccl_log_prefix); !used.empty()) r->set_nccl_transport(used);
  Keep(p, *r, /*fresh=*/true);
  return true;
}

}  // namespace ddplab
