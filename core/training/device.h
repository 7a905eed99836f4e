// The device a run trains on: which one (ChooseDevice), waiting for it (Synchronize), and
// giving back what the run's allocations cached once it ends (ReleaseCachedMemory).
//
//   absl::StatusOr<at::Device> device = ddplab::ChooseDevice(experiment, local_rank);
//   ... train ...
//   ddplab::Synchronize(*device);
//   ddplab::ReleaseCachedMemory();
#ifndef DDPLAB_CORE_TRAINING_DEVICE_H_
#define DDPLAB_CORE_TRAINING_DEVICE_H_

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

// The device of `e` for the process of `local_rank` on its node: the CPU where the
// experiment asks for it (or for nothing, with no GPU here), else that GPU. An error where
// the experiment asks for what this build or machine lacks.
absl::StatusOr<at::Device> ChooseDevice(const v1::Experiment& e, int local_rank);

// Waits for everything queued on `device` (nothing on the CPU).
void Synchronize(const at::Device& device);

// What LibTorch's allocator cached for a run goes back to the GPU, so that a run after it
// in the same process (Note [Persistent workers], core/launch/worker_pool.h) starts as a
// fresh process would: its peak is its own, and NCCL and cuDNN find the memory free.
void ReleaseCachedMemory();

}  // namespace ddplab

#endif  // DDPLAB_CORE_TRAINING_DEVICE_H_
