#include "core/engine/engine.h"

#include <memory>
#include <string>
#include <utility>

#include <torch/types.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/fidelity/error_sampler.h"
#include "core/launch/distributed.h"
#include "core/testing/gloo.h"
#include "gtest/gtest.h"

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/Sleep.h>
#endif

namespace ddplab {
namespace {

using Buckets = std::vector<std::vector<size_t>>;

// A Gloo group of this process alone (its rendezvous store is in memory).
absl::StatusOr<ProcessGroupPtr> OneProcessGroup() {
  return CreateProcessGroup(WorkerEnv(), /*nccl=*/false, std::chrono::seconds(30));
}

TEST(AssignBucketsTest, FirstBucketSmallThenTheCap) {
  // Sizes in bytes of parameters 0..5, taken in reverse order.
  std::vector<int64_t> bytes{100, 100, 300, 50, 50, 400};
  std::vector<size_t> order{5, 4, 3, 2, 1, 0};
  EXPECT_EQ(AssignBuckets(bytes, order, 400, 500), (Buckets{{5}, {4, 3, 2, 1}, {0}}));
  EXPECT_EQ(AssignBuckets(bytes, order, 1, 1), (Buckets{{5}, {4}, {3}, {2}, {1}, {0}}));
  EXPECT_EQ(AssignBuckets(bytes, order, 10'000, 10'000), (Buckets{{5, 4, 3, 2, 1, 0}}));
}

TEST(AssignBucketsTest, FollowsTheOrderGiven) {
  std::vector<int64_t> bytes{10, 10, 10};
  EXPECT_EQ(AssignBuckets(bytes, {1, 0, 2}, 10, 20), (Buckets{{1}, {0, 2}}));
}

// DDP's rule's numbers (ddp_buckets.h): the first bucket and MiB to bytes, which the
// engine, bucket_sizing and the tuner share.
TEST(AssignBucketsTest, TheFirstBucketAndMiBAreDdps) {
  EXPECT_EQ(ddp::FirstCapMiB(ddp::kDefaultCapMiB), 1.0);
  EXPECT_EQ(ddp::FirstCapMiB(0.25), 0.25);
  EXPECT_EQ(ddp::MiBToBytes(2.5), 2'621'440);
  EXPECT_EQ(ddp::MiBToBytes(0.1), 104'858);  // 104857.6, to the nearest byte
  EXPECT_EQ(CapPlanner().Describe(), "buckets of 25 MiB, the first 1 MiB");
}

// A communication hook that leaves each bucket as it is and notes the order of calls.
class RecordingHook : public CommHook {
 public:
  explicit RecordingHook(std::vector<size_t>* calls) : calls_(calls) {}
  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    calls_->push_back(bucket.index);
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    future->markCompleted(c10::IValue(bucket.buffer));
    return future;
  }

 private:
  std::vector<size_t>* calls_;
};

// Bucket caps of one byte: each parameter in a bucket of its own.
EngineParts OneParameterPerBucket() {
  EngineParts parts;
  parts.planner = std::make_shared<CapPlanner>(1, 1);
  return parts;
}

// A hook that reduces the bucket itself, made by `make` (the hook below it is dropped).
HookWrapper Replacing(std::function<std::unique_ptr<CommHook>()> make) {
  return [make](std::unique_ptr<CommHook>, const CommContext&) { return make(); };
}

// A codec whose bytes are bfloat16, as plugins/bf16's (its own tests cover it): it packs
// its buckets in bfloat16 and passes them on.
class Bfloat16 : public HookWrapperBase {
 public:
  using HookWrapperBase::HookWrapperBase;
  std::shared_ptr<const BucketCodec> Codec() const override { return std::make_shared<const CastBytes>(at::kBFloat16); }
  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override { return inner_->Run(bucket); }
};
HookWrapper InBfloat16() {
  return [](std::unique_ptr<CommHook> inner, const CommContext&) -> std::unique_ptr<CommHook> {
    return std::make_unique<Bfloat16>(std::move(inner));
  };
}

// Accepts parameters unused from the first step on (as plugins/static_graph does).
class UnusedFromTheStart : public MissingGradients {
 public:
  std::string Accept(const std::vector<size_t>&, bool first_step) const override {
    return first_step ? "" : "used once, missing now";
  }
};

// One process, Gloo, with a hook (so that buckets are used): buckets start in reverse
// parameter order and are rebuilt once in the order gradients became ready. Here p0's
// gradient is ready before p1's. The hook sees every bucket, in order.
TEST(DataParallelEngineTest, RebuildsBucketsInTheOrderGradientsBecomeReady) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  at::Tensor p0 = torch::ones({4}).requires_grad_();
  at::Tensor p1 = torch::ones({4}).requires_grad_();
  EngineParts parts = OneParameterPerBucket();
  std::vector<size_t> calls;
  parts.hooks.push_back([&](std::unique_ptr<CommHook>, const CommContext& context) -> std::unique_ptr<CommHook> {
    EXPECT_EQ(context.world_size, 1);
    return std::make_unique<RecordingHook>(&calls);
  });
  DataParallelEngine engine({p0, p1}, *group, parts);
  EXPECT_EQ(engine.buckets(), (Buckets{{1}, {0}}));
  at::Tensor x = torch::arange(4.0);
  for (int step = 0; step < 2; ++step) {
    engine.ZeroGrad();
    engine.BeginStep(true);
    (p0 * (p1 * x)).sum().backward();  // backward reaches p0's accumulator first
    ASSERT_TRUE(engine.EndBackward().ok());
    EXPECT_TRUE(at::allclose(p0.grad(), x)) << step;  // world size 1: the local gradient
  }
  EXPECT_TRUE(engine.stats().rebuilt);
  EXPECT_EQ(engine.buckets(), (Buckets{{0}, {1}}));
  EXPECT_EQ(calls, (std::vector<size_t>{0, 1, 0, 1}));
}

// One process without a hook: nothing to average, so no buckets are filled or held.
TEST(DataParallelEngineTest, OneProcessKeepsTheLocalGradientsWithoutBuckets) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  at::Tensor p = torch::ones({3}).requires_grad_();
  DataParallelEngine engine({p}, *group, EngineParts());
  for (int step = 0; step < 2; ++step) {
    engine.ZeroGrad();
    engine.BeginStep(true);
    (p * torch::arange(3.0)).sum().backward();
    ASSERT_TRUE(engine.EndBackward().ok());
    EXPECT_TRUE(at::equal(p.grad(), torch::arange(3.0)));
  }
  EXPECT_EQ(engine.stats().bucket_memory_bytes, 0);
}

// A group of one process without collectives: c10d's defaults throw for each.
class NoCollectives : public compat::CollectiveGroup {
 public:
  NoCollectives() : compat::CollectiveGroup(/*rank=*/0, /*size=*/1) {}
  const std::string getBackendName() const override { return "no_collectives"; }
};

// One process issues no collective: not the parameters' broadcast, nor the rebuild's,
// nor a bucket's mean (bf16's, and the exact one of a sampled step). NCCL's first
// collective makes a communicator, and one made in the process slows the rest of its
// steps (bench/NOTES.md). A hook is called as usual.
TEST(DataParallelEngineTest, OneProcessIssuesNoCollective) {
  at::Tensor p0 = torch::ones({4}).requires_grad_();
  at::Tensor p1 = torch::full({4}, 2.0).requires_grad_();
  enum Mode { kPlain, kHook, kBfloat16 };
  for (Mode mode : {kPlain, kHook, kBfloat16}) {
    std::vector<size_t> calls;
    EngineParts parts = OneParameterPerBucket();
    if (mode == kHook) parts.hooks.push_back(Replacing([&] { return std::make_unique<RecordingHook>(&calls); }));
    std::shared_ptr<ErrorSampler> sampler;
    if (mode == kBfloat16) {
      parts.hooks.push_back(InBfloat16());
      sampler = AddErrorSampler({p0, p1}, /*every=*/1, parts);  // every step also reduces exactly
    }
    DataParallelEngine engine({p0, p1}, c10::make_intrusive<NoCollectives>(), parts);
    ASSERT_NO_THROW(engine.BroadcastParameters()) << "mode " << mode;
    EXPECT_TRUE(at::equal(p1, torch::full({4}, 2.0)));
    at::Tensor x = torch::arange(4.0);
    for (int step = 0; step < 2; ++step) {  // the second rebuilds the buckets
      engine.ZeroGrad();
      ASSERT_NO_THROW(engine.BeginStep(true)) << "mode " << mode << ", step " << step;
      (p0 * (p1 * x)).sum().backward();
      absl::Status status;
      ASSERT_NO_THROW(status = engine.EndBackward()) << "mode " << mode << ", step " << step;
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_TRUE(at::equal(p0.grad(), x * 2.0));  // exact in bfloat16 too
    }
    EXPECT_EQ(engine.stats().rebuilt, mode != kPlain);
    EXPECT_EQ(calls.size(), mode == kHook ? 4u : 0u);
    EXPECT_EQ(sampler ? sampler->stats().samples : 0, mode == kBfloat16 ? 2 : 0);
  }
}

// One process whose gradients travel in bfloat16 (the bf16 plugin): the engine still
// rounds them to it and back, as PyTorch's bf16_compress_hook does on one process, so
// that DDP on 1 GPU with bf16 costs and reports what the casts do.
TEST(DataParallelEngineTest, OneProcessInBfloat16RoundsTheGradients) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  at::Tensor p = torch::ones({5}).requires_grad_();
  // 1 + 2^-10 and friends: not representable in bfloat16's 8 bits of mantissa.
  const at::Tensor x = torch::arange(5.0) + 1.0 / 1024;
  const at::Tensor rounded = x.to(at::kBFloat16).to(at::kFloat);
  ASSERT_FALSE(at::equal(rounded, x));
  {
    const bool view = false;  // plugins/bucket_view's test covers bucket views
    EngineParts parts;
    parts.hooks.push_back(InBfloat16());
    DataParallelEngine engine({p}, *group, parts);
    for (int step = 0; step < 2; ++step) {
      engine.ZeroGrad();
      engine.BeginStep(true);
      (p * x).sum().backward();
      ASSERT_TRUE(engine.EndBackward().ok());
      EXPECT_TRUE(at::equal(p.grad(), rounded)) << "view " << view << ", step " << step;
    }
    EXPECT_EQ(engine.stats().sent_bytes, 5 * 2);
    EXPECT_EQ(engine.stats().sent_dtype, "BFloat16");
  }
}

// A hook that fails (its future holds an error) is the step's error, naming the bucket,
// once every bucket's future is done; not an exception out of the engine.
class FailingHook : public CommHook {
 public:
  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    if (bucket.index == 0) {
      future->setError(std::make_exception_ptr(std::runtime_error("no wire today")));
    } else {
      future->markCompleted(c10::IValue(bucket.buffer));
    }
    return future;
  }
};

TEST(DataParallelEngineTest, AFailingHookIsTheStepsError) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  at::Tensor p0 = torch::ones({4}).requires_grad_();
  at::Tensor p1 = torch::ones({4}).requires_grad_();
  EngineParts parts = OneParameterPerBucket();
  parts.hooks.push_back(Replacing([] { return std::make_unique<FailingHook>(); }));
  DataParallelEngine engine({p0, p1}, *group, parts);
  engine.ZeroGrad();
  engine.BeginStep(true);
  (p0 * p1).sum().backward();
  absl::Status s = engine.EndBackward();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "reducing bucket 0 of step 0 failed: no wire today");
}

// A hook that reads gradients where they lie: notes, per call, whether it was handed
// them and which of them were already in the bucket, then writes them into the bucket
// (with one process, their average).
class ReadingHook : public CommHook {
 public:
  struct Call {
    bool handed = false;              // GradBucket::gradients was filled
    std::vector<bool> in_bucket;      // per parameter of the bucket
    std::vector<bool> copied;         // its part of the bucket already equals it
  };
  explicit ReadingHook(std::vector<Call>* calls) : calls_(calls) {}
  std::shared_ptr<const BucketCodec> Codec() const override { return std::make_shared<const GradientsWhereTheyLie>(); }
  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    Call call;
    call.handed = !bucket.gradients.empty();
    for (size_t k = 0; k < bucket.gradients.size(); ++k) {
      const at::Tensor& g = bucket.gradients[k];
      call.in_bucket.push_back(g.is_alias_of(bucket.buffer));
      EXPECT_EQ(g.sizes(), at::IntArrayRef(bucket.sizes[k]));
      at::Tensor part = bucket.buffer.narrow(0, bucket.offsets[k], g.numel());
      call.copied.push_back(at::equal(part, g.reshape({-1})));
      part.copy_(g.reshape({-1}));
    }
    calls_->push_back(call);
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    future->markCompleted(c10::IValue(bucket.buffer));
    return future;
  }

 private:
  std::vector<Call>* calls_;
};

// The layout hands such a hook autograd's gradients instead of copying them into the
// bucket, except where a gradient is in the bucket already (a parameter unused from the
// start: its zeros), on steps that sample the error too. The gradients come out right.
TEST(DataParallelEngineTest, AHookThatReadsGradientsWhereTheyLieIsHandedAutogradsTensors) {
  REQUIRE_GLOO();
  {
    absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
    ASSERT_TRUE(group.ok()) << group.status();
    at::Tensor p0 = torch::ones({2, 3}).requires_grad_();
    at::Tensor p1 = torch::ones({3}).requires_grad_();
    at::Tensor unused = torch::ones({4}).requires_grad_();
    EngineParts parts;  // one bucket
    parts.missing_gradients = std::make_shared<UnusedFromTheStart>();
    std::vector<ReadingHook::Call> calls;
    parts.hooks.push_back(Replacing([&] { return std::make_unique<ReadingHook>(&calls); }));
    // Steps 0 and 2 are sampled (windows of one step).
    std::shared_ptr<ErrorSampler> sampler = AddErrorSampler({p0, p1, unused}, /*every=*/2, parts, /*window=*/1);
    DataParallelEngine engine({p0, p1, unused}, *group, parts);
    for (int step = 0; step < 4; ++step) {
      engine.ZeroGrad();
      engine.BeginStep(true);
      const double scale = step + 1;
      ((p0 * scale).sum() + (p1 * 2 * scale).sum()).backward();
      ASSERT_TRUE(engine.EndBackward().ok()) << step;
      ASSERT_EQ(calls.size(), static_cast<size_t>(step + 1));
      const ReadingHook::Call& call = calls.back();
      EXPECT_TRUE(call.handed) << step;
      if (call.handed) {
        // Only the unused parameter's (its zeros) is in the bucket.
        const Buckets buckets = engine.buckets();
        ASSERT_EQ(buckets.size(), 1u);
        std::vector<bool> expected;
        for (size_t i : buckets[0]) expected.push_back(i == 2);
        EXPECT_EQ(call.in_bucket, expected) << step;
        // The bucket still holds the last step's average where the engine did not copy
        // this step's gradient in (the gradients change with the step).
        EXPECT_EQ(call.copied, expected) << step;
      }
      EXPECT_TRUE(at::allclose(p0.grad(), torch::full({2, 3}, scale))) << step;
      EXPECT_TRUE(at::allclose(p1.grad(), torch::full({3}, 2 * scale))) << step;
    }
    EXPECT_EQ(sampler->stats().samples, 2);
  }
}

TEST(DataParallelEngineTest, MissingGradientIsAnError) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  at::Tensor used = torch::ones({2}).requires_grad_();
  at::Tensor unused = torch::ones({2}).requires_grad_();
  DataParallelEngine engine({used, unused}, *group, EngineParts());
  engine.ZeroGrad();
  engine.BeginStep(true);
  (used * 2).sum().backward();
  absl::Status s = engine.EndBackward();
  EXPECT_EQ(s.message(),
            "parameter(s) 1 received no gradient in this step. Every parameter must take part "
            "in every step");
}

TEST(DataParallelEngineTest, APolicyAllowsAParameterUnusedFromTheStart) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  at::Tensor used = torch::ones({2}).requires_grad_();
  at::Tensor unused = torch::ones({2}).requires_grad_();
  EngineParts parts;
  parts.missing_gradients = std::make_shared<UnusedFromTheStart>();
  DataParallelEngine engine({used, unused}, *group, parts);
  for (int step = 0; step < 3; ++step) {
    engine.ZeroGrad();
    engine.BeginStep(true);
    (used * 2).sum().backward();
    ASSERT_TRUE(engine.EndBackward().ok()) << step;
  }
  // The graph changes: the unused parameter gets a gradient.
  engine.ZeroGrad();
  engine.BeginStep(true);
  (used * unused).sum().backward();
  EXPECT_EQ(engine.EndBackward().message(),
            "parameter 1 received a gradient, but not in the first step: a parameter left "
            "unused in the first step must stay unused");
}

// A hook that halves each bucket's sum (one process: its mean) and notes which steps it
// was told are sampled.
class HalvingHook : public CommHook {
 public:
  explicit HalvingHook(std::vector<std::pair<int64_t, bool>>* calls) : calls_(calls) {}
  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    calls_->emplace_back(bucket.step, bucket.sampled);
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    future->markCompleted(c10::IValue(bucket.buffer * 0.5));
    return future;
  }

 private:
  std::vector<std::pair<int64_t, bool>>* calls_;
};

// Windows of 2 steps every 3: steps 0, 1, 3, 4 sampled, 6 not (timed). Each parameter's
// reduced gradient is half the exact one: relative error 0.5 and cosine 1, per step, per
// parameter and over every window. The hook is told which steps are sampled.
TEST(DataParallelEngineTest, SampledWindowsMeasureEachParameter) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  at::Tensor p0 = torch::ones({2, 3}).requires_grad_();
  at::Tensor p1 = torch::ones({3}).requires_grad_();
  EngineParts parts = OneParameterPerBucket();
  std::vector<std::pair<int64_t, bool>> calls;
  parts.hooks.push_back(Replacing([&] { return std::make_unique<HalvingHook>(&calls); }));
  std::shared_ptr<ErrorSampler> sampler = AddErrorSampler({p0, p1}, /*every=*/3, parts, /*window=*/2);
  DataParallelEngine engine({p0, p1}, *group, parts);
  for (int step = 0; step < 7; ++step) {
    if (step == 6) engine.StartTiming();
    engine.ZeroGrad();
    engine.BeginStep(true);
    ((p0 * (step + 1)).sum() + (p1 * torch::arange(3.0)).sum()).backward();
    ASSERT_TRUE(engine.EndBackward().ok()) << step;
  }
  engine.FinishTiming();
  std::vector<int64_t> sampled;
  for (const auto& [step, was_sampled] : calls) {
    if (was_sampled && (sampled.empty() || sampled.back() != step)) sampled.push_back(step);
  }
  EXPECT_EQ(sampled, (std::vector<int64_t>{0, 1, 3, 4}));
  const FidelityStats& f = sampler->stats();
  EXPECT_EQ(f.samples, 4);
  EXPECT_NEAR(f.relative_error_sum / f.samples, 0.5, 1e-6);
  EXPECT_NEAR(f.cosine_sum / f.samples, 1.0, 1e-6);
  ASSERT_EQ(f.parameters.size(), 2u);
  for (const FidelityStats::Parameter& p : f.parameters) {
    EXPECT_EQ(p.samples, 4);
    EXPECT_NEAR(p.relative_error_sum / p.samples, 0.5, 1e-6);
    EXPECT_NEAR(p.cosine_sum / p.samples, 1.0, 1e-6);
    EXPECT_EQ(p.windows, 2);
    EXPECT_NEAR(p.effective_error_sum / p.windows, 0.5, 1e-6);
  }
  ASSERT_EQ(f.windows.size(), 2u);  // W = 1, 2
  for (const FidelityStats::Window& w : f.windows) {
    EXPECT_EQ(w.count, 2) << w.steps;
    EXPECT_NEAR(w.error_sum / w.count, 0.5, 1e-6) << w.steps;
  }
}

}  // namespace
}  // namespace ddplab
