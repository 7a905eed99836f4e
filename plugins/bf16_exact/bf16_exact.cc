// bf16_exact: gradients whose every value is a bfloat16 value travel as bfloat16, and
// are summed in float32: the mean an all-reduce in float32 gives, for fewer bytes. Under
// bf16 autocast a linear layer's weight and bias get their gradient as a bfloat16
// product widened to float32 (Note [A block's casts together], core/model/vit.cc), so
// their float32 gradients carry 16 bits of nothing; the layer norms' and embeddings'
// gradients are float32 products and go as float32. Per bucket:
//   1. each float32 gradient is bfloat16's (sent as bfloat16) or not (sent as float32),
//      as decided by Note [Which gradients are bfloat16];
//   2. the bfloat16 ones: over two ranks an all-gather of them, then each rank computes
//      a/2 + b/2 in float32 (the same on both ranks, and a float32 all-reduce's average
//      bit for bit: NCCL's and Gloo's halve each first too); from three ranks on an
//      all-to-all of chunks (a reduce-scatter's bytes, nothing reduced on the wire), each
//      rank sums its chunk in float32 in rank order, and an all-gather of the float32
//      sums;
//   3. the others: core's mean, in their own dtype;
//   4. the bucket gets every mean, in float32.
// On a GPU the sums are one kernel of our own (sum_kernel.h) that writes each mean into
// its part of the bucket; ATen's ops elsewhere.
// Bytes each rank sends against a float32 all-reduce's, for gradients all bfloat16: half
// over two ranks, three quarters from three on (the all-gather is in float32, or the
// result would be rounded).
//
// Note [Which gradients are bfloat16]
// Each rank sees only its own gradients, and the ranks must send the same bytes in the
// same order, so the ranks decide together, on steps that are neither timed nor captured
// in a CUDA graph (a warm-up's): for each parameter not yet sent as float32 for good,
// each rank says whether its gradient is all zeros, all bfloat16 values, or not (NaN,
// which bfloat16 holds, aside); the ranks gather the answers (one byte a parameter); a
// parameter is bfloat16's once some rank saw it nonzero and none saw a value bfloat16
// cannot hold, and float32's for good once some rank did, before anything of the step is
// sent (`demoted_parameters` counts those that had been bfloat16's). All zeros decides
// nothing: a zero-initialised head leaves every block's first gradient zero, in float32
// training too. Until decided a parameter goes as float32. Asking reads the answers on the
// host, so a timed step, or a replay of a captured one, asks nothing and sends as the
// last check decided; a parameter still undecided when the step is captured goes as
// float32 for good (every rank captures the same step, so they agree). What it sends as
// bfloat16 is counted on the device as it is narrowed, every step, replays included,
// with no sync: `rounded_values` is the values that were not bfloat16's, and anything but
// 0 says the run was not lossless (a parameter used a varying number of times a step, say,
// whose contributions autograd adds in float32).
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if defined(DDPLAB_CUDA)
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAStream.h>

#include "plugins/bf16_exact/sum_kernel.h"
#endif

#include "core/engine/collectives.h"
#include "core/engine/own_reduction.h"
#include "core/plugin/plugin_api.h"
#include "plugins/bf16_exact/bf16_exact.pb.h"

namespace {

using ddplab::CommContext;
using ddplab::GradBucket;

enum class Kind : uint8_t { kUndecided, kBf16, kFloat32 };
enum Answer : uint8_t { kZeros = 0, kExact = 1, kInexact = 2 };

// Parameter k's gradient in the bucket: where it lies, or its part of the buffer.
at::Tensor GradientOf(const GradBucket& bucket, size_t k) {
  if (k < bucket.gradients.size() && bucket.gradients[k].defined()) return bucket.gradients[k];
  const int64_t numel = c10::multiply_integers(bucket.sizes[k]);
  return bucket.buffer.narrow(0, bucket.offsets[k], numel).view(bucket.sizes[k]);
}

// Whether the current stream is being captured into a CUDA graph.
bool Capturing(const at::Tensor& on) {
#if defined(DDPLAB_CUDA)
  if (on.is_cuda()) return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
#endif
  (void)on;
  return false;
}

// What reduces the buckets, with the kinds decided so far (parameter index -> kind).
class Reducer {
 public:
  explicit Reducer(const CommContext& context) : context_(context) {}

  void Reduce(GradBucket& bucket) {
    const size_t count = bucket.parameters.size();
    std::vector<at::Tensor> gradients(count);
    for (size_t k = 0; k < count; ++k) gradients[k] = GradientOf(bucket, k);
    Decide(bucket, gradients);
    std::vector<size_t> bf16, rest;
    for (size_t k = 0; k < count; ++k) (KindOf(bucket.parameters[k]) == Kind::kBf16 ? bf16 : rest).push_back(k);
    std::vector<at::Tensor> means(count);
    if (!bf16.empty()) MeanInBf16(bucket, gradients, bf16, means);
    if (!rest.empty()) MeanAsTheyAre(bucket, gradients, rest, means);
    std::vector<at::Tensor> parts, results;  // what the GPU's sum wrote in place is not here
    for (size_t k = 0; k < count; ++k) {
      if (!means[k].defined()) continue;
      parts.push_back(bucket.buffer.narrow(0, bucket.offsets[k], means[k].numel()).view(means[k].sizes()));
      results.push_back(means[k]);
    }
    if (!parts.empty()) ddplab::compat::CopyEach(parts, results);
    bucket.gradients.clear();
    Count(gradients, bf16);
  }

  std::map<std::string, double> Stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, double> stats;
    if (sent_bytes_ > 0) stats["compression_ratio"] = allreduce_bytes_ / sent_bytes_;
    if (elements_ > 0) stats["bf16_fraction"] = static_cast<double>(bf16_elements_) / elements_;
    stats["demoted_parameters"] = static_cast<double>(demoted_);
    if (rounded_.defined() && !Capturing(rounded_))
      stats["rounded_values"] = static_cast<double>(rounded_.item<int64_t>());
    return stats;
  }

 private:
  Kind KindOf(size_t parameter) const {
    auto it = kinds_.find(parameter);
    return it == kinds_.end() ? Kind::kUndecided : it->second;
  }

  // Note [Which gradients are bfloat16].
  void Decide(const GradBucket& bucket, const std::vector<at::Tensor>& gradients) {
    std::vector<size_t> asked;
    const bool capturing = Capturing(bucket.buffer);
    for (size_t k = 0; k < gradients.size(); ++k) {
      const size_t p = bucket.parameters[k];
      const Kind kind = KindOf(p);
      if (kind == Kind::kFloat32) continue;
      if (gradients[k].scalar_type() != at::kFloat) {
        kinds_[p] = Kind::kFloat32;
      } else if (kind == Kind::kUndecided && capturing) {
        kinds_[p] = Kind::kFloat32;
      } else if (!capturing && bucket.may_measure) {
        asked.push_back(k);  // undecided, or bfloat16's and asked again
      }
    }
    if (asked.empty()) return;
    std::vector<at::Tensor> answers;
    for (size_t k : asked) {
      const at::Tensor& g = gradients[k];
      const at::Tensor inexact = Inexact(g).any();
      answers.push_back(
          at::where(inexact, at::scalar_tensor(kInexact, g.options().dtype(at::kByte)), g.ne(0).any().to(at::kByte)));
    }
    at::Tensor mine = at::stack(answers);
    at::Tensor all = at::empty({context_.world_size * mine.numel()}, mine.options());
    if (context_.world_size > 1) {
      context_.collectives->AllGatherBytes(all, mine);
    } else {
      all.copy_(mine);
    }
    const at::Tensor by_rank = all.view({context_.world_size, mine.numel()}).cpu();
    const at::Tensor inexact = by_rank.eq(kInexact).any(0), nonzero = by_rank.eq(kExact).any(0);
    for (size_t i = 0; i < asked.size(); ++i) {
      const size_t p = bucket.parameters[asked[i]];
      if (inexact[i].item<bool>()) {
        if (KindOf(p) == Kind::kBf16) {
          std::lock_guard<std::mutex> lock(mu_);
          ++demoted_;
        }
        kinds_[p] = Kind::kFloat32;
      } else if (nonzero[i].item<bool>()) {
        kinds_[p] = Kind::kBf16;
      }
    }
  }

  // The means of gradients `which` (all bfloat16 values), in float32: written into the
  // bucket's parts where the GPU's kernel sums (their `means` left undefined), else into
  // `means`.
  void MeanInBf16(const GradBucket& bucket, const std::vector<at::Tensor>& gradients, const std::vector<size_t>& which,
                  std::vector<at::Tensor>& means) {
    const int world = context_.world_size;
    int64_t numel = 0;
    for (size_t k : which) numel += gradients[k].numel();
    const int64_t chunk = (numel + world - 1) / world;
    const auto options = bucket.buffer.options();
    at::Tensor wire = at::empty({chunk * world}, options.dtype(at::kBFloat16));
    std::vector<int64_t> starts;  // each gradient's first element in the wire
    int64_t at = 0;
    for (size_t k : which) {
      starts.push_back(at);
      at += gradients[k].numel();
    }
    NarrowInto(wire, gradients, which, starts);
    if (chunk * world > numel) wire.narrow(0, numel, chunk * world - numel).zero_();
    if (world <= 2) {
      at::Tensor gathered = wire;
      if (world == 2) {
        gathered = at::empty({2 * wire.numel()}, wire.options());
        context_.collectives->AllGatherBytes(gathered, wire);
      }
      if (SumOnGpu(gathered, wire.numel(), bucket, which, starts)) return;
      const at::Tensor rows = gathered.view({world, wire.numel()});
      at::Tensor mean = rows[0].to(at::kFloat);
      if (world == 2) mean.mul_(0.5).add_(rows[1].to(at::kFloat).mul_(0.5));  // a/2 + b/2 = b/2 + a/2
      Split(mean, gradients, which, starts, means);
      return;
    }
    at::Tensor received = at::empty_like(wire);
    at::Tensor out = received.view(at::kByte), in = wire.view(at::kByte);
    std::vector<int64_t> splits;  // empty: equal chunks
    context_.process_group->alltoall_base(out, in, splits, splits)->wait();
    at::Tensor mine = at::empty({chunk}, options.dtype(at::kFloat));
    if (!SumOnGpu(received, chunk, mine)) {
      const at::Tensor from = received.view({world, chunk});
      mine = from[0].to(at::kFloat);
      for (int r = 1; r < world; ++r) mine.add_(from[r]);
      mine.div_(world);
    }
    at::Tensor mean = at::empty({chunk * world}, options.dtype(at::kFloat));
    context_.collectives->AllGatherBytes(mean, mine);
    Split(mean, gradients, which, starts, means);
  }

  // Where g holds a value bfloat16 does not (NaN, which bfloat16 holds as NaN, aside).
  static at::Tensor Inexact(const at::Tensor& g) {
    return g.ne(g.to(at::kBFloat16).to(at::kFloat)).logical_and_(g.isnan().logical_not_());
  }

  // Gradients `which` rounded into the wire at `starts`, and the values that were not
  // bfloat16's counted into rounded_ on the device, without a sync: every step's check,
  // a replay's too (on a GPU one kernel, sum_kernel.h).
  void NarrowInto(at::Tensor& wire, const std::vector<at::Tensor>& gradients, const std::vector<size_t>& which,
                  const std::vector<int64_t>& starts) {
    if (!rounded_.defined()) rounded_ = at::zeros({}, wire.options().dtype(at::kLong));
#if defined(DDPLAB_CUDA)
    bool contiguous = wire.is_cuda();
    for (size_t k : which) contiguous = contiguous && gradients[k].is_contiguous();
    if (contiguous) {
      std::vector<ddplab::bf16_exact::Source> sources;
      for (size_t i = 0; i < which.size(); ++i) {
        const at::Tensor& g = gradients[which[i]];
        sources.push_back({g.data_ptr<float>(), starts[i], g.numel()});
      }
      const cudaError_t error = ddplab::bf16_exact::Narrow(
          sources.data(), static_cast<int>(sources.size()), reinterpret_cast<uint16_t*>(wire.data_ptr()),
          rounded_.data_ptr<int64_t>(), c10::cuda::getCurrentCUDAStream(wire.device().index()).stream());
      if (error != cudaSuccess)
        throw std::runtime_error(std::string("bf16_exact: narrowing: ") + cudaGetErrorString(error));
      return;
    }
#endif
    std::vector<at::Tensor> parts, sources;
    for (size_t i = 0; i < which.size(); ++i) {
      const at::Tensor& g = gradients[which[i]];
      parts.push_back(wire.narrow(0, starts[i], g.numel()).view(g.sizes()));
      sources.push_back(g);
      rounded_.add_(Inexact(g).sum());
    }
    ddplab::compat::CopyEach(parts, sources);
  }

  // Each of `which` its part of `mean` (from `starts`), shaped like its gradient.
  static void Split(const at::Tensor& mean, const std::vector<at::Tensor>& gradients, const std::vector<size_t>& which,
                    const std::vector<int64_t>& starts, std::vector<at::Tensor>& means) {
    for (size_t i = 0; i < which.size(); ++i) {
      const at::Tensor& g = gradients[which[i]];
      means[which[i]] = mean.narrow(0, starts[i], g.numel()).view(g.sizes());
    }
  }

  // On a GPU, the rows of `gathered` (each `stride` long) summed by sum_kernel.h straight
  // into the bucket's parts of `which`; false elsewhere (nothing done).
  static bool SumOnGpu(const at::Tensor& gathered, int64_t stride, const GradBucket& bucket,
                       const std::vector<size_t>& which, const std::vector<int64_t>& starts) {
#if defined(DDPLAB_CUDA)
    if (!gathered.is_cuda() || !bucket.buffer.is_contiguous() || bucket.buffer.scalar_type() != at::kFloat)
      return false;
    std::vector<ddplab::bf16_exact::Segment> segments;
    float* base = bucket.buffer.data_ptr<float>();
    for (size_t i = 0; i < which.size(); ++i) {
      const size_t k = which[i];
      segments.push_back({base + bucket.offsets[k], starts[i], c10::multiply_integers(bucket.sizes[k])});
    }
    Launch(gathered, stride, segments);
    return true;
#else
    (void)gathered, (void)stride, (void)bucket, (void)which, (void)starts;
    return false;
#endif
  }

  // On a GPU, the rows of `gathered` (each `stride` long) summed into `out`, contiguous;
  // false elsewhere.
  static bool SumOnGpu(const at::Tensor& gathered, int64_t stride, at::Tensor& out) {
#if defined(DDPLAB_CUDA)
    if (!gathered.is_cuda()) return false;
    Launch(gathered, stride, {{out.data_ptr<float>(), 0, out.numel()}});
    return true;
#else
    (void)gathered, (void)stride, (void)out;
    return false;
#endif
  }

#if defined(DDPLAB_CUDA)
  static void Launch(const at::Tensor& gathered, int64_t stride,
                     const std::vector<ddplab::bf16_exact::Segment>& segments) {
    const int world = static_cast<int>(gathered.numel() / stride);
    const cudaError_t error = ddplab::bf16_exact::SumInto(
        reinterpret_cast<const uint16_t*>(gathered.data_ptr()), stride, world, segments.data(),
        static_cast<int>(segments.size()), c10::cuda::getCurrentCUDAStream(gathered.device().index()).stream());
    if (error != cudaSuccess)
      throw std::runtime_error(std::string("bf16_exact: the sum's kernel: ") + cudaGetErrorString(error));
  }
#endif

  // The means of gradients `which` in their own dtype (core's mean), into `means`.
  // Where they are the whole bucket (as in float32 training), the bucket is averaged in
  // place, as core's layout and all-reduce do: each gradient not already in its part of
  // the bucket (a bucket view's, or a target's) copied there first, many in one kernel.
  // Their `means` are then left undefined.
  void MeanAsTheyAre(const GradBucket& bucket, const std::vector<at::Tensor>& gradients,
                     const std::vector<size_t>& which, std::vector<at::Tensor>& means) {
    if (which.size() == gradients.size() && bucket.buffer.is_contiguous()) {
      std::vector<at::Tensor> parts, elsewhere;
      for (size_t k = 0; k < gradients.size(); ++k) {
        const at::Tensor part = bucket.buffer.narrow(0, bucket.offsets[k], gradients[k].numel());
        if (gradients[k].is_contiguous() && gradients[k].data_ptr() == part.data_ptr()) continue;
        parts.push_back(part.view(gradients[k].sizes()));
        elsewhere.push_back(gradients[k]);
      }
      if (!parts.empty()) ddplab::compat::CopyEach(parts, elsewhere);
      context_.collectives->StartMean(bucket.buffer).wait();
      return;
    }
    std::vector<at::Tensor> flat;
    for (size_t k : which) flat.push_back(gradients[k].reshape({-1}));
    at::Tensor all = at::cat(flat);
    context_.collectives->StartMean(all).wait();
    int64_t at = 0;
    for (size_t k : which) {
      means[k] = all.narrow(0, at, gradients[k].numel()).view(gradients[k].sizes());
      at += gradients[k].numel();
    }
  }

  // compression_ratio: the bytes each rank sends for the bucket in a float32 ring
  // all-reduce (2 (n-1)/n of the gradients' bytes over n ranks) over what it sends here:
  // the rest's ring all-reduce, and for the bfloat16 gradients (b elements, in chunks of
  // c) an all-gather of 2b bytes over two ranks, else (n-1) chunks of 2c bytes in the
  // all-to-all and of 4c in the all-gather. One process counts as two would.
  void Count(const std::vector<at::Tensor>& gradients, const std::vector<size_t>& bf16) {
    const double n = std::max(context_.world_size, 2);
    const auto ring = [n](double bytes) { return 2 * (n - 1) / n * bytes; };
    double all = 0, in_bf16 = 0, rest = 0;
    int64_t numel = 0, numel_bf16 = 0;
    for (size_t k = 0; k < gradients.size(); ++k) {
      const double bytes = static_cast<double>(gradients[k].numel()) * gradients[k].element_size();
      all += bytes;
      numel += gradients[k].numel();
      rest += bytes;
    }
    for (size_t k : bf16) {
      rest -= 4.0 * gradients[k].numel();
      numel_bf16 += gradients[k].numel();
    }
    const double chunk = std::ceil(numel_bf16 / n);
    in_bf16 = numel_bf16 == 0 ? 0 : n == 2 ? 2.0 * numel_bf16 : (n - 1) * 6 * chunk;
    std::lock_guard<std::mutex> lock(mu_);
    allreduce_bytes_ += ring(all);
    sent_bytes_ += ring(rest) + in_bf16;
    elements_ += numel;
    bf16_elements_ += numel_bf16;
  }

  const CommContext context_;
  std::map<size_t, Kind> kinds_;  // the reducing thread's alone
  mutable std::mutex mu_;         // the counters below: Reduce writes, Stats reads
  double allreduce_bytes_ = 0, sent_bytes_ = 0;
  int64_t elements_ = 0, bf16_elements_ = 0, demoted_ = 0;
  // Values sent as bfloat16 that were not bfloat16's, counted where they were narrowed
  // (on the GPU with no sync); read by Stats. Nonzero: the run was not lossless.
  at::Tensor rounded_;
};

class Bf16ExactHook : public ddplab::CommHook {
 public:
  explicit Bf16ExactHook(const CommContext& context) : context_(context) {}

  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override { return own_.Run(bucket); }

  // Reads the gradients where autograd left them: nothing is packed into the bucket.
  std::shared_ptr<const ddplab::BucketCodec> Codec() const override {
    return std::make_shared<const ddplab::GradientsWhereTheyLie>();
  }

  std::map<std::string, double> Stats() const override { return reducer_.Stats(); }

 private:
  const CommContext context_;
  Reducer reducer_{context_};
  // On the hook's stream, or its thread over Gloo (own_reduction.h); last.
  ddplab::OwnReduction own_{context_, [this](GradBucket& bucket) { reducer_.Reduce(bucket); }};
};

void Register(const ddplab::plugins::bf16_exact::v1::Config&, ddplab::PluginRegistrar& registrar) {
  registrar.WrapCommHook(
      ddplab::ExtensionPoint::kCommHook,
      [](std::unique_ptr<ddplab::CommHook>, const CommContext& context) -> std::unique_ptr<ddplab::CommHook> {
        return std::make_unique<Bf16ExactHook>(context);
      });
  registrar.Refuse(ddplab::ExtensionPoint::kCodec,
                   "it chooses per gradient what travels as bfloat16; a codec would change that");
}

}  // namespace

DDPLAB_PLUGIN("bf16_exact", "1.0.0", ddplab::plugins::bf16_exact::v1::Config, ddplab::PluginStatus::kExperimental,
              Register)
