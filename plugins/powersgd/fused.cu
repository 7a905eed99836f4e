// PowerSGD's fused passes (fused.h). Every kernel is bound by reading or writing the
// gradient matrix, so each reads it once, four elements at a time (16 bytes of float32, 8
// of bfloat16) where the columns divide by four and the pointers are aligned, one at a
// time otherwise; the thin matrices P and Q are read through the read-only cache.
#include "plugins/powersgd/fused.h"

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ddplab::powersgd::fused {
namespace {

using bf16 = __nv_bfloat16;

// Loads W consecutive elements as float32.
template <int W>
__device__ __forceinline__ void Load(const float* x, float (&v)[W]) {
  if constexpr (W == 4) {
    const float4 a = *reinterpret_cast<const float4*>(x);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  } else {
    for (int i = 0; i < W; ++i) v[i] = x[i];
  }
}

template <int W>
__device__ __forceinline__ void Load(const bf16* x, float (&v)[W]) {
  if constexpr (W == 4) {
    const uint2 a = *reinterpret_cast<const uint2*>(x);
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&a.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&a.y));
    v[0] = lo.x, v[1] = lo.y, v[2] = hi.x, v[3] = hi.y;
  } else {
    for (int i = 0; i < W; ++i) v[i] = __bfloat162float(x[i]);
  }
}

// Stores W elements; `v` becomes what was stored (rounded to bfloat16 for bf16).
template <int W>
__device__ __forceinline__ void Store(float* x, float (&v)[W]) {
  if constexpr (W == 4) {
    *reinterpret_cast<float4*>(x) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    for (int i = 0; i < W; ++i) x[i] = v[i];
  }
}

template <int W>
__device__ __forceinline__ void Store(bf16* x, float (&v)[W]) {
  if constexpr (W == 4) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v[2], v[3]);
    uint2 a;
    a.x = *reinterpret_cast<const unsigned int*>(&lo);
    a.y = *reinterpret_cast<const unsigned int*>(&hi);
    *reinterpret_cast<uint2*>(x) = a;
    const float2 l = __bfloat1622float2(lo), h = __bfloat1622float2(hi);
    v[0] = l.x, v[1] = l.y, v[2] = h.x, v[3] = h.y;
  } else {
    for (int i = 0; i < W; ++i) {
      x[i] = __float2bfloat16_rn(v[i]);
      v[i] = __bfloat162float(x[i]);
    }
  }
}

// The W * R consecutive floats of Q's rows j .. j + W - 1 ([cols, R] row-major), as R
// 16-byte loads where W is four (the caller has checked Q's alignment).
template <int W, int R>
__device__ __forceinline__ void LoadQ(const float* q, int64_t j, float (&v)[W * R]) {
  const float* rows = q + j * R;
  if constexpr (W == 4) {
#pragma unroll
    for (int t = 0; t < R; ++t) {
      const float4 a = __ldg(reinterpret_cast<const float4*>(rows) + t);
      v[4 * t] = a.x, v[4 * t + 1] = a.y, v[4 * t + 2] = a.z, v[4 * t + 3] = a.w;
    }
  } else {
#pragma unroll
    for (int t = 0; t < W * R; ++t) v[t] = __ldg(rows + t);
  }
}

// A launch's matrices: blockIdx.z picks one. Passed by value (kernel parameters).
constexpr int kLaunchBatch = 32;
template <typename P>
struct Pointers {
  P at[kLaunchBatch];
};

// ---- M = G + E and P = M Q: one warp per row ----

constexpr int kRowsPerBlock = 8;  // warps per block

template <typename T, int R, int W>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    AddAndProjectKernel(Pointers<const float*> gs, Pointers<const void*> es, Pointers<void*> ms,
                        const float* __restrict__ qs, float* __restrict__ ps, int64_t rows, int64_t cols) {
  const int z = blockIdx.z;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // the whole warp: a warp is one row
  const float* g_row = gs.at[z] + row * cols;
  const T* e = static_cast<const T*>(es.at[z]);
  const T* e_row = e != nullptr ? e + row * cols : nullptr;
  T* m_row = static_cast<T*>(ms.at[z]) + row * cols;  // may be e_row: each element is read before it is written
  const float* q = qs + z * cols * R;
  float acc[R] = {};
#pragma unroll 4
  for (int64_t j = static_cast<int64_t>(lane) * W; j < cols; j += 32 * W) {
    float v[W];
    Load<W>(g_row + j, v);
    if (e_row != nullptr) {
      float ev[W];
      Load<W>(e_row + j, ev);
#pragma unroll
      for (int i = 0; i < W; ++i) v[i] += ev[i];
    }
    Store<W>(m_row + j, v);
    float qv[W * R];
    LoadQ<W, R>(q, j, qv);
#pragma unroll
    for (int i = 0; i < W; ++i) {
#pragma unroll
      for (int k = 0; k < R; ++k) acc[k] += v[i] * qv[i * R + k];
    }
  }
#pragma unroll
  for (int k = 0; k < R; ++k) {
    for (int offset = 16; offset > 0; offset /= 2) acc[k] += __shfl_down_sync(0xffffffffu, acc[k], offset);
  }
  if (lane == 0) {
    float* p = ps + z * rows * R;
#pragma unroll
    for (int k = 0; k < R; ++k) p[row * R + k] = acc[k];
  }
}

// ---- Q = M^T P: blocks of 32 x 8 threads over 32 * W columns and a chunk of rows ----
// Each block sums its rows' products in shared memory and writes one partial Q for its
// columns; the partials of the row chunks are then summed in a fixed order (no atomics:
// the same Q from the same M every time).

constexpr int kColumnThreads = 32;
constexpr int kRowThreads = 8;

// Rows per chunk: enough that the partials (R floats per column and chunk) stay a few
// percent of M's bytes.
inline int64_t RowsPerChunk(int r) { return 32 * static_cast<int64_t>(r); }

inline int64_t Chunks(int64_t rows, int r) { return (rows + RowsPerChunk(r) - 1) / RowsPerChunk(r); }

// Writes matrix z's partials at out + z * out_stride: [chunks, cols, R].
template <typename T, int R, int W>
__global__ void __launch_bounds__(kColumnThreads * kRowThreads)
    ProjectTransposedKernel(Pointers<const void*> ms, const float* __restrict__ ps, float* __restrict__ out,
                            int64_t out_stride, int64_t rows, int64_t cols, int64_t rows_per_chunk) {
  __shared__ float partial[kRowThreads][kColumnThreads * W * R];
  const int z = blockIdx.z;
  const T* m = static_cast<const T*>(ms.at[z]);
  const float* p = ps + z * rows * R;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t j = (static_cast<int64_t>(blockIdx.x) * kColumnThreads + tx) * W;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  float acc[W][R] = {};
  if (j < cols) {
#pragma unroll 4
    for (int64_t i = begin + ty; i < end; i += kRowThreads) {
      float v[W];
      Load<W>(m + i * cols + j, v);
#pragma unroll
      for (int k = 0; k < R; ++k) {
        const float pk = __ldg(p + i * R + k);
#pragma unroll
        for (int w = 0; w < W; ++w) acc[w][k] += v[w] * pk;
      }
    }
  }
#pragma unroll
  for (int w = 0; w < W; ++w) {
#pragma unroll
    for (int k = 0; k < R; ++k) partial[ty][(tx * W + w) * R + k] = acc[w][k];
  }
  __syncthreads();
  // Sum over the row threads: thread (tx, ty) takes every kRowThreads-th of the block's
  // W * R * kColumnThreads outputs, so the stores of a warp are consecutive.
  float* chunk_out = out + z * out_stride + static_cast<int64_t>(blockIdx.y) * cols * R;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kColumnThreads * W * R;
  for (int x = ty * kColumnThreads + tx; x < kColumnThreads * W * R; x += kColumnThreads * kRowThreads) {
    if (first + x >= cols * R) break;
    float sum = 0;
#pragma unroll
    for (int y = 0; y < kRowThreads; ++y) sum += partial[y][x];
    chunk_out[first + x] = sum;
  }
}

// q[z] = the sum of matrix z's `chunks` partials of n floats each.
__global__ void SumChunksKernel(const float* __restrict__ scratch, float* __restrict__ q, int64_t chunks,
                                int64_t n) {
  const int z = blockIdx.z;
  const float* in = scratch + z * chunks * n;
  for (int64_t x = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; x < n;
       x += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0;
    for (int64_t c = 0; c < chunks; ++c) sum += in[c * n + x];
    q[z * n + x] = sum;
  }
}

// ---- out = P Q^T, M -= P Q^T: one row per blockIdx.y, W columns per thread ----

constexpr int kExpandThreads = 256;

template <typename T, int R, int W>
__global__ void __launch_bounds__(kExpandThreads)
    ExpandAndSubtractKernel(Pointers<void*> ms, const float* __restrict__ ps, const float* __restrict__ qs,
                            Pointers<float*> outs, int64_t first_row, int64_t rows, int64_t cols) {
  const int z = blockIdx.z;
  const int64_t row = first_row + blockIdx.y;
  const int64_t j = (static_cast<int64_t>(blockIdx.x) * kExpandThreads + threadIdx.x) * W;
  if (j >= cols) return;
  const float* p = ps + z * rows * R;
  const float* q = qs + z * cols * R;
  float pk[R];
#pragma unroll
  for (int k = 0; k < R; ++k) pk[k] = __ldg(p + row * R + k);
  float qv[W * R];
  LoadQ<W, R>(q, j, qv);
  float o[W];
#pragma unroll
  for (int w = 0; w < W; ++w) {
    float sum = 0;
#pragma unroll
    for (int k = 0; k < R; ++k) sum += pk[k] * qv[w * R + k];
    o[w] = sum;
  }
  float stored[W];
#pragma unroll
  for (int w = 0; w < W; ++w) stored[w] = o[w];
  Store<W>(outs.at[z] + row * cols + j, stored);
  if (ms.at[z] != nullptr) {
    T* m = static_cast<T*>(ms.at[z]) + row * cols + j;
    float v[W];
    Load<W>(m, v);
#pragma unroll
    for (int w = 0; w < W; ++w) v[w] -= o[w];
    Store<W>(m, v);
  }
}

// ---- dispatch ----

constexpr int64_t kMaxGridY = 65535;

bool Aligned(const void* x, size_t bytes) { return x == nullptr || reinterpret_cast<uintptr_t>(x) % bytes == 0; }

size_t StateBytes(State state) { return state == State::kBFloat16 ? 2 : 4; }

// Four at a time where every row of every matrix starts aligned: `floats` and `states`
// are arrays of `batch` pointers (or null), `q` Q's batch.
bool Vectorized(int64_t batch, int64_t cols, State state, std::initializer_list<const void* const*> floats,
                std::initializer_list<const void* const*> states, const float* q) {
  if (cols % 4 != 0 || !Aligned(q, 16)) return false;
  for (int64_t i = 0; i < batch; ++i) {
    for (const void* const* x : floats) {
      if (x != nullptr && !Aligned(x[i], 16)) return false;
    }
    for (const void* const* x : states) {
      if (x != nullptr && !Aligned(x[i], 4 * StateBytes(state))) return false;
    }
  }
  return true;
}

// Calls f.template operator()<T, R, W>() for the state's dtype, the rank and the width.
template <typename F>
cudaError_t Dispatch(State state, int r, bool vectorized, F&& f) {
  auto with_rank = [&](auto type_tag, auto width) -> cudaError_t {
    using T = decltype(type_tag);
    constexpr int W = decltype(width)::value;
    switch (r) {
      case 1: return f.template operator()<T, 1, W>();
      case 2: return f.template operator()<T, 2, W>();
      case 3: return f.template operator()<T, 3, W>();
      case 4: return f.template operator()<T, 4, W>();
      case 5: return f.template operator()<T, 5, W>();
      case 6: return f.template operator()<T, 6, W>();
      case 7: return f.template operator()<T, 7, W>();
      case 8: return f.template operator()<T, 8, W>();
      default: return cudaErrorInvalidValue;
    }
  };
  using Four = std::integral_constant<int, 4>;
  using One = std::integral_constant<int, 1>;
  if (state == State::kBFloat16) {
    return vectorized ? with_rank(bf16{}, Four{}) : with_rank(bf16{}, One{});
  }
  return vectorized ? with_rank(float{}, Four{}) : with_rank(float{}, One{});
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Pointers [first, first + count) of `x` (all null where x is).
template <typename P, typename Q>
Pointers<P> Slice(Q const* x, int64_t first, int64_t count) {
  Pointers<P> out{};
  for (int64_t i = 0; i < count; ++i) out.at[i] = x != nullptr ? static_cast<P>(x[first + i]) : nullptr;
  return out;
}

// Runs launch(first, count) over the batch, kLaunchBatch matrices at a time.
template <typename L>
cudaError_t ForEachLaunch(int64_t batch, L&& launch) {
  for (int64_t first = 0; first < batch; first += kLaunchBatch) {
    launch(first, batch - first < kLaunchBatch ? batch - first : kLaunchBatch);
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

}  // namespace

bool Supports(int64_t rows, int r) { return r >= 1 && r <= kMaxRank && Chunks(rows, r) <= kMaxGridY; }

cudaError_t AddAndProject(int64_t batch, const float* const* g, const void* const* e, void* const* m, State state,
                          const float* q, float* p, int64_t rows, int64_t cols, int r, cudaStream_t stream) {
  if (batch == 0 || rows == 0 || cols == 0) return cudaSuccess;
  if (!Supports(rows, r)) return cudaErrorInvalidValue;
  const bool vectorized =
      Vectorized(batch, cols, state, {reinterpret_cast<const void* const*>(g)}, {e, const_cast<const void* const*>(m)}, q);
  return Dispatch(state, r, vectorized, [&]<typename T, int R, int W>() {
    return ForEachLaunch(batch, [&](int64_t first, int64_t count) {
      const dim3 grid(static_cast<unsigned>(CeilDiv(rows, kRowsPerBlock)), 1, static_cast<unsigned>(count));
      AddAndProjectKernel<T, R, W><<<grid, 32 * kRowsPerBlock, 0, stream>>>(
          Slice<const float*>(g, first, count), Slice<const void*>(e, first, count), Slice<void*>(m, first, count),
          q + first * cols * r, p + first * rows * r, rows, cols);
    });
  });
}

size_t ProjectTransposedScratch(int64_t batch, int64_t rows, int64_t cols, int r) {
  const int64_t chunks = Chunks(rows, r);
  return chunks > 1 ? static_cast<size_t>(batch * chunks * cols * r) : 0;
}

cudaError_t ProjectTransposed(int64_t batch, const void* const* m, State state, const float* p, float* q,
                              float* scratch, int64_t rows, int64_t cols, int r, cudaStream_t stream) {
  if (batch == 0 || cols == 0) return cudaSuccess;
  if (rows == 0) return cudaMemsetAsync(q, 0, sizeof(float) * batch * cols * r, stream);
  if (!Supports(rows, r)) return cudaErrorInvalidValue;
  const bool vectorized = Vectorized(batch, cols, state, {}, {m}, nullptr);
  const int64_t chunks = Chunks(rows, r);
  if (chunks > 1 && scratch == nullptr) return cudaErrorInvalidValue;
  return Dispatch(state, r, vectorized, [&]<typename T, int R, int W>() {
    const int64_t n = cols * r;
    return ForEachLaunch(batch, [&](int64_t first, int64_t count) {
      const dim3 grid(static_cast<unsigned>(CeilDiv(cols, kColumnThreads * W)), static_cast<unsigned>(chunks),
                      static_cast<unsigned>(count));
      float* out = chunks > 1 ? scratch + first * chunks * n : q + first * n;
      ProjectTransposedKernel<T, R, W><<<grid, dim3(kColumnThreads, kRowThreads), 0, stream>>>(
          Slice<const void*>(m, first, count), p + first * rows * r, out, chunks > 1 ? chunks * n : n, rows, cols,
          RowsPerChunk(r));
      if (chunks > 1) {
        const int64_t blocks = CeilDiv(n, 256) < 1024 ? CeilDiv(n, 256) : 1024;
        SumChunksKernel<<<dim3(static_cast<unsigned>(blocks), 1, static_cast<unsigned>(count)), 256, 0, stream>>>(
            out, q + first * n, chunks, n);
      }
    });
  });
}

cudaError_t ExpandAndSubtract(int64_t batch, void* const* m, State state, const float* p, const float* q,
                              float* const* out, int64_t rows, int64_t cols, int r, cudaStream_t stream) {
  if (batch == 0 || rows == 0 || cols == 0) return cudaSuccess;
  if (!Supports(rows, r)) return cudaErrorInvalidValue;
  const bool vectorized = Vectorized(batch, cols, state, {reinterpret_cast<const void* const*>(out)},
                                     {const_cast<const void* const*>(m)}, q);
  return Dispatch(state, r, vectorized, [&]<typename T, int R, int W>() {
    return ForEachLaunch(batch, [&](int64_t first, int64_t count) {
      // A row per blockIdx.y, so at most kMaxGridY rows per launch.
      for (int64_t first_row = 0; first_row < rows; first_row += kMaxGridY) {
        const int64_t slab = rows - first_row < kMaxGridY ? rows - first_row : kMaxGridY;
        const dim3 grid(static_cast<unsigned>(CeilDiv(cols, kExpandThreads * W)), static_cast<unsigned>(slab),
                        static_cast<unsigned>(count));
        ExpandAndSubtractKernel<T, R, W><<<grid, kExpandThreads, 0, stream>>>(
            Slice<void*>(m, first, count), p + first * rows * r, q + first * cols * r, Slice<float*>(out, first, count),
            first_row, rows, cols);
      }
    });
  });
}

}  // namespace ddplab::powersgd::fused
