// Memory for tensors that NCCL reduces as windows: allocated by NCCL (ncclMemAlloc, as
// c10d's ProcessGroupNCCL::getMemAllocator does) into a pool of LibTorch's caching
// allocator, each tensor in a segment of its own (so at offset 0, as windows want), and
// registered with a process group's communicator as NCCL windows (c10d's registerMemPool
// with `symm`: ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC). Only in a CUDA build
// with NCCL; elsewhere Make says why not.
//
//   absl::StatusOr<std::unique_ptr<RegisteredPool>> pool = RegisteredPool::Make(group);
//   at::Tensor bucket = (*pool)->Allocate([&] { return at::zeros({n}, cuda_float); });
//   (*pool)->InUse();         // its buckets are reduced: the next Allocate is a rebuild's
//   group->allreduce(...)     // on `bucket`: NCCL may take its symmetric kernels
//
// Note [Registered once per build]
// Registering a window is collective, and NCCL places each rank's windows by the order in
// which that rank registered them: every rank must register the same buckets in the same
// order. So each bucket is registered as it is allocated, one new segment at a time (the
// order of the engine's buckets, the same on every rank; c10d's registerMemPool would
// register a pool's segments in an order of the allocator's, which differs between
// processes). The engine allocates its buckets twice, before the first step and after the
// rebuild: the rebuild's go into a new pool of their own, after the first build's windows
// are ended (once the device is idle) and their pool is let go.
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

  // Runs `make` with every CUDA allocation of this thread going to the pool, registers
  // what it made as a window (collective), and returns it. After InUse, a rebuild's first
  // allocation first ends the windows before and starts a new pool (Note [Registered once
  // per build]). Throws inside a CUDA graph's capture, and with c10d's message where the
  // communicator refuses.
  at::Tensor Allocate(const std::function<at::Tensor()>& make);
  // The buckets allocated so far are being reduced.
  void InUse();
  // Bytes allocated by this build, and windows registered over the pool's life.
  int64_t bytes() const;
  int windows() const;

 private:
  struct State;
  explicit RegisteredPool(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace ddplab

#endif  // DDPLAB_PLUGINS_REGISTERED_BUCKETS_REGISTERED_POOL_H_
