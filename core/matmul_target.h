// How many multiprocessors cuBLAS plans a thread's matrix products for. Where other
// kernels (NCCL's, one block per channel) hold some multiprocessors while a product runs,
// a product planned for all of them needs one more wave of blocks than planned for the
// rest; cuBLAS's SM count target plans it for fewer.
#ifndef DDPLAB_CORE_MATMUL_TARGET_H_
#define DDPLAB_CORE_MATMUL_TARGET_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddplab {

// The current GPU's multiprocessors. An error on a build without CUDA.
absl::StatusOr<int> CurrentDeviceMultiprocessors();

// Sets the target on the calling thread's cuBLAS handle for the current GPU: LibTorch
// keeps one handle per thread and GPU, so this applies to the products that thread runs
// from then on (autograd runs a GPU's backward on a thread of its own). 0: all of the
// GPU's multiprocessors. An error on a build without CUDA or where LibTorch's cuBLAS has
// no SM count target.
absl::Status SetMatmulMultiprocessors(int multiprocessors);

// The calling thread's target for the current GPU (0: all), as cuBLAS reports it.
absl::StatusOr<int> MatmulMultiprocessors();

}  // namespace ddplab

#endif  // DDPLAB_CORE_MATMUL_TARGET_H_
