#include "plugins/powersgd/residual.h"

#include <cmath>

namespace ddplab::powersgd {
namespace {

// The sum of the tensors' squared L2 norms, in double (bfloat16 state included).
double SquaredNorm(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return 0;
  std::vector<at::Tensor> norms;
  for (const at::Tensor& t : tensors) norms.push_back(t.to(at::kDouble).pow(2).sum());
  return at::stack(norms).sum().item<double>();
}

}  // namespace

void ResidualMeter::AddGradients(const std::vector<Group>& groups) {
  std::vector<at::Tensor> gradients;
  for (const Group& g : groups) {
    for (const Matrix& m : g.matrices) gradients.push_back(m.source);
  }
  gradient_sq_ += SquaredNorm(gradients);
}

void ResidualMeter::AddResiduals(const std::vector<Group>& groups, const ErrorState& errors) {
  std::vector<at::Tensor> residuals;
  for (const Group& g : groups) {
    for (size_t parameter : g.parameters) {
      auto it = errors.find(parameter);
      if (it != errors.end() && it->second.defined()) residuals.push_back(it->second);
    }
  }
  residual_sq_ += SquaredNorm(residuals);
}

void ResidualMeter::EndStep() {
  if (gradient_sq_ > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    ratio_sum_ += std::sqrt(residual_sq_ / gradient_sq_);
    steps_++;
  }
  gradient_sq_ = residual_sq_ = 0;
}

double ResidualMeter::mean() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_ > 0 ? ratio_sum_ / steps_ : 0;
}

int ResidualMeter::steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_;
}

}  // namespace ddplab::powersgd
