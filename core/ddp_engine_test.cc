#include "core/ddp_engine.h"

#include <memory>
#include <string>
#include <utility>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/launcher.h"
#include "core/testing/gloo.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

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
EngineOptions OneParameterPerBucket() {
  EngineOptions options;
  options.bucket_cap_bytes = 1;
  options.first_bucket_cap_bytes = 1;
  return options;
}

// One process, Gloo, with a hook (so that buckets are used): buckets start in reverse
// parameter order and are rebuilt once in the order gradients became ready. Here p0's
// gradient is ready before p1's. The hook sees every bucket, in order.
TEST(DataParallelEngineTest, RebuildsBucketsInTheOrderGradientsBecomeReady) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  at::Tensor p0 = torch::ones({4}).requires_grad_();
  at::Tensor p1 = torch::ones({4}).requires_grad_();
  const EngineOptions options = OneParameterPerBucket();
  std::vector<size_t> calls;
  DataParallelEngine engine({p0, p1}, *group, options, [&](const CommContext& context) {
    EXPECT_EQ(context.world_size, 1);
    return std::make_unique<RecordingHook>(&calls);
  });
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
  EngineOptions options;
  options.gradient_as_bucket_view = true;
  DataParallelEngine engine({p}, *group, options);
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
    DataParallelEngine::CommHookFactory factory;
    if (mode == kHook) factory = [&](const CommContext&) { return std::make_unique<RecordingHook>(&calls); };
    EngineOptions options = OneParameterPerBucket();
    if (mode == kBfloat16) {
      options.comm_dtype = at::kBFloat16;
      options.gradient_error_every = 1;  // every step also reduces exactly
    }
    DataParallelEngine engine({p0, p1}, c10::make_intrusive<NoCollectives>(), options, factory);
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
    EXPECT_EQ(engine.stats().gradient_error_samples, mode == kBfloat16 ? 2 : 0);
  }
}

// One process with bf16 and the optimizer overlapped, on a GPU: the updates, on a stream
// of the engine's own, read the bucket only after backward has cast into it. With no
// collective (one rank), nothing else orders the two streams: NCCL's wait did before.
// Backward is held behind a long kernel, so that a missing order reads the bucket early.
TEST(DataParallelEngineTest, OneProcessInBfloat16OrdersItsUpdatesOnAGpu) {
  if (!DDPLAB_CUDA_BUILD || !torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU";
#if defined(DDPLAB_CUDA)
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  const at::Tensor x = torch::rand({1 << 22}, cuda) + 1.0 / 1024;
  const at::Tensor expected = 1.0 - 0.5 * x.to(at::kBFloat16).to(at::kFloat);
  for (bool beside_forward : {false, true}) {
    at::Tensor p = torch::ones({1 << 22}, cuda).requires_grad_();
    EngineOptions options;
    options.comm_dtype = at::kBFloat16;
    options.overlap_optimizer = true;
    options.optimizer_during_backward = !beside_forward;  // on the update stream during backward
    options.updates_beside_forward = beside_forward;      // on it after backward
    DataParallelEngine engine({p}, c10::make_intrusive<NoCollectives>(), options);
    engine.SetParameterUpdate([&p](const std::vector<size_t>&) { p.detach().add_(p.grad(), -0.5); });
    engine.ZeroGrad();
    engine.BeginStep(true);
    at::cuda::sleep(int64_t{1} << 29);  // a quarter of a second or so on the compute stream
    (p * x).sum().backward();
    ASSERT_TRUE(engine.EndBackward().ok());
    engine.WaitForUpdates();
    EXPECT_TRUE(at::equal(p.detach(), expected)) << "beside the forward: " << beside_forward;
  }
#endif
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
  for (bool view : {false, true}) {
    EngineOptions options;
    options.comm_dtype = at::kBFloat16;
    options.gradient_as_bucket_view = view;
    DataParallelEngine engine({p}, *group, options);
    for (int step = 0; step < 2; ++step) {
      engine.ZeroGrad();
      engine.BeginStep(true);
      (p * x).sum().backward();
      ASSERT_TRUE(engine.EndBackward().ok());
      EXPECT_TRUE(at::equal(p.grad(), rounded)) << "view " << view << ", step " << step;
    }
    EXPECT_EQ(engine.stats().wire_bytes, 5 * 2);
    EXPECT_EQ(engine.stats().wire_dtype, "BFloat16");
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
  const EngineOptions options = OneParameterPerBucket();
  DataParallelEngine engine({p0, p1}, *group, options,
                            [](const CommContext&) { return std::make_unique<FailingHook>(); });
  engine.ZeroGrad();
  engine.BeginStep(true);
  (p0 * p1).sum().backward();
  absl::Status s = engine.EndBackward();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "the communication hook failed on bucket 0 of step 0: no wire today");
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
  bool ReadsGradientsWhereTheyLie() const override { return true; }
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

// The engine hands such a hook autograd's gradients instead of copying them into the
// bucket, except where a gradient is in the bucket already (a parameter unused from the
// start: its zeros) and on steps that sample the error (the exact reduction needs the
// bucket filled). With and without bucket views, the gradients come out right.
TEST(DataParallelEngineTest, AHookThatReadsGradientsWhereTheyLieIsHandedAutogradsTensors) {
  REQUIRE_GLOO();
  for (bool views : {true, false}) {
    SCOPED_TRACE(views ? "bucket views" : "no bucket views");
    absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
    ASSERT_TRUE(group.ok()) << group.status();
    at::Tensor p0 = torch::ones({2, 3}).requires_grad_();
    at::Tensor p1 = torch::ones({3}).requires_grad_();
    at::Tensor unused = torch::ones({4}).requires_grad_();
    EngineOptions options;  // one bucket
    options.static_graph = true;
    options.gradient_as_bucket_view = views;
    options.gradient_error_every = 2;  // steps 0 and 2 are sampled
    std::vector<ReadingHook::Call> calls;
    DataParallelEngine engine({p0, p1, unused}, *group, options,
                              [&](const CommContext&) { return std::make_unique<ReadingHook>(&calls); });
    for (int step = 0; step < 4; ++step) {
      engine.ZeroGrad();
      engine.BeginStep(true);
      const double scale = step + 1;
      ((p0 * scale).sum() + (p1 * 2 * scale).sum()).backward();
      ASSERT_TRUE(engine.EndBackward().ok()) << step;
      ASSERT_EQ(calls.size(), static_cast<size_t>(step + 1));
      const ReadingHook::Call& call = calls.back();
      EXPECT_EQ(call.handed, step % 2 == 1) << step;
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
    EXPECT_EQ(engine.stats().gradient_error_samples, 2);
  }
}

TEST(DataParallelEngineTest, TheTailGroupIsSetBeforeTheFirstStep) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  absl::StatusOr<ProcessGroupPtr> tail = OneProcessGroup();
  ASSERT_TRUE(tail.ok()) << tail.status();
  at::Tensor p = torch::ones({2}).requires_grad_();
  EngineOptions options;
  options.tail_buckets = 1;
  DataParallelEngine engine({p}, *group, options);
  EXPECT_TRUE(engine.SetTailGroup(*tail).ok());
  engine.ZeroGrad();
  engine.BeginStep(true);
  absl::Status late = engine.SetTailGroup(*tail);
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(late.message(), "the tail group must be set before the first step");
}

TEST(DataParallelEngineTest, MissingGradientIsAnError) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  at::Tensor used = torch::ones({2}).requires_grad_();
  at::Tensor unused = torch::ones({2}).requires_grad_();
  DataParallelEngine engine({used, unused}, *group, EngineOptions());
  engine.ZeroGrad();
  engine.BeginStep(true);
  (used * 2).sum().backward();
  absl::Status s = engine.EndBackward();
  EXPECT_EQ(s.message(),
            "parameter(s) 1 received no gradient in this step. Every parameter must take part "
            "in every step; with static_graph, a parameter unused in the first step may stay "
            "unused");
}

TEST(DataParallelEngineTest, StaticGraphAllowsAParameterUnusedFromTheStart) {
  REQUIRE_GLOO();
  absl::StatusOr<ProcessGroupPtr> group = OneProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  at::Tensor used = torch::ones({2}).requires_grad_();
  at::Tensor unused = torch::ones({2}).requires_grad_();
  EngineOptions options;
  options.static_graph = true;
  DataParallelEngine engine({used, unused}, *group, options);
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
            "parameter 1 received a gradient, but not in the first step: the graph changed, "
            "which static_graph does not allow");
}

// Real processes over Gloo: every combination of static_graph, bucket_view and bucket
// sizing (one bucket, or many small ones with a rebuild), on 2 and 3 ranks; and zero_copy
// and launch_thread with the levers they compose with.
struct Combination {
  int ranks;
  bool static_graph, bucket_view, small_buckets;
  int accumulate;
  const char* plugin = "";  // one more plugin, by name
  bool momentum = false;    // SGD with momentum and weight decay
};

class EngineProcessesTest : public ::testing::TestWithParam<Combination> {};

TEST_P(EngineProcessesTest, AveragedGradientsEqualOneProcessOverTheWholeBatch) {
  REQUIRE_GLOO();
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  const Combination& c = GetParam();
  std::vector<std::string> argv{
      runfiles->Rlocation("ddplab/core/testdata/engine_worker"),
      absl::StrCat("--static_graph=", c.static_graph),
      absl::StrCat("--bucket_view=", c.bucket_view),
      absl::StrCat("--bucket_cap_bytes=", c.small_buckets ? 20'000 : 25'000'000),
      absl::StrCat("--first_bucket_cap_bytes=", c.small_buckets ? 4'000 : 1'000'000),
      absl::StrCat("--accumulate=", c.accumulate),
      "--steps=3"};
  if (c.momentum) {
    argv.push_back("--momentum=0.9");
    argv.push_back("--weight_decay=0.01");
  }
  std::string plugins;
  for (absl::string_view name : absl::StrSplit(c.plugin, '+', absl::SkipEmpty())) {
    if (name == "optimizer_during_backward") {
      absl::StrAppend(&plugins, "plugin { optimizer_overlap { during_backward: true } } ");
    } else if (name == "tail3") {
      absl::StrAppend(&plugins, "plugin { tail_communicator { buckets: 3 } } ");
    } else if (name == "tail_all") {
      absl::StrAppend(&plugins, "plugin { tail_communicator { buckets: 1000 } } ");
    } else if (name == "drain") {
      argv.push_back("--drain_next_step=true");  // the worker's flag, not a plugin
    } else if (name == "forward_reversed3") {
      absl::StrAppend(&plugins, "plugin { forward_overlap { reversed_buckets: 3 } } ");
    } else if (name == "forward_reversed_all") {
      absl::StrAppend(&plugins, "plugin { forward_overlap { reversed_buckets: 1000 } } ");
    } else {
      absl::StrAppend(&plugins, "plugin { ", name, " {} } ");
    }
  }
  argv.push_back(absl::StrCat("--plugins=", plugins));
  LaunchOptions options;
  options.nproc_per_node = c.ranks;
  LaunchResult r = Launch(argv, options);
  EXPECT_EQ(r.exit_code, 0) << r.message;
}

std::vector<Combination> AllCombinations() {
  std::vector<Combination> out;
  for (int ranks : {2, 3}) {
    for (int bits = 0; bits < 8; ++bits) {
      out.push_back({ranks, (bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, 1});
    }
  }
  // Gradient accumulation: 3 micro-steps reduced once equal one large batch.
  out.push_back({2, false, false, true, 3});
  out.push_back({2, true, true, true, 3});
  // Gradients averaged where they lie, alone and with the levers they compose with.
  for (const char* plugin : {"zero_copy", "launch_thread", "zero_copy+launch_thread"}) {
    const bool views = std::string(plugin) == "launch_thread";
    out.push_back({2, false, views, true, 1, plugin});
    out.push_back({3, true, views, true, 1, plugin});
    out.push_back({2, true, false, false, 1, plugin});
    out.push_back({2, true, views, true, 3, plugin});
  }
  // The optimizer per bucket, after backward and during it, with momentum and weight
  // decay: each step's gradients as above, so every earlier update was the reference's
  // (the worker also fails if the engine did not do the updates).
  const std::pair<const char*, const char*> whens[] = {
      {"optimizer_overlap", "optimizer_overlap+zero_copy"},
      {"optimizer_during_backward", "optimizer_during_backward+zero_copy"}};
  for (const auto& [alone, zero_copy] : whens) {
    out.push_back({2, false, false, true, 1, alone, true});
    out.push_back({3, true, true, true, 1, alone, true});
    out.push_back({2, true, true, false, 1, alone, true});
    out.push_back({2, false, false, true, 3, alone, true});
    out.push_back({2, true, false, true, 1, zero_copy, true});
    out.push_back({3, false, false, true, 1, zero_copy, true});
    out.push_back({2, true, false, true, 3, zero_copy, true});
  }
  out.push_back({2, true, true, true, 1, "optimizer_overlap+launch_thread", true});
  // The last buckets over a second group (tail_communicator): one, three, or every bucket
  // (one bucket in all, or more buckets asked for than there are), with the levers and
  // the reductions it composes with.
  out.push_back({2, false, false, true, 1, "tail_communicator"});
  out.push_back({3, true, true, true, 1, "tail3"});
  out.push_back({2, true, true, false, 1, "tail_communicator"});
  out.push_back({2, false, false, true, 1, "tail_all"});
  out.push_back({2, true, false, true, 3, "tail3+zero_copy"});
  out.push_back({3, true, true, true, 1, "tail3+launch_thread"});
  out.push_back({2, true, false, true, 1, "tail3+zero_copy+optimizer_overlap", true});
  out.push_back({2, false, false, true, 1, "tail3+optimizer_during_backward", true});
  // The updates beside the next forward (forward_overlap), which waits for them stage by
  // stage before the worker checks the step: the last bucket, three or every bucket
  // reversed, none; with the reductions and levers it composes with.
  out.push_back({2, false, false, true, 1, "forward_overlap", true});
  out.push_back({3, true, true, true, 1, "forward_reversed3", true});
  out.push_back({2, true, true, false, 1, "forward_overlap", true});
  out.push_back({2, false, false, true, 3, "forward_reversed3", true});
  out.push_back({2, true, false, true, 1, "forward_reversed3+zero_copy", true});
  out.push_back({3, false, false, true, 3, "forward_overlap+zero_copy", true});
  out.push_back({2, true, true, true, 1, "forward_reversed_all+launch_thread", true});
  out.push_back({2, true, false, true, 1, "forward_reversed3+zero_copy+launch_thread", true});
  // Nobody waits in a forward: the next step's ZeroGrad finishes the updates (and before
  // the rebuild after the first step), the gradients checked at the last step.
  out.push_back({2, false, false, true, 1, "forward_reversed3+drain", true});
  out.push_back({3, true, true, true, 3, "forward_overlap+drain", true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    AllPlugins, EngineProcessesTest, ::testing::ValuesIn(AllCombinations()),
    [](const ::testing::TestParamInfo<Combination>& info) {
      const Combination& c = info.param;
      return absl::StrCat(c.ranks, "ranks", c.static_graph ? "_static_graph" : "",
                          c.bucket_view ? "_bucket_view" : "", c.small_buckets ? "_small_buckets" : "",
                          c.accumulate > 1 ? absl::StrCat("_accumulate", c.accumulate) : "",
                          *c.plugin ? "_" : "", absl::StrReplaceAll(c.plugin, {{"+", "_"}}),
                          c.momentum ? "_momentum" : "");
    });

// The same on two GPUs over NCCL, where the machine has them (the GPU machine's
// `bazel test //...`; skipped elsewhere): the CUDA paths (streams, events, the tail's
// side stream and its waits) against one process over the whole batch. The tolerance
// allows for cuDNN choosing other algorithms for the reference's larger batch; a missing
// wait gives errors of order one.
struct GpuCase {
  const char* name;
  const char* plugins;
  double grad_tolerance = 1e-3;  // bfloat16 on the wire: its rounding
  const char* flags = "";        // more of the worker's flags, space-separated
};

class EngineOnGpusTest : public ::testing::TestWithParam<GpuCase> {};

TEST_P(EngineOnGpusTest, AveragedGradientsEqualOneProcessOverTheWholeBatch) {
  if (!DDPLAB_CUDA_BUILD || !torch::cuda::is_available() || torch::cuda::device_count() < 2) {
    GTEST_SKIP() << "needs a CUDA build and two GPUs";
  }
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  std::vector<std::string> argv{runfiles->Rlocation("ddplab/core/testdata/engine_worker"),
                                "--cuda",
                                "--static_graph=true",
                                "--bucket_cap_bytes=20000",
                                "--first_bucket_cap_bytes=4000",
                                absl::StrCat("--grad_tolerance=", GetParam().grad_tolerance),
                                "--momentum=0.9",
                                "--steps=3",
                                absl::StrCat("--plugins=", GetParam().plugins)};
  for (absl::string_view flag : absl::StrSplit(GetParam().flags, ' ', absl::SkipEmpty())) {
    argv.push_back(std::string(flag));
  }
  LaunchOptions options;
  options.nproc_per_node = 2;
  LaunchResult r = Launch(argv, options);
  EXPECT_EQ(r.exit_code, 0) << r.message;
}

INSTANTIATE_TEST_SUITE_P(
    Plugins, EngineOnGpusTest,
    ::testing::Values(
        GpuCase{"plain", ""}, GpuCase{"bucket_view", "plugin { bucket_view {} }"},
        GpuCase{"zero_copy", "plugin { zero_copy {} }"},
        GpuCase{"bf16_bucket_view_unused_parameter", "plugin { bf16 {} } plugin { bucket_view {} }", 1.0 / 256,
                "--unused_parameter"},
        GpuCase{"bf16_optimizer_overlap", "plugin { bf16 {} } plugin { optimizer_overlap {} }", 1.0 / 256},
        GpuCase{"zero_copy_optimizer_overlap", "plugin { zero_copy {} } plugin { optimizer_overlap {} }"},
        GpuCase{"bucket_view_optimizer_during_backward",
                "plugin { bucket_view {} } plugin { optimizer_overlap { during_backward: true } }"},
        GpuCase{"launch_thread", "plugin { launch_thread {} }"},
        // PowerSGD at full rank reads autograd's gradients on its own stream.
        GpuCase{"powersgd_full_rank", "plugin { powersgd { rank: 256 min_compression_rate: 0.001 } }"},
        GpuCase{"powersgd_full_rank_bf16_state",
                "plugin { powersgd { rank: 256 min_compression_rate: 0.001 bf16_state: true } } "
                "plugin { bucket_view {} }",
                1.0 / 64},
        GpuCase{"powersgd_full_rank_bucket_view_unused_parameter",
                "plugin { powersgd { rank: 256 min_compression_rate: 0.001 } } plugin { bucket_view {} }", 1e-3,
                "--unused_parameter"},
        // At rank 4 the passes run in the fused kernels (full rank is beyond them): the
        // learnable task's held-out loss within 5% of exact all-reduce's, as on CPUs.
        GpuCase{"powersgd_rank4_loss", "plugin { powersgd { rank: 4 } }", -1,
                "--steps=60 --batch=16 --momentum=0 --loss_tolerance=0.05"},
        GpuCase{"powersgd_rank4_bf16_state_bucket_view_loss",
                "plugin { powersgd { rank: 4 bf16_state: true } } plugin { bucket_view {} }", -1,
                "--steps=60 --batch=16 --momentum=0 --loss_tolerance=0.05"},
        GpuCase{"tail3", "plugin { tail_communicator { buckets: 3 } }"},
        GpuCase{"tail3_zero_copy_optimizer_overlap",
                "plugin { zero_copy {} } plugin { optimizer_overlap {} } plugin { tail_communicator { buckets: 3 } }"},
        GpuCase{"tail2_bucket_view_launch_thread",
                "plugin { bucket_view {} } plugin { launch_thread {} } plugin { tail_communicator { buckets: 2 } }"},
        GpuCase{"tail3_optimizer_during_backward",
                "plugin { optimizer_overlap { during_backward: true } } plugin { tail_communicator { buckets: 3 } }"},
        GpuCase{"tail_all", "plugin { tail_communicator { buckets: 1000 } }"},
        GpuCase{"forward_overlap", "plugin { forward_overlap {} }"},
        GpuCase{"forward_reversed3_zero_copy",
                "plugin { zero_copy {} } plugin { forward_overlap { reversed_buckets: 3 } }"},
        GpuCase{"forward_reversed3_bucket_view_launch_thread",
                "plugin { bucket_view {} } plugin { launch_thread {} } plugin { forward_overlap { reversed_buckets: 3 } }"},
        GpuCase{"forward_reversed_all_bf16",
                "plugin { bf16 {} } plugin { forward_overlap { reversed_buckets: 1000 } }", 1.0 / 256},
        // The updates start late on the device: a forward or ZeroGrad that did not make the
        // compute stream wait for them would read parameters not yet updated.
        GpuCase{"forward_overlap_slow_updates", "plugin { forward_overlap {} }", 1e-3, "--slow_updates"},
        GpuCase{"forward_reversed3_zero_copy_drain_slow_updates",
                "plugin { zero_copy {} } plugin { forward_overlap { reversed_buckets: 3 } }", 1e-3,
                "--slow_updates --drain_next_step"}),
    [](const ::testing::TestParamInfo<GpuCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ddplab

namespace ddplab {
namespace {

// Compression over real processes: what each lossy configuration must reproduce.
struct CompressionCase {
  const char* name;
  int ranks;
  const char* plugins;
  double grad_tolerance;  // < 0: not checked
  double loss_tolerance;  // < 0: not checked
  const char* wire_dtype;
  int steps;
  int batch = 4;          // per rank
  const char* flags = "";  // more of the worker's flags, space-separated
};

class CompressionProcessesTest : public ::testing::TestWithParam<CompressionCase> {};

TEST_P(CompressionProcessesTest, MatchesTheExactAverage) {
  REQUIRE_GLOO();
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  const CompressionCase& c = GetParam();
  std::vector<std::string> argv{runfiles->Rlocation("ddplab/core/testdata/engine_worker"),
                                absl::StrCat("--plugins=", c.plugins),
                                absl::StrCat("--grad_tolerance=", c.grad_tolerance),
                                absl::StrCat("--loss_tolerance=", c.loss_tolerance),
                                absl::StrCat("--wire_dtype=", c.wire_dtype),
                                absl::StrCat("--steps=", c.steps),
                                absl::StrCat("--batch=", c.batch),
                                "--bucket_cap_bytes=20000",
                                "--first_bucket_cap_bytes=4000"};
  for (absl::string_view flag : absl::StrSplit(c.flags, ' ', absl::SkipEmpty())) argv.push_back(std::string(flag));
  LaunchOptions options;
  options.nproc_per_node = c.ranks;
  LaunchResult r = Launch(argv, options);
  EXPECT_EQ(r.exit_code, 0) << r.message;
}

// bfloat16 keeps 8 significant bits: a relative error up to 2^-8 per element.
constexpr double kBf16Rounding = 1.0 / 256;

INSTANTIATE_TEST_SUITE_P(
    Plugins, CompressionProcessesTest,
    ::testing::Values(
        // bf16: the exact average within bf16 rounding, sent as bfloat16.
        CompressionCase{"bf16_2ranks", 2, "plugin { bf16 {} }", kBf16Rounding, -1, "BFloat16", 3},
        CompressionCase{"bf16_3ranks", 3, "plugin { bf16 {} }", kBf16Rounding, -1, "BFloat16", 3},
        // Gradients cast into the wire as they come in: into bucket views, with a parameter
        // unused from the start (its share is zeros), before and after the rebuild; over
        // accumulated micro-steps; and a sampled step (cast from the float32 bucket, beside
        // its exact copy) before the others.
        CompressionCase{"bf16_bucket_view_unused_parameter", 2, "plugin { bf16 {} }", kBf16Rounding, -1,
                        "BFloat16", 4, 4, "--bucket_view=true --static_graph=true --unused_parameter"},
        CompressionCase{"bf16_unused_parameter", 3, "plugin { bf16 {} }", kBf16Rounding, -1, "BFloat16", 4, 4,
                        "--static_graph=true --unused_parameter"},
        CompressionCase{"bf16_bucket_view_accumulate3", 2, "plugin { bf16 {} }", kBf16Rounding, -1, "BFloat16", 3,
                        4, "--bucket_view=true --accumulate=3"},
        CompressionCase{"bf16_bucket_view_sampled", 2, "plugin { bf16 { sample_error_every: 2 } }", kBf16Rounding,
                        -1, "BFloat16", 4, 4, "--bucket_view=true"},
        // With the optimizer overlapped: each bucket's update reads the bucket's
        // bfloat16 average, cast back.
        CompressionCase{"bf16_optimizer_overlap", 2, "plugin { bf16 {} } plugin { optimizer_overlap {} }",
                        kBf16Rounding, -1, "BFloat16", 3},
        CompressionCase{"bf16_forward_overlap", 2,
                        "plugin { bf16 {} } plugin { forward_overlap { reversed_buckets: 3 } }",
                        kBf16Rounding, -1, "BFloat16", 3},
        // Sampled steps (the exact reduction beside bf16's) are not deferred; the others are.
        CompressionCase{"bf16_sampled_forward_overlap", 2,
                        "plugin { bf16 { sample_error_every: 2 } } plugin { forward_overlap {} }", kBf16Rounding,
                        -1, "BFloat16", 4},
        CompressionCase{"bf16_optimizer_during_backward", 2,
                        "plugin { bf16 {} } plugin { optimizer_overlap { during_backward: true } }",
                        kBf16Rounding, -1, "BFloat16", 3},
        // PowerSGD with a rank at least every matrix's own reproduces the exact average.
        CompressionCase{"bf16_tail_communicator", 2,
                        "plugin { bf16 {} } plugin { tail_communicator { buckets: 2 } }", kBf16Rounding,
                        -1, "BFloat16", 3},
        CompressionCase{"powersgd_full_rank",
                        2,
                        "plugin { powersgd { rank: 256 min_compression_rate: 0.001 } }",
                        1e-4,
                        -1,
                        "",
                        3},
        // Gradients read where autograd left them (the engine copies none into the bucket):
        // into bucket views with a parameter unused from the start (its zeros are in the
        // bucket), over accumulated micro-steps, with sampled steps (which fill the
        // bucket) between the others (steps 0 and 2: untimed, as only untimed steps are
        // sampled), and uncompressed before the start step. (Three
        // steps: at full rank float32's rounding, carried by error feedback, passes 1e-4
        // of the gradient by the fourth, with or without the engine's copies.)
        CompressionCase{"powersgd_full_rank_bucket_view_unused_parameter", 2,
                        "plugin { powersgd { rank: 256 min_compression_rate: 0.001 } }", 1e-4, -1, "", 3, 4,
                        "--bucket_view=true --static_graph=true --unused_parameter"},
        CompressionCase{"powersgd_full_rank_bucket_view_accumulate3", 3,
                        "plugin { powersgd { rank: 256 min_compression_rate: 0.001 } }", 1e-4, -1, "", 3, 4,
                        "--bucket_view=true --accumulate=3"},
        CompressionCase{"powersgd_full_rank_bucket_view_sampled", 2,
                        "plugin { powersgd { rank: 256 min_compression_rate: 0.001 sample_error_every: 2 } }",
                        1e-4, -1, "", 3, 4, "--bucket_view=true --timed_from=-1"},
        CompressionCase{"powersgd_full_rank_bucket_view_start_step2", 2,
                        "plugin { powersgd { rank: 256 min_compression_rate: 0.001 start_step: 2 } }", 1e-4,
                        -1, "", 3, 4, "--bucket_view=true"},
        // The same with the optimizer per bucket after backward, behind the hook's result.
        CompressionCase{"powersgd_full_rank_optimizer_overlap",
                        2,
                        "plugin { powersgd { rank: 256 min_compression_rate: 0.001 } } "
                        "plugin { optimizer_overlap {} }",
                        1e-4,
                        -1,
                        "",
                        3},
        // On the learnable task, after the same steps, the loss on held-out samples is
        // at most 5% above exact all-reduce's.
        CompressionCase{"bf16_loss", 2, "plugin { bf16 {} }", -1, 0.05, "BFloat16", 60, 16},
        CompressionCase{"powersgd_rank4_loss", 2, "plugin { powersgd { rank: 4 } }", -1, 0.05, "", 60, 16},
        CompressionCase{"powersgd_rank4_bf16_state_loss", 2, "plugin { powersgd { rank: 4 bf16_state: true } }",
                        -1, 0.05, "", 60, 16},
        // Full rank with M and the error in bfloat16: the exact average to its rounding,
        // over bucket views.
        CompressionCase{"powersgd_full_rank_bf16_state", 2,
                        "plugin { powersgd { rank: 256 min_compression_rate: 0.001 bf16_state: true } }",
                        kBf16Rounding * 4, -1, "", 3, 4, "--bucket_view=true"},
        CompressionCase{"bf16_powersgd_rank4_loss", 2, "plugin { bf16 {} } plugin { powersgd { rank: 4 } }",
                        -1, 0.05, "", 60, 16}),
    [](const ::testing::TestParamInfo<CompressionCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ddplab
