#include "core/ddp_engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/collectives.h"

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ddplab {

std::vector<std::vector<size_t>> AssignBuckets(const std::vector<int64_t>& bytes,
                                               const std::vector<size_t>& order,
                                               int64_t first_cap, int64_t cap) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> current;
  int64_t size = 0;
  for (size_t index : order) {
    current.push_back(index);
    size += bytes[index];
    if (size >= (buckets.empty() ? first_cap : cap)) {
      buckets.push_back(std::move(current));
      current.clear();
      size = 0;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

namespace {

struct Bucket {
  int64_t bytes = 0;
  std::vector<size_t> params;
  std::vector<int64_t> offsets;  // elements into `buffer`
  at::Tensor buffer;             // the flattened gradients (none when reduced in place)
  std::vector<at::Tensor> views;  // per parameter, shaped like it
  int pending = 0;               // expected gradients not yet in
  bool launched = false;
  bool finished = false;         // averaged, in place and its parameters updated
  // Its update is queued (updates_beside_forward) and the caller has not waited for it:
  // on a GPU, `updated` follows it on the update stream; on a CPU it is still to be done.
  bool awaiting = false;
  at::Tensor wire;               // what the bucket travels as, when another dtype
  std::vector<at::Tensor> wire_views;  // per parameter, shaped like it
  // Gradients autograd handed over that are not in the bucket (or the wire) yet, and
  // their slots: copied in together (FlushIncoming), one kernel for many small tensors.
  std::vector<size_t> incoming;
  std::vector<at::Tensor> incoming_grads;
  int64_t incoming_bytes = 0;
  std::optional<PendingMean> mean;  // the engine's own reduction
  c10::intrusive_ptr<c10::ivalue::Future> future;  // a hook's
  at::Tensor exact;              // sampled steps: the exact mean, for the error
  std::optional<PendingMean> exact_mean;
#if defined(DDPLAB_CUDA)
  // With the launch thread: recorded on autograd's stream when the bucket is complete,
  // one for the whole run (every step's is waited on before the next step records it).
  std::optional<at::cuda::CUDAEvent> launch_ready;
  std::optional<at::cuda::CUDAEvent> updated;  // updates_beside_forward, one for the run
#endif
};

// A bucket's collective for the launch thread: what to reduce, and (on a GPU) the
// bucket's event after the gradients on autograd's stream.
struct LaunchJob {
  size_t index = 0;
  std::vector<at::Tensor> tensors;
#if defined(DDPLAB_CUDA)
  at::cuda::CUDAEvent* ready = nullptr;
#endif
};

}  // namespace

struct DataParallelEngine::State {
  // The most gradient memory a bucket holds beside itself before copying it in: a bound
  // on what holding gradients adds to the peak, whatever the bucket cap. (A hook that
  // reads gradients where they lie gets them all: it is handed them instead of a copy.)
  static constexpr int64_t kMaxIncomingBytes = 25 << 20;
  std::vector<at::Tensor> params;
  ProcessGroupPtr group;
  // The last options.tail_buckets buckets' group (SetTailGroup); none: `group` for all.
  ProcessGroupPtr tail_group;
  std::atomic<int> tail_launched{0};  // buckets reduced over it this step
#if defined(DDPLAB_CUDA)
  // Where the tail's collectives are started from: ordered after the bucket's gradients
  // and the first group's last collective, without making the compute stream wait.
  std::optional<c10::cuda::CUDAStream> tail_stream;
  std::optional<at::cuda::CUDAEvent> tail_ready;
#endif
  EngineOptions options;
  std::unique_ptr<CommHook> hook;
  bool cuda = false;
  int world = 1;
  int rank = 0;

  std::mutex mu;  // hooks run on autograd's threads
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of, slot_of;
  std::vector<bool> expected;  // should receive a gradient each synced step
  std::vector<bool> marked;    // received one this step
  std::vector<size_t> ready_order;  // the first synced step's order
  bool first_step_done = false;
  int64_t synced_steps = 0;  // completed synced steps
  bool timing = false;       // between StartTiming and FinishTiming
  double deferred_wait_ms = 0;  // CPU: the host's waits in AwaitUpdate while timing
  // DDPLAB_TEST_SLOW_UPDATES=1 in the environment: QueueUpdates delays the update stream.
  bool slow_updates_for_test = false;
  int64_t wire_bytes = 0;    // sent by the engine's own reductions this step
  // This step's error is sampled (SampleError, fixed when the step begins).
  bool sampled = false;
  bool sampling_paused = false;  // PauseErrorSampling
  // Buckets travel in another dtype and this step is not sampled (a sampled step reduces
  // the float32 bucket exactly too): each gradient goes straight into the wire's dtype as
  // it comes in (MarkReady), instead of into the float32 bucket, to be cast at launch.
  bool cast_in = false;
  // The hook reads gradients where autograd left them (CommHook::ReadsGradientsWhereTheyLie)
  // and this step is not sampled: they are held until their bucket is launched and handed
  // over in GradBucket::gradients, never copied into the bucket.
  bool hook_reads = false;
  at::ScalarType wire_dtype = at::ScalarType::Undefined;
  bool rebuilt = false;
  size_t next_to_launch = 0;
  std::vector<size_t> launch_sequence;  // the buckets launched this step, in order
  bool sync = false;
  std::string error;  // found by a hook, reported by EndBackward
  bool shut_down = false;  // ShutDown was called: no more steps
  bool began = false;      // a step has begun (BeginStep)
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  // The optimizer per bucket (EngineOptions::overlap_optimizer).
  ParameterUpdate update;
  bool updated = false;  // the last EndBackward's step updated the parameters
#if defined(DDPLAB_CUDA)
  // Where the updates run during backward (optimizer_during_backward), and their end,
  // which the caller's stream waits for.
  std::optional<c10::cuda::CUDAStream> update_stream;
  std::optional<at::cuda::CUDAEvent> updates_done;
#endif
#if defined(DDPLAB_CUDA)
  // (end of backward, last bucket reduced) per timed step, read in FinishTiming.
  std::vector<std::pair<at::cuda::CUDAEvent, at::cuda::CUDAEvent>> exposed_events;
#endif
  // With bucket times (StartTiming): the collectives of the timed steps not yet read,
  // per bucket. A collective holds its tensors (with zero_copy, that step's gradients),
  // so they are read and dropped when the next step begins, before its gradients exist.
  bool bucket_times = false;
  std::vector<std::vector<c10::intrusive_ptr<c10d::Work>>> timed_works;
  std::vector<double> bucket_ms_sum;  // per bucket, over the steps read
  std::vector<int> bucket_ms_count;

  // Reads the durations of the collectives in timed_works and drops them.
  void HarvestBucketTimes() {
    if (timed_works.empty()) return;
#if defined(DDPLAB_CUDA)
    // They are done on the device once the last timed step's reductions are.
    if (!exposed_events.empty()) exposed_events.back().second.synchronize();
#endif
    for (const auto& works : timed_works) {
      if (bucket_ms_sum.size() < works.size()) {
        bucket_ms_sum.resize(works.size(), 0);
        bucket_ms_count.resize(works.size(), 0);
      }
      for (size_t b = 0; b < works.size(); ++b) {
        if (!works[b]) continue;
        if (std::optional<double> ms = compat::WorkDurationMs(works[b])) {
          bucket_ms_sum[b] += *ms;
          bucket_ms_count[b]++;
        }
      }
    }
    timed_works.clear();
  }

  // The launch thread (options.launch_thread), started at the first job. It stores each
  // bucket's PendingMean; EndBackward reads them once `launched` reaches `enqueued`.
  std::thread launcher;
  std::mutex launch_mu;
  std::condition_variable launch_cv;
  std::deque<LaunchJob> jobs;
  size_t enqueued = 0, launched = 0;  // this step
  bool stop_launcher = false;
  std::string launch_error;
#if defined(DDPLAB_CUDA)
  std::optional<c10::cuda::CUDAStream> launch_stream;
#endif

  ~State() {
    if (launcher.joinable()) {
      {
        std::lock_guard<std::mutex> lock(launch_mu);
        stop_launcher = true;
      }
      launch_cv.notify_all();
      launcher.join();
    }
  }

  bool view_mode() const { return options.gradient_as_bucket_view; }
  // The optimizer runs per bucket, right after its reduction (overlap_optimizer): after
  // backward, or during it where the engine starts the reduction itself from autograd's
  // thread (optimizer_during_backward).
  bool update_buckets() const { return options.overlap_optimizer && update && !identity(); }
  bool update_during_backward() const {
    return update_buckets() && options.optimizer_during_backward && !hook && !options.launch_thread;
  }
  // The updates run beside the next forward (updates_beside_forward): after backward, with
  // the engine's own all-reduce over one group.
  bool defer() const {
    return options.updates_beside_forward && update_buckets() && !options.optimizer_during_backward &&
           !hook && options.tail_buckets <= 0;
  }
  // The first bucket of the reversed tail (updates_beside_forward); buckets.size(): none.
  size_t ReversedFrom() const {
    if (!defer() || options.reversed_buckets <= 0) return buckets.size();
    const size_t n = static_cast<size_t>(options.reversed_buckets);
    return n >= buckets.size() ? 0 : buckets.size() - n;
  }
  std::vector<size_t> LaunchOrder() const {
    std::vector<size_t> order;
    const size_t reversed = ReversedFrom();
    for (size_t i = 0; i < reversed; ++i) order.push_back(i);
    for (size_t i = buckets.size(); i-- > reversed;) order.push_back(i);
    return order;
  }
  // One process, no hook, and gradients travelling in their own dtype: the average of
  // one gradient is itself, so there is nothing to copy, reduce or wait for. (In another
  // dtype one process still rounds its gradients to it, as PyTorch's bf16_compress_hook
  // does, and pays for the casts: DDP on 1 GPU with bf16 measures them.)
  bool identity() const { return world == 1 && !hook && !other_wire_dtype(); }
  bool other_wire_dtype() const {
    return options.comm_dtype != at::ScalarType::Undefined && !params.empty() &&
           options.comm_dtype != params[0].scalar_type();
  }
  // Gradients averaged where they lie (EngineOptions::reduce_in_place), where nothing
  // needs them flat: the engine's own all-reduce in their own dtype, no bucket views.
  bool in_place() const {
    return options.reduce_in_place && !identity() && !hook && !view_mode() && !other_wire_dtype();
  }

  void Build(const std::vector<size_t>& order) {
    std::vector<int64_t> bytes;
    for (const at::Tensor& p : params) bytes.push_back(p.numel() * p.element_size());
    std::vector<std::vector<size_t>> groups =
        AssignBuckets(bytes, order, options.first_bucket_cap_bytes, options.bucket_cap_bytes);
    buckets.clear();
    buckets.resize(groups.size());
    bucket_of.assign(params.size(), 0);
    slot_of.assign(params.size(), 0);
    for (size_t b = 0; b < groups.size(); ++b) {
      Bucket& bucket = buckets[b];
      bucket.params = groups[b];
      int64_t total = 0;
      for (size_t i : bucket.params) {
        bucket.offsets.push_back(total);
        total += params[i].numel();
        bucket.bytes += bytes[i];
      }
      for (size_t k = 0; k < bucket.params.size(); ++k) {
        bucket_of[bucket.params[k]] = b;
        slot_of[bucket.params[k]] = k;
      }
      // With one process and no hook the buckets are never filled, and gradients reduced
      // in place need none: no memory for them.
      if (identity() || in_place()) continue;
      bucket.buffer = at::zeros({total}, params[bucket.params[0]].options());
      if (other_wire_dtype() && !hook) {
        // What the bucket travels as, allocated once: the collectives of a step then
        // hold no memory of their own.
        bucket.wire = at::empty({total}, bucket.buffer.options().dtype(options.comm_dtype));
      }
      for (size_t k = 0; k < bucket.params.size(); ++k) {
        const at::Tensor& p = params[bucket.params[k]];
        bucket.views.push_back(bucket.buffer.narrow(0, bucket.offsets[k], p.numel()).view(p.sizes()));
        if (bucket.wire.defined()) {
          bucket.wire_views.push_back(bucket.wire.narrow(0, bucket.offsets[k], p.numel()).view(p.sizes()));
        }
      }
    }
    if (view_mode() && !identity()) {
      for (size_t i = 0; i < params.size(); ++i) {
        params[i].mutable_grad() = buckets[bucket_of[i]].views[slot_of[i]];
      }
    }
  }

  void ResetStep() {
    marked.assign(params.size(), false);
    wire_bytes = 0;
    sampled = SampleError();
    cast_in = !sampled && !buckets.empty() && buckets[0].wire.defined();
    hook_reads = !sampled && hook && hook->ReadsGradientsWhereTheyLie();
    tail_launched = 0;
    next_to_launch = 0;
    launch_sequence.clear();
    for (Bucket& b : buckets) {
      b.incoming.clear();  // left by a step that failed
      b.incoming_grads.clear();
      b.incoming_bytes = 0;
      b.pending = 0;
      for (size_t i : b.params) b.pending += expected[i] ? 1 : 0;
      b.launched = false;
      b.finished = false;
      b.mean.reset();
      b.future.reset();
      b.exact = at::Tensor();
      b.exact_mean.reset();
    }
  }

  // Sampled steps also reduce a copy of each bucket exactly (float32), for the error.
  // Never in a timed step: the extra reduction and copy would be measured too.
  bool SampleError() const {
    return !timing && !sampling_paused && options.gradient_error_every > 0 &&
           synced_steps % options.gradient_error_every == 0 &&
           (hook || options.comm_dtype != at::ScalarType::Undefined);
  }

  // The first bucket reduced over the tail group; buckets.size() when there is none.
  size_t FirstTail() const {
    if (!tail_group || options.tail_buckets <= 0) return buckets.size();
    const size_t n = static_cast<size_t>(options.tail_buckets);
    return n >= buckets.size() ? 0 : buckets.size() - n;
  }

  // Starts the engine's own reduction of bucket `index`'s tensors: over the tail group for
  // the last buckets, else over the group. On a GPU the tail's first collective runs after
  // the group's last: NCCL does not allow two communicators' collectives to run at the same
  // time on a GPU unless every rank orders them the same way, which this does.
  PendingMean StartReduction(size_t index, std::vector<at::Tensor> sent) {
    if (index < FirstTail()) return StartMeanCoalesced(*group, std::move(sent), cuda);
    ++tail_launched;  // counted for EngineStats::tail_buckets
#if defined(DDPLAB_CUDA)
    std::optional<c10::cuda::CUDAStreamGuard> guard;  // the tail's stream, until it is started
    if (cuda) {
      const c10::DeviceIndex device = params[0].device().index();
      if (!tail_stream) tail_stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device);
      if (!tail_ready) tail_ready.emplace(cudaEventDisableTiming);
      tail_ready->record(c10::cuda::getCurrentCUDAStream(device));
      guard.emplace(*tail_stream);
      tail_ready->block(*tail_stream);
      if (index == FirstTail() && index > 0) {
        const std::optional<PendingMean>& before = buckets[index - 1].mean;
        // The current stream (the tail's) waits for the group's last collective.
        if (before && before->work) before->work->synchronize();
      }
    }
#endif
    return StartMeanCoalesced(*tail_group, std::move(sent), cuda);
  }

  // The gradients held for bucket `b` copied into it, or cast into its wire (cast_in), on
  // the current stream.
  void FlushIncoming(Bucket& b) {
    if (b.incoming.empty()) return;
    std::vector<at::Tensor> dst;
    for (size_t slot : b.incoming) dst.push_back(cast_in ? b.wire_views[slot] : b.views[slot]);
    compat::CopyEach(dst, b.incoming_grads);
    b.incoming.clear();
    b.incoming_grads.clear();
    b.incoming_bytes = 0;
  }

  void Launch(size_t index) {
    Bucket& b = buckets[index];
    launch_sequence.push_back(index);
    if (cast_in) {
      // A parameter without a gradient this step sends what its view holds, as the
      // float32 bucket would.
      for (size_t k = 0; k < b.params.size(); ++k) {
        if (!marked[b.params[k]]) {
          b.incoming.push_back(k);
          b.incoming_grads.push_back(b.views[k]);
        }
      }
    }
    GradBucket grad_bucket;
    if (hook_reads) {
      // Each gradient where it is: the held ones where autograd left them, the others
      // (unused this step, or in place already) in the bucket.
      grad_bucket.gradients = b.views;
      for (size_t k = 0; k < b.incoming.size(); ++k) {
        grad_bucket.gradients[b.incoming[k]] = b.incoming_grads[k];
      }
      b.incoming.clear();
      b.incoming_grads.clear();
      b.incoming_bytes = 0;
    } else {
      FlushIncoming(b);
    }
    if (sampled) b.exact = b.buffer.clone();
    if (hook) {
      grad_bucket.index = index;
      grad_bucket.buffer = b.buffer;
      grad_bucket.offsets = b.offsets;
      for (size_t i : b.params) grad_bucket.sizes.push_back(params[i].sizes().vec());
      grad_bucket.parameters = b.params;
      grad_bucket.is_last = index + 1 == buckets.size();
      grad_bucket.step = synced_steps;
      b.future = hook->Run(grad_bucket);
    } else {
      std::vector<at::Tensor> sent;
      if (in_place()) {
        for (size_t i : b.params) {
          // Every rank sends the same list: a parameter without a gradient here (unused
          // in this step on this rank) sends zeros, as its share of a bucket would be.
          at::Tensor& grad = params[i].mutable_grad();
          if (!grad.defined()) {
            grad = at::zeros_like(params[i], at::MemoryFormat::Contiguous);
          } else if (!grad.is_contiguous()) {
            grad = grad.contiguous();
          }
          sent.push_back(grad);
        }
      } else {
        if (b.wire.defined() && !cast_in) b.wire.copy_(b.buffer);  // the cast
        sent.push_back(b.wire.defined() ? b.wire : b.buffer);
      }
      for (const at::Tensor& t : sent) wire_bytes += t.numel() * t.element_size();
      wire_dtype = sent[0].scalar_type();
      if (options.launch_thread) {
        Enqueue(index, std::move(sent));
      } else {
        b.mean = StartReduction(index, std::move(sent));
      }
    }
    b.launched = true;
    if (update_during_backward()) FinishAndUpdate(index);
  }

  // The bucket's average copied back into the gradients that are not its views, and
  // its parameters that have a gradient updated, on the current stream.
  void CopyBackAndUpdate(size_t index) {
    Bucket& b = buckets[index];
    std::vector<size_t> with_gradient;
    for (size_t k = 0; k < b.params.size(); ++k) {
      const size_t i = b.params[k];
      if (expected[i] && !view_mode() && !in_place()) params[i].mutable_grad().copy_(b.views[k]);
      if (params[i].grad().defined()) with_gradient.push_back(i);
    }
    if (!with_gradient.empty()) update(with_gradient);
    b.finished = true;
  }

  // With the optimizer during backward: the bucket's average put where the gradients are
  // and its parameters updated, on the update stream (after the reduction; on Gloo the
  // host waits for it here), while the compute stream goes on with backward.
  void FinishAndUpdate(size_t index) {
#if defined(DDPLAB_CUDA)
    std::optional<c10::cuda::CUDAStreamGuard> guard;
    if (cuda) guard.emplace(UpdateStream());
#endif
    ReduceAndUpdate(index);
  }

  // The engine's own reduction of bucket `index` waited for (on a GPU by the current
  // stream, on Gloo by the host), its average put where the gradients are (cast back from
  // the wire's dtype) and its parameters updated.
  void ReduceAndUpdate(size_t index) {
    Bucket& b = buckets[index];
    b.mean->wait();
    if (b.wire.defined()) b.buffer.copy_(b.wire);
    CopyBackAndUpdate(index);
  }

#if defined(DDPLAB_CUDA)
  // Where the updates run during backward or beside the next forward, made at first use.
  c10::cuda::CUDAStream UpdateStream() {
    if (!update_stream) {
      update_stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, params[0].device().index());
    }
    return *update_stream;
  }
#endif

  // Hands a bucket's collective to the launch thread (started at the first job).
  void Enqueue(size_t index, std::vector<at::Tensor> tensors) {
    LaunchJob job;
    job.index = index;
    job.tensors = std::move(tensors);
#if defined(DDPLAB_CUDA)
    if (cuda) {
      const c10::DeviceIndex device = params[0].device().index();
      if (!launch_stream) launch_stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device);
      Bucket& b = buckets[index];
      if (!b.launch_ready) b.launch_ready.emplace(cudaEventDisableTiming);
      b.launch_ready->record(c10::cuda::getCurrentCUDAStream(device));
      job.ready = &*b.launch_ready;
    }
#endif
    {
      std::lock_guard<std::mutex> lock(launch_mu);
      jobs.push_back(std::move(job));
      ++enqueued;
      if (!launcher.joinable()) launcher = std::thread([this] { LaunchLoop(); });
    }
    launch_cv.notify_all();
  }

  void LaunchLoop() {
    while (true) {
      LaunchJob job;
      {
        std::unique_lock<std::mutex> lock(launch_mu);
        launch_cv.wait(lock, [this] { return stop_launcher || !jobs.empty(); });
        if (stop_launcher) return;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      std::optional<PendingMean> mean;
      std::string failure;
      try {
#if defined(DDPLAB_CUDA)
        if (job.ready) {
          // c10d orders its collective after the calling thread's current stream.
          c10::cuda::CUDAStreamGuard guard(*launch_stream);
          job.ready->block(*launch_stream);
          mean = StartReduction(job.index, std::move(job.tensors));
        } else
#endif
        {
          mean = StartReduction(job.index, std::move(job.tensors));
        }
      } catch (const std::exception& e) {
        failure = absl::StrCat("launching the all-reduce of bucket ", job.index, ": ",
                               compat::WhatWithoutBacktrace(e));
      }
      {
        std::lock_guard<std::mutex> lock(launch_mu);
        buckets[job.index].mean = std::move(mean);
        if (!failure.empty() && launch_error.empty()) launch_error = std::move(failure);
        ++launched;
      }
      launch_cv.notify_all();
    }
  }

  // Waits until the launch thread has started every collective handed to it this step;
  // its first failure, if any.
  std::string WaitLaunched() {
    std::unique_lock<std::mutex> lock(launch_mu);
    launch_cv.wait(lock, [this] { return launched == enqueued; });
    enqueued = launched = 0;
    std::string failure = std::move(launch_error);
    launch_error.clear();
    return failure;
  }

  // Launches complete buckets in order: every rank must issue the same collectives in
  // the same order. The reversed tail (updates_beside_forward) waits until all of its
  // buckets are complete, then goes from the last bucket back.
  void LaunchReady() {
    const size_t reversed = ReversedFrom();
    while (next_to_launch < reversed && buckets[next_to_launch].pending == 0) {
      Launch(next_to_launch++);
    }
    if (next_to_launch != reversed || reversed == buckets.size()) return;
    for (size_t i = reversed; i < buckets.size(); ++i) {
      if (buckets[i].pending != 0) return;
    }
    for (size_t i = buckets.size(); i-- > reversed;) Launch(i);
    next_to_launch = buckets.size();
  }

  // updates_beside_forward: every bucket's reduction waited for and its parameters
  // updated, in launch order, without the caller waiting. On a GPU they are queued on the
  // update stream now, each followed by its event; on a CPU they are done when waited for.
  void QueueUpdates() {
#if defined(DDPLAB_CUDA)
    if (cuda) {
      c10::cuda::CUDAStreamGuard guard(UpdateStream());
      if (slow_updates_for_test) {
        // Tests only: the updates start some milliseconds late, so that a forward that did
        // not wait for them reads parameters not yet updated.
        at::Tensor m = at::ones({2048, 2048}, params[0].options().dtype(at::kFloat));
        for (int k = 0; k < 20; ++k) m = at::mm(m, m) / 2048;
      }
      for (size_t i : LaunchOrder()) {
        Bucket& b = buckets[i];
        ReduceAndUpdate(i);
        if (!b.updated) b.updated.emplace(cudaEventDisableTiming);
        b.updated->record(*update_stream);
        b.awaiting = true;
      }
      return;
    }
#endif
    for (Bucket& b : buckets) b.awaiting = true;
  }

  // The caller's current stream waits for bucket `index`'s queued update (on a CPU: the
  // update is done now). With `mu` held.
  void AwaitUpdate(size_t index) {
    Bucket& b = buckets[index];
    if (!b.awaiting) return;
#if defined(DDPLAB_CUDA)
    if (cuda) {
      b.updated->block(c10::cuda::getCurrentCUDAStream(params[0].device().index()));
      b.awaiting = false;
      return;
    }
#endif
    // On a CPU the wait is the host's: counted as exposed communication while timing.
    auto start = std::chrono::steady_clock::now();
    ReduceAndUpdate(index);
    b.awaiting = false;
    if (timing) {
      deferred_wait_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
  }

  // Called around every step (ZeroGrad, BeginStep, the trainer after each forward): nothing
  // to do, and no order to build, unless updates are deferred.
  void AwaitAllUpdates() {
    if (!defer()) return;
    for (size_t i : LaunchOrder()) AwaitUpdate(i);
  }

  void MarkReady(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    if (!sync || !error.empty()) return;
    if (!expected[i]) {
      error = absl::StrCat("parameter ", i,
                           " received a gradient, but not in the first step: the graph changed, "
                           "which static_graph does not allow");
      return;
    }
    if (marked[i]) {
      error = absl::StrCat("parameter ", i, " received two gradients in one step");
      return;
    }
    marked[i] = true;
    if (!first_step_done) ready_order.push_back(i);
    if (identity()) return;
    Bucket& b = buckets[bucket_of[i]];
    if (!in_place()) {
      at::Tensor& view = b.views[slot_of[i]];
      const at::Tensor& grad = params[i].grad();
      if (cast_in) {
        // Straight into the wire's dtype, at once, so the float32 bucket is written only
        // when the average comes back. (Held and cast with the others, as copies are
        // below, bf16 measured 0.3% slower, at the edge of the runs' spread.)
        b.wire_views[slot_of[i]].copy_(grad);
        if (view_mode()) params[i].mutable_grad() = view;
      } else if (!grad.is_alias_of(view)) {
        // Held until the bucket is complete (or holds kMaxIncomingBytes), then copied in
        // with the others: one kernel for many (PowerSGD rank 1 +0.85% over NVLink,
        // bench/NOTES.md). For a hook that reads them where they lie, held until the
        // bucket is launched and never copied.
        b.incoming.push_back(slot_of[i]);
        b.incoming_grads.push_back(grad);
        b.incoming_bytes += grad.numel() * grad.element_size();
        if (view_mode()) params[i].mutable_grad() = view;
        if (b.incoming_bytes >= kMaxIncomingBytes && !hook_reads) FlushIncoming(b);
      }
    }
    if (--b.pending == 0) LaunchReady();
  }
};

DataParallelEngine::DataParallelEngine(std::vector<at::Tensor> params, ProcessGroupPtr group,
                                       const EngineOptions& options,
                                       CommHookFactory comm_hook_factory)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.params = std::move(params);
  s.group = std::move(group);
  s.options = options;
  s.world = s.group->getSize();
  s.rank = s.group->getRank();
  s.cuda = !s.params.empty() && s.params[0].is_cuda();
  const char* slow = std::getenv("DDPLAB_TEST_SLOW_UPDATES");
  s.slow_updates_for_test = slow != nullptr && std::string(slow) == "1";
  if (comm_hook_factory) {
    CommContext context;
    context.process_group = s.group.get();
    context.rank = s.rank;
    context.world_size = s.world;
    context.nccl = s.cuda;
    context.options = &s.options;
    s.hook = comm_hook_factory(context);
  }
  s.expected.assign(s.params.size(), true);
  // Before the first step, gradients are expected in reverse parameter order.
  std::vector<size_t> order;
  for (size_t i = s.params.size(); i-- > 0;) order.push_back(i);
  s.Build(order);
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i) {
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(s.params[i]);
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [weak, i](const torch::autograd::variable_list& outputs,
                  const torch::autograd::variable_list&) {
          if (std::shared_ptr<State> state = weak.lock()) state->MarkReady(i);
          return outputs;
        }));
    // The accumulator must outlive the steps, or autograd makes a new one without hooks.
    s.accumulators.push_back(std::move(accumulator));
  }
  UpdateBucketStats();
}

void DataParallelEngine::UpdateBucketStats() {
  stats_.bucket_bytes.clear();
  stats_.bucket_memory_bytes = 0;
  for (const Bucket& b : state_->buckets) {
    stats_.bucket_bytes.push_back(b.bytes);
    if (b.buffer.defined()) stats_.bucket_memory_bytes += b.bytes;
  }
}

DataParallelEngine::~DataParallelEngine() {
  // Updates still queued read and write tensors that go with the engine (bucket buffers,
  // gradients): they finish first. A failure here has nowhere to go.
  State& s = *state_;
  try {
    std::lock_guard<std::mutex> lock(s.mu);
    s.AwaitAllUpdates();
#if defined(DDPLAB_CUDA)
    if (s.update_stream) s.update_stream->synchronize();
#endif
  } catch (const std::exception&) {
  }
}

absl::Status DataParallelEngine::ShutDown() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.shut_down) return absl::OkStatus();
  absl::Status status;
  try {
    s.AwaitAllUpdates();
  } catch (const std::exception& e) {
    status = absl::InternalError(
        absl::StrCat("the last step's reductions failed: ", compat::WhatWithoutBacktrace(e)));
  }
  s.shut_down = true;
  status.Update(ShutDownProcessGroup(*s.group));
  if (s.tail_group) status.Update(ShutDownProcessGroup(*s.tail_group));
  return status;
}

absl::Status DataParallelEngine::SetTailGroup(ProcessGroupPtr group) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (group && (group->getSize() != s.world || group->getRank() != s.rank)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the tail group has rank ", group->getRank(), " of ", group->getSize(),
                     ", the engine's group rank ", s.rank, " of ", s.world, ": they must be the same ranks"));
  }
  if (s.began) return absl::FailedPreconditionError("the tail group must be set before the first step");
  s.tail_group = std::move(group);
  return absl::OkStatus();
}

void DataParallelEngine::BroadcastParameters() {
  if (state_->world == 1) return;  // nothing to issue (see the header)
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> flat{at::cat(
      [&] {
        std::vector<at::Tensor> parts;
        for (const at::Tensor& p : state_->params) parts.push_back(p.detach().reshape(-1));
        return parts;
      }())};
  state_->group->broadcast(flat)->wait();
  int64_t offset = 0;
  for (at::Tensor& p : state_->params) {
    p.detach().copy_(flat[0].narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

void DataParallelEngine::SetParameterUpdate(ParameterUpdate update) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->update = std::move(update);
}

bool DataParallelEngine::updated_parameters() const { return state_->updated; }

void DataParallelEngine::WaitForParameters(const std::vector<size_t>& params) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  for (size_t i : params) {
    if (i < s.bucket_of.size() && !s.identity()) s.AwaitUpdate(s.bucket_of[i]);
  }
}

void DataParallelEngine::WaitForUpdates() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->AwaitAllUpdates();
}

int DataParallelEngine::outstanding_updates() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  int n = 0;
  for (const Bucket& b : state_->buckets) n += b.awaiting ? 1 : 0;
  return n;
}

bool DataParallelEngine::defers_updates() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->defer();
}

std::vector<size_t> DataParallelEngine::launch_order() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->launch_sequence;
}

void DataParallelEngine::ZeroGrad() {
  State& s = *state_;
  // The gradients go (or are zeroed) on the caller's stream: after the updates that read them.
  WaitForUpdates();
  if (s.view_mode() && !s.identity()) {
    // A parameter that receives a gradient each step starts the step with none: autograd
    // then hands over its gradient without a kernel, and MarkReady copies it into the
    // bucket and makes the view the gradient again (read once, written once) instead of
    // zeroing the bucket and adding into it (written twice, read twice: twice the bytes).
    // Only the others keep a zeroed view.
    for (size_t i = 0; i < s.params.size(); ++i) {
      at::Tensor& view = s.buckets[s.bucket_of[i]].views[s.slot_of[i]];
      if (s.expected[i]) {
        s.params[i].mutable_grad() = at::Tensor();
      } else {
        view.zero_();
        s.params[i].mutable_grad() = view;
      }
    }
    return;
  }
  for (at::Tensor& p : s.params) p.mutable_grad() = at::Tensor();
}

void DataParallelEngine::BeginStep(bool sync) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  // A step that ended early (an error) may have left collectives with the launch thread:
  // they are started before the buckets change.
  if (s.options.launch_thread) s.WaitLaunched();
  s.AwaitAllUpdates();
  s.HarvestBucketTimes();
  s.began = true;
  s.sync = sync;
  s.updated = false;
  if (sync && s.first_step_done && !s.rebuilt && !s.identity()) {
    // Regroup once in the order gradients became ready, rank 0's order for everyone.
    std::vector<size_t> order = s.ready_order;
    for (size_t i = s.params.size(); i-- > 0;) {
      if (!s.expected[i]) order.push_back(i);
    }
    if (s.world > 1) {
      at::Tensor shared = at::tensor(std::vector<int64_t>(order.begin(), order.end()),
                                     at::TensorOptions().dtype(at::kLong));
      if (s.cuda) shared = shared.to(s.params[0].device());
      std::vector<at::Tensor> tensors{shared};
      s.group->broadcast(tensors)->wait();
      shared = shared.cpu();
      for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<size_t>(shared[k].item<int64_t>());
    }
    // Gradients so far (accumulated micro-steps) move into the new buckets; a parameter
    // without one (ZeroGrad just dropped it) stays without.
    std::vector<at::Tensor> grads;
    if (s.view_mode()) {
      for (const at::Tensor& p : s.params) grads.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
    }
    s.Build(order);
    if (s.view_mode()) {
      for (size_t i = 0; i < s.params.size(); ++i) {
        if (grads[i].defined()) {
          s.params[i].mutable_grad().copy_(grads[i]);
        } else {
          s.params[i].mutable_grad() = at::Tensor();
        }
      }
    }
    s.rebuilt = true;
    stats_.rebuilt = true;
    UpdateBucketStats();
  }
  s.ResetStep();
}

absl::Status DataParallelEngine::EndBackward() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.shut_down) return absl::FailedPreconditionError("the engine was shut down: no more steps");
  if (!s.sync) return absl::OkStatus();
  if (!s.error.empty()) return absl::InternalError(s.error);
  std::vector<size_t> missing;
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (s.expected[i] && !s.marked[i]) missing.push_back(i);
  }
  if (!missing.empty()) {
    if (s.options.static_graph && !s.first_step_done) {
      // Static graph: parameters unused in the first step stay unused; their share of
      // each bucket is zero.
      for (size_t i : missing) {
        s.expected[i] = false;
        if (s.identity()) continue;
        Bucket& b = s.buckets[s.bucket_of[i]];
        if (!s.in_place()) b.views[s.slot_of[i]].zero_();  // in place: zeros at launch
        if (--b.pending == 0) s.LaunchReady();
      }
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          "parameter(s) ", absl::StrJoin(missing, ", "),
          " received no gradient in this step. Every parameter must take part in every "
          "step; with static_graph, a parameter unused in the first step may stay unused"));
    }
  }
  if (s.identity()) {
    s.first_step_done = true;
    s.synced_steps++;
    stats_.synced_steps++;
    if (timing_) stats_.timed_steps++;
    return absl::OkStatus();
  }
  s.LaunchReady();
  const bool timed = timing_;
  auto host_start = std::chrono::steady_clock::now();
#if defined(DDPLAB_CUDA)
  if (timed && s.cuda) {
    s.exposed_events.emplace_back(at::cuda::CUDAEvent(cudaEventDefault),
                                  at::cuda::CUDAEvent(cudaEventDefault));
    // On the parameters' device's stream (the caller's current device may be another): the
    // second event may be recorded on the update stream, and both must be on one device.
    s.exposed_events.back().first.record(c10::cuda::getCurrentCUDAStream(s.params[0].device().index()));
  }
#endif
  if (timed && s.bucket_times) s.timed_works.emplace_back();
  if (s.options.launch_thread) {
    if (std::string failure = s.WaitLaunched(); !failure.empty()) {
      // Every bucket that was launched is waited for before the error is reported.
      for (Bucket& b : s.buckets) {
        if (b.mean) b.mean->wait();
      }
      return absl::InternalError(failure);
    }
  }
  // Updates beside the next forward: queued now, waited for by the next forward. Not on a
  // sampled step, whose exact reductions follow the step's own.
  const bool deferred = s.defer() && !s.sampled;
  if (timed && s.bucket_times) {
    for (Bucket& b : s.buckets) s.timed_works.back().push_back(b.mean ? b.mean->work : c10::intrusive_ptr<c10d::Work>());
  }
  if (deferred) s.QueueUpdates();
  std::string hook_error;  // the first bucket's, once every bucket is done with
  for (size_t i = 0; i < s.buckets.size() && !deferred; ++i) {
    Bucket& b = s.buckets[i];
    if (b.finished) continue;  // waited for below, through the update stream
    if (b.mean) {
      b.mean->wait();
      if (b.wire.defined()) b.buffer.copy_(b.wire);
    } else if (b.future) {
      b.future->wait();
      if (b.future->hasError()) {
        if (hook_error.empty()) {
          hook_error = absl::StrCat("the communication hook failed on bucket ", i, " of step ",
                                    s.synced_steps, ": ",
                                    compat::WithoutBacktrace(b.future->tryRetrieveErrorMessage()));
        }
        continue;
      }
      c10::IValue value = b.future->value();
      at::Tensor result = value.isTensor() ? value.toTensor() : value.toTensorVector().at(0);
      if (!result.is_same(b.buffer)) b.buffer.copy_(result);
    }
    // The optimizer after backward: this bucket's update is queued behind its reduction,
    // while the later buckets' reductions go on. On the caller's stream: on a stream of
    // the engine's own the step measured 1.7% slower (bench/NOTES.md, optimizer_overlap).
    if (s.update_buckets() && hook_error.empty()) s.CopyBackAndUpdate(i);
  }
  if (!hook_error.empty()) return absl::InternalError(hook_error);
  const bool updated = s.update_buckets();
#if defined(DDPLAB_CUDA)
  if (s.update_during_backward() && s.cuda && s.update_stream) {
    // What follows (the next forward) waits for every bucket's update.
    if (!s.updates_done) s.updates_done.emplace(cudaEventDisableTiming);
    s.updates_done->record(*s.update_stream);
    s.updates_done->block(c10::cuda::getCurrentCUDAStream(s.params[0].device().index()));
  }
#endif
  // Sampled steps: the exact means, started only now that every bucket's own reduction
  // is done. A hook may issue its collectives from a thread of its own; starting these
  // from this thread while it does could order the collectives differently on each rank.
  for (Bucket& b : s.buckets) {
    if (b.exact.defined()) b.exact_mean = StartMean(*s.group, b.exact, s.cuda);
  }
  double error_sq = 0, exact_sq = 0;
  for (Bucket& b : s.buckets) {
    if (b.exact_mean) {
      b.exact_mean->wait();
      error_sq += (b.buffer - b.exact).pow(2).sum().item<double>();
      exact_sq += b.exact.pow(2).sum().item<double>();
    }
  }
  if (exact_sq > 0) {
    stats_.gradient_error_sum += std::sqrt(error_sq / exact_sq);
    stats_.gradient_error_samples++;
  }
  if (!s.view_mode() && !s.in_place() && !deferred) {
    for (size_t i = 0; i < s.params.size(); ++i) {
      const Bucket& b = s.buckets[s.bucket_of[i]];
      if (s.expected[i] && !b.finished) s.params[i].mutable_grad().copy_(b.views[s.slot_of[i]]);
    }
  }
#if defined(DDPLAB_CUDA)
  if (timed && s.cuda) {
    if (deferred) {
      s.exposed_events.back().second.record(*s.update_stream);  // the last update
    } else {
      s.exposed_events.back().second.record(c10::cuda::getCurrentCUDAStream(s.params[0].device().index()));
    }
  } else
#endif
  if (timed) {
    stats_.exposed_comm_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start).count();
  }
  stats_.synced_steps++;
  s.synced_steps++;
  if (timed) stats_.timed_steps++;
  stats_.wire_bytes = s.wire_bytes;
  stats_.tail_buckets = s.tail_launched;
  stats_.wire_dtype = s.wire_bytes > 0 ? std::string(c10::toString(s.wire_dtype)) : "";
  s.first_step_done = true;
  s.updated = updated;
  stats_.gradient_memory_bytes = 0;
  if (!s.view_mode()) {
    for (const at::Tensor& p : s.params) {
      if (p.grad().defined()) stats_.gradient_memory_bytes += p.grad().numel() * p.grad().element_size();
    }
  }
  return absl::OkStatus();
}

void DataParallelEngine::PauseErrorSampling(bool paused) { state_->sampling_paused = paused; }

void DataParallelEngine::StartTiming(bool bucket_times) {
  timing_ = true;
  state_->timing = true;
  state_->bucket_times = bucket_times;
  state_->bucket_ms_sum.clear();
  state_->bucket_ms_count.clear();
  stats_.exposed_comm_ms = 0;
  state_->deferred_wait_ms = 0;
  stats_.timed_steps = 0;
  stats_.bucket_allreduce_ms.clear();
  stats_.bucket_busbw_gbps.clear();
  state_->timed_works.clear();
#if defined(DDPLAB_CUDA)
  state_->exposed_events.clear();
#endif
}

void DataParallelEngine::FinishTiming() {
  timing_ = false;
  state_->timing = false;
  state_->HarvestBucketTimes();
  stats_.exposed_comm_ms += state_->deferred_wait_ms;
  state_->deferred_wait_ms = 0;
#if defined(DDPLAB_CUDA)
  for (auto& [done, reduced] : state_->exposed_events) {
    reduced.synchronize();
    stats_.exposed_comm_ms += done.elapsed_time(reduced);
  }
  state_->exposed_events.clear();
#endif
  // Per-bucket all-reduce times, where c10d measured them.
  const std::vector<double>& sum = state_->bucket_ms_sum;
  const std::vector<int>& count = state_->bucket_ms_count;
  const size_t n = std::min(sum.size(), stats_.bucket_bytes.size());
  const int world = state_->world;
  for (size_t b = 0; b < n && count[b] > 0; ++b) {
    double ms = sum[b] / count[b];
    stats_.bucket_allreduce_ms.push_back(ms);
    double algbw = stats_.bucket_bytes[b] / (ms * 1e-3) / 1e9;
    stats_.bucket_busbw_gbps.push_back(algbw * 2.0 * (world - 1) / world);
  }
}

std::map<std::string, double> DataParallelEngine::hook_stats() const {
  return state_->hook ? state_->hook->Stats() : std::map<std::string, double>();
}

std::vector<std::vector<size_t>> DataParallelEngine::buckets() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : state_->buckets) out.push_back(b.params);
  return out;
}

}  // namespace ddplab
