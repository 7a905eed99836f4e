#include "core/engine/allreduce_hook.h"

#include <utility>

namespace ddplab {

c10::intrusive_ptr<c10::ivalue::Future> MeanFuture(PendingMean mean, std::vector<at::Tensor> tensors, bool nccl) {
  const c10::TypePtr type = c10::ListType::ofTensors();
  if (!mean.work) {
    mean.wait();
    std::vector<c10::Device> devices;
    if (!tensors.empty() && !tensors[0].device().is_cpu()) devices.push_back(tensors[0].device());
    auto done = c10::make_intrusive<c10::ivalue::Future>(type, devices);
    done->markCompleted(c10::IValue(tensors));
    return done;
  }
  if (nccl || !mean.finish) return mean.work->getFuture();  // NCCL averages inside the reduction
  // Gloo completes the future before the work: the callback must not wait for the work.
  return mean.work->getFuture()->then(
      [finish = std::move(mean.finish), tensors](c10::ivalue::Future& done) {
        if (done.hasError()) std::rethrow_exception(done.exception_ptr());
        finish();
        return c10::IValue(tensors);
      },
      type);
}

c10::intrusive_ptr<c10::ivalue::Future> AllreduceHook::Run(GradBucket& bucket) {
  std::vector<at::Tensor> tensors = bucket.buffer.defined() ? std::vector<at::Tensor>{bucket.buffer} : bucket.gradients;
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) bytes += t.numel() * t.element_size();
  PendingMean mean = StartMeanCoalesced(group_, tensors, nccl_);
  if (sent_ && !tensors.empty()) sent_(bucket.index, mean.work, bytes, tensors[0].scalar_type());
  return MeanFuture(std::move(mean), std::move(tensors), nccl_);
}

std::unique_ptr<CommHook> MakeHookChain(const std::vector<HookWrapper>& wrappers, CommContext context,
                                        AllreduceHook::Sent sent) {
  if (!context.collectives) context.collectives = CollectivesOver(*context.process_group, context.nccl);
  std::unique_ptr<CommHook> hook = std::make_unique<AllreduceHook>(*context.process_group, context.nccl, std::move(sent));
  for (const HookWrapper& wrap : wrappers) hook = wrap(std::move(hook), context);
  return hook;
}

}  // namespace ddplab
