// bucket_view: parameters' gradients are views into the buckets (PyTorch DDP's
// gradient_as_bucket_view=True), so the average lands in the gradients themselves:
// nothing is copied out after the reduction, and a gradient that autograd accumulates
// into its view (micro-steps, unused parameters) is never copied in either.
//
// A gradient layout around the host's flat buckets (FlatBuckets, the default layout's,
// which the host makes for it): the bucket buffers are the gradients' storage. Where the wire has another dtype (bf16),
// the storage is a float32 buffer of its own beside the wire's bucket, and the codec
// unpacks the average into it.
#include <memory>
#include <utility>
#include <vector>

#include "core/plugin/plugin_api.h"
#include "plugins/bucket_view/bucket_view.pb.h"

namespace {

class ViewLayout : public ddplab::GradientLayout {
 public:
  ViewLayout(std::vector<at::Tensor>& params, const ddplab::FlatBucketsMaker& flat_buckets)
      : params_(params), flat_(flat_buckets(params)) {}

  void Build(const std::vector<ddplab::LayoutBucket>& buckets, std::shared_ptr<const ddplab::BucketCodec> codec) override {
    const bool first = flat_->buckets() == 0;
    flat_->Build(buckets, std::move(codec));
    storage_.clear();
    storage_views_.clear();
    for (size_t b = 0; b < flat_->buckets(); ++b) {
      const at::Tensor& buffer = flat_->buffer(b);
      const at::Tensor& p = params_[flat_->parameters(b)[0]];
      const bool own = buffer.scalar_type() != p.scalar_type();
      storage_.push_back(own ? at::zeros({buffer.numel()}, p.options()) : buffer);
      storage_views_.push_back(own ? flat_->PartsOf(b, storage_.back()) : flat_->views(b));
    }
    // Every gradient becomes its view. At the rebuild, gradients accumulated so far move
    // into their new views; a parameter without one (ZeroGrad just dropped it) stays without.
    for (size_t b = 0; b < flat_->buckets(); ++b) {
      for (size_t k = 0; k < flat_->parameters(b).size(); ++k) {
        at::Tensor& grad = params_[flat_->parameters(b)[k]].mutable_grad();
        if (!first && !grad.defined()) continue;
        if (grad.defined()) storage_views_[b][k].copy_(grad);
        grad = storage_views_[b][k];
      }
    }
  }

  // A parameter that receives a gradient each step starts the step with none: autograd
  // then hands over its gradient without a kernel, and Collect copies it in once and makes
  // the view the gradient again (one read, one write) instead of zeroing the bucket and
  // adding into it (two of each). Only unused parameters keep a zeroed view.
  void ZeroGrad() override {
    for (size_t b = 0; b < flat_->buckets(); ++b) {
      for (size_t k = 0; k < flat_->parameters(b).size(); ++k) {
        at::Tensor& grad = params_[flat_->parameters(b)[k]].mutable_grad();
        if (flat_->unused(b, k)) {
          storage_views_[b][k].zero_();
          grad = storage_views_[b][k];
        } else {
          grad = at::Tensor();
        }
      }
    }
  }

  void Collect(size_t bucket, size_t slot) override {
    const at::Tensor& view = storage_views_[bucket][slot];
    at::Tensor& grad = params_[flat_->parameters(bucket)[slot]].mutable_grad();
    const bool in_place = grad.is_alias_of(view);
    // In the wire's own buffer already (the storage is the buffer), or to be put there.
    if (!in_place || flat_->buffer(bucket).scalar_type() != grad.scalar_type()) flat_->Put(bucket, slot, grad);
    grad = view;
  }

  void MarkUnused(size_t bucket, size_t slot) override {
    flat_->MarkUnused(bucket, slot);
    storage_views_[bucket][slot].zero_();
    params_[flat_->parameters(bucket)[slot]].mutable_grad() = storage_views_[bucket][slot];
  }

  // The gradient's view, in the gradients' dtype (the wire's buffer, or the storage beside
  // it): written there, Collect finds it in place (Note [Gradients written where they go]).
  at::Tensor Target(size_t bucket, size_t slot) const override {
    return flat_->unused(bucket, slot) ? at::Tensor() : storage_views_[bucket][slot];
  }

  void HandOver(size_t bucket, ddplab::GradBucket& out) override { flat_->HandOver(bucket, out); }

  // The gradients are the storage's views: the average only has to be in the storage,
  // unpacked by the chain's codec where it is not there already.
  void Deliver(size_t bucket, const at::Tensor& result) override {
    if (!result.is_same(storage_[bucket])) flat_->codec().Unpack({result}, {storage_[bucket]});
  }

  int64_t bucket_bytes() const override {
    int64_t bytes = flat_->bucket_bytes();
    for (size_t b = 0; b < flat_->buckets(); ++b) {
      if (!storage_[b].is_same(flat_->buffer(b))) bytes += storage_[b].numel() * storage_[b].element_size();
    }
    return bytes;
  }
  int64_t gradient_bytes() const override { return 0; }
  std::string Describe() const override { return "gradients as views into the buckets"; }

 private:
  std::vector<at::Tensor>& params_;
  std::unique_ptr<ddplab::FlatBuckets> flat_;           // the flat buckets, in the wire's dtype
  std::vector<at::Tensor> storage_;                     // per bucket, the gradients' dtype
  std::vector<std::vector<at::Tensor>> storage_views_;  // per bucket and slot
};

void Register(const ddplab::plugins::bucket_view::v1::Config&, ddplab::PluginRegistrar& registrar) {
  registrar.SetGradientLayout([](std::vector<at::Tensor>& params, const ddplab::FlatBucketsMaker& flat_buckets)
                                  -> std::unique_ptr<ddplab::GradientLayout> {
    return std::make_unique<ViewLayout>(params, flat_buckets);
  });
  ddplab::PyTorchForm form;
  form.ddp_arguments = {"gradient_as_bucket_view=True"};
  registrar.DescribeInPyTorch(form);
}

}  // namespace

DDPLAB_PLUGIN("bucket_view", "2.0.0", ddplab::plugins::bucket_view::v1::Config, ddplab::PluginStatus::kStable,
              Register)
