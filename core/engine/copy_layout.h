// The default gradient layout (PyTorch DDP's): each bucket is a flat buffer, gradients
// are copied into it as backward produces them, and the average is copied back into the
// parameters' own gradients.
//
// What the bytes are is the hook chain's codec's (Note [A codec's bytes],
// extension_points.h): it makes each flat buffer, packs gradients into it and unpacks the
// average; the layout keeps the buffers and decides when to pack. Gradients are held and
// packed together, one kernel for many small tensors, once a bucket is complete or holds
// kMaxHeldBytes (Note [Held gradients]). A flat buffer in another dtype than the
// gradients has each gradient packed at once, as it comes in: a bucket in the gradients'
// dtype is then never written. A codec that packs nothing (GradientsWhereTheyLie) has the
// held gradients handed over as they are.
//
// Layouts that keep flat buckets too wrap it (plugins/bucket_view): the host makes one for
// them as FlatBuckets (extension_points.h, LayoutFactory), whose accessors they read.
//
//   std::unique_ptr<ddplab::GradientLayout> layout = std::make_unique<ddplab::CopyLayout>(params);
//   layout->Build(buckets, hook->Codec());  // nullptr: core's copy
#ifndef DDPLAB_CORE_ENGINE_COPY_LAYOUT_H_
#define DDPLAB_CORE_ENGINE_COPY_LAYOUT_H_

#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "core/engine/extension_points.h"

namespace ddplab {

class CopyLayout : public FlatBuckets {
 public:
  // Note [Held gradients]: the most gradient memory a bucket holds beside itself before
  // copying it in, a bound on what holding adds to the peak whatever the bucket cap.
  // Copying many at once measured +0.85% for PowerSGD rank 1 over NVLink
  // (bench/NOTES.md); a hook that reads gradients where they lie is handed them all.
  static constexpr int64_t kMaxHeldBytes = 25 << 20;

  // `params` outlive the layout.
  explicit CopyLayout(std::vector<at::Tensor>& params) : params_(params) {}

  // `codec` nullptr: core's (BucketCodec itself).
  void Build(const std::vector<LayoutBucket>& buckets, std::shared_ptr<const BucketCodec> codec) override;
  void ZeroGrad() override;
  void Collect(size_t bucket, size_t slot) override;
  void MarkUnused(size_t bucket, size_t slot) override;
  void HandOver(size_t bucket, GradBucket& out) override;
  void Deliver(size_t bucket, const at::Tensor& result) override;
  int64_t bucket_bytes() const override;
  int64_t gradient_bytes() const override;
  std::string Describe() const override { return "gradients copied into flat buckets"; }

  // What a layout that wraps this one reads (FlatBuckets).
  const BucketCodec& codec() const override { return *codec_; }
  size_t buckets() const override { return flats_.size(); }
  const at::Tensor& buffer(size_t bucket) const override { return flats_[bucket].buffer; }
  const std::vector<size_t>& parameters(size_t bucket) const override { return flats_[bucket].def.params; }
  const std::vector<at::Tensor>& views(size_t bucket) const override { return flats_[bucket].views; }
  bool unused(size_t bucket, size_t slot) const override { return flats_[bucket].unused[slot]; }
  std::vector<at::Tensor> PartsOf(size_t bucket, const at::Tensor& result) const override {
    return Parts(flats_[bucket], result);
  }
  void Put(size_t bucket, size_t slot, const at::Tensor& grad) override { Take(flats_[bucket], slot, grad); }

 private:
  struct Flat {
    LayoutBucket def;
    at::Tensor buffer;              // the codec's (BucketCodec::Buffer)
    std::vector<at::Tensor> views;  // of `buffer`, per slot, shaped like the parameter
    // Per slot, what the hook reads as its gradient once packed (BucketCodec::Pack): its
    // view, or where a codec packs nothing, the gradient itself.
    std::vector<at::Tensor> packed;
    std::vector<bool> unused;       // MarkUnused
    // Gradients not in the buffer yet, and their slots.
    std::vector<size_t> held;
    std::vector<at::Tensor> held_grads;
    int64_t held_bytes = 0;
  };

  // Puts `grad` (slot's gradient) on its way into the buffer: packed at once when the
  // buffer is in another dtype, else held (and the held ones packed past kMaxHeldBytes).
  void Take(Flat& flat, size_t slot, const at::Tensor& grad);
  // Packs the held gradients (the codec's Pack).
  void Flush(Flat& flat);
  // `result`'s part for each slot, shaped like its parameter.
  std::vector<at::Tensor> Parts(const Flat& flat, const at::Tensor& result) const;

  std::vector<at::Tensor>& params_;
  std::shared_ptr<const BucketCodec> codec_;
  std::vector<Flat> flats_;
};

// The host's FlatBucketsMaker (extension_points.h): a CopyLayout over `params`.
inline std::unique_ptr<FlatBuckets> MakeFlatBuckets(std::vector<at::Tensor>& params) {
  return std::make_unique<CopyLayout>(params);
}

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_COPY_LAYOUT_H_
