#include "core/data/synthetic_data.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>

#include "core/torch_compat.h"

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ddplab {
namespace {

// SplitMix64: spreads (seed, rank, index) over the generator's seed space.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The LEARNABLE task's per-class patterns: a 4x4 grid per channel, upsampled.
constexpr int64_t kPrototypeGrid = 4;

}  // namespace

struct SyntheticData::Slot {
  at::Tensor images, labels;
  int64_t index = -1;
  bool busy = false;    // a worker is generating into it
  bool ready = false;   // generated, waiting for the consumer
  bool in_use = false;  // the consumer holds it (CPU: until the next batch)
#if defined(DDPLAB_CUDA)
  at::cuda::CUDAEvent copied;  // the last asynchronous copy out of this slot
  bool copy_pending = false;
#endif
};

struct SyntheticData::DeviceBatch {
  Batch batch;
#if defined(DDPLAB_CUDA)
  at::cuda::CUDAEvent ready;
#endif
};

struct SyntheticData::CudaState {
#if defined(DDPLAB_CUDA)
  explicit CudaState(c10::DeviceIndex device)
      : copy_stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device)) {}
  c10::cuda::CUDAStream copy_stream;
#endif
};

SyntheticData::SyntheticData(const Options& options) : options_(options) {
  if (options_.task == v1::Data::LEARNABLE) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(Mix(options_.seed));
    prototypes_ = at::empty({options_.num_classes, 3, kPrototypeGrid, kPrototypeGrid})
                      .normal_(0.0, 1.0, gen);
  }
  bool gpu = options_.device.is_cuda();
#if defined(DDPLAB_CUDA)
  if (gpu) cuda_ = std::make_unique<CudaState>(options_.device.index());
#endif
  at::TensorOptions host = at::TensorOptions().pinned_memory(gpu && options_.pin_memory);
  int num_slots = options_.num_workers > 0 ? options_.prefetch + options_.num_workers : 1;
  for (int i = 0; i < num_slots; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->images = at::empty({options_.batch_size, 3, options_.image_size, options_.image_size},
                             host.dtype(at::kFloat));
    slot->labels = at::empty({options_.batch_size}, host.dtype(at::kLong));
    slots_.push_back(std::move(slot));
  }
  for (int i = 0; i < options_.num_workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

SyntheticData::~SyntheticData() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  free_cv_.notify_all();
  ready_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
#if defined(DDPLAB_CUDA)
  if (cuda_) cuda_->copy_stream.synchronize();
#endif
}

void SyntheticData::Generate(int64_t index, at::Tensor& images, at::Tensor& labels) const {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(
      Mix(options_.seed ^ Mix(static_cast<uint64_t>(options_.rank) << 40 ^
                              static_cast<uint64_t>(index))));
  images.normal_(0.0, 1.0, gen);
  labels.random_(0, options_.num_classes, gen);
  if (options_.task == v1::Data::LEARNABLE) {
    std::vector<int64_t> size{options_.image_size, options_.image_size};
    images.add_(at::upsample_nearest2d(prototypes_.index_select(0, labels), at::IntArrayRef(size)));
  }
}

void SyntheticData::WorkerLoop() {
  const int64_t num_slots = static_cast<int64_t>(slots_.size());
  while (true) {
    int64_t index;
    Slot* slot;
    {
      std::unique_lock<std::mutex> lock(mu_);
      free_cv_.wait(lock, [&] {
        if (stopping_) return true;
        Slot& s = *slots_[next_to_generate_ % num_slots];
        return !s.busy && !s.ready && !s.in_use;
      });
      if (stopping_) return;
      index = next_to_generate_++;
      slot = slots_[index % num_slots].get();
      slot->busy = true;
    }
#if defined(DDPLAB_CUDA)
    // The consumer's last copy out of this buffer must finish before it is overwritten.
    if (slot->copy_pending) slot->copied.synchronize();
#endif
    try {
      Generate(index, slot->images, slot->labels);
    } catch (const std::exception& e) {
      // An exception that left this thread would call std::terminate: the consumer
      // throws it instead, from Next(), where the run reports it as its error.
      std::lock_guard<std::mutex> lock(mu_);
      if (failure_.empty())
        failure_ = "a data worker failed generating batch " + std::to_string(index) + ": " +
                   compat::WhatWithoutBacktrace(e);
      stopping_ = true;
      ready_cv_.notify_all();
      free_cv_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      slot->index = index;
      slot->busy = false;
      slot->ready = true;
    }
    ready_cv_.notify_all();
  }
}

SyntheticData::Slot& SyntheticData::WaitReady(int64_t index) {
  Slot& slot = *slots_[index % static_cast<int64_t>(slots_.size())];
  if (workers_.empty()) {
#if defined(DDPLAB_CUDA)
    if (slot.copy_pending) slot.copied.synchronize();
#endif
    Generate(index, slot.images, slot.labels);
    slot.index = index;
    slot.in_use = true;
    return slot;
  }
  auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  ready_cv_.wait(lock, [&] { return (slot.ready && slot.index == index) || !failure_.empty(); });
  if (!(slot.ready && slot.index == index)) throw std::runtime_error(failure_);
  slot.ready = false;
  slot.in_use = true;
  host_wait_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return slot;
}

void SyntheticData::Release(Slot& slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot.in_use = false;
  }
  free_cv_.notify_all();
}

void SyntheticData::IssueCopy(int64_t index) {
#if defined(DDPLAB_CUDA)
  Slot& slot = WaitReady(index);
  auto device_batch = std::make_unique<DeviceBatch>();
  c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(options_.device.index());
  // Allocated on the compute stream, which uses and frees them. The copy waits for the
  // compute stream's queued work, which may still use memory the allocator hands out.
  at::TensorOptions on_device = at::TensorOptions().device(options_.device);
  device_batch->batch.images = at::empty(slot.images.sizes(), on_device.dtype(at::kFloat));
  device_batch->batch.labels = at::empty(slot.labels.sizes(), on_device.dtype(at::kLong));
  at::cuda::CUDAEvent compute_point;
  compute_point.record(compute);
  {
    c10::cuda::CUDAStreamGuard guard(cuda_->copy_stream);
    compute_point.block(cuda_->copy_stream);
    device_batch->batch.images.copy_(slot.images, /*non_blocking=*/true);
    device_batch->batch.labels.copy_(slot.labels, /*non_blocking=*/true);
    device_batch->ready.record(cuda_->copy_stream);
    slot.copied.record(cuda_->copy_stream);
  }
  slot.copy_pending = true;
  Release(slot);
  in_flight_.push_back(std::move(device_batch));
#else
  (void)index;
#endif
}

Batch SyntheticData::Next() {
  if (!options_.device.is_cuda()) {
    if (held_ != nullptr) Release(*held_);
    held_ = &WaitReady(next_to_consume_++);
    return Batch{held_->images, held_->labels};
  }
#if defined(DDPLAB_CUDA)
  const int64_t index = next_to_consume_++;
  if (next_to_copy_ <= index) IssueCopy(next_to_copy_++);
  // Copy ahead what the workers have ready, without waiting for more.
  while (next_to_copy_ <= index + options_.prefetch && !workers_.empty()) {
    const Slot& next = *slots_[next_to_copy_ % static_cast<int64_t>(slots_.size())];
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!(next.ready && next.index == next_to_copy_)) break;
    }
    IssueCopy(next_to_copy_++);
  }
  std::unique_ptr<DeviceBatch> device_batch = std::move(in_flight_.front());
  in_flight_.pop_front();
  device_batch->ready.block(c10::cuda::getCurrentCUDAStream(options_.device.index()));
  return device_batch->batch;
#else
  return Batch{};
#endif
}

}  // namespace ddplab
