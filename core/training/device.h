// The device a run trains on: which one (ChooseDevice), the host threads its process
// keeps for LibTorch's own work (UseHostThreadsFor), waiting for it (Synchronize), and
// giving back what the run's allocations cached once it ends (ReleaseCachedMemory).
//
//   absl::StatusOr<at::Device> device = ddplab::ChooseDevice(experiment, local_rank);
//   ddplab::UseHostThreadsFor(*device);
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

// Note [A GPU worker's host threads]
// LibTorch starts with as many intra-op threads as the machine has cores, in every
// process. A GPU run's step does no work on the host that they would share, but after a
// parallel region OpenMP's threads spin, and NCCL's socket transport moves every byte
// through threads of its own on those cores. Over sockets (NCCL_P2P_DISABLE=1
// NCCL_SHM_DISABLE=1) on 2 H200, one bucket after backward made 2.04 steps/s with
// LibTorch's default and 2.20 with OMP_NUM_THREADS=1, against PyTorch's 2.09-2.12 under
// torchrun, which sets OMP_NUM_THREADS=1 for each of its workers (bench/NOTES.md, "#62's
// rows on 2 H200, again"). So a run on a GPU keeps one intra-op thread, as torchrun's
// workers do; a run on the CPU keeps what the process started with, since its compute is
// those threads. OMP_NUM_THREADS, where set, is the user's word and is left alone.
void UseHostThreadsFor(const at::Device& device);

// Waits for everything queued on `device` (nothing on the CPU).
void Synchronize(const at::Device& device);

// What LibTorch's allocator cached for a run goes back to the GPU, so that a run after it
// in the same process (Note [Persistent workers], core/launch/worker_pool.h) starts as a
// fresh process would: its peak is its own, and NCCL and cuDNN find the memory free.
void ReleaseCachedMemory();

}  // namespace ddplab

#endif  // DDPLAB_CORE_TRAINING_DEVICE_H_
