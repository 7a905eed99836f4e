// fp16: gradients travel in float16 (PyTorch's fp16_compress_hook), half the bytes of
// float32, with float16's range (above 65504 overflows, below 6e-8 flushes to zero). A
// codec: it wraps whatever reduces the bucket, as fp16_compress_wrapper does.
#include <cmath>
#include <memory>
#include <string>

#include "core/plugin/plugin_api.h"
#include "fp16.pb.h"

namespace {

using Config = ddplab::examples::fp16::v1::Config;

class Fp16Hook : public ddplab::HookWrapperBase {
 public:
  Fp16Hook(std::unique_ptr<ddplab::CommHook> inner, double scale) : HookWrapperBase(std::move(inner)), scale_(scale) {}

  // Unscaled, buckets are float16 (Note [A codec's bytes]): each gradient is rounded
  // into its bucket as autograd hands it over, and a float32 bucket is never written.
  // Scaled, the bucket stays as the hook below wants it, and is scaled and rounded here.
  std::shared_ptr<const ddplab::BucketCodec> Codec() const override {
    if (scale_ != 1) return inner_->Codec();
    return std::make_shared<const ddplab::CastBytes>(at::kHalf);
  }

  c10::intrusive_ptr<c10::ivalue::Future> Run(ddplab::GradBucket& bucket) override {
    if (!bucket.buffer.defined() || bucket.buffer.scalar_type() == at::kHalf) return inner_->Run(bucket);
    const at::Tensor original = bucket.buffer;
    ddplab::GradBucket wire = bucket;
    wire.buffer = (scale_ == 1 ? original : original * scale_).to(at::kHalf);
    for (size_t k = 0; k < wire.gradients.size(); ++k) {
      wire.gradients[k] = wire.buffer.narrow(0, wire.offsets[k], bucket.gradients[k].numel()).view(wire.sizes[k]);
    }
    const double scale = scale_;
    return inner_->Run(wire)->then(
        [original, scale](c10::ivalue::Future& reduced) {
          const c10::IValue value = reduced.value();
          original.copy_(value.isTensor() ? value.toTensor() : value.toTensorVector().at(0));
          if (scale != 1) original.div_(scale);
          return c10::IValue(original);
        },
        c10::TensorType::get());
  }

 private:
  double scale_;
};

// The plugin's own check, beyond what fp16.proto's rules say: a power of two, at least 1
// (below, it would shrink gradients toward float16's zero, the opposite of its purpose).
std::string BadScale(double scale) {
  int exponent = 0;
  if (std::frexp(scale, &exponent) != 0.5 || scale < 1 || scale > 65536) {
    return "must be a power of two from 1 to 65536 (so that scaling is exact and shrinks no gradient), got " +
           std::to_string(scale);
  }
  return "";
}

void Register(const Config& config, ddplab::PluginRegistrar& registrar) {
  const double scale = config.scale() > 0 ? config.scale() : 1;
  if (std::string bad = BadScale(scale); !bad.empty()) {
    registrar.RejectField("scale", bad);
    return;
  }
  registrar.WrapCommHook(ddplab::ExtensionPoint::kCodec,
                         [scale](std::unique_ptr<ddplab::CommHook> inner, const ddplab::CommContext&) {
                           return std::unique_ptr<ddplab::CommHook>(new Fp16Hook(std::move(inner), scale));
                         });
  registrar.Lossy(static_cast<int>(config.sample_error_every()));
  ddplab::PyTorchForm form;
  form.hook = "default_hooks.fp16_compress_hook";
  form.hook_wrapper = "default_hooks.fp16_compress_wrapper";
  if (scale != 1) form.not_in_pytorch.push_back("fp16.scale");
  registrar.DescribeInPyTorch(form);
}

}  // namespace

DDPLAB_PLUGIN("fp16", "1.0.0", Config, ddplab::PluginStatus::kExperimental, Register)
