#include "core/fidelity/fidelity.h"

#include <algorithm>
#include <cmath>

// Note [Windowed effective error]: a lossy reduction's error in one step is not what
// training sees when the method carries what it loses into later steps. PowerSGD with
// error feedback sends each step's gradient plus the residual earlier steps left out, so
// that, with e_t the mean over ranks of the residuals after step t,
//   reduced_t - exact_t = e_(t-1) - e_t,
// and its per-step relative error (0.75 at rank 1 on the ViT) counts last step's residual,
// re-sent, as an error. Summed over W consecutive steps the differences telescope:
//   sum(reduced - exact) = e_(t0-1) - e_(t0+W-1),
// bounded by the residuals, while sum(exact) grows with W as far as the gradients agree
// in direction. With plain SGD the parameters after W steps differ from exact
// all-reduce's by the learning rate times sum(reduced - exact) (to first order), so
//   ||sum(reduced - exact)|| / ||sum(exact)||
// over W steps is how far the compressed run's parameters drift from exact's, relative to
// how far exact's moved: it falls as W grows where error feedback works, stays near the
// per-step error for a biased compressor without it (its errors point the same way each
// step), and falls slowly for unbiased rounding (bf16), whose errors partly cancel.
// Windows of `window` consecutive synced steps are sampled; W counts from the window's
// first step (1, 2, 4, ... and the whole window), and each figure is the mean over the
// windows that reached that length. A window costs two float32 copies of the gradients
// (the sums), held while it is open, beside the exact copy every sampled step takes.

namespace ddplab {
namespace {

// The window lengths reported: 1, 2, 4, ... below `window`, and `window`.
std::vector<FidelityStats::Window> Levels(int window) {
  std::vector<FidelityStats::Window> levels;
  for (int w = 1; w < window; w *= 2) levels.push_back({w, 0, 0});
  if (window >= 1) levels.push_back({window, 0, 0});
  return levels;
}

// Per parameter, in double: ||a - b||^2, ||b||^2, ||a||^2 and <a, b>, as rows of one
// tensor on the host (one copy from the device for all of them).
at::Tensor Products(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  std::vector<at::Tensor> rows;
  for (size_t i = 0; i < b.size(); ++i) {
    const at::Tensor y = b[i].reshape(-1).to(at::kDouble);
    const at::Tensor x = a[i].defined() ? a[i].reshape(-1).to(at::kDouble) : at::zeros_like(y);
    const at::Tensor d = x - y;
    rows.push_back(at::stack({at::dot(d, d), at::dot(y, y), at::dot(x, x), at::dot(x, y)}));
  }
  return at::stack(rows).cpu();
}

// Per tensor, in double: its squared L2 norm, on the host.
at::Tensor SquaredNorms(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> norms;
  for (const at::Tensor& t : tensors) {
    const at::Tensor x = t.reshape(-1).to(at::kDouble);
    norms.push_back(at::dot(x, x));
  }
  return at::stack(norms).cpu();
}

double Cosine(double dot, double a_sq, double b_sq) {
  return a_sq > 0 && b_sq > 0 ? dot / std::sqrt(a_sq * b_sq) : 0.0;
}

}  // namespace

FidelityMeter::FidelityMeter(const std::vector<int64_t>& numel, int every, int window)
    : every_(every), window_(std::max(window, 1)) {
  stats_.parameters.assign(numel.size(), FidelityStats::Parameter());
  for (size_t i = 0; i < numel.size(); ++i) stats_.parameters[i].numel = numel[i];
  stats_.windows = Levels(window_);
}

bool FidelityMeter::Samples(int64_t step, bool eligible) {
  if (every_ <= 0) return false;
  if (!eligible) {
    DropWindow();
    return false;
  }
  return position_ > 0 || step % every_ == 0;
}

void FidelityMeter::Add(const std::vector<at::Tensor>& reduced, const std::vector<at::Tensor>& exact) {
  if (exact.empty()) return;
  const double step_error = AddStep(reduced, exact);
  if (position_ == 0) DropWindow();  // a new window
  position_++;
  if (window_ == 1) {
    // A window of one step needs no sums: its figure is the step's.
    if (step_error >= 0) {
      stats_.windows[0].count++;
      stats_.windows[0].error_sum += step_error;
    }
  } else {
    Accumulate(reduced, exact);
    for (size_t level = 0; level < stats_.windows.size(); ++level) {
      if (stats_.windows[level].steps == position_) EndWindowLevel(level);
    }
  }
  if (position_ >= window_) DropWindow();
}

// The step's figures, whole and per parameter; returns its relative error (-1 where the
// exact mean is zero).
double FidelityMeter::AddStep(const std::vector<at::Tensor>& reduced, const std::vector<at::Tensor>& exact) {
  const at::Tensor products = Products(reduced, exact);
  auto p = products.accessor<double, 2>();
  double diff_sq = 0, exact_sq = 0, reduced_sq = 0, dot = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    diff_sq += p[i][0];
    exact_sq += p[i][1];
    reduced_sq += p[i][2];
    dot += p[i][3];
    if (p[i][1] <= 0) continue;
    FidelityStats::Parameter& parameter = stats_.parameters[i];
    parameter.samples++;
    parameter.relative_error_sum += std::sqrt(p[i][0] / p[i][1]);
    parameter.cosine_sum += Cosine(p[i][3], p[i][2], p[i][1]);
    if (window_ == 1) {  // the window is the step
      parameter.windows++;
      parameter.effective_error_sum += std::sqrt(p[i][0] / p[i][1]);
    }
  }
  if (exact_sq <= 0) return -1;
  const double error = std::sqrt(diff_sq / exact_sq);
  stats_.samples++;
  stats_.relative_error_sum += error;
  stats_.cosine_sum += Cosine(dot, reduced_sq, exact_sq);
  return error;
}

// Adds the step to the open window's sums.
void FidelityMeter::Accumulate(const std::vector<at::Tensor>& reduced, const std::vector<at::Tensor>& exact) {
  diff_sum_.resize(exact.size());
  exact_sum_.resize(exact.size());
  for (size_t i = 0; i < exact.size(); ++i) {
    const at::Tensor want = exact[i].reshape(-1);
    const at::Tensor got = reduced[i].defined() ? reduced[i].reshape(-1) : at::zeros_like(want);
    if (!exact_sum_[i].defined()) {
      diff_sum_[i] = got - want;
      exact_sum_[i] = want.clone();
    } else {
      diff_sum_[i].add_(got).sub_(want);
      exact_sum_[i].add_(want);
    }
  }
}

// The open window has reached level `level`'s length: its effective error, and at the
// whole window's length each parameter's.
void FidelityMeter::EndWindowLevel(size_t level) {
  const at::Tensor diff = SquaredNorms(diff_sum_), sum = SquaredNorms(exact_sum_);
  auto d = diff.accessor<double, 1>();
  auto e = sum.accessor<double, 1>();
  double diff_sq = 0, exact_sq = 0;
  const bool whole = stats_.windows[level].steps == window_;
  for (size_t i = 0; i < diff_sum_.size(); ++i) {
    diff_sq += d[i];
    exact_sq += e[i];
    if (whole && e[i] > 0) {
      stats_.parameters[i].windows++;
      stats_.parameters[i].effective_error_sum += std::sqrt(d[i] / e[i]);
    }
  }
  if (exact_sq <= 0) return;
  stats_.windows[level].count++;
  stats_.windows[level].error_sum += std::sqrt(diff_sq / exact_sq);
}

void FidelityMeter::DropWindow() {
  position_ = 0;
  diff_sum_.clear();
  exact_sum_.clear();
}

}  // namespace ddplab
