// PowerSGD's passes over one gradient matrix as three CUDA kernels, each reading the
// matrix once, where ATen needs five passes and a matrix of its own (see powersgd.cc):
//
//   AddAndProject:     M = G + E, written over E (or into a new matrix), and P = M Q
//   ProjectTransposed: Q = M^T P
//   ExpandAndSubtract: out = P Q^T, and E = M - P Q^T written over M
//
// M and E are float32 or bfloat16 (the state's dtype); G, P, Q and out are float32. In
// bfloat16, M is rounded once (G + E computed in float32) and P is computed from the
// rounded M, so that E = M - P Q^T is what the approximation left out of the M it saw.
// Plain C++ with raw pointers: the kernels are compiled by nvcc without LibTorch's
// headers; powersgd.cc checks shapes and dtypes and passes the pointers. Matrices of one
// shape go to each kernel together (one launch for up to 32 of them).
#ifndef DDPLAB_PLUGINS_POWERSGD_FUSED_H_
#define DDPLAB_PLUGINS_POWERSGD_FUSED_H_

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace ddplab::powersgd::fused {

enum class State { kFloat32, kBFloat16 };

// The ranks the kernels are built for: 1 to kMaxRank.
inline constexpr int kMaxRank = 8;

// Whether the kernels take a matrix of `rows` rows at rank r (1 to kMaxRank, and rows
// below some 2^21 * r).
bool Supports(int64_t rows, int r);

// Each function works on a batch of `batch` matrices of one shape, given as host arrays
// of `batch` device pointers (element i of each array is matrix i's), all row-major and
// contiguous: G, M, E and out [rows, cols]; P and Q are contiguous batches, P
// [batch, rows, r] and Q [batch, cols, r]. Each returns its launches' error.

// M = G + E, P = M Q. `e` may be null (no errors: E = 0), and so may any of its
// elements; e[i] may equal m[i] (M written over E).
cudaError_t AddAndProject(int64_t batch, const float* const* g, const void* const* e, void* const* m, State state,
                          const float* q, float* p, int64_t rows, int64_t cols, int r, cudaStream_t stream);

// Floats of scratch memory ProjectTransposed needs for this batch (0: none).
size_t ProjectTransposedScratch(int64_t batch, int64_t rows, int64_t cols, int r);

// Q = M^T P; `scratch` holds ProjectTransposedScratch(batch, rows, cols, r) floats.
cudaError_t ProjectTransposed(int64_t batch, const void* const* m, State state, const float* p, float* q,
                              float* scratch, int64_t rows, int64_t cols, int r, cudaStream_t stream);

// out = P Q^T; and where `m` and m[i] are not null, m[i] -= P Q^T (rounded to the state's
// dtype).
cudaError_t ExpandAndSubtract(int64_t batch, void* const* m, State state, const float* p, const float* q,
                              float* const* out, int64_t rows, int64_t cols, int r, cudaStream_t stream);

// Orthonormalizes the columns of each of `batch` matrices P ([batch, rows, r],
// contiguous), in place, one launch for the batch: `passes` passes of modified
// Gram-Schmidt; in each, column j's part orthogonal to the earlier columns is normalized
// where its length exceeds `dependent` times column j's length at the start of the pass,
// and zeroed where it does not (a dependent or zero column stays zero).
cudaError_t Orthonormalize(int64_t batch, float* p, int64_t rows, int r, int passes, float dependent,
                           cudaStream_t stream);

// next = q with each all-zero column of each matrix replaced by fill's; q, fill and next
// are [batch, cols, r], contiguous.
cudaError_t ReplaceZeroColumns(int64_t batch, const float* q, const float* fill, float* next, int64_t cols, int r,
                               cudaStream_t stream);

}  // namespace ddplab::powersgd::fused

#endif  // DDPLAB_PLUGINS_POWERSGD_FUSED_H_
