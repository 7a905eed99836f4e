// PowerSGD's small steps between the passes (fused.h): P's orthonormalization and the
// kept Q's zero columns, each one launch per shape where ATen's ops took some ten. One
// block per matrix: the thin matrices are small, and the work is bound by launches.
#include <cstdint>

#include <cuda_runtime.h>

#include "plugins/powersgd/fused.h"

namespace ddplab::powersgd::fused {
namespace {

// Sums each of the R values over the block (blockDim.x a multiple of 32, at most 1024);
// every thread gets the sums. `shared` holds 32 * R floats.
template <int R>
__device__ __forceinline__ void BlockSum(float (&v)[R], float* shared) {
#pragma unroll
  for (int t = 0; t < R; ++t) {
    for (int offset = 16; offset > 0; offset /= 2) v[t] += __shfl_xor_sync(0xffffffffu, v[t], offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // `shared` is free: every thread is past its last read of it
  if (lane == 0) {
#pragma unroll
    for (int t = 0; t < R; ++t) shared[warp * R + t] = v[t];
  }
  __syncthreads();
#pragma unroll
  for (int t = 0; t < R; ++t) {
    float sum = 0;
    for (int w = 0; w < warps; ++w) sum += shared[w * R + t];
    v[t] = sum;
  }
}

// One block per matrix P ([rows, R] row-major): `passes` passes of modified Gram-Schmidt
// over its columns, in place. In each pass, column j's part orthogonal to the columns
// before it is normalized where its length exceeds `dependent` times column j's length
// at the start of the pass, and zeroed where it does not (powersgd.cc's GramSchmidt).
template <int R>
__global__ void OrthonormalizeKernel(float* p_batch, int64_t rows, int passes, float dependent) {
  __shared__ float shared[32 * R];
  float* p = p_batch + static_cast<int64_t>(blockIdx.x) * rows * R;
  for (int pass = 0; pass < passes; ++pass) {
    float threshold[R];
#pragma unroll
    for (int t = 0; t < R; ++t) threshold[t] = 0;
    for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
#pragma unroll
      for (int t = 0; t < R; ++t) threshold[t] += p[i * R + t] * p[i * R + t];
    }
    BlockSum<R>(threshold, shared);
#pragma unroll
    for (int t = 0; t < R; ++t) threshold[t] = sqrtf(threshold[t]) * dependent;
#pragma unroll
    for (int j = 0; j < R; ++j) {
      float norm[1] = {0};
      for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) norm[0] += p[i * R + j] * p[i * R + j];
      BlockSum<1>(norm, shared);
      const float length = sqrtf(norm[0]);
      const float scale = length > threshold[j] ? 1.0f / length : 0.0f;
      // Column j scaled, and its projections on the later columns summed (the scaled
      // column's dot products); each thread scales the rows it sums.
      float dot[R];
#pragma unroll
      for (int t = 0; t < R; ++t) dot[t] = 0;
      for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
        const float c = p[i * R + j] * scale;
        p[i * R + j] = c;
#pragma unroll
        for (int t = j + 1; t < R; ++t) dot[t] += c * p[i * R + t];
      }
      if (j + 1 < R) {
        BlockSum<R>(dot, shared);
        for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
          const float c = p[i * R + j];
#pragma unroll
          for (int t = j + 1; t < R; ++t) p[i * R + t] -= c * dot[t];
        }
      }
      __syncthreads();  // column j and the later ones are final for this j before any reads
    }
  }
}

// One block per matrix: next = q with each all-zero column replaced by fill's ([cols, R]
// row-major each).
template <int R>
__global__ void ReplaceZeroColumnsKernel(const float* q_batch, const float* fill_batch, float* next_batch,
                                         int64_t cols) {
  __shared__ float shared[32 * R];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols * R;
  const float *q = q_batch + base, *fill = fill_batch + base;
  float* next = next_batch + base;
  float sum[R];
#pragma unroll
  for (int t = 0; t < R; ++t) sum[t] = 0;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
#pragma unroll
    for (int t = 0; t < R; ++t) sum[t] += fabsf(q[i * R + t]);
  }
  BlockSum<R>(sum, shared);
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
#pragma unroll
    for (int t = 0; t < R; ++t) next[i * R + t] = sum[t] == 0 ? fill[i * R + t] : q[i * R + t];
  }
}

// Calls f.template operator()<R>() for rank r (1 to kMaxRank).
template <typename F>
cudaError_t WithRank(int r, F&& f) {
  switch (r) {
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 3: return f.template operator()<3>();
    case 4: return f.template operator()<4>();
    case 5: return f.template operator()<5>();
    case 6: return f.template operator()<6>();
    case 7: return f.template operator()<7>();
    case 8: return f.template operator()<8>();
    default: return cudaErrorInvalidValue;
  }
}

// Threads per block for a pass over `n` rows of a thin matrix: enough to cover them in a
// few iterations, 128 to 512.
unsigned ThinThreads(int64_t n) { return n >= 2048 ? 512 : n >= 512 ? 256 : 128; }

constexpr int64_t kMaxGridX = 2147483647;

}  // namespace

cudaError_t Orthonormalize(int64_t batch, float* p, int64_t rows, int r, int passes, float dependent,
                           cudaStream_t stream) {
  if (batch < 0 || batch > kMaxGridX || rows < 1 || passes < 1) return cudaErrorInvalidValue;
  if (batch == 0) return cudaSuccess;
  return WithRank(r, [&]<int R>() {
    OrthonormalizeKernel<R><<<static_cast<unsigned>(batch), ThinThreads(rows), 0, stream>>>(p, rows, passes, dependent);
    return cudaGetLastError();
  });
}

cudaError_t ReplaceZeroColumns(int64_t batch, const float* q, const float* fill, float* next, int64_t cols, int r,
                               cudaStream_t stream) {
  if (batch < 0 || batch > kMaxGridX || cols < 1) return cudaErrorInvalidValue;
  if (batch == 0) return cudaSuccess;
  return WithRank(r, [&]<int R>() {
    ReplaceZeroColumnsKernel<R><<<static_cast<unsigned>(batch), ThinThreads(cols), 0, stream>>>(q, fill, next, cols);
    return cudaGetLastError();
  });
}

}  // namespace ddplab::powersgd::fused
