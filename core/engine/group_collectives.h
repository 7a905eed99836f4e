// Core's collectives over a c10d process group: the functions behind Collectives
// (collectives.h), which core calls directly and hands to plugins as a Collectives.
//
//   ddplab::PendingMean mean = ddplab::StartMean(group, tensor, /*nccl=*/true);
//   mean.wait();
//   std::shared_ptr<const ddplab::Collectives> service = ddplab::CollectivesOver(group, nccl);
#ifndef DDPLAB_CORE_ENGINE_GROUP_COLLECTIVES_H_
#define DDPLAB_CORE_ENGINE_GROUP_COLLECTIVES_H_

#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "core/engine/collectives.h"
#include "core/torch_compat.h"

namespace ddplab {

// Collectives' functions over `group` (NCCL's where `nccl`, else Gloo's).
PendingMean StartMean(compat::CollectiveGroup& group, at::Tensor tensor, bool nccl);
PendingMean StartMeanCoalesced(compat::CollectiveGroup& group, std::vector<at::Tensor> tensors, bool nccl);
void AllGatherBytes(compat::CollectiveGroup& group, bool nccl, at::Tensor& gathered, const at::Tensor& mine);
PendingMean StartMeanScatter(compat::CollectiveGroup& group, std::vector<at::Tensor> inputs,
                             std::vector<at::Tensor> shards, bool nccl);
PendingMean StartGatherInPlace(compat::CollectiveGroup& group, std::vector<at::Tensor> wholes, bool nccl);

// All of them over `group`, which outlives what is returned, as the host hands them to
// plugins (CommContext::collectives).
std::shared_ptr<const Collectives> CollectivesOver(compat::CollectiveGroup& group, bool nccl);

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_GROUP_COLLECTIVES_H_
