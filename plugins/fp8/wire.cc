#include "plugins/fp8/wire.h"

#include <algorithm>

#if defined(DDPLAB_CUDA)
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include "plugins/fp8/kernels.h"
#endif

namespace ddplab::fp8 {
namespace {

// Rows of `parts` ([n, part_bytes]), each a shard's scales then its codes, as the
// Quantized of the n shards in row order.
Quantized Unpack(const at::Tensor& parts, const Layout& layout) {
  const int64_t scale_bytes = 4 * layout.blocks_per_shard;
  return {parts.narrow(1, scale_bytes, layout.shard()).contiguous().view(-1),
          parts.narrow(1, 0, scale_bytes).contiguous().view(at::kFloat).view(-1)};
}

// `q` (n shards, in order) as rows of scales then codes: [n, part_bytes].
at::Tensor Pack(const Quantized& q, const Layout& layout) {
  const int64_t n = q.bytes.numel() / layout.shard(), scale_bytes = 4 * layout.blocks_per_shard;
  at::Tensor parts = at::empty({n, layout.part_bytes()}, q.bytes.options());
  parts.narrow(1, 0, scale_bytes).copy_(q.scales.view({n, layout.blocks_per_shard}).view(at::kByte));
  parts.narrow(1, scale_bytes, layout.shard()).copy_(q.bytes.view({n, layout.shard()}));
  return parts;
}

#if defined(DDPLAB_CUDA)
kernels::FormatParams Params(Format format) {
  const FormatSpec& spec = SpecOf(format);
  return {spec.mantissa_bits, spec.min_exponent, spec.largest, format == Format::kE5M2};
}

kernels::Shape ShapeOf(const Layout& layout) {
  return {layout.world, layout.shard(), layout.block, layout.blocks_per_shard, layout.part_bytes()};
}

cudaStream_t Stream(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
#endif

}  // namespace

Layout LayoutOf(int64_t numel, int world, int64_t block) {
  Layout layout;
  layout.numel = numel;
  layout.world = world;
  layout.block = block;
  layout.blocks_per_shard = std::max<int64_t>(1, (numel + world * block - 1) / (world * block));
  return layout;
}

bool KernelsRun(const at::Tensor& t) {
#if defined(DDPLAB_CUDA)
  return t.is_cuda();
#else
  (void)t;
  return false;
#endif
}

at::Tensor QuantizeParts(const at::Tensor& values, at::Tensor* residual, const Layout& layout, Format format,
                         bool kernels) {
  const bool feedback = residual != nullptr && residual->defined();
#if defined(DDPLAB_CUDA)
  if (kernels) {
    at::Tensor parts = at::empty({layout.world, layout.part_bytes()}, values.options().dtype(at::kByte));
    C10_CUDA_CHECK(kernels::Quantize(values.data_ptr<float>(), feedback ? residual->data_ptr<float>() : nullptr,
                                     ShapeOf(layout), Params(format), parts.data_ptr<uint8_t>(), Stream(values)));
    return parts;
  }
#endif
  (void)kernels;
  at::Tensor sent = feedback ? values.add(*residual) : values;
  const Quantized q = Quantize(sent, layout.block, format);
  if (feedback) *residual = sent.sub(Dequantize(q.bytes, q.scales, layout.block, format, at::kFloat));
  return Pack(q, layout);
}

at::Tensor SumParts(const at::Tensor& received, const Layout& layout, Format format, bool to_bf16, bool kernels) {
#if defined(DDPLAB_CUDA)
  if (kernels) {
    at::Tensor out = to_bf16 ? at::empty({layout.shard()}, received.options().dtype(at::kBFloat16))
                             : at::empty({1, layout.part_bytes()}, received.options());
    C10_CUDA_CHECK(kernels::SumShards(received.data_ptr<uint8_t>(), ShapeOf(layout), Params(format),
                                      to_bf16 ? nullptr : out.data_ptr<uint8_t>(),
                                      to_bf16 ? out.data_ptr() : nullptr, Stream(received)));
    return out;
  }
#endif
  (void)kernels;
  const Quantized from = Unpack(received, layout);
  const at::Tensor exact =
      Dequantize(from.bytes, from.scales, layout.block, format, at::kDouble).view({layout.world, layout.shard()});
  at::Tensor sum = exact[0].clone();
  for (int r = 1; r < layout.world; ++r) sum.add_(exact[r]);
  const at::Tensor mean = DivideBy(sum, layout.world).to(at::kFloat);
  if (to_bf16) return mean.to(at::kBFloat16);
  return Pack(Quantize(mean, layout.block, format), layout);
}

void DequantizeParts(const at::Tensor& parts, const Layout& layout, Format format, bool kernels, at::Tensor& out) {
#if defined(DDPLAB_CUDA)
  if (kernels && out.is_contiguous() && out.scalar_type() == at::kFloat) {
    kernels::Shape shape = ShapeOf(layout);
    shape.shards = static_cast<int>(parts.size(0));
    C10_CUDA_CHECK(kernels::Dequantize(parts.data_ptr<uint8_t>(), shape, Params(format), out.data_ptr<float>(),
                                       out.numel(), Stream(parts)));
    return;
  }
#endif
  (void)kernels;
  const Quantized q = Unpack(parts, layout);
  out.copy_(Dequantize(q.bytes, q.scales, layout.block, format, at::kFloat).narrow(0, 0, out.numel()));
}

at::Tensor DequantizeParts(const at::Tensor& parts, const Layout& layout, Format format, bool kernels) {
  at::Tensor out = at::empty({parts.size(0) * layout.shard()}, parts.options().dtype(at::kFloat));
  DequantizeParts(parts, layout, format, kernels, out);
  return out;
}

}  // namespace ddplab::fp8
