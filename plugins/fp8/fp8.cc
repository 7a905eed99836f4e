// fp8: gradients travel as 8-bit floats in blocks with a float32 scale each (codec.h),
// are summed in float64 by the rank that owns their shard, and come back in 8 bits again
// (or bfloat16), as a communication hook. NCCL's own float8 sums add in 8 bits at every
// hop of the ring; here nothing is added on the wire. Per bucket:
//   1. the gradients (plus, with error feedback, what quantizing this bucket lost at the
//      last step) are copied into a float32 buffer, padded with zeros to W shards of whole
//      blocks (W ranks);
//   2. the buffer is quantized in blocks; with error feedback, what that lost is kept;
//   3. an all-to-all (c10d's alltoall_base) gives rank r every rank's shard r, each as its
//      blocks' scales then its codes: a reduce-scatter's bytes, nothing reduced on the wire;
//   4. rank r dequantizes the shards in float64 (exactly: 4 significant bits times a
//      float32 scale), sums them in rank order, divides by W and rounds the mean to float32;
//   5. the mean shard is quantized again with fresh scales (or rounded to bfloat16) and
//      all-gathered;
//   6. the bucket gets every shard, dequantized in float32.
// The bytes are 1 + 4/block per value each way (0.258 of float32's at 128), besides padding.
// One process quantizes its gradients once and issues no collective.
//
// The passes over every value (steps 2, 4 and 5, 6) are wire.h's: ATen's operations, or on
// GPUs of a CUDA build kernels of our own that give the same bits in one pass each.
// On GPUs (NCCL) Run queues everything on a stream of its own and NCCL's, and returns. On
// CPUs (Gloo) a thread of the hook's own reduces the buckets in order while backward goes
// on (core/engine/own_reduction.h).
#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/collectives.h"
#include "core/engine/flat_bucket.h"
#include "core/engine/own_reduction.h"
#include "core/plugin/plugin_api.h"
#include "plugins/fp8/fp8.pb.h"
#include "plugins/fp8/wire.h"

namespace {

using ddplab::CommContext;
using ddplab::GradBucket;
using ddplab::fp8::Format;
using ddplab::plugins::fp8::v1::Config;

constexpr int64_t kDefaultBlock = 128;

struct Settings {
  Format format = Format::kE4M3;
  int64_t block = kDefaultBlock;
  bool gather_bf16 = false;
  bool error_feedback = false;
  bool kernels = true;  // kernels.h's passes on GPUs of a CUDA build
};

// The bucket's mean over the ranks into bucket.buffer (steps 1 to 6 above); `residual`
// (error feedback; null without) holds what quantizing this bucket lost last time and
// gets this time's.
void Reduce(const Settings& s, const CommContext& context, GradBucket& bucket, at::Tensor* residual) {
  const ddplab::fp8::Layout layout = ddplab::fp8::LayoutOf(bucket.buffer.numel(), context.world_size, s.block);
  at::Tensor values = at::empty({layout.padded()}, bucket.buffer.options().dtype(at::kFloat));
  ddplab::CopyBucketInto(bucket, values);
  if (residual != nullptr && (!residual->defined() || residual->numel() != values.numel())) {
    *residual = at::zeros_like(values);  // the first step, or buckets rebuilt
  }
  const bool kernels = s.kernels && ddplab::fp8::KernelsRun(values);
  at::Tensor parts = ddplab::fp8::QuantizeParts(values, residual, layout, s.format, kernels);
  if (context.world_size == 1) {
    ddplab::fp8::DequantizeParts(parts, layout, s.format, kernels, bucket.buffer);
    return;
  }
  at::Tensor received = at::empty_like(parts);
  std::vector<int64_t> out_splits, in_splits;  // empty: equal shards
  context.process_group->alltoall_base(received, parts, out_splits, in_splits)->wait();
  const at::Tensor mine = ddplab::fp8::SumParts(received, layout, s.format, s.gather_bf16, kernels);
  if (s.gather_bf16) {
    at::Tensor result = at::empty({layout.padded()}, mine.options());
    context.collectives->AllGatherBytes(result, mine);
    bucket.buffer.copy_(result.narrow(0, 0, layout.numel));
    return;
  }
  at::Tensor gathered = at::empty({layout.world, layout.part_bytes()}, received.options());
  context.collectives->AllGatherBytes(gathered, mine);
  ddplab::fp8::DequantizeParts(gathered, layout, s.format, kernels, bucket.buffer);
}

class Fp8Hook : public ddplab::CommHook {
 public:
  Fp8Hook(const Settings& settings, const CommContext& context) : settings_(settings), context_(context) {}

  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    Count(bucket);
    return own_.Run(bucket);
  }

  // Reads the gradients where autograd left them: nothing is packed into the bucket.
  std::shared_ptr<const ddplab::BucketCodec> Codec() const override {
    return std::make_shared<const ddplab::GradientsWhereTheyLie>();
  }

  // compression_ratio: the gradients' bytes over the bytes sent per value, each way
  // (scales and padding included); wire_bytes_per_step: what each rank sends per step,
  // both collectives together.
  std::map<std::string, double> Stats() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    std::map<std::string, double> stats;
    if (wire_bytes_ > 0) stats["compression_ratio"] = 2.0 * gradient_bytes_ / wire_bytes_;
    if (steps_ > 0 && context_.world_size > 1) {
      stats["wire_bytes_per_step"] = wire_bytes_ * (context_.world_size - 1.0) / context_.world_size / steps_;
    }
    return stats;
  }

 private:
  void Count(const GradBucket& bucket) {
    const ddplab::fp8::Layout layout = ddplab::fp8::LayoutOf(bucket.buffer.numel(), context_.world_size, settings_.block);
    const int64_t there = layout.world * layout.part_bytes();
    const int64_t back = settings_.gather_bf16 ? 2 * layout.padded() : there;
    std::lock_guard<std::mutex> lock(stats_mu_);
    gradient_bytes_ += layout.numel * static_cast<int64_t>(bucket.buffer.element_size());
    wire_bytes_ += there + back;
    if (bucket.is_last) ++steps_;
  }

  // This bucket's residual (error feedback; null without), kept by the bucket's
  // parameters: when the engine regroups its buckets, a new group's residual starts at
  // zero and those of the groups it replaces (sharing a parameter) are dropped.
  at::Tensor* Residual(const std::vector<size_t>& parameters) {
    if (!settings_.error_feedback) return nullptr;
    std::lock_guard<std::mutex> lock(residuals_mu_);
    if (auto it = residuals_.find(parameters); it != residuals_.end()) return &it->second;
    const std::set<size_t> mine(parameters.begin(), parameters.end());
    for (auto it = residuals_.begin(); it != residuals_.end();) {
      const bool shares = std::any_of(it->first.begin(), it->first.end(), [&](size_t p) { return mine.count(p) > 0; });
      it = shares ? residuals_.erase(it) : std::next(it);
    }
    return &residuals_[parameters];  // std::map: the pointer stays valid
  }

  const Settings settings_;
  const CommContext context_;
  mutable std::mutex stats_mu_;  // the counters below: Run writes, Stats reads
  int64_t gradient_bytes_ = 0, wire_bytes_ = 0, steps_ = 0;
  std::mutex residuals_mu_;
  std::map<std::vector<size_t>, at::Tensor> residuals_;
  // On the hook's stream, or its thread over Gloo (own_reduction.h); last.
  ddplab::OwnReduction own_{context_, [this](GradBucket& bucket) {
    Reduce(settings_, context_, bucket, Residual(bucket.parameters));
  }};
};

void Register(const Config& config, ddplab::PluginRegistrar& registrar) {
  Settings s;
  s.format = config.format() == Config::E5M2 ? Format::kE5M2 : Format::kE4M3;
  if (config.block_size() != 0) s.block = config.block_size();
  if (s.block % 16 != 0) {
    registrar.RejectField("block_size", "must be a multiple of 16, got " + std::to_string(s.block));
    return;
  }
  s.gather_bf16 = config.gather() == Config::BF16;
  s.error_feedback = config.error_feedback();
  s.kernels = !config.disable_fused_kernels();
  registrar.WrapCommHook(ddplab::ExtensionPoint::kCommHook,
                         [s](std::unique_ptr<ddplab::CommHook>, const CommContext& context) -> std::unique_ptr<ddplab::CommHook> {
                           return std::make_unique<Fp8Hook>(s, context);
                         });
  registrar.Refuse(ddplab::ExtensionPoint::kCodec, "it sends 8-bit floats itself; a codec would change what travels");
  registrar.Lossy(static_cast<int>(config.sample_error_every()));
  // PyTorch's DDP has no FP8 hook: described by nothing, the report says its gain needs
  // ddplab's engine.
}

}  // namespace

DDPLAB_PLUGIN("fp8", "0.1.0", ddplab::plugins::fp8::v1::Config, ddplab::PluginStatus::kExperimental, Register)
