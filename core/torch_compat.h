// The differences between the LibTorch versions ddplab builds against (1.13 on the CPU
// machines, 2.x with CUDA), in one place.
#ifndef DDPLAB_CORE_TORCH_COMPAT_H_
#define DDPLAB_CORE_TORCH_COMPAT_H_

#include <exception>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace ddplab::compat {

// softmax(q k^T / sqrt(d)) v over the last two dimensions of [batch, heads, seq, dim]
// tensors, with LibTorch's fused kernels where it has them.
inline at::Tensor ScaledDotProductAttention(const at::Tensor& q, const at::Tensor& k,
                                            const at::Tensor& v) {
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v);
#else
  return std::get<0>(at::_scaled_dot_product_attention(q, k, v));
#endif
}

// What c10d's NCCL and Gloo process groups are: c10d::Backend since LibTorch 2.0,
// c10d::ProcessGroup before. Both have allreduce, broadcast and barrier.
#if TORCH_VERSION_MAJOR >= 2
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

// c10d's grouped reduce-scatter with a mean (shards[k] gets the mean of chunk `rank` of
// inputs[k]) and grouped all-gather into tensors (LibTorch 2's
// reduce_scatter_tensor_coalesced and allgather_into_tensor_coalesced, which NCCL's group
// has); null where this LibTorch has neither, for the caller to do without.
inline c10::intrusive_ptr<c10d::Work> ReduceScatterMeanCoalesced(CollectiveGroup& group, std::vector<at::Tensor>& shards,
                                                                 std::vector<at::Tensor>& inputs) {
#if TORCH_VERSION_MAJOR >= 2
  c10d::ReduceScatterOptions options;
  options.reduceOp = c10d::ReduceOp::AVG;
  return group.reduce_scatter_tensor_coalesced(shards, inputs, options);
#else
  (void)group, (void)shards, (void)inputs;
  return {};
#endif
}
inline c10::intrusive_ptr<c10d::Work> AllGatherIntoCoalesced(CollectiveGroup& group, std::vector<at::Tensor>& wholes,
                                                             std::vector<at::Tensor>& mine) {
#if TORCH_VERSION_MAJOR >= 2
  return group.allgather_into_tensor_coalesced(wholes, mine);
#else
  (void)group, (void)wholes, (void)mine;
  return {};
#endif
}

// A c10::Error message without the C++ backtrace that c10 appends to it.
inline std::string WithoutBacktrace(std::string message) {
  if (size_t cut = message.find("\nException raised from"); cut != std::string::npos) message.resize(cut);
  return message;
}
inline std::string WhatWithoutBacktrace(const std::exception& e) { return WithoutBacktrace(e.what()); }

// Milliseconds a finished collective took on its stream, where c10d measures it (NCCL
// with TORCH_NCCL_ENABLE_TIMING=1 since LibTorch 2.1); nullopt elsewhere. Call only once
// the device has finished the collective.
inline std::optional<double> WorkDurationMs(const c10::intrusive_ptr<c10d::Work>& work) {
#if TORCH_VERSION_MAJOR >= 2
  try {
    return work->getDuration();
  } catch (const std::exception&) {
    return std::nullopt;
  }
#else
  (void)work;
  return std::nullopt;
#endif
}

// Whether a TCPStoreOptions-like type has the member masterListenFd (LibTorch 2.x: the
// server takes over a socket the caller already bound, so the caller chooses the address),
// and useLibUV. Detected, not inferred from the version number.
template <typename T, typename = void>
struct HasMasterListenFd : std::false_type {};
template <typename T>
struct HasMasterListenFd<T, std::void_t<decltype(std::declval<T&>().masterListenFd)>>
    : std::true_type {};
template <typename T, typename = void>
struct HasUseLibUV : std::false_type {};
template <typename T>
struct HasUseLibUV<T, std::void_t<decltype(std::declval<T&>().useLibUV)>> : std::true_type {};

inline constexpr bool kTcpStoreTakesListenFd = HasMasterListenFd<c10d::TCPStoreOptions>::value;

// Hands the server a listening socket; false (and `options` untouched) where this
// LibTorch's TCPStore has no masterListenFd. From then on the store owns `fd`, and closes
// it, even when its constructor throws. A template so that the assignments are compiled
// only where the members exist.
template <typename Options>
bool SetMasterListenFd(Options& options, int fd) {
  if constexpr (HasMasterListenFd<Options>::value) {
    options.masterListenFd = fd;
    if constexpr (HasUseLibUV<Options>::value) {
      // Before 2.8 the libuv server adopted the fd but never accepted on it (it lacked
      // uv_listen, pytorch#150215): the clients hung. The classic server takes it.
      if constexpr (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 8) options.useLibUV = false;
    }
    return true;
  } else {
    (void)options;
    (void)fd;
    return false;
  }
}

// Caps the NCCL channels (CTAs) of the communicator a ProcessGroupNCCL::Options-like
// type creates, through its ncclConfig_t (`config`, where c10d was built with an NCCL that
// takes a configuration); false (and `options` untouched) where it has none.
template <typename T, typename = void>
struct HasNcclConfig : std::false_type {};
template <typename T>
struct HasNcclConfig<T, std::void_t<decltype(std::declval<T&>().config.maxCTAs)>> : std::true_type {};

template <typename Options>
bool SetNcclMaxCtas(Options& options, int ctas) {
  if constexpr (HasNcclConfig<Options>::value) {
    options.config.maxCTAs = ctas;
    return true;
  } else {
    (void)options;
    (void)ctas;
    return false;
  }
}

// Ends a process group's communicators after its last collective, as
// torch.distributed.destroy_process_group() does, where the group has shutdown()
// (ProcessGroupNCCL in LibTorch 2.x, which otherwise warns at exit that it was never
// destroyed); false where it has none (LibTorch 1.13), and there is nothing to end.
template <typename Group, typename = void>
struct HasShutdown : std::false_type {};
template <typename Group>
struct HasShutdown<Group, std::void_t<decltype(std::declval<Group&>().shutdown())>> : std::true_type {};

template <typename Group>
bool ShutDown(Group& group) {
  if constexpr (HasShutdown<Group>::value) {
    group.shutdown();
    return true;
  } else {
    (void)group;
    return false;
  }
}

// dst[i].copy_(src[i]) for each i, casting where the dtypes differ: one multi-tensor
// kernel where LibTorch has _foreach_copy_ (2.2 and later, on a GPU with each list of one
// dtype and matching strides), one copy per tensor elsewhere and for a single tensor.
inline void CopyEach(at::TensorList dst, at::TensorList src) {
  if (dst.size() == 1) {
    dst[0].copy_(src[0]);
    return;
  }
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
  at::_foreach_copy_(dst, src);
#else
  for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
#endif
}

// A profiler event's (torch::autograd::profiler::KinetoEvent's) start and duration in
// nanoseconds: LibTorch 1.13 gives microseconds, 2.x nanoseconds.
template <typename Event>
int64_t ProfilerEventStartNs(const Event& event) {
#if TORCH_VERSION_MAJOR >= 2
  return static_cast<int64_t>(event.startNs());
#else
  return static_cast<int64_t>(event.startUs()) * 1000;
#endif
}
template <typename Event>
int64_t ProfilerEventDurationNs(const Event& event) {
#if TORCH_VERSION_MAJOR >= 2
  return static_cast<int64_t>(event.durationNs());
#else
  return static_cast<int64_t>(event.durationUs()) * 1000;
#endif
}

// avg = beta avg + (1 - beta) x for each pair, as torch.optim's foreach Adam of each
// version computes it (LibTorch 2: lerp; 1.13: mul, then add with alpha), so that the same
// gradients give the same bits as PyTorch's.
inline void ForeachMovingAverage(at::TensorList avgs, at::TensorList xs, double beta) {
#if TORCH_VERSION_MAJOR >= 2
  at::_foreach_lerp_(avgs, xs, 1 - beta);
#else
  at::_foreach_mul_(avgs, beta);
  at::_foreach_add_(avgs, xs, 1 - beta);
#endif
}

// Whether this LibTorch has torch.optim's fused kernels for CUDA tensors:
// at::_fused_adamw_ (2.0) and at::_fused_sgd_ (2.3); LibTorch 1.13 has neither. Where it
// has them, FusedAdamW and FusedSgd are those kernels; elsewhere they must not be called.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
inline constexpr bool kFusedOptimizers = true;
#else
inline constexpr bool kFusedOptimizers = false;
#endif

// torch.optim.AdamW(fused=True)'s kernel: one pass over each tensor; `steps` are the
// parameters' step counts as 0-dim float32 tensors on their device, already incremented.
inline void FusedAdamW(at::TensorList params, at::TensorList grads, at::TensorList avgs, at::TensorList sqs,
                       at::TensorList steps, double lr, double beta1, double beta2, double weight_decay,
                       double eps) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  at::_fused_adamw_(params, grads, avgs, sqs, /*max_exp_avg_sqs=*/{}, steps, lr, beta1, beta2, weight_decay, eps,
                    /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)params, (void)grads, (void)avgs, (void)sqs, (void)steps, (void)lr, (void)beta1, (void)beta2,
      (void)weight_decay, (void)eps;
  TORCH_CHECK(false, "this LibTorch has no fused AdamW");
#endif
}

// torch.optim.SGD(fused=True)'s kernel. `buffers` empty without momentum; on a first
// step (`first_step`) the kernel sets each buffer to its gradient.
inline void FusedSgd(at::TensorList params, at::TensorList grads, at::TensorList buffers, double lr,
                     double momentum, double weight_decay, bool first_step) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  at::_fused_sgd_(params, grads, buffers, weight_decay, momentum, lr, /*dampening=*/0, /*nesterov=*/false,
                  /*maximize=*/false, first_step);
#else
  (void)params, (void)grads, (void)buffers, (void)lr, (void)momentum, (void)weight_decay, (void)first_step;
  TORCH_CHECK(false, "this LibTorch has no fused SGD");
#endif
}

// The dtype torch.autocast casts to on `device` while it is on there; nothing while it
// is off (1.13 has autocast on CPUs and CUDA alone).
inline std::optional<at::ScalarType> AutocastDtype(at::DeviceType device) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  if (!at::autocast::is_autocast_enabled(device)) return std::nullopt;
  return at::autocast::get_autocast_dtype(device);
#else
  if (device == at::kCPU) {
    if (!at::autocast::is_cpu_enabled()) return std::nullopt;
    return at::autocast::get_autocast_cpu_dtype();
  }
  if (device != at::kCUDA || !at::autocast::is_enabled()) return std::nullopt;
  return at::autocast::get_autocast_gpu_dtype();
#endif
}

// torch.autocast(device_type, dtype) for its lifetime, as Python's context manager: the
// state before comes back after, and the cast weights' cache is dropped when the
// outermost scope ends. (LibTorch 2.4 keys autocast by device type; 1.13 has a call per
// device.)
class AutocastScope {
 public:
  AutocastScope(at::DeviceType device, at::ScalarType dtype) : device_(device) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    was_enabled_ = at::autocast::is_autocast_enabled(device);
    was_dtype_ = at::autocast::get_autocast_dtype(device);
    at::autocast::set_autocast_enabled(device, true);
    at::autocast::set_autocast_dtype(device, dtype);
#else
    const bool cpu = device == at::kCPU;
    was_enabled_ = cpu ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
    was_dtype_ = cpu ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
    cpu ? at::autocast::set_cpu_enabled(true) : at::autocast::set_enabled(true);
    cpu ? at::autocast::set_autocast_cpu_dtype(dtype) : at::autocast::set_autocast_gpu_dtype(dtype);
#endif
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(device_, was_enabled_);
    at::autocast::set_autocast_dtype(device_, was_dtype_);
#else
    const bool cpu = device_ == at::kCPU;
    cpu ? at::autocast::set_cpu_enabled(was_enabled_) : at::autocast::set_enabled(was_enabled_);
    cpu ? at::autocast::set_autocast_cpu_dtype(was_dtype_) : at::autocast::set_autocast_gpu_dtype(was_dtype_);
#endif
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  at::DeviceType device_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

}  // namespace ddplab::compat

#endif  // DDPLAB_CORE_TORCH_COMPAT_H_
