#include "plugins/powersgd/groups.h"

#include <algorithm>
#include <tuple>

#if defined(DDPLAB_CUDA)
#include <c10/cuda/CUDAStream.h>

#include "plugins/powersgd/fused.h"
#endif

namespace ddplab::powersgd {

// A column whose part orthogonal to the earlier ones is below this fraction of its own
// length is taken as dependent on them (rounding noise, not a direction) and zeroed.
// With bf16_state, P comes from bfloat16 products, whose rounding leaves a dependent
// column some 2^-9 to 2^-8 of its length off the others: it is kept, as a direction of
// rounding noise along which M has no more than its own rounding, so the projection is
// the same to bfloat16's precision. (A threshold above that rounding, 1/32, also dropped
// weak but real directions: at full rank the result was 1.8% off instead of 0.4%.)
const double kDependentColumn = 1e-4;

// One pass of modified Gram-Schmidt over the columns of each matrix in `p`
// ([batch, rows, rank]), in place. A dependent or zero column becomes zero rather than a
// noise vector blown up to unit length, so P P^T stays a projection where P has lower
// rank than its columns (a gradient from few samples, or a zero one).
namespace {

void GramSchmidt(at::Tensor& p) {
  const int64_t rank = p.size(2);
  at::Tensor threshold = p.norm(2, {1}, /*keepdim=*/true).mul_(kDependentColumn);  // [batch, 1, rank]
  for (int64_t j = 0; j < rank; ++j) {
    at::Tensor col = p.narrow(2, j, 1);  // [batch, rows, 1]
    at::Tensor norm = col.norm(2, {1}, /*keepdim=*/true);  // [batch, 1, 1]
    col.mul_(at::where(norm > threshold.narrow(2, j, 1), norm.reciprocal(), 0.0));
    if (j + 1 < rank) {
      at::Tensor rest = p.narrow(2, j + 1, rank - j - 1);  // [batch, rows, rest]
      // rest -= col (col^T rest)
      rest.baddbmm_(col, at::bmm(col.transpose(1, 2), rest), /*beta=*/1, /*alpha=*/-1);
    }
  }
}

}  // namespace

// Orthonormal columns in float32, dependent or zero ones zeroed, for a batch of matrices.
// - One column: normalized (one pass of the above).
// - A few matrices (a bucket of some tens of MB holds one or two of a shape): Householder
//   QR, orthonormal to rounding without a second pass, in a number of launches that does
//   not grow with the rank, where Gram-Schmidt launches several per column and a small
//   bucket's work is bound by launches (4 H200, rank 4, 25 MB buckets: 0.56 -> 0.81 of
//   one GPU). Column j of Q is kept, with R's sign so that P = Q R as Gram-Schmidt gives
//   it, where |R_jj| (the part of column j orthogonal to the earlier ones) passes the
//   same threshold.
// - Many matrices (one large bucket): two passes of batched Gram-Schmidt, whose launches
//   do not grow with the batch; LibTorch's QR runs one solver call per matrix (rank 4,
//   one 2000 MB bucket: 0.85 with Gram-Schmidt, 0.80 with QR).
constexpr int64_t kMostMatricesForQr = 4;

void Orthogonalize(at::Tensor& p) {
  // In 16-bit floats (under the bf16 codec) Gram-Schmidt, as PyTorch's _orthogonalize
  // does: LibTorch has no QR for them.
  if (p.size(2) == 1 || (p.scalar_type() != at::kFloat && p.scalar_type() != at::kDouble)) {
    GramSchmidt(p);
    return;
  }
  if (p.size(0) > kMostMatricesForQr) {
    GramSchmidt(p);
    GramSchmidt(p);  // what rounding left of the earlier directions ("twice is enough")
    return;
  }
  auto [q, r] = at::linalg_qr(p);  // [batch, rows, rank], [batch, rank, rank]
  at::Tensor diagonal = r.diagonal(0, 1, 2).unsqueeze(1);  // [batch, 1, rank]
  at::Tensor threshold = p.norm(2, {1}, /*keepdim=*/true).mul_(kDependentColumn);
  p.copy_(q.mul_(at::where(diagonal.abs() > threshold, diagonal.sign(), 0.0)));
}


Split SplitBucket(const GradBucket& bucket, int64_t rank, double min_compression_rate) {
  Split split;
  for (size_t k = 0; k < bucket.parameters.size(); ++k) {
    const std::vector<int64_t>& size = bucket.sizes[k];
    int64_t numel = 1;
    for (int64_t d : size) numel *= d;
    at::Tensor flat = bucket.buffer.narrow(0, bucket.offsets[k], numel);
    split.gradient_elements += numel;
    if (size.size() >= 2) {
      const int64_t rows = size[0], cols = numel / size[0];
      const int64_t r = std::min({rank, rows, cols});
      if (static_cast<double>(rows + cols) * r * min_compression_rate < static_cast<double>(rows * cols)) {
        at::Tensor view = flat.view({rows, cols});
        at::Tensor source = bucket.gradients.empty() ? view : bucket.gradients[k].reshape({rows, cols});
        std::vector<Matrix>& same = split.by_shape[{rows, cols}];
        if (same.empty()) split.shape_order.push_back({rows, cols});
        same.push_back({bucket.parameters[k], view, source});
        continue;
      }
    }
    split.plain.push_back(flat);
    split.plain_slots.push_back(k);
  }
  return split;
}

// Whether a group's passes run in fused.h's kernels: on a GPU, float32 gradients, a
// rank they were built for.
bool UseFused(const at::Tensor& buffer, int64_t rows, int64_t r, bool fused_kernels) {
#if defined(DDPLAB_CUDA)
  return fused_kernels && buffer.is_cuda() && buffer.scalar_type() == at::kFloat &&
         fused::Supports(rows, static_cast<int>(r));
#else
  (void)buffer, (void)rows, (void)r, (void)fused_kernels;
  return false;
#endif
}

#if defined(DDPLAB_CUDA)
namespace {

fused::State FusedState(bool bf16_state) {
  return bf16_state ? fused::State::kBFloat16 : fused::State::kFloat32;
}

void Check(cudaError_t status, const char* kernel) {
  TORCH_CHECK(status == cudaSuccess, "powersgd: ", kernel, " failed: ", cudaGetErrorString(status));
}

}  // namespace

// M = G + error for the group's matrices, each written over its error (into a new M
// without one, or without error feedback), and P = M Q into the group's P. `q` is
// [batch, cols, r].
void AddAndProject(Group& g, const at::Tensor& q_batch, const PassOptions& o, ErrorState& error_state) {
  const at::Tensor q = q_batch.contiguous();
  const int64_t rows = g.p.size(1), cols = g.q.size(1);
  std::vector<at::Tensor> gradients;  // held until the launch is queued
  std::vector<const float*> gs;
  std::vector<const void*> es;
  std::vector<void*> ms;
  for (const Matrix& matrix : g.matrices) {
    gradients.push_back(matrix.source.contiguous());
    const at::Tensor& error = error_state[matrix.parameter];
    const bool with_error = o.error_feedback && error.defined();
    at::Tensor m = with_error ? error
                              : at::empty({rows, cols}, gradients.back().options().dtype(StateDtype(gradients.back(), o.bf16_state)));
    TORCH_INTERNAL_ASSERT(m.is_contiguous() && m.scalar_type() == StateDtype(gradients.back(), o.bf16_state) &&
                          m.numel() == rows * cols);
    gs.push_back(gradients.back().data_ptr<float>());
    es.push_back(with_error ? error.data_ptr() : nullptr);
    ms.push_back(m.data_ptr());
    g.ms.push_back(m);
  }
  Check(fused::AddAndProject(static_cast<int64_t>(gs.size()), gs.data(), es.data(), ms.data(),
                                               FusedState(o.bf16_state), q.data_ptr<float>(), g.p.data_ptr<float>(), rows, cols,
                                               static_cast<int>(g.r), c10::cuda::getCurrentCUDAStream().stream()),
        "AddAndProject");
}

// Q = M^T P for the group's matrices, into the group's Q.
void ProjectTransposed(Group& g, const PassOptions& o) {
  const int64_t batch = static_cast<int64_t>(g.ms.size()), rows = g.p.size(1), cols = g.q.size(1);
  const int r = static_cast<int>(g.r);
  const size_t scratch_floats = fused::ProjectTransposedScratch(batch, rows, cols, r);
  at::Tensor scratch;
  if (scratch_floats > 0) scratch = at::empty({static_cast<int64_t>(scratch_floats)}, g.p.options());
  std::vector<const void*> ms;
  for (const at::Tensor& m : g.ms) ms.push_back(m.data_ptr());
  Check(fused::ProjectTransposed(batch, ms.data(), FusedState(o.bf16_state), g.p.data_ptr<float>(),
                                                   g.q.data_ptr<float>(),
                                                   scratch.defined() ? scratch.data_ptr<float>() : nullptr, rows,
                                                   cols, r, c10::cuda::getCurrentCUDAStream().stream()),
        "ProjectTransposed");
}

// The result P Q^T into the bucket for the group's matrices, and with error feedback
// the error M - P Q^T written over each M and kept for the next step.
void ExpandAndSubtract(Group& g, const PassOptions& o, ErrorState& error_state) {
  const int64_t rows = g.p.size(1), cols = g.q.size(1);
  std::vector<void*> ms;
  std::vector<float*> outs;
  for (size_t i = 0; i < g.ms.size(); ++i) {
    at::Tensor& out = g.matrices[i].view;
    TORCH_INTERNAL_ASSERT(out.is_contiguous() && out.scalar_type() == at::kFloat);
    outs.push_back(out.data_ptr<float>());
    ms.push_back(o.error_feedback ? g.ms[i].data_ptr() : nullptr);
  }
  Check(fused::ExpandAndSubtract(static_cast<int64_t>(outs.size()), ms.data(), FusedState(o.bf16_state),
                                                   g.p.data_ptr<float>(), g.q.data_ptr<float>(), outs.data(), rows,
                                                   cols, static_cast<int>(g.r),
                                                   c10::cuda::getCurrentCUDAStream().stream()),
        "ExpandAndSubtract");
  if (o.error_feedback) {
    for (size_t i = 0; i < g.ms.size(); ++i) error_state[g.matrices[i].parameter] = g.ms[i];
  }
  g.ms.clear();
}

// The group's P orthonormalized in one launch, as Orthogonalize does it in several per
// column: one pass of Gram-Schmidt at rank 1 (a normalization), two above (where
// Orthogonalize takes Householder QR for a few matrices: the same columns, to rounding).
void OrthonormalizeFused(Group& g) {
  Check(fused::Orthonormalize(g.p.size(0), g.p.data_ptr<float>(), g.p.size(1),
                                                static_cast<int>(g.r), g.r == 1 ? 1 : 2,
                                                static_cast<float>(kDependentColumn),
                                                c10::cuda::getCurrentCUDAStream().stream()),
        "Orthonormalize");
}

// q with its zero columns replaced by fill's, [batch, cols, r], in one launch.
at::Tensor ReplaceZeroColumnsFused(const at::Tensor& q, const at::Tensor& fill) {
  TORCH_INTERNAL_ASSERT(q.is_contiguous() && fill.is_contiguous() && q.sizes() == fill.sizes() &&
                        q.scalar_type() == at::kFloat && fill.scalar_type() == at::kFloat);
  at::Tensor next = at::empty_like(q);
  Check(fused::ReplaceZeroColumns(q.size(0), q.data_ptr<float>(), fill.data_ptr<float>(),
                                                    next.data_ptr<float>(), q.size(1), static_cast<int>(q.size(2)),
                                                    c10::cuda::getCurrentCUDAStream().stream()),
        "ReplaceZeroColumns");
  return next;
}
#else
void OrthonormalizeFused(Group&) { TORCH_INTERNAL_ASSERT(false, "no fused kernels in this build"); }
at::Tensor ReplaceZeroColumnsFused(const at::Tensor&, const at::Tensor&) {
  TORCH_INTERNAL_ASSERT(false, "no fused kernels in this build");
  return at::Tensor();
}
void AddAndProject(Group&, const at::Tensor&, const PassOptions&, ErrorState&) {
  TORCH_INTERNAL_ASSERT(false, "no fused kernels in this build");
}
void ProjectTransposed(Group&, const PassOptions&) { TORCH_INTERNAL_ASSERT(false, "no fused kernels in this build"); }
void ExpandAndSubtract(Group&, const PassOptions&, ErrorState&) {
  TORCH_INTERNAL_ASSERT(false, "no fused kernels in this build");
}
#endif

}  // namespace ddplab::powersgd
