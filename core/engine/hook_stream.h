// A CUDA stream of a communication hook's own, for hooks that wait on their collectives
// before they go on (an all-to-all, then a sum, then an all-gather). Header only: plugins
// compile it. Off the GPU, and in the CPU build, Run calls its function where it is.
//
//   class MyHook : public ddplab::CommHook {
//     Future Run(GradBucket& b) override {
//       stream_.Run(b, [&] { Reduce(b); future->markCompleted(...); });
//       return future;
//     }
//     ddplab::HookStream stream_;   // used from autograd's thread alone
//   };
//
// Note [A hook's own stream]
// c10d's wait() on an NCCL collective orders the current stream after NCCL's. In a hook
// run on autograd's thread the current stream is the compute stream, so each wait would
// hold backward's next kernels until the bucket's exchange is over: communication
// exposed in full, however it overlaps on paper. Run instead queues the hook's work on a
// stream of its own, ordered after the gradients (an event on the compute stream). A
// future completed inside Run records its event on that stream, so the engine's wait for
// it orders the compute stream after the whole reduction, at the end of backward.
// Gradients that autograd hands over and then drops are read on the hook's stream:
// record_stream keeps their memory from being handed out again before the reads are
// done.
#ifndef DDPLAB_CORE_ENGINE_HOOK_STREAM_H_
#define DDPLAB_CORE_ENGINE_HOOK_STREAM_H_

#include <optional>
#include <utility>

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "core/engine/extension_points.h"

namespace ddplab {

class HookStream {
 public:
  // Calls `work` with the hook's stream current where the bucket is on a GPU (Note [A
  // hook's own stream]), else as it is.
  template <typename Work>
  void Run(const GradBucket& bucket, Work&& work) {
#if defined(DDPLAB_CUDA)
    if (bucket.buffer.defined() && bucket.buffer.is_cuda()) {
      const c10::DeviceIndex device = bucket.buffer.device().index();
      if (!stream_) stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device);
      at::cuda::CUDAEvent ready;
      ready.record(c10::cuda::getCurrentCUDAStream(device));
      ready.block(*stream_);
      for (const at::Tensor& gradient : bucket.gradients) {
        if (gradient.defined() && !gradient.is_alias_of(bucket.buffer)) gradient.record_stream(*stream_);
      }
      c10::cuda::CUDAStreamGuard guard(*stream_);
      std::forward<Work>(work)();
      return;
    }
#else
    (void)bucket;
#endif
    std::forward<Work>(work)();
  }

 private:
#if defined(DDPLAB_CUDA)
  std::optional<c10::cuda::CUDAStream> stream_;
#endif
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_HOOK_STREAM_H_
