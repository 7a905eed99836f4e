// Memory for tensors that NCCL reduces as windows: allocated by NCCL (ncclMemAlloc, as
// c10d's ProcessGroupNCCL::getMemAllocator does) into a pool of LibTorch's caching
// allocator, each tensor in a segment of its own (so at offset 0, as windows want), and
// registered with a process group's communicator as NCCL windows (c10d's registerMemPool
// with `symm`: ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC). Only in a CUDA build
// with NCCL; elsewhere Make says why not.
//
//   absl::StatusOr<std::unique_ptr<RegisteredPool>> pool = RegisteredPool::Make(group);
//   at::Tensor bucket = (*pool)->Allocate([&] { return at::zeros({n}, cuda_float); });
//   (*pool)->RegisterNew();   // collective; once the communicator exists
//   group->allreduce(...)     // on `bucket`: NCCL may take its symmetric kernels
//
// Note [Registered once per build]
// Registration is per pool, not per tensor: RegisterNew registers every segment the pool
// holds, and Allocate after a registration first deregisters them all, so that the next
// RegisterNew registers old and new segments alike (c10d deregisters only what it
// registered). The engine allocates its buckets twice (before the first step and after
// the rebuild), so a run registers twice. Registering windows is collective: every rank
// allocates and registers in the same order, as the engine's buckets are the same on
// every rank.
//
// Note [Why windows]
// NCCL (2.27 to 2.29) never reads a plainly registered buffer (ncclCommRegister) in an
// in-place ring all-reduce, which is what a bucket's all-reduce is: only windows change
// what NCCL does with a bucket. Where every rank's buffer is in a window, NCCL runs its
// symmetric kernels (loads and stores over NVLink, no staging buffers, typically fewer
// CTAs than the ring) for sums of floats; not for its average (ncclAvg), which is why the
// plugin premultiplies and sums. One node, peers reachable by CUDA P2P, cuMem memory.
#ifndef DDPLAB_PLUGINS_REGISTERED_BUCKETS_REGISTERED_POOL_H_
#define DDPLAB_PLUGINS_REGISTERED_BUCKETS_REGISTERED_POOL_H_

#include <functional>
#include <memory>
#include <mutex>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/torch_compat.h"

namespace ddplab {

class RegisteredPool {
 public:
  // A pool on the current CUDA device for `group`'s communicator (a ProcessGroupNCCL:
  // c10d's Backend in LibTorch 2.x).
  static absl::StatusOr<std::unique_ptr<RegisteredPool>> Make(compat::CollectiveGroup* group);
  ~RegisteredPool();
  RegisteredPool(const RegisteredPool&) = delete;
  RegisteredPool& operator=(const RegisteredPool&) = delete;

  // Runs `make` with every CUDA allocation of this thread going to the pool, and returns
  // what it made. Deregisters the pool first where it was registered (Note [Registered
  // once per build]).
  at::Tensor Allocate(const std::function<at::Tensor()>& make);
  // Registers the pool's segments as windows where Allocate added any since the last
  // call; throws with c10d's message where the communicator refuses.
  void RegisterNew();
  // Bytes allocated through Allocate, and how many times the pool was registered.
  int64_t bytes() const;
  int registrations() const;

 private:
  struct State;
  explicit RegisteredPool(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace ddplab

#endif  // DDPLAB_PLUGINS_REGISTERED_BUCKETS_REGISTERED_POOL_H_
