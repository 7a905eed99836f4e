// optimizer_overlap: each bucket's parameters are stepped by the experiment's optimizer
// as soon as the bucket's average lands, while later buckets are still being reduced
// (PyTorch's _hook_then_optimizer): a hook wrapper around whatever reduces the bucket.
// The step then has no optimizer pass of its own after the last reduction. The
// parameters after each step are the same, bit for bit. An optimizer that needs every
// gradient first (gradient clipping) would not work with it; the experiment's SGD needs
// none.
//
// Where the steps run: each bucket's future is this hook's own, completed once backward
// has returned (CommHook::BackwardDone), its compute all queued: then, bucket after
// bucket, the current stream waits for the bucket's average and the optimizer steps its
// parameters, queued behind it (on a CPU: once the average is in), while later buckets
// still reduce. PyTorch's future.then() would run each step at once, on a stream of
// CUDA's pool, beside backward: for zero_copy over NVLink that measured 2.5% slower and
// 0.33 GiB more (bench/NOTES.md).
//
// With during_backward, each bucket's parameters are stepped during backward instead, as
// soon as its average lands (Note [The optimizer during backward]).
//
// Note [The optimizer during backward]
// In a step whose backward leaves the GPU no gaps (the short step as one CUDA graph), the
// optimizer's pass after backward costs its whole length, while memory-bound work beside
// backward costs a fraction of its own: on one H200 (bench/overlap_probe.py, amp_study's
// training as a graph) each bucket's fused AdamW beside backward, after a stand-in of its
// all-reduce, left the step 0.6 ms shorter than the same all-reduces with the optimizer
// after backward. In float32's eager step on 4 H200 the same updates beside backward cost
// 1% (bench/NOTES.md), so it is a setting. The update of a bucket's parameters is queued on
// a stream of the wrapper's own, after the bucket's gradients (an event on the stream
// current when the bucket is handed over) and its reduction (the future's events), while
// backward goes on: backward reads none of them again, since a parameter's bucket is
// handed over once its last gradient is in. The future the engine waits for completes
// on that stream. Over Gloo the update runs where the reduction completes. The updates
// are the optimizer's elementwise ones, one bucket at a time (a lock), as after backward.
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "core/plugin/plugin_api.h"
#include "plugins/optimizer_overlap/optimizer_overlap.pb.h"

namespace {

using ddplab::GradBucket;

// Where a bucket's update runs during backward (Note [The optimizer during backward]): on
// a GPU, a stream of its own ordered after what is queued where Ready and Run are called;
// elsewhere, where Run is called.
class UpdateStream {
 public:
  // Marks the bucket's gradients on the current stream (an event), for Run.
  std::shared_ptr<void> Ready(const std::vector<c10::Device>& devices) {
#if defined(DDPLAB_CUDA)
    if (!devices.empty()) {
      auto ready = std::make_shared<at::cuda::CUDAEvent>(cudaEventDisableTiming);
      ready->record(c10::cuda::getCurrentCUDAStream(devices[0].index()));
      return ready;
    }
#endif
    (void)devices;
    return nullptr;
  }

  // Calls `work` with the stream current, ordered after `ready` and after the current
  // stream (which waits for the reduction's events in a future's callback).
  template <typename Work>
  void Run(const std::vector<c10::Device>& devices, const std::shared_ptr<void>& ready, Work&& work) {
#if defined(DDPLAB_CUDA)
    if (!devices.empty()) {
      const c10::DeviceIndex device = devices[0].index();
      c10::cuda::CUDAGuard device_guard(device);
      if (!stream_) stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device);
      at::cuda::CUDAEvent reduced(cudaEventDisableTiming);
      reduced.record(c10::cuda::getCurrentCUDAStream(device));
      reduced.block(*stream_);
      static_cast<at::cuda::CUDAEvent*>(ready.get())->block(*stream_);
      c10::cuda::CUDAStreamGuard guard(*stream_);
      std::forward<Work>(work)();
      return;
    }
#endif
    (void)devices;
    (void)ready;
    std::forward<Work>(work)();
  }

 private:
#if defined(DDPLAB_CUDA)
  std::optional<c10::cuda::CUDAStream> stream_;
#endif
};

class StepWhenReduced : public ddplab::HookWrapperBase {
 public:
  StepWhenReduced(std::unique_ptr<ddplab::CommHook> inner, ddplab::ParameterStep step, bool during_backward)
      : HookWrapperBase(std::move(inner)), step_(std::move(step)), during_backward_(during_backward) {}

  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    if (during_backward_) return StepDuringBackward(bucket);
    Pending pending{inner_->Run(bucket), bucket.parameters, bucket.buffer.defined(), bucket.offsets, bucket.sizes, {}};
    pending.done = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get(), DevicesOf(bucket));
    c10::intrusive_ptr<c10::ivalue::Future> done = pending.done;
    pending_.push_back(std::move(pending));
    return done;
  }

  void BackwardDone() override {
    StepAll();
    inner_->BackwardDone();
  }

 private:
  struct Pending {
    c10::intrusive_ptr<c10::ivalue::Future> reduced;
    std::vector<size_t> params;
    bool flat;
    std::vector<int64_t> offsets;
    std::vector<std::vector<int64_t>> sizes;
    c10::intrusive_ptr<c10::ivalue::Future> done;
  };

  // The bucket's, where its gradients are (always handed over).
  static std::vector<c10::Device> DevicesOf(const GradBucket& bucket) {
    if (bucket.gradients.empty() || bucket.gradients[0].device().is_cpu()) return {};
    return {bucket.gradients[0].device()};
  }

  // Note [The optimizer during backward]: the bucket's update queued once its reduction
  // completes, on the update stream; the future returned completes there.
  c10::intrusive_ptr<c10::ivalue::Future> StepDuringBackward(GradBucket& bucket) {
    const std::vector<c10::Device> devices = DevicesOf(bucket);
    auto done = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get(), devices);
    c10::intrusive_ptr<c10::ivalue::Future> reduced = inner_->Run(bucket);
    std::shared_ptr<void> ready = updates_.Ready(devices);
    reduced->addCallback([this, done, devices, ready, params = bucket.parameters, flat = bucket.buffer.defined(),
                          offsets = bucket.offsets, sizes = bucket.sizes](c10::ivalue::Future& f) {
      try {
        if (f.hasError()) std::rethrow_exception(f.exception_ptr());
        const c10::IValue value = f.value();
        std::lock_guard<std::mutex> lock(update_mu_);
        updates_.Run(devices, ready, [&] {
          step_(params, ddplab::ReducedGradients(value, flat, offsets, sizes));
          done->markCompleted(value);  // on a GPU an event on the update stream
        });
      } catch (...) {
        done->setError(std::current_exception());
      }
    });
    return done;
  }

  // Every bucket of the step, in order: its average waited for, its parameters stepped.
  void StepAll() {
    for (Pending& p : pending_) {
      try {
        p.reduced->wait();
        if (p.reduced->hasError()) std::rethrow_exception(p.reduced->exception_ptr());
        const c10::IValue value = p.reduced->value();
        step_(p.params, ddplab::ReducedGradients(value, p.flat, p.offsets, p.sizes));
        p.done->markCompleted(value);
      } catch (...) {
        p.done->setError(std::current_exception());
      }
    }
    pending_.clear();
  }

  ddplab::ParameterStep step_;
  const bool during_backward_;
  std::vector<Pending> pending_;  // this step's buckets so far
  std::mutex update_mu_;          // during backward: one bucket's update at a time
  UpdateStream updates_;          // during backward; update_mu_'s
};

void Register(const ddplab::plugins::optimizer_overlap::v1::Config& config, ddplab::PluginRegistrar& registrar) {
  const bool during_backward = config.during_backward();
  registrar.WrapCommHook(ddplab::ExtensionPoint::kHookWrapper,
                         [during_backward](std::unique_ptr<ddplab::CommHook> inner, const ddplab::CommContext& context)
                             -> std::unique_ptr<ddplab::CommHook> {
                           return std::make_unique<StepWhenReduced>(std::move(inner), context.step, during_backward);
                         });
}

}  // namespace

DDPLAB_PLUGIN("optimizer_overlap", "3.0.0", ddplab::plugins::optimizer_overlap::v1::Config, ddplab::PluginStatus::kStable, Register)
