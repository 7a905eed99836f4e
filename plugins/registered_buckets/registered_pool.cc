#include "plugins/registered_buckets/registered_pool.h"

#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#if defined(DDPLAB_CUDA) && defined(USE_C10D_NCCL)
#define DDPLAB_REGISTERED_POOL 1
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
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
// no_split in later LibTorch; before, a raw pointer and no no_split (where the caching
// allocator rounds large blocks to whole segments).
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
// c10d's ProcessGroupNCCL::getMemAllocator offers it only where the GPU supports
// multicast, which runs here keep off (NVLS), so the pool takes one of its own.
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

// Registers `pool` as windows where registerMemPool takes `symm` (later LibTorch); false
// where it cannot.
template <typename Group>
bool RegisterWindows(Group& group, MemPool* pool) {
  if constexpr (std::is_invocable_v<decltype(&Group::registerMemPool), Group*, MemPool*, bool>) {
    group.registerMemPool(pool, /*symm=*/true);
    return true;
  } else {
    (void)group;
    (void)pool;
    return false;
  }
}

}  // namespace

struct RegisteredPool::State {
  std::mutex mu;
  c10d::ProcessGroupNCCL* group = nullptr;
  c10::DeviceIndex device = 0;
  std::shared_ptr<CudaAllocator> allocator;
  // Freed with this object; tensors made in it may outlive it, as a CUDA graph's pool's
  // do, and go back to the allocator when they die.
  std::unique_ptr<MemPool> pool;
  bool registered = false;
  bool added = false;
  int64_t bytes = 0;
  int registrations = 0;
};

absl::StatusOr<std::unique_ptr<RegisteredPool>> RegisteredPool::Make(compat::CollectiveGroup* group) {
  auto* nccl = dynamic_cast<c10d::ProcessGroupNCCL*>(group);
  if (nccl == nullptr) {
    return absl::FailedPreconditionError("the run's collectives are not NCCL's (a CPU run, over Gloo)");
  }
  auto state = std::make_unique<State>();
  state->group = nccl;
  state->device = c10::cuda::current_device();
  try {
    state->allocator = NcclAllocator();
    c10::cuda::CUDAGuard guard(state->device);
    state->pool = NewPool(state->allocator);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat("NCCL's memory pool could not be made: ", compat::WhatWithoutBacktrace(e)));
  }
  return std::unique_ptr<RegisteredPool>(new RegisteredPool(std::move(state)));
}

at::Tensor RegisteredPool::Allocate(const std::function<at::Tensor()>& make) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.registered) {
    s.group->deregisterMemPool(s.pool.get());
    s.registered = false;
  }
  c10::cuda::CUDAGuard guard(s.device);
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
  s.added = true;
  if (made.defined()) s.bytes += made.numel() * made.element_size();
  return made;
}

void RegisteredPool::RegisterNew() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.added) return;
  if (!RegisterWindows(*s.group, s.pool.get())) {
    throw std::runtime_error("this LibTorch's c10d registers no NCCL windows (registerMemPool takes no `symm`)");
  }
  s.registered = true;
  s.added = false;
  ++s.registrations;
}

#else  // !DDPLAB_REGISTERED_POOL

struct RegisteredPool::State {
  int64_t bytes = 0;
  int registrations = 0;
};

absl::StatusOr<std::unique_ptr<RegisteredPool>> RegisteredPool::Make(compat::CollectiveGroup*) {
  return absl::FailedPreconditionError("this build has no NCCL (a CPU build)");
}

at::Tensor RegisteredPool::Allocate(const std::function<at::Tensor()>& make) { return make(); }

void RegisteredPool::RegisterNew() {}

#endif  // DDPLAB_REGISTERED_POOL

RegisteredPool::RegisteredPool(std::unique_ptr<State> state) : state_(std::move(state)) {}

RegisteredPool::~RegisteredPool() {
#if DDPLAB_REGISTERED_POOL
  // The windows go before their memory can. Once the group is shut down its communicator
  // has taken them with it, and c10d says so by throwing: nothing is left to do then.
  if (state_ && state_->registered) {
    try {
      state_->group->deregisterMemPool(state_->pool.get());
    } catch (const std::exception&) {
    }
  }
#endif
}
int64_t RegisteredPool::bytes() const { return state_->bytes; }
int RegisteredPool::registrations() const { return state_->registrations; }

}  // namespace ddplab
