// A bucket's gradient matrices of one shape (a Group) and the passes over them that the
// PowerSGD hook (powersgd.cc) runs: P's orthogonalization, and on a GPU the passes as
// ddplab's own kernels (fused.h) in one launch per group.
//
//   ddplab::powersgd::Orthogonalize(g.p);            // ATen's, any device
//   ddplab::powersgd::AddAndProject(g, q, options, errors);   // fused.h's, on a GPU
#ifndef DDPLAB_PLUGINS_POWERSGD_GROUPS_H_
#define DDPLAB_PLUGINS_POWERSGD_GROUPS_H_

#include <cstdint>
#include <map>
#include <vector>

#include <ATen/ATen.h>

#include "core/engine/extension_points.h"

namespace ddplab::powersgd {

// See Orthogonalize: the fraction of its length below which a column is dependent.
extern const double kDependentColumn;

struct Matrix {
  size_t parameter;
  at::Tensor view;    // rows x cols, into the bucket: where the result goes
  at::Tensor source;  // rows x cols: where the gradient is (`view`, or autograd's)
};

// The matrices of one shape in a bucket.
struct Group {
  std::vector<Matrix> matrices;
  std::vector<size_t> parameters;  // the key of the group's Q kept for the next step
  int64_t r;
  at::Tensor p, q;  // [batch, rows, r], [batch, cols, r]
  at::Tensor m;     // [batch, rows, cols], M stacked, for ATen's passes
  bool fused = false;  // the passes in fused.h's kernels instead, each M in `ms`
  std::vector<at::Tensor> ms;
};

// A bucket's matrices that compress enough, grouped by shape, and the rest (uncompressed).
struct Split {
  std::map<std::vector<int64_t>, std::vector<Matrix>> by_shape;
  std::vector<std::vector<int64_t>> shape_order;  // by_shape's keys as they first appear
  std::vector<at::Tensor> plain;
  std::vector<size_t> plain_slots;  // their positions in the bucket
  int64_t gradient_elements = 0;
};

// `bucket`'s gradients split as PyTorch's powerSGD_hook splits them: a gradient of two or
// more dimensions, viewed as rows x the rest, is compressed at rank r = min(rank, rows,
// cols) where (rows + cols) r min_compression_rate < rows cols; the others are not.
Split SplitBucket(const GradBucket& bucket, int64_t rank, double min_compression_rate);

// What the passes need of the hook's configuration.
struct PassOptions {
  bool error_feedback = true;
  bool bf16_state = false;  // M and the error in bfloat16
};

// Each compressed parameter's error (what compression left out), kept for its next step.
using ErrorState = std::map<size_t, at::Tensor>;

// What M and the error are kept in: `t`'s dtype, or bfloat16.
inline at::ScalarType StateDtype(const at::Tensor& t, bool bf16_state) {
  return bf16_state ? at::kBFloat16 : t.scalar_type();
}

// Orthonormal columns in float32 for a batch of matrices `p` ([batch, rows, rank]), in
// place; dependent or zero columns become zero.
void Orthogonalize(at::Tensor& p);

// Whether a group's passes run in fused.h's kernels: on a GPU, float32 gradients, a rank
// they were built for, and `fused_kernels` (not disabled).
bool UseFused(const at::Tensor& buffer, int64_t rows, int64_t r, bool fused_kernels);

// fused.h's passes over a group (CUDA builds; they fail elsewhere): M = G + error and
// P = M Q; Q = M^T P; the result P Q^T into the bucket and the error M - P Q^T kept;
// P orthonormalized; q's zero columns replaced by fill's.
void AddAndProject(Group& g, const at::Tensor& q_batch, const PassOptions& o, ErrorState& error_state);
void ProjectTransposed(Group& g, const PassOptions& o);
void ExpandAndSubtract(Group& g, const PassOptions& o, ErrorState& error_state);
void OrthonormalizeFused(Group& g);
at::Tensor ReplaceZeroColumnsFused(const at::Tensor& q, const at::Tensor& fill);

}  // namespace ddplab::powersgd

#endif  // DDPLAB_PLUGINS_POWERSGD_GROUPS_H_
