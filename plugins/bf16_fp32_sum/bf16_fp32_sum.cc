// bf16_fp32_sum: gradients travel in bfloat16 but are summed in float32, rounded to
// bfloat16 once whatever the number of ranks (Megatron-core's
// reduce_scatter_with_fp32_accumulation), as a communication hook. PyTorch's
// bf16_compress_hook (plugins/bf16) all-reduces in bfloat16: on NCCL every hop of the
// ring rounds the partial sum, so its error grows with the ranks. Here, per bucket:
//   1. the gradients are cast to bfloat16, padded to a multiple of the ranks and split in
//      one chunk per rank;
//   2. an all-to-all (c10d's alltoall_base) gives rank r every rank's chunk r: a
//      reduce-scatter's bytes, with nothing reduced on the wire;
//   3. rank r sums its chunks in float32, in rank order, divides by the ranks and rounds
//      the mean once to bfloat16;
//   4. an all-gather gives every rank every rounded chunk;
//   5. the bucket gets the mean in its own dtype (float32).
// The bytes of an all-reduce in bfloat16 (a reduce-scatter and an all-gather). bfloat16
// travels as its bytes: Gloo in LibTorch 1.x has no bfloat16, and nothing is reduced on
// the wire. One process rounds its gradients once, as plugins/bf16 does, and issues no
// collective. Two ranks on NCCL take one all-reduce in bfloat16 instead (Note [Two ranks
// round once]).
//
// Note [Two ranks round once]
// Over two ranks every element of the mean is one addition, a/2 + b/2 (NCCL's average
// scales each input by 1/2, exact in bfloat16 above its smallest normal numbers), rounded
// once to bfloat16, whatever algorithm NCCL picks: the result of steps 2 to 4 bit for
// bit, in one collective. Over host memory on 2 H200 the all-to-all and all-gather made
// the step 0.916 of plugins/bf16's (bench/NOTES.md). From three ranks on, an all-reduce in
// bfloat16 rounds each hop, so the all-to-all stays there.
//
// Gradients are read where autograd left them (GradBucket::gradients) and cast straight
// into the bfloat16 chunks: the float32 bucket is only written, with the mean.
//
// On GPUs (NCCL) Run queues everything on a stream of the hook's own and NCCL's, and
// returns (Note [A hook's own stream], core/engine/hook_stream.h). On CPUs
// (Gloo) wait() blocks the host, so the buckets are reduced on a thread of the hook's
// own, one after another in the order the engine hands them over (the same on every
// rank, so the collectives match), while backward goes on.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/collectives.h"
#include "core/engine/flat_bucket.h"
#include "core/engine/own_reduction.h"
#include "core/plugin/plugin_api.h"
#include "plugins/bf16_fp32_sum/bf16_fp32_sum.pb.h"

namespace {

using ddplab::CommContext;
using ddplab::GradBucket;

// The bucket's mean over the ranks, rounded once to bfloat16, into bucket.buffer (steps
// 1 to 5 above). On NCCL the waits order the current stream after each collective.
void Reduce(const CommContext& context, GradBucket& bucket) {
  const int world = context.world_size;
  const int64_t numel = bucket.buffer.numel();
  const int64_t chunk = (numel + world - 1) / world;
  at::Tensor wire = at::empty({chunk * world}, bucket.buffer.options().dtype(at::kBFloat16));
  ddplab::CopyBucketInto(bucket, wire);  // cast to bfloat16, zeros after
  if (world == 1) {
    bucket.buffer.copy_(wire);
    return;
  }
  if (world == 2 && context.nccl) {  // Note [Two ranks round once]
    context.collectives->StartMean(wire).wait();
    bucket.buffer.copy_(wire.narrow(0, 0, numel));
    return;
  }
  at::Tensor received = at::empty_like(wire);
  at::Tensor out = received.view(at::kByte), in = wire.view(at::kByte);
  std::vector<int64_t> out_splits, in_splits;  // empty: equal chunks
  context.process_group->alltoall_base(out, in, out_splits, in_splits)->wait();
  // Chunk `rank` of every rank, summed in float32 in rank order; the mean, rounded once.
  const at::Tensor from = received.view({world, chunk});
  at::Tensor sum = from[0].to(at::kFloat);
  for (int r = 1; r < world; ++r) sum.add_(from[r]);
  const at::Tensor mine = sum.div_(world).to(at::kBFloat16);
  at::Tensor gathered = at::empty_like(wire);
  context.collectives->AllGatherBytes(gathered, mine);
  bucket.buffer.copy_(gathered.narrow(0, 0, numel));
}

class Bf16Fp32SumHook : public ddplab::CommHook {
 public:
  explicit Bf16Fp32SumHook(const CommContext& context) : context_(context) {}

  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    Count(bucket);
    return own_.Run(bucket);
  }

  // Reads the gradients where autograd left them: nothing is packed into the bucket.
  std::shared_ptr<const ddplab::BucketCodec> Codec() const override {
    return std::make_shared<const ddplab::GradientsWhereTheyLie>();
  }

  // compression_ratio: the bytes of the gradients over the bytes sent in bfloat16
  // (padding included), as an all-reduce of the float32 buckets would send them.
  std::map<std::string, double> Stats() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    std::map<std::string, double> stats;
    if (wire_bytes_ > 0) stats["compression_ratio"] = static_cast<double>(gradient_bytes_) / wire_bytes_;
    return stats;
  }

 private:
  void Count(const GradBucket& bucket) {
    const int64_t numel = bucket.buffer.numel();
    const int64_t padded = (numel + context_.world_size - 1) / context_.world_size * context_.world_size;
    std::lock_guard<std::mutex> lock(stats_mu_);
    gradient_bytes_ += numel * static_cast<int64_t>(bucket.buffer.element_size());
    wire_bytes_ += padded * 2;
  }

  const CommContext context_;
  mutable std::mutex stats_mu_;  // the counters below: Run writes, Stats reads
  int64_t gradient_bytes_ = 0, wire_bytes_ = 0;
  // On the hook's stream, or its thread over Gloo (own_reduction.h); last.
  ddplab::OwnReduction own_{context_, [this](GradBucket& bucket) { Reduce(context_, bucket); }};
};

void Register(const ddplab::plugins::bf16_fp32_sum::v1::Config& config, ddplab::PluginRegistrar& registrar) {
  registrar.WrapCommHook(ddplab::ExtensionPoint::kCommHook,
                         [](std::unique_ptr<ddplab::CommHook>, const CommContext& context) -> std::unique_ptr<ddplab::CommHook> {
                           return std::make_unique<Bf16Fp32SumHook>(context);
                         });
  // A codec would cast what this hook already sends in bfloat16.
  registrar.Refuse(ddplab::ExtensionPoint::kCodec,
                   "it sends bfloat16 itself, summed in float32; a codec would change what travels");
  registrar.Lossy(static_cast<int>(config.sample_error_every()));
}

}  // namespace

DDPLAB_PLUGIN("bf16_fp32_sum", "1.0.0", ddplab::plugins::bf16_fp32_sum::v1::Config, ddplab::PluginStatus::kExperimental, Register)
