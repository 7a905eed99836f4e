// Memory for tensors that NCCL reduces where they lie: allocated by NCCL (ncclMemAlloc,
// as c10d's ProcessGroupNCCL::getMemAllocator does) into a pool of LibTorch's caching
// allocator, and registered with a process group's communicator (c10d's registerMemPool:
// ncclCommRegister, or ncclCommWindowRegister for symmetric windows). Only in a CUDA build
// with NCCL; elsewhere Make says why not.
//
//   absl::StatusOr<std::unique_ptr<RegisteredPool>> pool = RegisteredPool::Make(group, false);
//   at::Tensor bucket = (*pool)->Allocate([&] { return at::zeros({n}, cuda_float); });
//   (*pool)->RegisterNew();   // once the communicator exists; collective for windows
//   group->allreduce(...)     // on `bucket`, or any part of it
//
// Note [Registered once per build]
// Registration is per pool, not per tensor: RegisterNew registers every segment the pool
// holds, and Allocate after a registration first deregisters them all, so that the next
// RegisterNew registers old and new segments alike (c10d deregisters only what it
// registered). The engine allocates its buckets twice (before the first step and after
// the rebuild), so a run registers twice. With symmetric windows both calls are
// collective: every rank allocates and registers in the same order, as the engine's
// buckets are the same on every rank.
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
  // c10d's Backend in LibTorch 2.x). `symmetric`: register NCCL windows.
  static absl::StatusOr<std::unique_ptr<RegisteredPool>> Make(compat::CollectiveGroup* group, bool symmetric);
  ~RegisteredPool();
  RegisteredPool(const RegisteredPool&) = delete;
  RegisteredPool& operator=(const RegisteredPool&) = delete;

  // Runs `make` with every CUDA allocation of this thread going to the pool, and returns
  // what it made. Deregisters the pool first where it was registered (Note [Registered
  // once per build]).
  at::Tensor Allocate(const std::function<at::Tensor()>& make);
  // Registers the pool's segments where Allocate added any since the last call; throws
  // with c10d's message where the communicator refuses.
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
