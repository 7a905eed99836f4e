// bf16: gradients travel in bfloat16 (PyTorch's bf16_compress_hook), half the bytes of
// float32. A codec, as bf16_compress_wrapper: it wraps whatever reduces the bucket
// (core's all-reduce, or PowerSGD, which then computes in bfloat16 as under PyTorch's
// wrapper). Its bytes are bfloat16 (Note [A codec's bytes]): each gradient is rounded
// into a bfloat16 bucket as autograd hands it over and a float32 bucket is never
// written; the bucket is averaged in bfloat16 (NCCL divides inside the reduction) and
// widened back into the float32 gradients. A bucket handed over in another dtype is
// rounded here.
#include <memory>

#include "core/plugin/plugin_api.h"
#include "plugins/bf16/bf16.pb.h"

namespace {

using ddplab::GradBucket;

class Bf16Hook : public ddplab::HookWrapperBase {
 public:
  using HookWrapperBase::HookWrapperBase;

  // Buckets in bfloat16, packed and unpacked by rounding copies.
  std::shared_ptr<const ddplab::BucketCodec> Codec() const override {
    return std::make_shared<const ddplab::CastBytes>(at::kBFloat16);
  }

  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    if (!bucket.buffer.defined() || bucket.buffer.scalar_type() == at::kBFloat16) return inner_->Run(bucket);
    const at::Tensor original = bucket.buffer;
    GradBucket wire = bucket;
    wire.buffer = original.to(at::kBFloat16);
    for (size_t k = 0; k < wire.gradients.size(); ++k) {
      wire.gradients[k] = wire.buffer.narrow(0, wire.offsets[k], bucket.gradients[k].numel()).view(wire.sizes[k]);
    }
    return inner_->Run(wire)->then(
        [original](c10::ivalue::Future& reduced) {
          const c10::IValue value = reduced.value();
          original.copy_(value.isTensor() ? value.toTensor() : value.toTensorVector().at(0));
          return c10::IValue(original);
        },
        c10::TensorType::get());
  }
};

void Register(const ddplab::plugins::bf16::v1::Config& config, ddplab::PluginRegistrar& registrar) {
  registrar.WrapCommHook(ddplab::ExtensionPoint::kCodec,
                         [](std::unique_ptr<ddplab::CommHook> inner, const ddplab::CommContext&) -> std::unique_ptr<ddplab::CommHook> {
                           return std::make_unique<Bf16Hook>(std::move(inner));
                         });
  registrar.Lossy(static_cast<int>(config.sample_error_every()));
  ddplab::PyTorchForm form;
  form.hook = "default_hooks.bf16_compress_hook";
  form.hook_wrapper = "default_hooks.bf16_compress_wrapper";
  // "BF16 all reduce communication hook required CUDA 11+ and NCCL 2.10+" (PyTorch 1.13
  // and 2.x, on Gloo).
  form.only_on_gpus = "needs CUDA and NCCL: bf16_compress_hook refuses Gloo";
  registrar.DescribeInPyTorch(form);
}

}  // namespace

DDPLAB_PLUGIN("bf16", "3.0.0", ddplab::plugins::bf16::v1::Config, ddplab::PluginStatus::kStable, Register)
