#include "core/training/device.h"

#include <torch/cuda.h>

#include "absl/strings/str_cat.h"
#include "core/build_flags.h"

#if defined(DDPLAB_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace ddplab {

void Synchronize(const at::Device& device) {
#if defined(DDPLAB_CUDA)
  if (device.is_cuda()) {
    cudaDeviceSynchronize();
    return;
  }
#endif
  (void)device;
}

absl::StatusOr<at::Device> ChooseDevice(const v1::Experiment& e, int local_rank) {
  v1::Distributed::Device want = e.distributed().device();
  bool has_gpu = DDPLAB_CUDA_BUILD && torch::cuda::is_available();
  if (want == v1::Distributed::CPU || (want == v1::Distributed::DEVICE_UNSPECIFIED && !has_gpu)) {
    return at::Device(at::kCPU);
  }
  if (!DDPLAB_CUDA_BUILD) {
    return absl::FailedPreconditionError(absl::StrCat(
        "experiment \"", e.name(), "\" asks for distributed.device CUDA, but this is a CPU build"));
  }
  int count = static_cast<int>(torch::cuda::device_count());
  if (local_rank >= count) {
    return absl::FailedPreconditionError(absl::StrCat("experiment \"", e.name(), "\" needs GPU ",
                                                      local_rank, " but this machine has ", count));
  }
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

void ReleaseCachedMemory() {
#if defined(DDPLAB_CUDA)
  try {
    if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::emptyCache();
  } catch (const std::exception&) {
    // A device in an error state: the run's own error says so.
  }
#endif
}

}  // namespace ddplab
