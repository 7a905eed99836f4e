// powersgd: low-rank gradient compression (Vogels et al., PowerSGD; PyTorch's
// powerSGD_hook), as a communication hook.
//
// Per bucket, each gradient matrix M (a parameter of two or more dimensions, viewed as
// rows x cols) that shrinks enough is sent as two thin matrices instead of itself:
//   M += error                     error feedback: what earlier steps lost
//   P = M Q;     mean of P over ranks, then orthogonalize P's columns
//   Q = M^T P;   mean of Q over ranks
//   M' = P Q^T  (the mean of M projected on P's span);   error = M - M'
// with Q warm-started from the last step, and the same random initial Q on every rank.
// All P of a bucket travel in one all-reduce, all Q in another; vectors and matrices that
// would not shrink by min_compression_rate travel uncompressed in a third. Matrices of
// one shape are multiplied and orthogonalized as a batch. Per-parameter state (Q, error)
// is keyed by the parameter, so it survives the engine's regrouping of buckets.
//
// On a GPU the work runs on a stream of its own, ordered after the bucket's gradients,
// so that backward goes on while the bucket is compressed and reduced; the engine waits
// for the result only after backward.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>

#include "core/collectives.h"
#include "core/plugin_api.h"

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace {

using ddplab::CommContext;
using ddplab::GradBucket;

// A column whose part orthogonal to the earlier ones is below this fraction of its own
// length is taken as dependent on them (rounding noise, not a direction) and zeroed.
constexpr double kDependentColumn = 1e-4;

// One pass of modified Gram-Schmidt over the columns of each matrix in `p`
// ([batch, rows, rank]), in place. A dependent or zero column becomes zero rather than a
// noise vector blown up to unit length, so P P^T stays a projection where P has lower
// rank than its columns (a gradient from few samples, or a zero one).
void GramSchmidt(at::Tensor& p) {
  const int64_t rank = p.size(2);
  at::Tensor original = p.norm(2, {1});  // [batch, rank]
  for (int64_t j = 0; j < rank; ++j) {
    at::Tensor col = p.select(2, j);  // [batch, rows]
    at::Tensor norm = col.norm(2, {1}, /*keepdim=*/true);  // [batch, 1]
    at::Tensor independent = norm > original.select(1, j).unsqueeze(1) * kDependentColumn;
    col.mul_(at::where(independent, norm.reciprocal(), at::zeros_like(norm)));
    if (j + 1 < rank) {
      at::Tensor rest = p.narrow(2, j + 1, rank - j - 1);  // [batch, rows, rest]
      // rest -= col (col^T rest)
      at::Tensor proj = at::bmm(col.unsqueeze(1), rest);  // [batch, 1, rest]
      rest.sub_(at::bmm(col.unsqueeze(2), proj));
    }
  }
}

// Orthonormal columns in float32: the second pass removes what rounding left of the
// earlier directions ("twice is enough").
void Orthogonalize(at::Tensor& p) {
  GramSchmidt(p);
  GramSchmidt(p);
}

// The configuration, read once from the PowerSgdConfig message.
struct Settings {
  int64_t rank;
  int64_t start_step;
  bool error_feedback;
  bool warm_start;
  double min_compression_rate;
  uint64_t seed;
};

class PowerSgdHook : public ddplab::CommHook {
 public:
  PowerSgdHook(const Settings& settings, const CommContext& context)
      : rank_(settings.rank),
        start_step_(settings.start_step),
        error_feedback_(settings.error_feedback),
        warm_start_(settings.warm_start),
        min_compression_rate_(settings.min_compression_rate),
        seed_(settings.seed),
        context_(context) {
    if (context_.options != nullptr) wire_dtype_ = context_.options->comm_dtype;
  }

  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    at::Tensor buffer = bucket.buffer;
#if defined(DDPLAB_CUDA)
    if (buffer.is_cuda()) {
      // Compress on a stream of our own, after the gradients the bucket holds.
      const c10::DeviceIndex device = buffer.device().index();
      if (!stream_) stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device);
      at::cuda::CUDAEvent ready;
      ready.record(c10::cuda::getCurrentCUDAStream(device));
      ready.block(*stream_);
      c10::cuda::CUDAStreamGuard guard(*stream_);
      Reduce(bucket);
      auto future = c10::make_intrusive<c10::ivalue::Future>(
          c10::TensorType::get(), std::vector<c10::Device>{buffer.device()});
      future->markCompleted(c10::IValue(buffer));  // records an event on our stream
      return future;
    }
#endif
    Reduce(bucket);
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    future->markCompleted(c10::IValue(buffer));
    return future;
  }

  std::map<std::string, double> Stats() const override {
    std::map<std::string, double> stats;
    if (sent_elements_ > 0) {
      stats["compression_ratio"] = static_cast<double>(gradient_elements_) / sent_elements_;
    }
    stats["first_compressed_step"] = first_compressed_step_;
    stats["rank"] = static_cast<double>(rank_);
    return stats;
  }

 private:
  struct Matrix {
    size_t parameter;
    at::Tensor view;  // rows x cols, into the bucket
  };

  // Q for a parameter: last step's (warm start) or a seeded random one, the same on
  // every rank (a new one each step without warm start).
  at::Tensor& QFor(size_t parameter, int64_t cols, int64_t r, int64_t step,
                   const at::TensorOptions& options) {
    at::Tensor& q = q_[parameter];
    if (!q.defined() || !warm_start_) {
      uint64_t draw = warm_start_ ? 0 : static_cast<uint64_t>(step);
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(
          (seed_ * 1000003 + parameter) * 7919 + draw);
      q = at::empty({cols, r}).normal_(0.0, 1.0, gen).to(options);
    }
    return q;
  }

  void Reduce(GradBucket& bucket) {
    at::Tensor buffer = bucket.buffer;
    if (bucket.step < start_step_) {
      ddplab::StartMean(*context_.process_group, buffer, context_.nccl).wait();
      return;
    }
    if (first_compressed_step_ < 0) first_compressed_step_ = static_cast<double>(bucket.step);

    // Which gradients are compressed; the rest travel as they are, in one batch.
    std::map<std::vector<int64_t>, std::vector<Matrix>> by_shape;
    std::vector<at::Tensor> plain;
    for (size_t k = 0; k < bucket.parameters.size(); ++k) {
      const std::vector<int64_t>& size = bucket.sizes[k];
      int64_t numel = 1;
      for (int64_t d : size) numel *= d;
      at::Tensor flat = buffer.narrow(0, bucket.offsets[k], numel);
      gradient_elements_ += numel;
      if (size.size() >= 2) {
        const int64_t rows = size[0], cols = numel / size[0];
        const int64_t r = std::min({rank_, rows, cols});
        if (static_cast<double>(rows + cols) * r * min_compression_rate_ <= static_cast<double>(rows * cols)) {
          by_shape[{rows, cols}].push_back({bucket.parameters[k], flat.view({rows, cols})});
          continue;
        }
      }
      plain.push_back(flat);
    }

    // Uncompressed gradients: one mean, started first.
    at::Tensor plain_flat;
    std::optional<ddplab::PendingMean> plain_mean;
    if (!plain.empty()) {
      plain_flat = at::cat(plain);
      sent_elements_ += plain_flat.numel();
      plain_mean = ddplab::StartMean(*context_.process_group, plain_flat, context_.nccl);
    }

    // Per shape: stack M (with error feedback), P = M Q.
    struct Group {
      std::vector<Matrix> matrices;
      at::Tensor m, p, q, m_local;
    };
    std::vector<Group> groups;
    for (auto& [shape, matrices] : by_shape) {
      Group g;
      g.matrices = matrices;
      // [batch, rows, cols]: the local gradients with their errors, each written once.
      g.m = at::empty({static_cast<int64_t>(matrices.size()), shape[0], shape[1]},
                      buffer.options());
      std::vector<at::Tensor> qs;
      for (size_t i = 0; i < matrices.size(); ++i) {
        const Matrix& matrix = matrices[i];
        at::Tensor slot = g.m.select(0, static_cast<int64_t>(i));
        const at::Tensor& error = error_[matrix.parameter];
        if (error_feedback_ && error.defined()) {
          at::add_out(slot, matrix.view, error);
        } else {
          slot.copy_(matrix.view);
        }
        const int64_t r = std::min({rank_, shape[0], shape[1]});
        qs.push_back(QFor(matrix.parameter, shape[1], r, bucket.step, buffer.options()));
      }
      g.q = at::stack(qs);  // [batch, cols, r]
      g.p = at::bmm(g.m, g.q);
      groups.push_back(std::move(g));
    }
    if (!groups.empty()) {
      // Mean of all P in one all-reduce, then orthogonalize.
      std::vector<at::Tensor> ps;
      for (const Group& g : groups) ps.push_back(g.p.reshape(-1));
      at::Tensor p_flat = Wire(at::cat(ps));
      sent_elements_ += p_flat.numel();
      ddplab::StartMean(*context_.process_group, p_flat, context_.nccl).wait();
      int64_t offset = 0;
      for (Group& g : groups) {
        g.p.copy_(p_flat.narrow(0, offset, g.p.numel()).view(g.p.sizes()));
        offset += g.p.numel();
        Orthogonalize(g.p);
        g.q = at::bmm(g.m.transpose(1, 2), g.p);  // [batch, cols, r]
      }
      // Mean of all Q in one all-reduce.
      std::vector<at::Tensor> qs;
      for (const Group& g : groups) qs.push_back(g.q.reshape(-1));
      at::Tensor q_flat = Wire(at::cat(qs));
      sent_elements_ += q_flat.numel();
      ddplab::StartMean(*context_.process_group, q_flat, context_.nccl).wait();
      offset = 0;
      for (Group& g : groups) {
        g.q.copy_(q_flat.narrow(0, offset, g.q.numel()).view(g.q.sizes()));
        offset += g.q.numel();
        at::Tensor approx = at::bmm(g.p, g.q.transpose(1, 2));  // the mean, projected
        // What the approximation left out, in one pass over the group: each parameter's
        // error is a view into it, kept until the parameter's next step.
        if (error_feedback_) g.m.sub_(approx);
        for (size_t i = 0; i < g.matrices.size(); ++i) {
          const Matrix& matrix = g.matrices[i];
          if (error_feedback_) error_[matrix.parameter] = g.m.select(0, static_cast<int64_t>(i));
          if (warm_start_) q_[matrix.parameter] = Refill(g.q[i], matrix.parameter);
          matrix.view.copy_(approx[i]);
        }
      }
    }
    if (plain_mean) {
      plain_mean->wait();
      int64_t offset = 0;
      for (at::Tensor& t : plain) {
        t.copy_(plain_flat.narrow(0, offset, t.numel()));
        offset += t.numel();
      }
    }
  }

  // The next step's Q: this step's, with its zero columns (directions P dropped as
  // dependent) replaced by a fixed random matrix of the parameter, so that a gradient of
  // low rank in one step does not confine the approximation to that rank in every later
  // step. Q is the same on every rank, and so are its zero columns and the replacement.
  // Computed on the device: no synchronization in the hook.
  at::Tensor Refill(const at::Tensor& q, size_t parameter) {
    at::Tensor& fill = refill_[parameter];
    if (!fill.defined()) {
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>((seed_ * 1000003 + parameter) * 31 + 17);
      fill = at::empty(q.sizes()).normal_(0.0, 1.0, gen).to(q.options());
    }
    at::Tensor zero = q.norm(2, {0}, /*keepdim=*/true) == 0;  // [1, r]
    return at::where(zero, fill, q);
  }

  // What P or Q travel as: bfloat16 when the bf16 plugin is listed too.
  at::Tensor Wire(at::Tensor t) const {
    if (wire_dtype_ == at::ScalarType::Undefined || wire_dtype_ == t.scalar_type()) return t;
    return t.to(wire_dtype_);
  }

  const int64_t rank_;
  const int64_t start_step_;
  const bool error_feedback_;
  const bool warm_start_;
  const double min_compression_rate_;
  const uint64_t seed_;
  const CommContext context_;
  at::ScalarType wire_dtype_ = at::ScalarType::Undefined;
  std::map<size_t, at::Tensor> q_, error_, refill_;  // per parameter
  int64_t gradient_elements_ = 0, sent_elements_ = 0;
  double first_compressed_step_ = -1;
#if defined(DDPLAB_CUDA)
  std::optional<c10::cuda::CUDAStream> stream_;
#endif
};

void Register(ddplab::PluginRegistrar& registrar) {
  const auto& config = static_cast<const ddplab::v1::PowerSgdConfig&>(registrar.config());
  Settings settings{static_cast<int64_t>(config.rank()),   static_cast<int64_t>(config.start_step()),
                    !config.disable_error_feedback(),       !config.disable_warm_start(),
                    config.min_compression_rate(),          config.seed()};
  const int every = static_cast<int>(config.sample_error_every());
  registrar.AddEngineOptions([every](ddplab::EngineOptions& options) {
    if (every > 0) options.gradient_error_every = every;
  });
  registrar.SetCommHook([settings](const CommContext& context) -> std::unique_ptr<ddplab::CommHook> {
    return std::make_unique<PowerSgdHook>(settings, context);
  });
}

}  // namespace

DDPLAB_PLUGIN("powersgd", "1.0.0", "ddplab.v1.PowerSgdConfig", Register)
