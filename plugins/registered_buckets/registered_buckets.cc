// registered_buckets: the engine's flat buckets as NCCL windows (registered_pool.h), so
// that NCCL reduces them with its symmetric kernels, which read and write peers' buckets
// over NVLink where they lie, with no staging buffers and typically fewer CTAs than its
// ring: fewer of the GPU's multiprocessors and memory cycles taken from backward's
// kernels (Note [Why windows], registered_pool.h). Two hooks of one plugin:
// - the reducer (kCommHook, in place of core's all-reduce): each bucket premultiplied by
//   1/world and summed, as NCCL's own average does for floats, because NCCL's symmetric
//   kernels sum and do not average;
// - around the chain (kHookWrapper), the chain's codec with its buffers made in the pool,
//   each registered as a window as it is made (Note [Registered once per build]).
// What travels is the bucket's bytes, as with core's all-reduce: it composes with the
// levers that keep flat buckets and leave the reduction to the all-reduce below them
// (bucket_sizing, static_graph, bucket_view, bf16, optimizer_overlap, cuda_graph).
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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
    return (below.empty() ? "" : below + ", ") + "as NCCL windows";
  }

 private:
  std::shared_ptr<const BucketCodec> inner_;
  std::shared_ptr<RegisteredPool> pool_;
};

// Around the chain (wrappers listed after it, and the error sampler, may wrap it in
// turn, and pass its codec on): hands out the pooled codec, and tells the pool when its
// buckets are reduced, so that the next buckets it makes are a rebuild's.
class InWindows : public ddplab::HookWrapperBase {
 public:
  InWindows(std::unique_ptr<ddplab::CommHook> inner, std::shared_ptr<RegisteredPool> pool)
      : HookWrapperBase(std::move(inner)), pool_(std::move(pool)) {}

  std::shared_ptr<const BucketCodec> Codec() const override {
    return std::make_shared<const PooledCodec>(inner_->Codec(), pool_);
  }
  c10::intrusive_ptr<c10::ivalue::Future> Run(ddplab::GradBucket& bucket) override {
    pool_->InUse();
    return inner_->Run(bucket);
  }
  std::map<std::string, double> Stats() const override {
    std::map<std::string, double> stats = inner_->Stats();
    stats["window_bytes"] = static_cast<double>(pool_->bytes());
    stats["windows"] = pool_->windows();
    return stats;
  }

 private:
  std::shared_ptr<RegisteredPool> pool_;
};

// The reducer: the bucket premultiplied by 1/world, then summed in place by NCCL.
class PremultipliedSum : public ddplab::CommHook {
 public:
  PremultipliedSum(ddplab::compat::CollectiveGroup* group, int world) : group_(group), world_(world) {}
  c10::intrusive_ptr<c10::ivalue::Future> Run(ddplab::GradBucket& bucket) override {
    if (!bucket.buffer.defined()) {
      throw std::invalid_argument("registered_buckets: bucket " + std::to_string(bucket.index) +
                                  " has no flat buffer to sum as a window");
    }
    bucket.buffer.mul_(1.0 / world_);
    std::vector<at::Tensor> tensors{bucket.buffer};
    c10d::AllreduceOptions sum;
    sum.reduceOp = c10d::ReduceOp::SUM;
    return group_->allreduce(tensors, sum)->getFuture();
  }

 private:
  ddplab::compat::CollectiveGroup* group_;
  int world_;
};

void Register(const ddplab::plugins::registered_buckets::v1::Config&, ddplab::PluginRegistrar& registrar) {
  if (!DDPLAB_CUDA_BUILD) {
    registrar.Reject("it registers the buckets with NCCL, and this build has no NCCL (a CPU build)");
    return;
  }
  // The chain's pool, made with its reducer (the chain's first hook) and handed over to
  // the hook around it; chains are made one at a time.
  auto pool = std::make_shared<std::shared_ptr<RegisteredPool>>();
  registrar.WrapCommHook(
      ddplab::ExtensionPoint::kCommHook,
      [pool](std::unique_ptr<ddplab::CommHook> below, const ddplab::CommContext& context) -> std::unique_ptr<ddplab::CommHook> {
        // One process issues no collective (Collectives::StartMean): nothing to register.
        pool->reset();
        if (context.world_size == 1) return below;
        absl::StatusOr<std::unique_ptr<RegisteredPool>> made = RegisteredPool::Make(context.process_group);
        if (!made.ok()) throw std::invalid_argument("registered_buckets: " + std::string(made.status().message()));
        *pool = std::move(*made);
        return std::make_unique<PremultipliedSum>(context.process_group, context.world_size);
      });
  registrar.WrapCommHook(
      ddplab::ExtensionPoint::kHookWrapper,
      [pool](std::unique_ptr<ddplab::CommHook> inner, const ddplab::CommContext&) -> std::unique_ptr<ddplab::CommHook> {
        // The chain's hooks own the pool from here: the plugin's configuration, which
        // outlives runs, keeps none.
        std::shared_ptr<RegisteredPool> mine = std::exchange(*pool, nullptr);
        if (mine == nullptr) return inner;
        return std::make_unique<InWindows>(std::move(inner), std::move(mine));
      });
  ddplab::PyTorchForm form;
  form.not_in_pytorch = {"registered_buckets (DDP's buckets are not NCCL windows)"};
  registrar.DescribeInPyTorch(form);
}

}  // namespace

DDPLAB_PLUGIN("registered_buckets", "1.0.0", ddplab::plugins::registered_buckets::v1::Config,
              ddplab::PluginStatus::kExperimental, Register)
