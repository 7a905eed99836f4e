// The collectives the host offers a plugin's hooks (CommContext::collectives): c10d's over
// the run's process group, with what the backends do not all have filled in. A plugin
// calls them through this interface and links nothing of the host's.
//
//   ddplab::PendingMean mean = context.collectives->StartMean(tensor);
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

// What waits for a mean started over the ranks (Collectives::StartMean).
struct PendingMean {
  c10::intrusive_ptr<c10d::Work> work;  // the collective, for its timing
  std::function<void()> wait;
  // What is left to do once `work` has completed, without waiting for it (`wait` does it
  // too); empty when nothing is.
  std::function<void()> finish;
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  // Starts averaging `tensor` over the ranks, in place and in the tensor's own dtype on
  // the wire. NCCL averages inside the reduction (ncclAvg). Gloo has no average: the
  // tensor is divided first. Gloo in LibTorch 1.x sums no 16-bit floats either: there
  // their values travel as their bytes through an all-gather and are summed in rank order
  // in float32, then rounded once. Over one rank nothing is issued (the tensor is its
  // own mean) and `work` is null; on a GPU `wait` still orders the current stream after
  // the stream current at the start. Returns what waits for the result.
  virtual PendingMean StartMean(at::Tensor tensor) const = 0;
  // As StartMean for several tensors of one dtype and device, each averaged in place
  // where it lies, in one grouped collective (c10d's allreduce_coalesced: on NCCL one
  // group of all-reduces, one launch; Gloo flattens them itself). No flat copy of them is
  // made.
  virtual PendingMean StartMeanCoalesced(std::vector<at::Tensor> tensors) const = 0;
  // Every rank's `mine` into `gathered` (the ranks' bytes of it, contiguous), in rank
  // order, as bytes: any dtype on either backend (Gloo in LibTorch 1.x has no
  // _allgather_base: its list form, into views of `gathered`). Returns once waited for
  // (on a GPU: once the current stream is ordered after it).
  virtual void AllGatherBytes(at::Tensor& gathered, const at::Tensor& mine) const = 0;
  // Starts averaging each of `inputs` (flat, its numel a multiple of the ranks) over the
  // ranks into `shards` (c10d's reduce-scatter with a mean): shards[k], flat, gets the mean
  // of chunk `rank` of inputs[k], in the inputs' dtype. One grouped collective on NCCL
  // (LibTorch 2's reduce_scatter_tensor_coalesced, averaged inside); where the backend has
  // none (Gloo), each input is averaged whole in place (StartMeanCoalesced), so that the
  // inputs then hold their means, and the rank's chunk is copied out. Over one rank the
  // shards are copies of the inputs.
  virtual PendingMean StartMeanScatter(std::vector<at::Tensor> inputs, std::vector<at::Tensor> shards) const = 0;
  // Starts gathering each of `wholes` (flat, its numel a multiple of the ranks) in place:
  // chunk r of every rank's wholes[k] becomes rank r's own chunk r (c10d's all-gather into a
  // tensor, this rank's chunk the input). One grouped collective on NCCL (LibTorch 2's
  // allgather_into_tensor_coalesced); on Gloo this rank's chunks end to end through
  // AllGatherBytes (done before it returns), copied into place; nothing over one rank. What waits for it is a PendingMean's `wait`.
  virtual PendingMean StartGatherInPlace(std::vector<at::Tensor> wholes) const = 0;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_COLLECTIVES_H_
