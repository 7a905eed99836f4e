// A bucket on the wire, as fp8's hook sends it (fp8.cc): W shards of whole blocks, one per
// rank, each travelling as its blocks' float32 scales then their codes. The three steps
// of the hook that touch every value, each one pass over the bucket, as ATen's operations
// (any device) or, on a GPU of a CUDA build, as kernels of our own (kernels.h) that give
// the same bits:
//
//   ddplab::fp8::Layout layout = ddplab::fp8::LayoutOf(numel, world, 128);
//   at::Tensor parts = QuantizeParts(values, &residual, layout, format, kernels);  // [W, part]
//   ... all-to-all: rank r gets every rank's part r ...
//   at::Tensor mine = SumParts(received, layout, format, /*to_bf16=*/false, kernels);
//   ... all-gather ...
//   DequantizeParts(gathered, layout, format, kernels, bucket);              // float32
#ifndef DDPLAB_PLUGINS_FP8_WIRE_H_
#define DDPLAB_PLUGINS_FP8_WIRE_H_

#include <cstdint>

#include <ATen/ATen.h>

#include "plugins/fp8/codec.h"

namespace ddplab::fp8 {

struct Layout {
  int64_t numel = 0;             // the bucket's values
  int world = 1;                 // shards, one per rank
  int64_t block = 128;           // values per scale
  int64_t blocks_per_shard = 0;  // at least 1
  int64_t shard() const { return blocks_per_shard * block; }
  int64_t padded() const { return shard() * world; }
  int64_t part_bytes() const { return 4 * blocks_per_shard + shard(); }  // scales, then codes
};
Layout LayoutOf(int64_t numel, int world, int64_t block);

// Whether this build has the kernels (a CUDA build) and `t` is where they run.
bool KernelsRun(const at::Tensor& t);

// `values` (float32, layout.padded(), zeros after the bucket's values) quantized in
// blocks, as [W, part_bytes] uint8: row r is shard r. With `residual` defined (error
// feedback), it is added to `values` first and becomes what quantizing lost:
// (values + residual) - dequantized, each rounded once in float32.
at::Tensor QuantizeParts(const at::Tensor& values, at::Tensor* residual, const Layout& layout, Format format,
                         bool kernels);

// Every rank's part of one shard ([W, part_bytes], rank order) dequantized in float64,
// summed in rank order, divided by W and rounded to float32; that mean quantized again as
// one part ([1, part_bytes] uint8) or, `to_bf16`, rounded to bfloat16 ([shard]).
at::Tensor SumParts(const at::Tensor& received, const Layout& layout, Format format, bool to_bf16, bool kernels);

// Parts ([n, part_bytes]) dequantized in float32: [n * shard], or its first out.numel()
// values into `out` (say, the bucket).
at::Tensor DequantizeParts(const at::Tensor& parts, const Layout& layout, Format format, bool kernels);
void DequantizeParts(const at::Tensor& parts, const Layout& layout, Format format, bool kernels, at::Tensor& out);

}  // namespace ddplab::fp8

#endif  // DDPLAB_PLUGINS_FP8_WIRE_H_
