#include "core/matmul_target.h"

#include "absl/strings/str_cat.h"
#include "core/build_flags.h"

#if DDPLAB_CUDA_BUILD
#include <dlfcn.h>

#include <ATen/cuda/CUDAContext.h>
#endif

namespace ddplab {

#if DDPLAB_CUDA_BUILD
namespace {

// cuBLAS's setter and getter, from the cuBLAS that LibTorch loaded (ddplab links LibTorch,
// not cuBLAS itself, so the handle and the functions come from the same library).
using SetTarget = decltype(&cublasSetSmCountTarget);
using GetTarget = decltype(&cublasGetSmCountTarget);

struct Functions {
  SetTarget set = nullptr;
  GetTarget get = nullptr;
};

absl::StatusOr<Functions> Resolve() {
  static const Functions f{reinterpret_cast<SetTarget>(dlsym(RTLD_DEFAULT, "cublasSetSmCountTarget")),
                           reinterpret_cast<GetTarget>(dlsym(RTLD_DEFAULT, "cublasGetSmCountTarget"))};
  if (f.set == nullptr || f.get == nullptr) {
    return absl::FailedPreconditionError(
        "the cuBLAS that LibTorch loaded has no cublasSetSmCountTarget (cuBLAS 11.3 and later have it)");
  }
  return f;
}

}  // namespace

absl::StatusOr<int> CurrentDeviceMultiprocessors() {
  return at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

absl::Status SetMatmulMultiprocessors(int multiprocessors) {
  absl::StatusOr<Functions> f = Resolve();
  if (!f.ok()) return f.status();
  if (cublasStatus_t s = f->set(at::cuda::getCurrentCUDABlasHandle(), multiprocessors);
      s != CUBLAS_STATUS_SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrCat("cublasSetSmCountTarget(", multiprocessors, ") failed: cuBLAS status ", static_cast<int>(s)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> MatmulMultiprocessors() {
  absl::StatusOr<Functions> f = Resolve();
  if (!f.ok()) return f.status();
  int target = 0;
  if (cublasStatus_t s = f->get(at::cuda::getCurrentCUDABlasHandle(), &target); s != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasGetSmCountTarget failed: cuBLAS status ", static_cast<int>(s)));
  }
  return target;
}

#else

absl::StatusOr<int> CurrentDeviceMultiprocessors() {
  return absl::FailedPreconditionError("this build has no CUDA");
}
absl::Status SetMatmulMultiprocessors(int) { return absl::FailedPreconditionError("this build has no CUDA"); }
absl::StatusOr<int> MatmulMultiprocessors() { return absl::FailedPreconditionError("this build has no CUDA"); }

#endif

}  // namespace ddplab
