#include "plugins/registered_buckets/registered_pool.h"

#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#if defined(DDPLAB_CUDA) && defined(USE_C10D_NCCL)
#define DDPLAB_REGISTERED_POOL 1
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#if __has_include(<ATen/cuda/MemPool.h>)
#include <ATen/cuda/MemPool.h>
#endif
#else
#define DDPLAB_REGISTERED_POOL 0
#endif

namespace ddplab {

#if DDPLAB_REGISTERED_POOL

namespace {

#if __has_include(<ATen/cuda/MemPool.h>)
using MemPool = at::cuda::MemPool;
#else
using MemPool = c10::cuda::MemPool;
#endif
using CudaAllocator = c10::cuda::CUDACachingAllocator::CUDAAllocator;

// A pool over `allocator` whose every allocation is a segment of its own (no_split), so
// that each tensor starts a window. MemPool takes its allocator as a shared pointer and
// no_split in later LibTorch; before, a raw pointer and no no_split.
template <typename Pool = MemPool>
std::unique_ptr<Pool> NewPool(const std::shared_ptr<CudaAllocator>& allocator) {
  if constexpr (std::is_constructible_v<Pool, std::shared_ptr<CudaAllocator>, bool, bool, bool>) {
    return std::make_unique<Pool>(allocator, /*is_user_created=*/true, /*use_on_oom=*/false, /*no_split=*/true);
  } else if constexpr (std::is_constructible_v<Pool, std::shared_ptr<CudaAllocator>>) {
    return std::make_unique<Pool>(allocator);
  } else {
    return std::make_unique<Pool>(allocator.get());
  }
}

// NCCL's own allocator (ncclMemAlloc: cuMem memory NCCL can register, as windows too).
// c10d's ProcessGroupNCCL::getMemAllocator offers it only where the GPU reports multicast
// support, which a machine may not (or may keep NVLS off), so the pool takes one of its own.
std::shared_ptr<CudaAllocator> NcclAllocator() {
  return torch::cuda::CUDAPluggableAllocator::createCustomAllocator(
      [](size_t size, int device, cudaStream_t) {
        c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
        void* ptr = nullptr;
        const ncclResult_t result = ncclMemAlloc(&ptr, size);
        if (result != ncclSuccess) {
          throw std::runtime_error(std::string("ncclMemAlloc of ") + std::to_string(size) +
                                   " bytes failed: " + ncclGetErrorString(result));
        }
        return ptr;
      },
      [](void* ptr, size_t, int device, cudaStream_t) {
        c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
        ncclMemFree(ptr);
      });
}

// Whether c10d registers windows: registerMemPool takes `symm` in later LibTorch.
template <typename Group = c10d::ProcessGroupNCCL>
constexpr bool TakesWindows() {
  return std::is_invocable_v<decltype(&Group::registerMemPool), Group*, MemPool*, bool>;
}

// Registers `pool`'s new segments as windows (Make refuses a c10d that cannot).
template <typename Group>
void RegisterWindows(Group& group, MemPool* pool) {
  if constexpr (TakesWindows<Group>()) group.registerMemPool(pool, /*symm=*/true);
}

}  // namespace

struct RegisteredPool::State {
  std::mutex mu;
  // Owned: the pool's windows are the group's communicator's, and go before it.
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group;
  c10::DeviceIndex device = 0;
  std::shared_ptr<CudaAllocator> allocator;
  // This build's pool. Tensors made in it may outlive it, as a CUDA graph's pool's do,
  // and go back to the allocator when they die.
  std::unique_ptr<MemPool> pool;
  bool registered = false;  // the pool holds windows
  bool in_use = false;      // a bucket of this build was reduced: the next Allocate rebuilds
  int64_t bytes = 0;
  int windows = 0;

  // Ends the pool's windows once nothing can still be reducing in them (NCCL tears a
  // window down on a stream of its own, without waiting for the collectives on it). After
  // the group is shut down its communicator has taken them with it, and c10d says so by
  // throwing: nothing is left to do then.
  void EndWindows() {
    if (!registered) return;
    registered = false;
    try {
      c10::cuda::CUDAGuard guard(device);
      c10::cuda::device_synchronize();
      group->deregisterMemPool(pool.get());
    } catch (const std::exception&) {
    }
  }
};

absl::StatusOr<std::unique_ptr<RegisteredPool>> RegisteredPool::Make(compat::CollectiveGroup* group) {
  auto* nccl = dynamic_cast<c10d::ProcessGroupNCCL*>(group);
  if (nccl == nullptr) {
    return absl::FailedPreconditionError("the run's collectives are not NCCL's (a CPU run, over Gloo)");
  }
  if constexpr (!TakesWindows()) {
    return absl::FailedPreconditionError("this LibTorch's c10d registers no NCCL windows (registerMemPool takes no `symm`)");
  }
  auto state = std::make_unique<State>();
  state->group = c10::intrusive_ptr<c10d::ProcessGroupNCCL>::reclaim_copy(nccl);
  state->device = c10::cuda::current_device();
  try {
    c10::cuda::CUDAGuard guard(state->device);
    state->allocator = NcclAllocator();
    state->pool = NewPool(state->allocator);
    // Windows are the communicator's: one all-reduce makes it (c10d makes it at a
    // group's first collective), on every rank at once, as every rank makes its hooks.
    std::vector<at::Tensor> one{at::zeros({1}, at::TensorOptions().device(at::kCUDA, state->device))};
    nccl->allreduce(one)->wait();
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat("NCCL's memory pool could not be made: ", compat::WhatWithoutBacktrace(e)));
  }
  return std::unique_ptr<RegisteredPool>(new RegisteredPool(std::move(state)));
}

at::Tensor RegisteredPool::Allocate(const std::function<at::Tensor()>& make) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  c10::cuda::CUDAGuard guard(s.device);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(c10::cuda::getCurrentCUDAStream(s.device).stream(), &capture);
  if (capture != cudaStreamCaptureStatusNone) {
    throw std::runtime_error(
        "registered_buckets: the buckets are being made inside a CUDA graph's capture, where windows cannot be "
        "registered (with cuda_graph, let eager_steps leave the engine's rebuild outside the capture: 2 or more)");
  }
  if (s.in_use) {  // a rebuild: a pool of its own, so that its segments are new and in order
    s.EndWindows();
    s.pool = NewPool(s.allocator);
    s.in_use = false;
    s.bytes = 0;
  }
  const auto thread = std::this_thread::get_id();
  // As c10d's own ProcessGroupNCCL::allocateTensor: this thread's allocations go to the
  // pool while `make` runs.
  c10::cuda::CUDACachingAllocator::beginAllocateToPool(
      s.device, s.pool->id(), [thread](cudaStream_t) { return std::this_thread::get_id() == thread; });
  at::Tensor made;
  try {
    made = make();
  } catch (...) {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(s.device, s.pool->id());
    c10::cuda::CUDACachingAllocator::releasePool(s.device, s.pool->id());
    throw;
  }
  c10::cuda::CUDACachingAllocator::endAllocateToPool(s.device, s.pool->id());
  c10::cuda::CUDACachingAllocator::releasePool(s.device, s.pool->id());
  // The new segment as a window at once, so that every rank registers its windows in
  // the order it allocates them (Note [Registered once per build]).
  RegisterWindows(*s.group, s.pool.get());
  s.registered = true;
  ++s.windows;
  if (made.defined()) s.bytes += made.numel() * made.element_size();
  return made;
}

void RegisteredPool::InUse() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->in_use = true;
}

#else  // !DDPLAB_REGISTERED_POOL

struct RegisteredPool::State {
  int64_t bytes = 0;
  int windows = 0;
};

absl::StatusOr<std::unique_ptr<RegisteredPool>> RegisteredPool::Make(compat::CollectiveGroup*) {
  return absl::FailedPreconditionError("this build has no NCCL");
}

at::Tensor RegisteredPool::Allocate(const std::function<at::Tensor()>& make) { return make(); }

void RegisteredPool::InUse() {}

#endif  // DDPLAB_REGISTERED_POOL

RegisteredPool::RegisteredPool(std::unique_ptr<State> state) : state_(std::move(state)) {}

RegisteredPool::~RegisteredPool() {
#if DDPLAB_REGISTERED_POOL
  if (state_) state_->EndWindows();  // the windows go before their memory can
#endif
}

int64_t RegisteredPool::bytes() const { return state_->bytes; }
int RegisteredPool::windows() const { return state_->windows; }

}  // namespace ddplab
