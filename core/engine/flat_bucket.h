// For a communication hook that reduces a bucket itself (a codec of its own on the wire):
// the bucket's gradients into a flat tensor of the hook's own, and the future the hook
// completes with the result. Header only: plugins compile it.
//
//   at::Tensor wire = at::empty({padded}, bucket.buffer.options().dtype(at::kBFloat16));
//   ddplab::CopyBucketInto(bucket, wire);        // cast, padded with zeros
//   auto future = ddplab::MakeBucketFuture(bucket.buffer);
#ifndef DDPLAB_CORE_ENGINE_FLAT_BUCKET_H_
#define DDPLAB_CORE_ENGINE_FLAT_BUCKET_H_

#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include "core/engine/extension_points.h"
#include "core/torch_compat.h"

namespace ddplab {

// The bucket's values into the first elements of `flat` (cast to its dtype), zeros after
// them. Gradients handed over where they lie (GradBucket::gradients) are read from there
// and let go: autograd's memory is free once the reads are queued.
inline void CopyBucketInto(GradBucket& bucket, at::Tensor& flat) {
  const int64_t numel = bucket.buffer.numel();
  if (bucket.gradients.empty()) {
    flat.narrow(0, 0, numel).copy_(bucket.buffer);
  } else {
    std::vector<at::Tensor> parts;
    for (size_t k = 0; k < bucket.gradients.size(); ++k) {
      const at::Tensor& gradient = bucket.gradients[k];
      parts.push_back(flat.narrow(0, bucket.offsets[k], gradient.numel()).view(gradient.sizes()));
    }
    compat::CopyEach(parts, bucket.gradients);
    bucket.gradients.clear();
  }
  if (flat.numel() > numel) flat.narrow(0, numel, flat.numel() - numel).zero_();
}

// The future of a bucket whose result is `buffer`: on a GPU, completing it records an
// event on the current stream, which the engine's wait blocks.
inline c10::intrusive_ptr<c10::ivalue::Future> MakeBucketFuture(const at::Tensor& buffer) {
  if (buffer.device().is_cpu()) return c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  return c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get(), std::vector<c10::Device>{buffer.device()});
}

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_FLAT_BUCKET_H_
