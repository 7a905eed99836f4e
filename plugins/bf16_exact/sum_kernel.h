// bf16_exact's passes on a GPU, each one kernel over a bucket's parameters:
// - Narrow: each gradient rounded into its place in the bfloat16 wire, counting on the
//   device the values that were not bfloat16 values (NaN aside), with no sync: the check
//   every step gets, a replay of a captured step too, for what ATen's cast costs alone;
// - SumInto: the ranks' bfloat16 gradients, gathered one rank after another, summed in
//   float32 in rank order, divided by the ranks and written where each parameter's mean
//   goes (its part of the bucket), reading each rank's bytes once and writing each mean
//   once. ATen's ops take four passes over the bucket for the same (a cast, the add, the
//   division, the copy into the bucket's parts).
//
//   std::vector<ddplab::bf16_exact::Segment> parts = {{out, offset, n}, ...};
//   ddplab::bf16_exact::SumInto(gathered, stride, world, parts.data(), parts.size(), stream);
//
// Plain C++ with raw pointers: compiled by nvcc without LibTorch's headers, in the CUDA
// build only (bf16_exact.cc calls it there).
#ifndef DDPLAB_PLUGINS_BF16_EXACT_SUM_KERNEL_H_
#define DDPLAB_PLUGINS_BF16_EXACT_SUM_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ddplab::bf16_exact {

// One parameter's part: its mean goes to out[0, n), from elements [offset, offset + n)
// of each rank's row of the gathered bfloat16 values.
struct Segment {
  float* out;
  int64_t offset;
  int64_t n;
};

// out = (sum over r in rank order of float(gathered[r * stride + offset + i])) / world,
// for each segment; over two ranks a/2 + b/2 (each halving exact), as NCCL's and Gloo's
// float32 averages compute it, so that a sum beyond float32's range does not overflow
// where theirs does not. `gathered` is bfloat16 (its bits as uint16_t), `segments` a host
// array of `count`. Returns the launches' error.
cudaError_t SumInto(const uint16_t* gathered, int64_t stride, int world, const Segment* segments, int count,
                    cudaStream_t stream);

// One gradient to narrow: n float32 values at `from`, into the wire at `offset`.
struct Source {
  const float* from;
  int64_t offset;
  int64_t n;
};

// wire[offset + i] = bfloat16(from[i]) (round to nearest even), for each source, and adds
// to *rounded (a device counter) the values that bfloat16 did not hold exactly, NaN not
// counted. Returns the launches' error.
cudaError_t Narrow(const Source* sources, int count, uint16_t* wire, int64_t* rounded, cudaStream_t stream);

}  // namespace ddplab::bf16_exact

#endif  // DDPLAB_PLUGINS_BF16_EXACT_SUM_KERNEL_H_
