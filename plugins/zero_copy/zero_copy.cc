// zero_copy: gradients are averaged where autograd left them. When a bucket is complete
// the layout hands its gradients, as they are, to one grouped all-reduce (c10d's
// allreduce_coalesced: on NCCL one group of all-reduces in one launch) instead of a flat
// bucket: no bucket memory, no copy kernels beside backward (bucket_view still copies
// each gradient autograd allocates once, into its view). It needs the engine's own
// all-reduce in the gradients' dtype, so it refuses a communication hook and a codec,
// which take a flat bucket, and another layout.
#include "core/plugin/plugin_api.h"
#include "plugins/zero_copy/zero_copy.pb.h"

namespace {

class InPlaceLayout : public ddplab::GradientLayout {
 public:
  explicit InPlaceLayout(std::vector<at::Tensor>& params) : params_(params) {}
  void Build(const std::vector<ddplab::LayoutBucket>& buckets, std::shared_ptr<const ddplab::BucketCodec>) override {
    buckets_ = buckets;
  }
  void ZeroGrad() override {
    for (at::Tensor& p : params_) p.mutable_grad() = at::Tensor();
  }
  void Collect(size_t, size_t) override {}
  void MarkUnused(size_t, size_t) override {}  // zeros at hand-over, below
  void HandOver(size_t bucket, ddplab::GradBucket& out) override {
    for (size_t i : buckets_[bucket].params) {
      // Every rank sends the same list: a parameter without a gradient here (unused in
      // this step on this rank) sends zeros, as its share of a bucket would be.
      at::Tensor& grad = params_[i].mutable_grad();
      if (!grad.defined()) {
        grad = at::zeros_like(params_[i], at::MemoryFormat::Contiguous);
      } else if (!grad.is_contiguous()) {
        grad = grad.contiguous();
      }
      out.gradients.push_back(grad);
    }
  }
  void Deliver(size_t, const at::Tensor&) override {}  // averaged where they lie
  int64_t bucket_bytes() const override { return 0; }
  int64_t gradient_bytes() const override {
    int64_t bytes = 0;
    for (const at::Tensor& p : params_) {
      if (p.grad().defined()) bytes += p.grad().numel() * p.grad().element_size();
    }
    return bytes;
  }
  std::string Describe() const override { return "gradients averaged where they lie"; }

 private:
  std::vector<at::Tensor>& params_;
  std::vector<ddplab::LayoutBucket> buckets_;
};

void Register(const ddplab::plugins::zero_copy::v1::Config&, ddplab::PluginRegistrar& registrar) {
  registrar.SetGradientLayout(
      [](std::vector<at::Tensor>& params, const ddplab::FlatBucketsMaker&) -> std::unique_ptr<ddplab::GradientLayout> {
        return std::make_unique<InPlaceLayout>(params);
      });
  registrar.Refuse(ddplab::ExtensionPoint::kCommHook, "a communication hook takes a flat bucket");
  registrar.Refuse(ddplab::ExtensionPoint::kCodec,
                   "a codec transforms a flat bucket (Note [What a codec hands below]), and zero_copy hands the "
                   "all-reduce the gradients where autograd left them, with no flat bucket");
}

}  // namespace

DDPLAB_PLUGIN("zero_copy", "2.0.0", ddplab::plugins::zero_copy::v1::Config, ddplab::PluginStatus::kStable, Register)
