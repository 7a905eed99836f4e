// The data-parallel engine: gradients all-reduced in buckets, overlapped with backward.
//
// Parameters are broadcast from rank 0 at start (one process issues no collective: see
// BroadcastParameters). Their gradients are grouped into buckets by size in reverse
// parameter order (a small first bucket, then the cap), and
// regrouped once, after the first step, in the order gradients actually became ready
// (rank 0's order, so that every rank has the same buckets). A hook on each parameter's
// gradient accumulator copies the gradient into its bucket; when a bucket is complete,
// and every bucket before it has been launched, its all-reduce starts on c10d's
// communication stream while backward goes on. After backward the step waits only for
// the reductions, and copies the averaged gradients back (or, with gradients as bucket
// views, has nothing to copy). With one process, no communication hook and gradients
// travelling in their own dtype there is nothing to average: the engine then keeps the
// local gradients and does no work.
//
//   ddplab::DataParallelEngine engine(model->parameters(), group, options, comm_hook_factory);
//   engine.BroadcastParameters();
//   for (...) {
//     engine.ZeroGrad();
//     engine.BeginStep(/*sync=*/true);   // false: accumulate locally, no reduction
//     loss.backward();
//     absl::Status s = engine.EndBackward();
//     if (!engine.updated_parameters()) optimizer.Step();
//   }

#ifndef DDPLAB_CORE_DDP_ENGINE_H_
#define DDPLAB_CORE_DDP_ENGINE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "core/distributed.h"
#include "core/plugin_api.h"

namespace ddplab {

// PyTorch's compute_bucket_assignment_by_size for parameters of one dtype and device:
// parameters are taken in `order` (indices into `bytes`); a bucket is closed once it
// holds at least its cap, `first_cap` for the first bucket and `cap` after.
std::vector<std::vector<size_t>> AssignBuckets(const std::vector<int64_t>& bytes,
                                               const std::vector<size_t>& order,
                                               int64_t first_cap, int64_t cap);

struct EngineStats {
  std::vector<int64_t> bucket_bytes;  // current buckets, in bucket order
  int64_t bucket_memory_bytes = 0;    // held by bucket buffers
  int64_t gradient_memory_bytes = 0;  // gradients outside buckets (0 with bucket views)
  bool rebuilt = false;               // buckets regrouped in the observed order
  int synced_steps = 0;
  // Exposed communication: from the end of backward's compute to the last bucket
  // reduced, summed over the timed steps (ms); from CUDA events on a GPU. With
  // updates_beside_forward: on a GPU to the last bucket updated, on the update stream,
  // which may overlap the next forward (the step time says how much did); on a CPU the
  // host's waits for the reductions in WaitForParameters and WaitForUpdates.
  double exposed_comm_ms = 0;
  int timed_steps = 0;
  // Per bucket (bucket order), over the timed steps: mean time of its all-reduce on the
  // communication stream and the bus bandwidth that gives (nccl-tests' busbw:
  // bytes / time * 2(n-1)/n). Empty where c10d does not time collectives (Gloo,
  // LibTorch before 2.1) or a communication hook replaces the all-reduce.
  std::vector<double> bucket_allreduce_ms;
  std::vector<double> bucket_busbw_gbps;
  // Sampled steps (EngineOptions::gradient_error_every): the sum of the relative errors
  // ||reduced - exact|| / ||exact|| over all buckets, and how many steps were sampled.
  double gradient_error_sum = 0;
  int gradient_error_samples = 0;
  // Buckets of the last synced step reduced over the tail group (SetTailGroup).
  int tail_buckets = 0;
  // What the engine's own reductions sent in the last synced step (not a hook's).
  int64_t wire_bytes = 0;
  std::string wire_dtype;
};

class DataParallelEngine {
 public:
  using CommHookFactory = std::function<std::unique_ptr<CommHook>(const CommContext&)>;

  // `params` in the model's order. `comm_hook_factory` may be empty: plain all-reduce.
  DataParallelEngine(std::vector<at::Tensor> params, ProcessGroupPtr group,
                     const EngineOptions& options, CommHookFactory comm_hook_factory = {});
  ~DataParallelEngine();
  DataParallelEngine(const DataParallelEngine&) = delete;
  DataParallelEngine& operator=(const DataParallelEngine&) = delete;

  // Makes every rank's parameters rank 0's. One process has them already and issues
  // nothing: NCCL's first collective would make a communicator, whose existence slows the
  // process's later steps (bench/NOTES.md).
  void BroadcastParameters();

  // What updates a bucket's parameters (indices into `params`, each with its averaged
  // gradient in place) with EngineOptions::overlap_optimizer: called once per bucket and
  // synced step, on a GPU with a stream of the engine's own current, ordered after the
  // bucket's reduction. Without it, or with one process, no hook and no other wire dtype
  // (nothing to average), the caller's optimizer runs after EndBackward as usual.
  using ParameterUpdate = std::function<void(const std::vector<size_t>& params)>;
  void SetParameterUpdate(ParameterUpdate update);
  // Whether the last EndBackward updated every parameter that had a gradient (the
  // caller then skips its optimizer step). False after a step that did not sync.
  // With EngineOptions::updates_beside_forward the updates may still be under way: the
  // caller waits for them with WaitForParameters or WaitForUpdates before it reads the
  // parameters or their gradients.
  bool updated_parameters() const;

  // With EngineOptions::updates_beside_forward, what the next forward calls before it
  // first reads parameters (indices into `params`): on a GPU the current stream waits
  // (on the device, not the host) for the last step's reductions and updates of their
  // buckets; on a CPU they are finished here. WaitForUpdates does it for every bucket
  // still outstanding. The caller must have waited for a parameter before anything reads
  // it (its forward); ZeroGrad, BeginStep and ShutDown wait for whatever is left. Nothing
  // to do without the option.
  void WaitForParameters(const std::vector<size_t>& params);
  void WaitForUpdates();
  // Buckets whose update the caller has not waited for yet.
  int outstanding_updates() const;
  // Whether steps end without waiting for their updates (updates_beside_forward in
  // effect: several processes or a hook, and a parameter update set).
  bool defers_updates() const;

  // The group that reduces the last EngineOptions::tail_buckets buckets of each step (the
  // tail_communicator plugin): the same ranks as the engine's group, over a communicator of
  // its own. Before the first step. Ended by ShutDown with the engine's group.
  absl::Status SetTailGroup(ProcessGroupPtr group);

  // Drops or zeroes the gradients (with bucket views: zeroes the buckets in place).
  void ZeroGrad();

  // Before backward. `sync` false accumulates gradients locally without reducing (the
  // first N-1 micro-steps of gradient accumulation).
  void BeginStep(bool sync);

  // After backward: waits for the reductions and puts the averaged gradients in place.
  // An error when a parameter that should have received a gradient did not.
  absl::Status EndBackward();

  // While paused, no step samples the gradient error (steps being profiled, which should
  // look like measured ones). Timed steps are never sampled either way.
  void PauseErrorSampling(bool paused);

  // Times the exposed communication of the synced steps between the two calls. On a
  // GPU the events are read (waited for) only in FinishTiming. `bucket_times`: also each
  // collective's duration, where c10d measures it (NCCL with TORCH_NCCL_ENABLE_TIMING);
  // each step's are read when the next one begins, which waits for them on the host.
  void StartTiming(bool bucket_times = false);
  void FinishTiming();

  const EngineStats& stats() const { return stats_; }
  // After the last step, on every rank: ends the process group's communicators (NCCL's;
  // nothing for Gloo). A second call does nothing; EndBackward fails after it.
  absl::Status ShutDown();

  // The communication hook's own figures (CommHook::Stats), if there is a hook.
  std::map<std::string, double> hook_stats() const;
  // The parameters of each bucket (indices into `params`), in bucket order.
  std::vector<std::vector<size_t>> buckets() const;
  // The order the last synced step started its buckets' reductions in (indices into
  // buckets()): bucket order, except the last EngineOptions::reversed_buckets, reversed.
  std::vector<size_t> launch_order() const;

 private:
  struct State;
  void UpdateBucketStats();
  std::shared_ptr<State> state_;
  EngineStats stats_;
  bool timing_ = false;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_DDP_ENGINE_H_
