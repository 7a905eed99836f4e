// The data-parallel engine: gradients averaged over ranks in buckets, overlapped with
// backward, as PyTorch's DDP does.
//
// The engine is a pipeline of extension points (extension_points.h), each with a default
// that is DDP's plain behaviour and each replaceable by a plugin (EngineParts, which the
// plugin host fills). Per synced step:
//   1. a hook on each parameter's gradient accumulator hands the gradient to the layout
//      (GradientLayout::Collect) as backward produces it;
//   2. when a bucket is complete, and every bucket before it has been started, the
//      layout hands it over to the hook chain (core's all-reduce, wrapped by the plugins'
//      hooks: extension_points.h);
//   3. EndBackward waits for each bucket's future in turn and the layout puts its average
//      where the gradients are.
// Buckets are planned before the first step in reverse parameter order, and once more
// after it in the order gradients became ready on rank 0 (the same buckets on every
// rank). Parameters are broadcast from rank 0 at start. One process with no hook but
// core's all-reduce does no work at all and issues no collective (Note [One process
// issues no collective], engine.cc).
//
//   ddplab::DataParallelEngine engine(model->parameters(), group, parts);
//   engine.SetParameterStep([&](const auto& p, const auto& g) { optimizer.StepParameters(p, g); });
//   engine.SetOptimizerMaker(...);   // for a hook that steps parts of the parameters
//   engine.BroadcastParameters();
//   for (...) {
//     engine.ZeroGrad();
//     engine.BeginStep(/*sync=*/true);   // false: accumulate locally, no reduction
//     loss.backward();
//     absl::Status s = engine.EndBackward();
//     if (!engine.updated_parameters()) optimizer.Step();
//   }

#ifndef DDPLAB_CORE_ENGINE_ENGINE_H_
#define DDPLAB_CORE_ENGINE_ENGINE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "core/engine/process_group.h"
#include "core/engine/comm_timer.h"
#include "core/engine/extension_points.h"
#include "core/hook_updates/hook_updates.h"

namespace ddplab {

// What the plugins of an experiment give the engine; every part left empty is the
// default of extension_points.h.
struct EngineParts {
  std::shared_ptr<const BucketPlanner> planner;
  std::shared_ptr<const MissingGradients> missing_gradients;
  LayoutFactory layout;
  // The hook chain around core's AllreduceHook, innermost first.
  std::vector<HookWrapper> hooks;
  // Sees the gradients of the steps it asks for (the error sampler's).
  std::shared_ptr<GradientTap> tap;
};

// What an engine with `parts` does, for people and result records, e.g. "buckets of 25 MiB,
// the first 1 MiB, gradients copied into flat buckets, averaged by all-reduce".
std::string DescribeEngine(const EngineParts& parts);

struct EngineStats {
  std::vector<int64_t> bucket_bytes;  // current buckets, in bucket order
  int64_t bucket_memory_bytes = 0;    // held by flat buffers
  int64_t gradient_memory_bytes = 0;  // gradients outside them
  bool rebuilt = false;               // buckets regrouped in the observed order
  int synced_steps = 0;
  // Exposed communication: from the end of backward's compute to the last bucket
  // averaged and in place (and updated, where a plugin updates per bucket), summed over
  // the timed steps (ms); from CUDA events on a GPU, the host clock on a CPU.
  double exposed_comm_ms = 0;
  int timed_steps = 0;
  // Per bucket (bucket order), over the timed steps: mean time of its all-reduce on the
  // communication stream and the bus bandwidth that gives (nccl-tests' busbw:
  // bytes / time * 2(n-1)/n). Empty where c10d does not time collectives (Gloo,
  // LibTorch before 2.1) or a communication hook replaces the all-reduce.
  std::vector<double> bucket_allreduce_ms;
  std::vector<double> bucket_busbw_gbps;
  // Each collective of the engine's own in the timed steps (not a hook's), from its
  // launch to its end: milliseconds from `timing_start`, the host's time at StartTiming.
  std::vector<CommTimer::BucketSpan> bucket_spans;
  std::chrono::steady_clock::time_point timing_start;
  // The gradient ready times of the step RecordReadyTimes asked for: each parameter and
  // milliseconds from the start of backward (BeginStep) to its gradient, in the order they
  // came, on the device's clock (CUDA events on the compute stream on a GPU).
  std::vector<std::pair<size_t, double>> gradient_ready_ms;
  // What core's all-reduce sent in the last synced step (not what a hook sent itself).
  int64_t sent_bytes = 0;
  std::string sent_dtype;
};

namespace internal_engine {
// The engine's parts in words (describe.cc).
std::string Describe(const BucketPlanner& planner, const GradientLayout& layout, const BucketCodec* codec,
                     size_t hooks);
}  // namespace internal_engine

class DataParallelEngine {
 public:
  // `params` in the model's order; `store`, where the ranks met, for the hooks that meet
  // their peers outside the collectives (CommContext::store).
  DataParallelEngine(std::vector<at::Tensor> params, ProcessGroupPtr group, const EngineParts& parts,
                     c10::intrusive_ptr<c10d::Store> store = {});
  ~DataParallelEngine();
  DataParallelEngine(const DataParallelEngine&) = delete;
  DataParallelEngine& operator=(const DataParallelEngine&) = delete;

  // Makes every rank's parameters rank 0's (nothing with one process).
  void BroadcastParameters();
  // Makes every rank's `tensors` rank 0's, in one collective (nothing with one process):
  // a model's buffers before a forward, as PyTorch's DDP broadcasts them
  // (broadcast_buffers=True).
  void Broadcast(const std::vector<at::Tensor>& tensors);
  // The parameters' names, in `params`' order, for the refusal of a parameter that got
  // no gradient ("unused.weight (4)"); without them it gives indices alone.
  void SetParameterNames(std::vector<std::string> names);

  // The experiment's optimizer, for a hook that steps parameters as their averages land
  // (CommContext::step). Without such a hook the caller's optimizer runs after
  // EndBackward as usual.
  void SetParameterStep(ParameterStep step);
  // Makes the experiment's optimizer over `tensors` (parts of the parameters: views of
  // them), stepping tensors[indices[k]] with grads[k], for a hook that asks for one
  // (CommContext::optimizer_over_parts: a sharded optimizer's).
  using OptimizerMaker = ddplab::OptimizerMaker;  // core/hook_updates/hook_updates.h
  void SetOptimizerMaker(OptimizerMaker maker);
  // Whether the last EndBackward's hooks stepped every parameter that had a gradient
  // (the caller then skips its optimizer step). False after a step that did not sync.
  bool updated_parameters() const;

  // Drops or zeroes the gradients, as the layout keeps them.
  void ZeroGrad();
  // Before backward. `sync` false accumulates gradients locally without reducing (the
  // first N-1 micro-steps of gradient accumulation).
  void BeginStep(bool sync);
  // After backward: waits for the reductions and puts the averaged gradients in place.
  // An error when a parameter that should have received a gradient did not.
  absl::Status EndBackward();

  // Records when each gradient of the next synced step is ready (EngineStats::
  // gradient_ready_ms): one event per parameter, on that step only.
  void RecordReadyTimes();

  // Times the exposed communication of the synced steps between the two calls. On a
  // GPU the events are read (waited for) only in FinishTiming. `bucket_times`: also each
  // collective's duration, where c10d measures it (NCCL with TORCH_NCCL_ENABLE_TIMING).
  void StartTiming(bool bucket_times = false);
  void FinishTiming();

  const EngineStats& stats() const { return stats_; }
  // After the last step, on every rank: ends the process group's communicators (NCCL's;
  // nothing for Gloo). A second call does nothing; EndBackward fails after it.
  absl::Status ShutDown();

  // The hook chain's own figures (CommHook::Stats).
  std::map<std::string, double> hook_stats() const;
  // The parameters of each bucket (indices into `params`), in bucket order.
  std::vector<std::vector<size_t>> buckets() const;
  // The engine's parts, for people and result records.
  std::string Describe() const;

  struct State;  // engine.cc

 private:
  void UpdateBucketStats();
  std::shared_ptr<State> state_;
  EngineStats stats_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_ENGINE_H_
