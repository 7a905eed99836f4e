// Core's all-reduce of a bucket (c10d's allreduce_hook): the end of every hook chain.
// It averages the bucket's flat buffer over the ranks, in the buffer's own dtype, or the
// bucket's gradients where they lie in one grouped collective where the layout keeps no
// buffer; the future completes with what it averaged.
//
//   std::unique_ptr<ddplab::CommHook> chain = ddplab::MakeHookChain(parts.hooks, context);
//   c10::intrusive_ptr<c10::ivalue::Future> done = chain->Run(bucket);
#ifndef DDPLAB_CORE_ENGINE_ALLREDUCE_HOOK_H_
#define DDPLAB_CORE_ENGINE_ALLREDUCE_HOOK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/group_collectives.h"
#include "core/engine/extension_points.h"

namespace ddplab {

// A future for `mean` (StartMean's): completes with `tensors` averaged. On NCCL it is the
// collective's own; on Gloo the mean's finishing step runs as it completes; over one
// rank it is complete at once (on a GPU ordered after the current stream).
c10::intrusive_ptr<c10::ivalue::Future> MeanFuture(PendingMean mean, std::vector<at::Tensor> tensors, bool nccl);

class AllreduceHook : public CommHook {
 public:
  // `sent` hears of each bucket sent: its index, the collective (null over one rank), and
  // the bytes and dtype that travelled.
  using Sent = std::function<void(size_t bucket, const c10::intrusive_ptr<c10d::Work>& work, int64_t bytes,
                                  at::ScalarType dtype)>;
  AllreduceHook(compat::CollectiveGroup& group, bool nccl, Sent sent = {})
      : group_(group), nccl_(nccl), sent_(std::move(sent)) {}

  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override;

 private:
  compat::CollectiveGroup& group_;
  bool nccl_;
  Sent sent_;
};

// The chain the engine makes: core's all-reduce over `context`'s group, wrapped by
// `wrappers`, innermost first (EngineParts::hooks).
// The chain of `wrappers` around core's all-reduce, each made with `context` (its
// collectives set over its process group where unset).
std::unique_ptr<CommHook> MakeHookChain(const std::vector<HookWrapper>& wrappers, CommContext context,
                                        AllreduceHook::Sent sent = {});

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_ALLREDUCE_HOOK_H_
