// bf16: gradients travel in bfloat16 (PyTorch's bf16_compress_hook), half the bytes of
// float32. A codec: it wraps the collectives below it, so whatever reduces the buckets
// sends bfloat16. With the engine's own all-reduce, each gradient is cast into its
// bucket's bfloat16 buffer as autograd hands it over (CopyLayout), the bucket averaged
// in bfloat16 (NCCL divides inside the reduction) and written back in float32; listed
// with powersgd, PowerSGD's P and Q travel in bfloat16.
#include "core/plugin_api.h"
#include "plugins/bf16/bf16.pb.h"

namespace {

class Bf16Collectives : public ddplab::Collectives {
 public:
  explicit Bf16Collectives(std::unique_ptr<ddplab::Collectives> inner) : inner_(std::move(inner)) {}
  at::ScalarType wire_dtype() const override { return at::kBFloat16; }
  ddplab::PendingMean StartMean(std::vector<at::Tensor> tensors) override {
    if (tensors.empty() || tensors[0].scalar_type() == at::kBFloat16) return inner_->StartMean(std::move(tensors));
    std::vector<at::Tensor> wire;
    for (const at::Tensor& t : tensors) wire.push_back(t.to(at::kBFloat16));
    ddplab::PendingMean mean = inner_->StartMean(wire);
    return {mean.work, [wait = mean.wait, wire, tensors]() mutable {
              wait();
              for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(wire[i]);
            }};
  }

 private:
  std::unique_ptr<ddplab::Collectives> inner_;
};

void Register(ddplab::PluginRegistrar& registrar) {
  const auto& config = static_cast<const ddplab::plugins::bf16::v1::Config&>(registrar.config());
  registrar.WrapCollectives([](std::unique_ptr<ddplab::Collectives> inner) -> std::unique_ptr<ddplab::Collectives> {
    return std::make_unique<Bf16Collectives>(std::move(inner));
  });
  registrar.SampleGradientError(static_cast<int>(config.sample_error_every()));
  ddplab::PyTorchForm form;
  form.hook = "default_hooks.bf16_compress_hook";
  form.hook_wrapper = "default_hooks.bf16_compress_wrapper";
  registrar.DescribeInPyTorch(form);
}

}  // namespace

DDPLAB_PLUGIN("bf16", "2.0.0", "ddplab.plugins.bf16.v1.Config", ddplab::PluginStatus::kStable, Register)
