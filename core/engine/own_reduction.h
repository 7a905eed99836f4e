// Where a communication hook that reduces each bucket itself (a wire of its own: fp8,
// bf16_fp32_sum, bf16_exact) does it, and the future it hands the engine: on GPUs its
// work is queued on a stream of its own beside backward (Note [A hook's own stream],
// hook_stream.h); over Gloo with several ranks, whose waits block the host, a thread of
// its own reduces the buckets one after another in the order handed over (the same on
// every rank, so the collectives match) while backward goes on. Header only: plugins
// compile it.
//
//   class MyHook : public ddplab::CommHook {
//     explicit MyHook(const CommContext& c) : context_(c) {}
//     Future Run(GradBucket& bucket) override { return own_.Run(bucket); }
//     void Reduce(GradBucket& bucket);  // the whole result into bucket.buffer
//     const CommContext context_;
//     ddplab::OwnReduction own_{context_, [this](GradBucket& b) { Reduce(b); }};  // last
//   };
//
// The reduction's errors complete the bucket's future with them. Once a bucket is
// reduced, nothing of it is held (the engine's step may end). Declare it last: its thread
// starts when it is made and drains what was handed over when it goes, calling the
// hook's members.
#ifndef DDPLAB_CORE_ENGINE_OWN_REDUCTION_H_
#define DDPLAB_CORE_ENGINE_OWN_REDUCTION_H_

#include <exception>
#include <functional>
#include <optional>
#include <utility>

#include "core/engine/extension_points.h"
#include "core/engine/flat_bucket.h"
#include "core/engine/hook_stream.h"
#include "core/engine/hook_worker.h"

namespace ddplab {

class OwnReduction {
 public:
  // `reduce` writes the bucket's whole result into its buffer.
  OwnReduction(const CommContext& context, std::function<void(GradBucket&)> reduce) : reduce_(std::move(reduce)) {
    if (!context.nccl && context.world_size > 1) worker_.emplace([this](Task& task) { Finish(task); });
  }

  // Queues the bucket's reduction (the engine's bucket is gone when this returns) and
  // returns the future its result completes.
  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) {
    Task task{bucket, MakeBucketFuture(bucket.buffer)};
    c10::intrusive_ptr<c10::ivalue::Future> future = task.future;
    if (worker_) {
      worker_->Push(std::move(task));
      return future;
    }
    stream_.Run(task.bucket, [&] { Finish(task); });  // Note [A hook's own stream]
    return future;
  }

 private:
  struct Task {
    GradBucket bucket;
    c10::intrusive_ptr<c10::ivalue::Future> future;
  };

  // Reduces the task's bucket and completes its future with it (or with the error).
  void Finish(Task& task) {
    c10::intrusive_ptr<c10::ivalue::Future> future = std::move(task.future);
    try {
      reduce_(task.bucket);
      const at::Tensor result = task.bucket.buffer;
      task.bucket = GradBucket();  // nothing of the step held once the engine goes on
      future->markCompleted(c10::IValue(result));
    } catch (...) {
      task.bucket = GradBucket();
      future->setError(std::current_exception());
    }
  }

  std::function<void(GradBucket&)> reduce_;
  HookStream stream_;  // Run's (autograd's thread) alone
  std::optional<HookWorker<Task>> worker_;  // last: started once everything it uses exists
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_OWN_REDUCTION_H_
