// The chain's codec owns a bucket's bytes (Note [A codec's bytes], extension_points.h):
// the layout packs and unpacks through it.
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "absl/status/statusor.h"
#include "core/engine/engine.h"
#include "core/launch/distributed.h"
#include "core/testing/gloo.h"
#include "gtest/gtest.h"

namespace ddplab {
namespace {

// A Gloo group of this process alone (its rendezvous store is in memory).
absl::StatusOr<ProcessGroupPtr> OneProcessGroup() {
  return CreateProcessGroup(WorkerEnv(), /*nccl=*/false, std::chrono::seconds(30));
}

// A codec of its own bytes: it packs each gradient doubled and unpacks the average
// halved, and a hook around it notes the buckets it is handed.
class DoubledBytes : public BucketCodec {
 public:
  std::vector<at::Tensor> Pack(const std::vector<at::Tensor>& grads, const std::vector<at::Tensor>& parts) const override {
    for (size_t k = 0; k < grads.size(); ++k) parts[k].copy_(grads[k] * 2);
    return parts;
  }
  void Unpack(const std::vector<at::Tensor>& parts, const std::vector<at::Tensor>& grads) const override {
    for (size_t k = 0; k < parts.size(); ++k) grads[k].copy_(parts[k] / 2);
  }
  std::string Describe() const override { return "sent doubled"; }
};
class Doubled : public HookWrapperBase {
 public:
  Doubled(std::unique_ptr<CommHook> inner, std::vector<at::Tensor>* seen)
      : HookWrapperBase(std::move(inner)), seen_(seen) {}
  std::shared_ptr<const BucketCodec> Codec() const override { return std::make_shared<const DoubledBytes>(); }
  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    seen_->push_back(bucket.buffer.clone());
    return inner_->Run(bucket);
  }

 private:
  std::vector<at::Tensor>* seen_;
};

// The layout packs and unpacks through the chain's codec (Note [A codec's bytes]), not by
// a rule of its own: the hook is handed the codec's bytes, the parameters get the average
// the codec unpacks, and the engine's description says what the codec says.
TEST(DataParallelEngineTest, TheBytesAreTheCodecs) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  at::Tensor p0 = torch::ones({3}).requires_grad_();
  at::Tensor p1 = torch::ones({2, 2}).requires_grad_();
  const at::Tensor x0 = torch::arange(3.0), x1 = torch::arange(4.0).view({2, 2});
  {
    std::vector<at::Tensor> seen;
    EngineParts parts;  // one bucket
    parts.hooks.push_back([&seen](std::unique_ptr<CommHook> inner, const CommContext&) -> std::unique_ptr<CommHook> {
      return std::make_unique<Doubled>(std::move(inner), &seen);
    });
    DataParallelEngine engine({p0, p1}, *group, parts);
    EXPECT_NE(engine.Describe().find(", sent doubled, "), std::string::npos) << engine.Describe();
    for (int step = 0; step < 2; ++step) {
      engine.ZeroGrad();
      engine.BeginStep(true);
      ((p0 * x0).sum() + (p1 * x1).sum()).backward();
      ASSERT_TRUE(engine.EndBackward().ok()) << step;
      ASSERT_EQ(seen.size(), static_cast<size_t>(step + 1));
      const at::Tensor sent = std::get<0>(seen.back().sort());  // in the bucket's order of parameters
      EXPECT_TRUE(at::equal(sent, std::get<0>((at::cat({x0, x1.reshape(-1)}) * 2).sort()))) << step;
      EXPECT_TRUE(at::equal(p0.grad(), x0)) << step;
      EXPECT_TRUE(at::equal(p1.grad(), x1)) << step;
    }
  }
}

// The codecs the SDK offers: CastBytes makes its buffer in its dtype and says so;
// GradientsWhereTheyLie packs nothing but a gradient of another dtype than the buffer,
// which it converts into its part.
TEST(BucketCodecTest, CastBytesAndGradientsWhereTheyLie) {
  const CastBytes bf16(at::kBFloat16);
  EXPECT_EQ(bf16.Buffer(6, torch::ones({1}).options()).scalar_type(), at::kBFloat16);
  EXPECT_EQ(bf16.Describe(), "sent as BFloat16");
  const GradientsWhereTheyLie lie;
  const at::Tensor buffer = torch::full({5}, -1.0);
  const at::Tensor same = torch::arange(3.0), other = torch::arange(2.0).to(at::kBFloat16);
  const std::vector<at::Tensor> handed = lie.Pack({same, other}, {buffer.narrow(0, 0, 3), buffer.narrow(0, 3, 2)});
  ASSERT_EQ(handed.size(), 2u);
  EXPECT_TRUE(handed[0].is_same(same));
  EXPECT_TRUE(at::equal(buffer.narrow(0, 0, 3), torch::full({3}, -1.0))) << "a gradient of the buffer's dtype is not copied";
  EXPECT_TRUE(handed[1].is_alias_of(buffer));
  EXPECT_EQ(handed[1].scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(buffer.narrow(0, 3, 2), torch::arange(2.0)));
}

}  // namespace
}  // namespace ddplab
