#include "core/engine/copy_layout.h"

#include <memory>
#include <utility>

namespace ddplab {

void CopyLayout::Build(const std::vector<LayoutBucket>& buckets, std::shared_ptr<const BucketCodec> codec) {
  codec_ = codec ? std::move(codec) : std::make_shared<const BucketCodec>();
  flats_.clear();
  flats_.resize(buckets.size());
  for (size_t b = 0; b < buckets.size(); ++b) {
    Flat& flat = flats_[b];
    flat.def = buckets[b];
    // The model's gradients' options: its first parameter's dtype, on the bucket's device.
    const at::Tensor& first = params_[flat.def.params[0]];
    flat.buffer = codec_->Buffer(flat.def.numel, first.options().dtype(params_[0].scalar_type()));
    flat.unused.assign(flat.def.params.size(), false);
    flat.views = Parts(flat, flat.buffer);
    flat.packed = flat.views;
  }
}

std::vector<at::Tensor> CopyLayout::Parts(const Flat& flat, const at::Tensor& result) const {
  std::vector<at::Tensor> parts;
  for (size_t k = 0; k < flat.def.params.size(); ++k) {
    const at::Tensor& p = params_[flat.def.params[k]];
    parts.push_back(result.narrow(0, flat.def.offsets[k], p.numel()).view(p.sizes()));
  }
  return parts;
}

void CopyLayout::ZeroGrad() {
  for (at::Tensor& p : params_) p.mutable_grad() = at::Tensor();
}

void CopyLayout::Take(Flat& flat, size_t slot, const at::Tensor& grad) {
  flat.held.push_back(slot);
  flat.held_grads.push_back(grad);
  flat.held_bytes += grad.numel() * grad.element_size();
  // Into another dtype, at once (Note [A codec's bytes]).
  if (flat.buffer.scalar_type() != grad.scalar_type() || flat.held_bytes >= kMaxHeldBytes) Flush(flat);
}

void CopyLayout::Collect(size_t bucket, size_t slot) {
  Flat& flat = flats_[bucket];
  Take(flat, slot, params_[flat.def.params[slot]].grad());
}

void CopyLayout::Flush(Flat& flat) {
  if (flat.held.empty()) return;
  std::vector<at::Tensor> parts;
  for (size_t slot : flat.held) parts.push_back(flat.views[slot]);
  std::vector<at::Tensor> packed = codec_->Pack(flat.held_grads, parts);
  for (size_t k = 0; k < flat.held.size(); ++k) flat.packed[flat.held[k]] = std::move(packed[k]);
  flat.held.clear();
  flat.held_grads.clear();
  flat.held_bytes = 0;
}

void CopyLayout::MarkUnused(size_t bucket, size_t slot) {
  Flat& flat = flats_[bucket];
  flat.unused[slot] = true;
  flat.views[slot].zero_();
}

void CopyLayout::HandOver(size_t bucket, GradBucket& out) {
  Flat& flat = flats_[bucket];
  Flush(flat);
  out.buffer = flat.buffer;
  // Each gradient as packed; a slot not packed this step (unused, or already in the
  // buffer) in the buffer.
  out.gradients = std::move(flat.packed);
  flat.packed = flat.views;
}

void CopyLayout::Deliver(size_t bucket, const at::Tensor& result) {
  const Flat& flat = flats_[bucket];
  const std::vector<at::Tensor> parts = result.is_same(flat.buffer) ? flat.views : Parts(flat, result);
  std::vector<at::Tensor> grads, src;
  for (size_t k = 0; k < flat.def.params.size(); ++k) {
    if (flat.unused[k]) continue;
    grads.push_back(params_[flat.def.params[k]].mutable_grad());
    src.push_back(parts[k]);
  }
  if (!grads.empty()) codec_->Unpack(src, grads);
}

int64_t CopyLayout::bucket_bytes() const {
  int64_t bytes = 0;
  for (const Flat& flat : flats_) bytes += flat.buffer.numel() * flat.buffer.element_size();
  return bytes;
}

int64_t CopyLayout::gradient_bytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& p : params_) {
    if (p.grad().defined()) bytes += p.grad().numel() * p.grad().element_size();
  }
  return bytes;
}

}  // namespace ddplab
