// The engine's fidelity figures (core/fidelity/fidelity.h) in a run's result, and in the
// line the run prints: how far a lossy plugin's reduced gradients are from an exact
// all-reduce's, per step, per parameter and over windows of steps.
//
//   ddplab::FillFidelity(engine.stats().fidelity, model->named_parameters().keys(), result);
//   std::cout << ddplab::FidelitySummary(result);
//   // "; gradient error 7.49e-01, cosine 0.663 (24 sampled steps), over 8 steps 1.08e-01"

#ifndef DDPLAB_CORE_FIDELITY_FIDELITY_RESULT_H_
#define DDPLAB_CORE_FIDELITY_FIDELITY_RESULT_H_

#include <string>
#include <vector>

#include "core/fidelity/fidelity.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab {

// Sets gradient_error, gradient_error_samples, gradient_cosine, effective_error and
// parameter_fidelity from `stats`, the parameters named `names` (the engine's order);
// nothing where no step was sampled.
void FillFidelity(const FidelityStats& stats, const std::vector<std::string>& names, v1::RunResult& r);

// "; gradient error ..., cosine ... (N sampled steps), over W steps ..." (the longest
// window), or "" where no step was sampled.
std::string FidelitySummary(const v1::RunResult& r);

}  // namespace ddplab

#endif  // DDPLAB_CORE_FIDELITY_FIDELITY_RESULT_H_
