// sharded_optimizer: the optimizer sharded over the ranks (ZeRO stage 1, as DeepSpeed
// and PyTorch's ZeroRedundancyOptimizer name it), fused into the bucket reduction. Each
// rank keeps the optimizer's state for, and steps, only its shard of each parameter; the
// bucket's gradients are reduce-scattered (each rank receives its shard's mean) and the
// stepped shards all-gathered into every rank's parameters. The parameters after each
// step are those of an all-reduce and a whole step: each element is updated by the same
// arithmetic on the same mean (Note [A sharded step]).
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/hook_stream.h"
#include "core/plugin/plugin_api.h"
#include "plugins/sharded_optimizer/peer_buckets.h"
#include "plugins/sharded_optimizer/sharded_optimizer.pb.h"

namespace {

using ddplab::GradBucket;

// Note [A sharded step]
// What it saves. An all-reduce's bytes travel either way: a reduce-scatter and an
// all-gather move one all-reduce's between them. What is saved is the optimizer's memory
// traffic and state: AdamW reads and writes 28 bytes a parameter a step, and each rank
// now does that for 1/W of them, with 1/W of the state. Beside a CUDA graph's backward,
// which leaves no gaps, work costs about the memory time of its bytes (bench/NOTES.md,
// "What work beside a graph's backward costs is its bytes"): this is the lever that
// removes bytes rather than moving them.
//
// The shards. Rank r's shard of a parameter of n elements is its elements
// [r n / W, (r + 1) n / W), flattened. So a parameter's shard is the same whichever
// bucket holds it (the engine regroups its buckets after the first step), and the
// optimizer's state, kept per shard by the engine's optimizer over parts
// (CommContext::optimizer_over_parts), stays the shard's. A parameter whose size W does
// not divide is averaged whole and stepped whole by every rank (as without the plugin).
//
// When. Each bucket's reduce-scatter starts as the bucket is handed over, beside backward.
// Then, by default (`during_backward`), each bucket's shard is stepped and its all-gather
// started as soon as its reduce-scatter lands, on a stream of the hook's own (Note [A
// hook's own stream], core/engine/hook_stream.h), so that the all-gathers travel beside
// backward: on 2 H200 under bf16 autocast, as a graph, 56.87 steps/s against 53.97 for
// the all-reduce (0.888 of one GPU against 0.842), where stepping after backward gained
// nothing (53.79; bench/NOTES.md, "The optimizer sharded over the ranks"). The first step
// runs after backward either way (the optimizer over the shards is made once every
// parameter's size has been seen).
// With `during_backward: false`, once backward is queued (BackwardDone), group after
// group of consecutive buckets: the
// current stream waits for their reduce-scatters, their shards are stepped in one update,
// and the all-gather of their parameters starts, beside the next group's step. Groups,
// not single buckets, because each update is a kernel of its own: in one process (one
// H200, the graph step, every parameter whole) stepping each 25 MiB bucket alone cost
// 0.15 ms a step over one update of all, groups of 64 MiB 0.12 ms (bench/NOTES.md). A
// group is at least `step_group_mb` of stepped gradients; the smaller the groups, the
// sooner the first all-gather starts. That order was tried first because the whole
// optimizer beside a graph's backward had measured 3.4% slower than after it; with
// sharding, what goes beside backward is 1/W of the optimizer and the all-gather that
// would otherwise wait after it. Either way each bucket's future completes once its
// all-gather is done, so the engine's wait orders the next step after it.
// With `by_copy_engines`, from the second step, each bucket's step beside backward is done
// by copies between the ranks' buckets instead (Note [A sharded step by copy engines],
// peer_buckets.h): the same shards, the same state.
//
// The gradients. After a step the parameters' gradients are not their means: where the
// backend reduce-scatters (NCCL) they keep this rank's own; where it cannot (Gloo), each
// gradient is averaged whole and keeps its mean. So whatever reads the averaged gradients
// after the reduction is refused: a codec or another hook in the chain.

// step_group_mb's default: until measured, 64 MiB of stepped gradients a group.
constexpr double kDefaultGroupMb = 64;

// The buckets' memory where copy engines reduce them: in symmetric memory.
class PeerCodec : public ddplab::BucketCodec {
 public:
  explicit PeerCodec(std::shared_ptr<ddplab::PeerBuckets> peers) : peers_(std::move(peers)) {}
  at::Tensor Buffer(int64_t numel, const at::TensorOptions& gradients) const override {
    return peers_->Allocate(numel, gradients);
  }
  std::string Describe() const override { return "in symmetric memory, stepped by copy engines"; }

 private:
  std::shared_ptr<ddplab::PeerBuckets> peers_;
};

class ShardedStep : public ddplab::CommHook {
 public:
  ShardedStep(const ddplab::CommContext& context, bool during_backward, int64_t group_bytes,
              std::shared_ptr<ddplab::PeerBuckets> peers)
      : during_backward_(during_backward),
        group_bytes_(group_bytes),
        collectives_(context.collectives),
        make_optimizer_(context.optimizer_over_parts),
        rank_(context.rank),
        world_(context.world_size),
        peers_(std::move(peers)) {}

  std::shared_ptr<const ddplab::BucketCodec> Codec() const override {
    if (peers_) return std::make_shared<const PeerCodec>(peers_);
    return ddplab::CommHook::Codec();
  }

  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    if (peers_) {
      peers_->InUse();
      if (optimizer_.step) return ByCopies(bucket);
    }
    Pending p;
    // What the layout gets back: the bucket as it was handed over (Note [A sharded step]).
    p.value = bucket.buffer.defined() ? c10::IValue(bucket.buffer) : c10::IValue(bucket.gradients);
    std::vector<at::Tensor> inputs, shards, whole;
    for (size_t k = 0; k < bucket.parameters.size(); ++k) {
      const size_t i = bucket.parameters[k];
      const at::Tensor flat = bucket.gradients[k].reshape(-1);
      if (numel_.size() <= i) numel_.resize(i + 1, -1);
      numel_[i] = flat.numel();
      if (!Sharded(flat.numel())) {
        whole.push_back(flat);
        p.whole.push_back(i);
        continue;
      }
      if (shard_grads_.size() <= i) shard_grads_.resize(i + 1);
      at::Tensor& shard = shard_grads_[i];
      if (!shard.defined()) shard = at::empty({flat.numel() / world_}, flat.options());
      inputs.push_back(flat);
      shards.push_back(shard);
      p.sharded.push_back(i);
    }
    p.grads = shards;
    p.grads.insert(p.grads.end(), whole.begin(), whole.end());
    for (const at::Tensor& g : p.grads) p.bytes += g.numel() * g.element_size();
    if (!inputs.empty()) p.scatter = collectives_->StartMeanScatter(inputs, shards);
    if (!whole.empty()) p.mean = collectives_->StartMeanCoalesced(whole);
    std::vector<c10::Device> devices;  // the bucket's, where its gradients are
    if (!bucket.gradients.empty() && !bucket.gradients[0].device().is_cpu()) devices.push_back(bucket.gradients[0].device());
    p.done = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get(), devices);
    c10::intrusive_ptr<c10::ivalue::Future> done = p.done;
    if (during_backward_ && optimizer_.step) {
      stream_.Run(bucket, [&] { Finish(p); });
    } else {
      pending_.push_back(std::move(p));
    }
    return done;
  }

  void BackwardDone() override {
    size_t completed = 0;
    try {
      if (!optimizer_.step) optimizer_ = MakeOptimizer();
      // Consecutive buckets stepped together, in groups of at least group_bytes_ of what
      // the step reads (Note [A sharded step]).
      for (size_t begin = 0, end = 0; begin < pending_.size(); begin = end) {
        int64_t bytes = 0;
        while (end < pending_.size() && (end == begin || bytes < group_bytes_)) bytes += pending_[end++].bytes;
        StepAndGather(pending_.data() + begin, pending_.data() + end);
      }
      for (Pending& p : pending_) {
        if (p.gather.wait) p.gather.wait();
        p.done->markCompleted(p.value);
        ++completed;
      }
    } catch (...) {
      for (size_t k = completed; k < pending_.size(); ++k) pending_[k].done->setError(std::current_exception());
    }
    pending_.clear();
  }

 private:
  struct Pending {
    c10::IValue value;
    std::vector<size_t> sharded, whole;  // the bucket's parameters, by kind
    std::vector<at::Tensor> grads;       // their averaged gradients once waited for, in that order
    int64_t bytes = 0;                   // of `grads`
    ddplab::PendingMean scatter, mean, gather;
    c10::intrusive_ptr<c10::ivalue::Future> done;
  };

  bool Sharded(int64_t numel) const { return world_ > 1 && numel % world_ == 0; }

  // Once every parameter's size has been seen (the first synced step hands over every
  // bucket): the optimizer over this rank's shard of each.
  ddplab::PartsOptimizer MakeOptimizer() {
    if (!make_optimizer_) throw std::runtime_error("sharded_optimizer: the engine offers no optimizer over parts of the parameters");
    std::vector<ddplab::ParameterPart> parts;
    for (size_t i = 0; i < numel_.size(); ++i) {
      const int64_t n = numel_[i];
      if (n < 0) throw std::runtime_error("sharded_optimizer: parameter " + std::to_string(i) + " was in no bucket of the step");
      parts.push_back(Sharded(n) ? ddplab::ParameterPart{rank_ * (n / world_), n / world_} : ddplab::ParameterPart{0, n});
    }
    return make_optimizer_(parts);
  }

  // The whole of a bucket beside backward by copy engines (`by_copy_engines`, from the
  // second step): reduced, stepped and gathered, on the hook's stream.
  c10::intrusive_ptr<c10::ivalue::Future> ByCopies(GradBucket& bucket) {
    auto done = c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get(),
                                                         std::vector<c10::Device>{bucket.buffer.device()});
    stream_.Run(bucket, [&] {
      try {
        peers_->Step(bucket, optimizer_);
        done->markCompleted(c10::IValue(bucket.buffer));
      } catch (...) {
        done->setError(std::current_exception());
      }
    });
    return done;
  }

  // The whole of a bucket beside backward (`during_backward`): stepped, gathered, done.
  void Finish(Pending& p) {
    try {
      StepAndGather(&p, &p + 1);
      if (p.gather.wait) p.gather.wait();
      p.done->markCompleted(p.value);
    } catch (...) {
      p.done->setError(std::current_exception());
    }
  }

  // Buckets [begin, end): their means waited for (on a GPU: the current stream waits),
  // their shards and whole parameters stepped at once, and one all-gather of their shards
  // started.
  void StepAndGather(Pending* begin, Pending* end) {
    std::vector<size_t> params;
    std::vector<at::Tensor> grads, wholes;
    for (Pending* b = begin; b != end; ++b) {
      Pending& p = *b;
      if (p.scatter.wait) p.scatter.wait();
      if (p.mean.wait) p.mean.wait();
      params.insert(params.end(), p.sharded.begin(), p.sharded.end());
      params.insert(params.end(), p.whole.begin(), p.whole.end());
      grads.insert(grads.end(), p.grads.begin(), p.grads.end());
      for (size_t i : p.sharded) wholes.push_back(optimizer_.flat_parameters.at(i));
    }
    optimizer_.step(params, grads);
    if (wholes.empty()) return;
    const ddplab::PendingMean gather = collectives_->StartGatherInPlace(wholes);
    for (Pending* b = begin; b != end; ++b) b->gather = gather;
  }

  const bool during_backward_;
  const int64_t group_bytes_;
  std::shared_ptr<const ddplab::Collectives> collectives_;
  ddplab::PartsOptimizerMaker make_optimizer_;
  const int64_t rank_, world_;
  ddplab::PartsOptimizer optimizer_;      // made at the first step's BackwardDone
  std::vector<int64_t> numel_;            // per parameter, as seen in buckets (-1: not yet)
  std::vector<at::Tensor> shard_grads_;   // per sharded parameter: its shard's mean
  std::vector<Pending> pending_;          // this step's buckets so far, to step after backward
  ddplab::HookStream stream_;             // Run's (autograd's thread) alone
  std::shared_ptr<ddplab::PeerBuckets> peers_;  // with by_copy_engines over several ranks
};

void Register(const ddplab::plugins::sharded_optimizer::v1::Config& config, ddplab::PluginRegistrar& registrar) {
  const bool during_backward = !config.has_during_backward() || config.during_backward();
  const double group_mb = config.has_step_group_mb() ? config.step_group_mb() : kDefaultGroupMb;
  if (!(group_mb >= 0) || group_mb > 1e6) {
    registrar.RejectField("step_group_mb", "must be between 0 (each bucket stepped alone) and 1e6 MiB");
    return;
  }
  const auto group_bytes = static_cast<int64_t>(group_mb * 1024 * 1024);
  const bool by_copy_engines = config.by_copy_engines();
  if (by_copy_engines && !during_backward) {
    registrar.RejectField("by_copy_engines", "copy engines step each bucket beside backward: leave during_backward set");
    return;
  }
  registrar.WrapCommHook(
      ddplab::ExtensionPoint::kCommHook,
      [during_backward, group_bytes, by_copy_engines](std::unique_ptr<ddplab::CommHook>,
                                                      const ddplab::CommContext& context) -> std::unique_ptr<ddplab::CommHook> {
        std::shared_ptr<ddplab::PeerBuckets> peers;
        if (by_copy_engines && context.world_size > 1) {  // one rank has no peers to copy from
          absl::StatusOr<std::unique_ptr<ddplab::PeerBuckets>> made = ddplab::PeerBuckets::Make(context);
          if (!made.ok()) throw std::invalid_argument("sharded_optimizer: by_copy_engines: " + std::string(made.status().message()));
          peers = std::move(*made);
        }
        return std::make_unique<ShardedStep>(context, during_backward, group_bytes, std::move(peers));
      });
  registrar.Refuse(ddplab::ExtensionPoint::kCodec,
                   "a codec hands the hook below it a bucket to reduce and turns the result back into gradients, and "
                   "the sharded optimizer never forms the bucket's mean: each rank has its shard's alone");
  registrar.Refuse(ddplab::ExtensionPoint::kHookWrapper,
                   "a wrapper acts on each bucket's averaged gradients, which the sharded optimizer never forms, and "
                   "the sharded optimizer already updates the parameters itself");
  ddplab::PyTorchForm form;
  form.not_in_pytorch = {
      "sharded_optimizer (PyTorch: ZeroRedundancyOptimizer(overlap_with_ddp=True) with "
      "ddp_zero_hook.hook_with_zero_step, which all-reduces each bucket whole and broadcasts what each rank stepped)"};
  registrar.DescribeInPyTorch(form);
}

}  // namespace

DDPLAB_PLUGIN("sharded_optimizer", "1.0.0", ddplab::plugins::sharded_optimizer::v1::Config,
              ddplab::PluginStatus::kExperimental, Register)
