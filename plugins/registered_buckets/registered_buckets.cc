// registered_buckets: the engine's flat buckets live in memory NCCL allocated and
// registered with the run's communicator (registered_pool.h), so that NCCL may read and
// write them where they lie instead of through its own staging buffers: fewer copies,
// and fewer of the GPU's multiprocessors and memory cycles taken from backward's kernels
// while it reduces. With `symmetric` they are NCCL windows, which NCCL's symmetric
// kernels (2.27 and later) take. A hook around whatever reduces: its codec is the one
// below with its buffers made in the pool, and the pool is registered at the first bucket
// after each build of the buckets (Note [Registered once per build]). What travels is
// unchanged, so it composes with every lever that keeps flat buckets (bucket_sizing,
// static_graph, bucket_view, bf16, optimizer_overlap, cuda_graph); under zero_copy there
// is no bucket to register, and a bucket without a buffer is an error naming it.
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/build_flags.h"
#include "core/plugin/plugin_api.h"
#include "plugins/registered_buckets/registered_buckets.pb.h"
#include "plugins/registered_buckets/registered_pool.h"

namespace {

using ddplab::BucketCodec;
using ddplab::RegisteredPool;

// The codec below, with each bucket's buffer made in the pool.
class PooledCodec : public BucketCodec {
 public:
  PooledCodec(std::shared_ptr<const BucketCodec> inner, std::shared_ptr<RegisteredPool> pool)
      : inner_(std::move(inner)), pool_(std::move(pool)) {}
  at::Tensor Buffer(int64_t numel, const at::TensorOptions& gradients) const override {
    return pool_->Allocate([&] { return inner_->Buffer(numel, gradients); });
  }
  std::vector<at::Tensor> Pack(const std::vector<at::Tensor>& grads, const std::vector<at::Tensor>& parts) const override {
    return inner_->Pack(grads, parts);
  }
  void Unpack(const std::vector<at::Tensor>& parts, const std::vector<at::Tensor>& grads) const override {
    inner_->Unpack(parts, grads);
  }
  std::string Describe() const override {
    const std::string below = inner_->Describe();
    return (below.empty() ? "" : below + ", ") + "in NCCL-registered memory";
  }

 private:
  std::shared_ptr<const BucketCodec> inner_;
  std::shared_ptr<RegisteredPool> pool_;
};

class RegisteredHook : public ddplab::HookWrapperBase {
 public:
  RegisteredHook(std::unique_ptr<ddplab::CommHook> inner, std::shared_ptr<RegisteredPool> pool)
      : HookWrapperBase(std::move(inner)), pool_(std::move(pool)) {}

  std::shared_ptr<const BucketCodec> Codec() const override {
    return std::make_shared<const PooledCodec>(inner_->Codec(), pool_);
  }

  c10::intrusive_ptr<c10::ivalue::Future> Run(ddplab::GradBucket& bucket) override {
    if (!bucket.buffer.defined()) {
      throw std::invalid_argument(
          "registered_buckets: bucket " + std::to_string(bucket.index) +
          " has no flat buffer to register (zero_copy averages gradients where they lie); leave one of them out");
    }
    pool_->RegisterNew();
    return inner_->Run(bucket);
  }

  std::map<std::string, double> Stats() const override {
    std::map<std::string, double> stats = inner_->Stats();
    stats["registered_bytes"] = static_cast<double>(pool_->bytes());
    stats["registrations"] = pool_->registrations();
    return stats;
  }

 private:
  std::shared_ptr<RegisteredPool> pool_;
};

void Register(const ddplab::plugins::registered_buckets::v1::Config& config, ddplab::PluginRegistrar& registrar) {
  if (!DDPLAB_CUDA_BUILD) {
    registrar.Reject("it registers the buckets with NCCL, and this build has no NCCL (a CPU build)");
    return;
  }
  const bool symmetric = config.symmetric();
  registrar.WrapCommHook(
      ddplab::ExtensionPoint::kHookWrapper,
      [symmetric](std::unique_ptr<ddplab::CommHook> inner, const ddplab::CommContext& context) -> std::unique_ptr<ddplab::CommHook> {
        // One process issues no collective (Collectives::StartMean): nothing to register.
        if (context.world_size == 1) return inner;
        absl::StatusOr<std::unique_ptr<RegisteredPool>> pool = RegisteredPool::Make(context.process_group, symmetric);
        if (!pool.ok()) throw std::invalid_argument("registered_buckets: " + std::string(pool.status().message()));
        return std::make_unique<RegisteredHook>(std::move(inner), std::shared_ptr<RegisteredPool>(std::move(*pool)));
      });
  ddplab::PyTorchForm form;
  form.not_in_pytorch = {"registered_buckets (DDP's buckets are not allocated by NCCL)"};
  registrar.DescribeInPyTorch(form);
}

}  // namespace

DDPLAB_PLUGIN("registered_buckets", "1.0.0", ddplab::plugins::registered_buckets::v1::Config,
              ddplab::PluginStatus::kExperimental, Register)
