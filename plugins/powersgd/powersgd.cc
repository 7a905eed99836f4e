// powersgd: low-rank gradient compression (Vogels et al., PowerSGD; PyTorch's
// powerSGD_hook), as a communication hook.
//
// Per bucket, each gradient matrix M (a parameter of two or more dimensions, viewed as
// rows x cols) that shrinks enough is sent as two thin matrices instead of itself:
//   M += error                     error feedback: what earlier steps lost
//   P = M Q;     mean of P over ranks, then orthogonalize P's columns
//   Q = M^T P;   mean of Q over ranks
//   M' = P Q^T  (the mean of M projected on P's span);   error = M - M'
// with Q warm-started from the last step. The random initial Q (every step's, without warm
// start) is PyTorch's for the same random_seed (initial_q.h), the same on every rank.
// All P of a bucket travel in one all-reduce, all Q in another; vectors and matrices that
// would not shrink by min_compression_rate travel uncompressed with the P, in the same
// grouped all-reduce (one launch; PyTorch's hook issues a third all-reduce for them: two
// collectives a bucket instead of three, the same means). Matrices of
// one shape are multiplied and orthogonalized as a batch. Per-parameter state (Q, error)
// is keyed by the parameter, so it survives the engine's regrouping of buckets.
//
// On a GPU (float32 gradients, rank up to 8) the passes over the matrices run as three
// kernels of our own (fused.h), each reading every matrix of a shape once in one launch:
// M = G + error written over the error as P = M Q is summed; Q = M^T P; P Q^T into the
// bucket as the error becomes M - P Q^T in place; and the small steps between them, P's
// orthonormalization and the zero columns of the kept Q, one launch each per shape where
// ATen's ops took some ten (LibTorch's profiler on 4 H200: 1,100 small launches a step at
// rank 1, beside backward's kernels). Elsewhere (or with disable_fused_kernels) they are
// ATen's products over the group's matrices stacked.
//
// With bf16_state, M and the error are kept in bfloat16 (in ATen's passes P = M Q,
// Q = M^T P and M - P Q^T are then computed in bfloat16, P and Q cast; they are small).
//
// Against PyTorch's powerSGD_hook (same settings, one bucket), the result is the same to
// float32's rounding step after step (parity/hooks_parity_test.py measures it): which
// gradients are compressed, the initial Q and the order of the random draws are
// PyTorch's. Where ddplab differs, the same in exact arithmetic: Q is not orthogonalized
// before P = M Q (P is, and P's span is M's image of Q's span either way); P's columns
// keep the signs Gram-Schmidt gives them (PyTorch's QR, at rank 3 and up, flips some; P Q^T
// is the same); uncompressed gradients carry no error (PyTorch's is the rank's part of the
// average it sent, whose mean over ranks is zero); all means divide before summing.
//
// Gradients are read where autograd left them (GradBucket::gradients): the engine does
// not copy them into the bucket first, since the bucket is written over with the result
// anyway (a read and a write of every gradient saved each step).
//
// The work runs on a thread of its own, one bucket after another in the order the engine
// hands them over (the same on every rank, so the collectives match), and on a GPU on a
// stream of its own ordered after the bucket's gradients. Backward goes on meanwhile, on
// the device and on the host: a bucket costs some dozens of small kernels (more with a
// higher rank), and launching them from autograd's thread held back backward's own
// launches. The engine waits for the result only after backward.
#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>

#include "core/engine/collectives.h"
#include "core/engine/hook_worker.h"
#include "core/plugin/plugin_api.h"
#include "plugins/powersgd/groups.h"
#include "plugins/powersgd/initial_q.h"
#include "plugins/powersgd/powersgd.pb.h"
#include "plugins/powersgd/residual.h"
#include "plugins/powersgd/settings.h"
#include "plugins/powersgd/thin_products.h"

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace {

using ddplab::CommContext;
using ddplab::GradBucket;
using ddplab::powersgd::Group;
using ddplab::powersgd::Matrix;
using ddplab::powersgd::PyTorchFormOf;
using ddplab::powersgd::Settings;
using ddplab::powersgd::SettingsOf;
using ddplab::powersgd::Split;
using ddplab::powersgd::SplitBucket;

class PowerSgdHook : public ddplab::CommHook {
 public:
  PowerSgdHook(const Settings& settings, const CommContext& context)
      : rank_(settings.rank),
        start_step_(settings.start_step),
        error_feedback_(settings.error_feedback),
        warm_start_(settings.warm_start),
        min_compression_rate_(settings.min_compression_rate),
        seed_(settings.seed),
        bf16_state_(settings.bf16_state),
        fused_kernels_(settings.fused_kernels),
        passes_{settings.error_feedback, settings.bf16_state},
        context_(context),
        q_seeds_(static_cast<uint32_t>(settings.seed)) {
    worker_.emplace([this](Task& task) { Work(task); });
  }

  // Hands the bucket to the worker and returns at once; the future completes when the
  // worker has reduced the bucket (on a GPU: has queued the reduction on its stream).
  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    Task task;
    task.bucket = bucket;  // the engine's is gone when Run returns
#if defined(DDPLAB_CUDA)
    if (bucket.buffer.is_cuda()) {
      // Ordered after the gradients the bucket holds, on the stream that made them.
      const c10::DeviceIndex device = bucket.buffer.device().index();
      // One event per bucket for the whole run: the engine waits for every bucket's
      // future before the next step, so the worker is done with this one by then.
      std::unique_ptr<at::cuda::CUDAEvent>& ready = ready_[bucket.index];
      if (!ready) ready = std::make_unique<at::cuda::CUDAEvent>(cudaEventDisableTiming);
      ready->record(c10::cuda::getCurrentCUDAStream(device));
      task.ready = ready.get();
      task.future = c10::make_intrusive<c10::ivalue::Future>(
          c10::TensorType::get(), std::vector<c10::Device>{bucket.buffer.device()});
    } else
#endif
    {
      task.future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    }
    c10::intrusive_ptr<c10::ivalue::Future> future = task.future;
    worker_->Push(std::move(task));
    return future;
  }

  // Reads the gradients where autograd left them: nothing is packed into the bucket.
  std::shared_ptr<const ddplab::BucketCodec> Codec() const override {
    return std::make_shared<const ddplab::GradientsWhereTheyLie>();
  }

  std::map<std::string, double> Stats() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    std::map<std::string, double> stats;
    if (sent_elements_ > 0) {
      stats["compression_ratio"] = static_cast<double>(gradient_elements_) / sent_elements_;
    }
    stats["first_compressed_step"] = first_compressed_step_;
    stats["rank"] = static_cast<double>(rank_);
    if (residuals_.steps() > 0) stats["residual_ratio"] = residuals_.mean();
    return stats;
  }

 private:
  struct Task {
    GradBucket bucket;
    c10::intrusive_ptr<c10::ivalue::Future> future;
#if defined(DDPLAB_CUDA)
    at::cuda::CUDAEvent* ready = nullptr;  // ready_'s, for the bucket
#endif
  };

  // Reduces one bucket on the worker (HookWorker), completing its future.
  void Work(Task& task) {
    try {
#if defined(DDPLAB_CUDA)
      if (task.ready) {
        const c10::DeviceIndex device = task.bucket.buffer.device().index();
        c10::cuda::CUDAGuard device_guard(device);
        if (!stream_) stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device);
        // The step's first bucket is queued only once backward has made it, waited for
        // here on the host. The host runs far ahead of the GPU, so it would otherwise
        // queue the bucket (and the ones after it) during the forward, behind a wait on
        // the compute stream; with that waiting work queued, the forward's kernels ran
        // with a few microseconds between them instead of about one (LibTorch's profiler
        // on 4 H200: 0.26 ms of a 28 ms forward; bench/NOTES.md). Later buckets are
        // queued at once: waiting for the last would leave its work exposed. Polled, so
        // that the wait (some tens of milliseconds a step) does not spin a core.
        if (task.bucket.index == 0) {
          while (!task.ready->query()) std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        task.ready->block(*stream_);
        // Autograd's gradients are read here, on our stream, and dropped (in Reduce) once
        // the reads are queued: the caching allocator must not hand their memory out
        // again before our stream is past them.
        for (const at::Tensor& gradient : task.bucket.gradients) {
          if (!gradient.is_alias_of(task.bucket.buffer)) gradient.record_stream(*stream_);
        }
        c10::cuda::CUDAStreamGuard guard(*stream_);
        Reduce(task.bucket);
        task.future->markCompleted(c10::IValue(task.bucket.buffer));  // an event on our stream
        return;
      }
#endif
      Reduce(task.bucket);
      task.future->markCompleted(c10::IValue(task.bucket.buffer));
    } catch (...) {
      task.future->setError(std::current_exception());
    }
  }

  // Copies the gradients of `slots` that are elsewhere (GradBucket::gradients) into their
  // parts of the bucket, together.
  static void IntoBucket(const GradBucket& bucket, const std::vector<size_t>& slots) {
    if (bucket.gradients.empty()) return;
    std::vector<at::Tensor> parts, gradients;
    for (size_t k : slots) {
      const at::Tensor& gradient = bucket.gradients[k];
      if (gradient.is_alias_of(bucket.buffer)) continue;
      parts.push_back(bucket.buffer.narrow(0, bucket.offsets[k], gradient.numel()).view(gradient.sizes()));
      gradients.push_back(gradient);
    }
    if (!parts.empty()) ddplab::compat::CopyEach(parts, gradients);
  }

  // Before a compressed step's products: random Qs, as PyTorch's powerSGD_hook draws them
  // (initial_q.h), for the bucket's matrices that need one (every one without warm start;
  // with it, those with none yet), in PyTorch's order: by shape in the order the shapes
  // first appear in the bucket, then in the bucket's order. One draw of the seeds a bucket
  // that needs any, and, as PyTorch, at the first compressed step of every bucket index.
  void DrawQs(const Split& split, const GradBucket& bucket) {
    const bool new_bucket = compressed_buckets_.insert(bucket.index).second;
    std::vector<std::pair<int64_t, int64_t>> shapes;
    std::vector<size_t> parameters;
    for (const std::vector<int64_t>& shape : split.shape_order) {
      const int64_t r = std::min({rank_, shape[0], shape[1]});
      for (const Matrix& matrix : split.by_shape.at(shape)) {
        if (warm_start_ && q_.count(matrix.parameter)) continue;
        shapes.emplace_back(shape[1], r);
        parameters.push_back(matrix.parameter);
      }
    }
    if (parameters.empty() && warm_start_ && !new_bucket) return;
    const std::vector<at::Tensor> qs = ddplab::powersgd::RandomQs(q_seeds_.Next(), shapes);
    for (size_t i = 0; i < qs.size(); ++i) q_[parameters[i]] = qs[i].to(bucket.buffer.options());
  }

  // The group's Q, [batch, cols, r]: last step's (warm start) or DrawQs's. A group that
  // was the same last step gets last step's batch as it is, without a copy.
  at::Tensor QsFor(const std::vector<size_t>& parameters) {
    if (warm_start_) {
      auto kept = group_q_.find(parameters);
      if (kept != group_q_.end()) return kept->second;
    }
    std::vector<at::Tensor> qs;
    for (size_t parameter : parameters) qs.push_back(q_.at(parameter));
    return qs.size() == 1 ? qs[0].unsqueeze(0) : at::stack(qs);
  }

  // Before the start step: every gradient averaged exactly, in the bucket.
  void ReduceExactly(GradBucket& bucket) {
    std::vector<size_t> every(bucket.parameters.size());
    for (size_t k = 0; k < every.size(); ++k) every[k] = k;
    IntoBucket(bucket, every);
    bucket.gradients.clear();  // read (or queued to be): autograd's memory is free to go
    context_.collectives->StartMean(bucket.buffer).wait();
  }

  void Reduce(GradBucket& bucket) {
    if (bucket.step < start_step_) {
      ReduceExactly(bucket);
      return;
    }
    Split split = SplitBucket(bucket, rank_, min_compression_rate_);
    IntoBucket(bucket, split.plain_slots);
    bucket.gradients.clear();  // the compressed ones are held by their Matrix::source
    // Uncompressed gradients are averaged where they lie: with the P (Compress), or alone
    // in a bucket with nothing to compress.
    int64_t sent_elements = 0;
    for (const at::Tensor& t : split.plain) sent_elements += t.numel();
    DrawQs(split, bucket);
    if (!split.by_shape.empty()) {
      sent_elements += Compress(split, bucket);
    } else if (!split.plain.empty()) {
      context_.collectives->StartMeanCoalesced(split.plain).wait();
    }
    if (bucket.sampled && bucket.is_last) residuals_.EndStep();
    std::lock_guard<std::mutex> lock(stats_mu_);
    if (first_compressed_step_ < 0) first_compressed_step_ = static_cast<double>(bucket.step);
    gradient_elements_ += split.gradient_elements;
    sent_elements_ += sent_elements;
  }

  // The compressed matrices' averages, P Q^T, into the bucket; returns the elements sent.
  int64_t Compress(Split& split, const GradBucket& bucket) {
    // Per shape: M (with error feedback), and P and Q as views of one buffer each, so
    // that all P (and then all Q) of the bucket travel in one all-reduce.
    std::vector<Group> groups;
    int64_t p_elements = 0, q_elements = 0;
    for (auto& [shape, matrices] : split.by_shape) {
      Group g;
      g.matrices = std::move(matrices);
      for (const Matrix& matrix : g.matrices) g.parameters.push_back(matrix.parameter);
      g.r = std::min({rank_, shape[0], shape[1]});
      g.fused = ddplab::powersgd::UseFused(bucket.buffer, shape[0], g.r, fused_kernels_);
      p_elements += static_cast<int64_t>(g.matrices.size()) * shape[0] * g.r;
      q_elements += static_cast<int64_t>(g.matrices.size()) * shape[1] * g.r;
      groups.push_back(std::move(g));
    }
    at::Tensor p_flat = at::empty({p_elements}, bucket.buffer.options());
    at::Tensor q_flat = at::empty({q_elements}, bucket.buffer.options());
    ProjectP(groups, p_flat, q_flat, bucket);
    const bool measure = bucket.sampled && error_feedback_;  // the residual's size
    if (measure) residuals_.AddGradients(groups);
    // Every gradient is read (or queued to be) now: autograd's memory may go before the
    // bucket is done (on a GPU, once our stream is past the reads, as recorded above).
    for (Group& g : groups) {
      for (Matrix& matrix : g.matrices) matrix.source = at::Tensor();
    }
    // Mean of all P and the uncompressed gradients in one grouped all-reduce, then
    // orthogonalize; Q = M^T P.
    std::vector<at::Tensor> first = split.plain;
    first.push_back(p_flat);
    context_.collectives->StartMeanCoalesced(std::move(first)).wait();
    for (Group& g : groups) {
      if (g.fused) {
        ddplab::powersgd::OrthonormalizeFused(g);
        ddplab::powersgd::ProjectTransposed(g, passes_);
        continue;
      }
      ddplab::powersgd::Orthogonalize(g.p);
      const at::Tensor p = g.p.to(g.m.scalar_type());
      InStateDtype(g.m, g.q, [&](at::Tensor& q) { ddplab::powersgd::MulMtP(g.m, p, q); });
    }
    // Mean of all Q in one all-reduce.
    Mean(q_flat);
    for (Group& g : groups) WriteResult(g);
    if (measure) residuals_.AddResiduals(groups, error_);
    return p_flat.numel() + q_flat.numel();
  }

  // Each group's P (views of `p_flat`) = M Q, M the gradients with their errors; Q's
  // views of `q_flat` made ready.
  void ProjectP(std::vector<Group>& groups, at::Tensor& p_flat, at::Tensor& q_flat, const GradBucket& bucket) {
    const at::Tensor& buffer = bucket.buffer;
    int64_t p_offset = 0, q_offset = 0;
    for (Group& g : groups) {
      const int64_t batch = static_cast<int64_t>(g.matrices.size());
      const int64_t rows = g.matrices[0].view.size(0), cols = g.matrices[0].view.size(1);
      g.p = p_flat.narrow(0, p_offset, batch * rows * g.r).view({batch, rows, g.r});
      g.q = q_flat.narrow(0, q_offset, batch * cols * g.r).view({batch, cols, g.r});
      p_offset += g.p.numel();
      q_offset += g.q.numel();
      at::Tensor q = QsFor(g.parameters);
      if (g.fused) {
        ddplab::powersgd::AddAndProject(g, q, passes_, error_);
        continue;
      }
      // [batch, rows, cols]: the local gradients with their errors, each written once.
      g.m = at::empty({batch, rows, cols}, buffer.options().dtype(ddplab::powersgd::StateDtype(buffer, bf16_state_)));
      for (int64_t i = 0; i < batch; ++i) {
        const Matrix& matrix = g.matrices[static_cast<size_t>(i)];
        at::Tensor slot = g.m.select(0, i);
        const at::Tensor& error = error_[matrix.parameter];
        if (error_feedback_ && error.defined()) {
          at::add_out(slot, matrix.source, error);
        } else {
          slot.copy_(matrix.source);
        }
      }
      InStateDtype(g.m, g.p, [&](at::Tensor& p) { ddplab::powersgd::MulMQ(g.m, q.to(g.m.scalar_type()), p); });
    }
  }

  // With the averaged Q: Q kept for the next step, the result P Q^T into the bucket, and
  // with error feedback what it left out kept as each parameter's error.
  void WriteResult(Group& g) {
    if (warm_start_) KeepQ(g.parameters, g.q, g.fused);
    if (g.fused) {
      ddplab::powersgd::ExpandAndSubtract(g, passes_, error_);
      return;
    }
    for (size_t i = 0; i < g.matrices.size(); ++i) {
      const int64_t b = static_cast<int64_t>(i);
      ddplab::powersgd::OuterInto(g.matrices[i].view, g.p.select(0, b), g.q.select(0, b));  // the mean, projected
    }
    if (error_feedback_) {
      // What the approximation left out, in one pass over the group (M -= P Q^T): each
      // parameter's error is a view into it, kept until its next step.
      ddplab::powersgd::SubtractOuter(g.m, g.p.to(g.m.scalar_type()), g.q.to(g.m.scalar_type()));
      for (size_t i = 0; i < g.matrices.size(); ++i) {
        error_[g.matrices[i].parameter] = g.m.select(0, static_cast<int64_t>(i));
      }
    }
  }

  // Runs `product`, which writes a thin matrix (P or Q) of M's dtype, into `out`: straight
  // into it where the dtypes agree, else into a temporary cast into it (P and Q are small).
  template <typename Product>
  static void InStateDtype(const at::Tensor& m, at::Tensor& out, Product product) {
    if (m.scalar_type() == out.scalar_type()) {
      product(out);
      return;
    }
    at::Tensor thin = at::empty(out.sizes(), out.options().dtype(m.scalar_type()));
    product(thin);
    out.copy_(thin);
  }

  // Averages `t` over the ranks in place, in its own dtype (bfloat16 where the bf16
  // codec wraps this hook: P and Q are then bfloat16, as under PyTorch's
  // bf16_compress_wrapper).
  void Mean(at::Tensor& t) const { context_.collectives->StartMean(t).wait(); }

  // Keeps the next step's Q of a group: this step's, with its zero columns (directions P
  // dropped as dependent) replaced by a fixed random matrix of the parameter, so that a
  // gradient of low rank in one step does not confine the approximation to that rank in
  // every later step. Q is the same on every rank, and so are its zero columns and the
  // replacement. Computed on the device for the whole group at once: no synchronization.
  void KeepQ(const std::vector<size_t>& parameters, const at::Tensor& q, bool fused) {  // [batch, cols, r]
    at::Tensor& fill = refill_[parameters];
    if (!fill.defined()) {
      std::vector<at::Tensor> fills;
      for (size_t parameter : parameters) {
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>((seed_ * 1000003 + parameter) * 31 + 17);
        fills.push_back(at::empty({q.size(1), q.size(2)}).normal_(0.0, 1.0, gen));
      }
      fill = at::stack(fills).to(q.options());
    }
    at::Tensor next;
    if (fused) {
      next = ddplab::powersgd::ReplaceZeroColumnsFused(q, fill);  // one launch
    } else {
      at::Tensor zero = q.norm(2, {1}, /*keepdim=*/true) == 0;  // [batch, 1, r]
      next = at::where(zero, fill, q);
    }
    group_q_[parameters] = next;
    for (size_t i = 0; i < parameters.size(); ++i) q_[parameters[i]] = next.select(0, static_cast<int64_t>(i));
  }

  const int64_t rank_;
  const int64_t start_step_;
  const bool error_feedback_;
  const bool warm_start_;
  const double min_compression_rate_;
  const uint64_t seed_;
  const bool bf16_state_;
  const bool fused_kernels_;
  const ddplab::powersgd::PassOptions passes_;
  const CommContext context_;
  std::map<size_t, at::Tensor> q_, error_;  // per parameter
  ddplab::powersgd::QSeeds q_seeds_;        // PyTorch's seeds of random Qs (DrawQs)
  std::set<size_t> compressed_buckets_;     // bucket indices compressed before
  // Per group of same-shape matrices in a bucket (its parameters): the kept Q as one
  // batch, and the replacement for its zero columns.
  std::map<std::vector<size_t>, at::Tensor> group_q_, refill_;
  int64_t gradient_elements_ = 0, sent_elements_ = 0;
  double first_compressed_step_ = -1;
  ddplab::powersgd::ResidualMeter residuals_;  // on sampled steps, with error feedback
#if defined(DDPLAB_CUDA)
  std::optional<c10::cuda::CUDAStream> stream_;  // the worker's
  std::map<size_t, std::unique_ptr<at::cuda::CUDAEvent>> ready_;  // per bucket index; Run's
#endif
  mutable std::mutex stats_mu_;  // the counters above: the worker writes, Stats reads
  std::optional<ddplab::HookWorker<Task>> worker_;  // last: started once everything it uses exists
};

void Register(const ddplab::plugins::powersgd::v1::Config& config, ddplab::PluginRegistrar& registrar) {
  const Settings settings = SettingsOf(config);
  if (settings.seed > 0xffffffffu) {  // numpy's RandomState, whose draws initial_q.h follows
    registrar.RejectField("random_seed", "must be below 2^32, as PyTorch's (numpy's RandomState takes no larger seed)");
    return;
  }
  registrar.Lossy(static_cast<int>(config.sample_error_every()));
  registrar.DescribeInPyTorch(PyTorchFormOf(settings));
  registrar.Refuse(ddplab::ExtensionPoint::kStepRunner,
                   "PowerSGD decides on the host from step to step (plain all-reduce before start_powerSGD_iter, "
                   "then its own worker thread), which a replayed step would not repeat");
  registrar.WrapCommHook(ddplab::ExtensionPoint::kCommHook,
                         [settings](std::unique_ptr<ddplab::CommHook>, const CommContext& context) -> std::unique_ptr<ddplab::CommHook> {
                           return std::make_unique<PowerSgdHook>(settings, context);
                         });
}

}  // namespace

DDPLAB_PLUGIN("powersgd", "2.0.0", ddplab::plugins::powersgd::v1::Config, ddplab::PluginStatus::kStable, Register)
