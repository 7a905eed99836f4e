// Collectives over c10d process groups that the backends do not all have.
//
//   ddplab::PendingMean mean = ddplab::StartMean(group, tensor, /*nccl=*/true);
//   ...                  // overlap other work
//   mean.wait();         // tensor now holds the mean over ranks (on a GPU: for the
//                        // current stream, which waits for the reduction)
#ifndef DDPLAB_CORE_ENGINE_COLLECTIVES_H_
#define DDPLAB_CORE_ENGINE_COLLECTIVES_H_

#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "core/torch_compat.h"

namespace ddplab {

// Starts averaging `tensor` over the ranks of `group`, in place and in the tensor's own
// dtype on the wire. NCCL averages inside the reduction (ncclAvg). Gloo has no average:
// the tensor is divided first. Gloo in LibTorch 1.x sums no 16-bit floats either: there
// their values travel as their bytes through an all-gather and are summed in rank order
// in float32, then rounded once. Over one rank nothing is issued (the tensor is
// its own mean) and `work` is null; on a GPU `wait` still orders the current stream after
// the stream current at the start. Returns what waits for the result.
struct PendingMean {
  c10::intrusive_ptr<c10d::Work> work;  // the collective, for its timing
  std::function<void()> wait;
  // What is left to do once `work` has completed, without waiting for it (`wait` does it
  // too); empty when nothing is.
  std::function<void()> finish;
};
PendingMean StartMean(compat::CollectiveGroup& group, at::Tensor tensor, bool nccl);

// As StartMean for several tensors of one dtype and device, each averaged in place where
// it lies, in one grouped collective (c10d's allreduce_coalesced: on NCCL one group of
// all-reduces, one launch; Gloo flattens them itself). No flat copy of them is made.
PendingMean StartMeanCoalesced(compat::CollectiveGroup& group, std::vector<at::Tensor> tensors,
                               bool nccl);

// Every rank's `mine` into `gathered` (the ranks' bytes of it, contiguous), in rank order,
// as bytes: any dtype on either backend (Gloo in LibTorch 1.x has no _allgather_base: its
// list form, into views of `gathered`). Returns once waited for (on a GPU: once the
// current stream is ordered after it).
void AllGatherBytes(compat::CollectiveGroup& group, bool nccl, at::Tensor& gathered, const at::Tensor& mine);

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_COLLECTIVES_H_
