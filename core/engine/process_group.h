// The process group the engine reduces over, and its orderly end. Creating one (the
// rendezvous, NCCL or Gloo) is the launch code's (core/launch/distributed.h).
//
//   ddplab::ProcessGroupPtr group = ...;          // CreateProcessGroup
//   absl::Status s = ddplab::ShutDownProcessGroup(*group);
#ifndef DDPLAB_CORE_ENGINE_PROCESS_GROUP_H_
#define DDPLAB_CORE_ENGINE_PROCESS_GROUP_H_

#include "absl/status/status.h"
#include "core/torch_compat.h"

namespace ddplab {

using ProcessGroupPtr = c10::intrusive_ptr<compat::CollectiveGroup>;

// After the last collective of every rank: ends an NCCL group's communicators (as
// torch.distributed.destroy_process_group() does); nothing for Gloo. Only on the normal
// path: it waits for the group's outstanding collectives.
absl::Status ShutDownProcessGroup(compat::CollectiveGroup& group);

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_PROCESS_GROUP_H_
