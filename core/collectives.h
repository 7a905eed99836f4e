// Collectives over c10d process groups that the backends do not all have.
//
//   ddplab::PendingMean mean = ddplab::StartMean(group, tensor, /*nccl=*/true);
//   ...                  // overlap other work
//   mean.wait();         // tensor now holds the mean over ranks (on a GPU: for the
//                        // current stream, which waits for the reduction)
#ifndef DDPLAB_CORE_COLLECTIVES_H_
#define DDPLAB_CORE_COLLECTIVES_H_

#include <functional>

#include <ATen/ATen.h>

#include "core/torch_compat.h"

namespace ddplab {

// Starts averaging `tensor` over the ranks of `group`, in place and in the tensor's own
// dtype on the wire. NCCL averages inside the reduction (ncclAvg). Gloo has no average:
// the tensor is divided first. Gloo in LibTorch 1.x has no bfloat16 either: there the
// bfloat16 values travel as their bytes through an all-gather and are summed in rank
// order in float32, then rounded once. Returns what waits for the result.
struct PendingMean {
  c10::intrusive_ptr<c10d::Work> work;  // the collective, for its timing
  std::function<void()> wait;
};
PendingMean StartMean(compat::CollectiveGroup& group, at::Tensor tensor, bool nccl);

}  // namespace ddplab

#endif  // DDPLAB_CORE_COLLECTIVES_H_
