// The products of PowerSGD's passes over a batch of gradient matrices of one shape at a
// low rank r: M [batch, rows, cols], P [batch, rows, r], Q [batch, cols, r]:
//   P = M Q,   Q = M^T P,   out = P Q^T,   M -= P Q^T.
// Each is bound by reading or writing M, so what matters is the bandwidth cuBLAS reaches.
// For a batch of many matrices it reaches most of it. For one or two matrices with r > 1
// and more rows than columns it picks tiles that leave most of the GPU idle: measured on
// an H200 (bench/powersgd_ops.py), rank 4, one 3072x1024 matrix: P = M Q 39 us,
// P Q^T 48 us, M -= P Q^T 52 us; with the rows split into 32 blocks, each block a matrix
// of the batch: 21, 8 and 10 us. So such products split the rows (M^T P then sums the
// blocks' products). Otherwise one matrix goes to mm and addmm, which beat bmm and
// baddbmm on a batch of one (rank 1, 1024x4096: P = M Q 4.8 against 6.3 us,
// M -= P Q^T 11.6 against 13.9 us).
#ifndef DDPLAB_PLUGINS_POWERSGD_THIN_PRODUCTS_H_
#define DDPLAB_PLUGINS_POWERSGD_THIN_PRODUCTS_H_

#include <cstdint>

#include <ATen/ATen.h>

namespace ddplab::powersgd {

// Blocks per matrix when split; fewer where the rows do not divide.
inline constexpr int64_t kRowBlocks = 32;
// Batches of at most this many matrices are split.
inline constexpr int64_t kSplitBatchAtMost = 2;

// How many row blocks to split each matrix of a [batch, rows, cols] batch into for rank
// r products; 1: none.
inline int64_t RowBlocks(int64_t batch, int64_t rows, int64_t cols, int64_t r) {
  if (r < 2 || batch > kSplitBatchAtMost || rows <= cols) return 1;
  int64_t k = kRowBlocks;
  while (k > 1 && (rows % k != 0 || rows / k < r)) k /= 2;
  return k;
}

// x [batch, s, t] with each matrix repeated k times, contiguous: [batch * k, s, t].
inline at::Tensor RepeatEach(const at::Tensor& x, int64_t k) {
  return x.unsqueeze(1).expand({x.size(0), k, x.size(1), x.size(2)}).reshape({x.size(0) * k, x.size(1), x.size(2)});
}

// p = m q. m and p contiguous.
inline void MulMQ(const at::Tensor& m, const at::Tensor& q, at::Tensor& p) {
  const int64_t b = m.size(0), rows = m.size(1), cols = m.size(2), r = q.size(2);
  const int64_t k = RowBlocks(b, rows, cols, r);
  if (k > 1) {
    at::Tensor blocks = p.view({b * k, rows / k, r});
    at::bmm_out(blocks, m.view({b * k, rows / k, cols}), RepeatEach(q, k));
  } else if (b == 1) {
    at::Tensor p0 = p.select(0, 0);
    at::mm_out(p0, m.select(0, 0), q.select(0, 0));
  } else {
    at::bmm_out(p, m, q);
  }
}

// q = m^T p. m and p contiguous.
inline void MulMtP(const at::Tensor& m, const at::Tensor& p, at::Tensor& q) {
  const int64_t b = m.size(0), rows = m.size(1), cols = m.size(2), r = p.size(2);
  const int64_t k = RowBlocks(b, rows, cols, r);
  if (k > 1) {
    at::Tensor parts = at::bmm(m.view({b * k, rows / k, cols}).transpose(1, 2), p.view({b * k, rows / k, r}));
    q.copy_(parts.view({b, k, cols, r}).sum(1));
  } else if (b == 1) {
    at::Tensor q0 = q.select(0, 0);
    at::mm_out(q0, m.select(0, 0).t(), p.select(0, 0));
  } else {
    at::bmm_out(q, m.transpose(1, 2), p);
  }
}

// out = p q^T for one matrix: p [rows, r], q [cols, r], out [rows, cols] contiguous.
inline void OuterInto(at::Tensor& out, const at::Tensor& p, const at::Tensor& q) {
  const int64_t rows = p.size(0), cols = q.size(0), r = p.size(1);
  const int64_t k = RowBlocks(1, rows, cols, r);
  if (k > 1) {
    at::Tensor blocks = out.view({k, rows / k, cols});
    at::bmm_out(blocks, p.view({k, rows / k, r}), RepeatEach(q.t().unsqueeze(0), k));
  } else {
    at::mm_out(out, p, q.t());
  }
}

// m -= p q^T. m and p contiguous.
inline void SubtractOuter(at::Tensor& m, const at::Tensor& p, const at::Tensor& q) {
  const int64_t b = m.size(0), rows = m.size(1), cols = m.size(2), r = p.size(2);
  const int64_t k = RowBlocks(b, rows, cols, r);
  if (k > 1) {
    m.view({b * k, rows / k, cols})
        .baddbmm_(p.view({b * k, rows / k, r}), RepeatEach(q.transpose(1, 2), k), /*beta=*/1, /*alpha=*/-1);
  } else if (b == 1) {
    m.select(0, 0).addmm_(p.select(0, 0), q.select(0, 0).t(), /*beta=*/1, /*alpha=*/-1);
  } else {
    m.baddbmm_(p, q.transpose(1, 2), /*beta=*/1, /*alpha=*/-1);
  }
}

}  // namespace ddplab::powersgd

#endif  // DDPLAB_PLUGINS_POWERSGD_THIN_PRODUCTS_H_
