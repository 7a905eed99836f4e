#include "core/fidelity/fidelity_result.h"

#include "absl/strings/str_format.h"

namespace ddplab {

void FillFidelity(const FidelityStats& stats, const std::vector<std::string>& names, v1::RunResult& r) {
  if (stats.samples == 0) return;
  r.set_gradient_error(stats.relative_error_sum / stats.samples);
  r.set_gradient_error_samples(stats.samples);
  r.set_gradient_cosine(stats.cosine_sum / stats.samples);
  for (const FidelityStats::Window& w : stats.windows) {
    if (w.count == 0) continue;
    v1::EffectiveError* e = r.add_effective_error();
    e->set_steps(static_cast<uint32_t>(w.steps));
    e->set_error(w.error_sum / w.count);
    e->set_windows(w.count);
  }
  for (size_t i = 0; i < stats.parameters.size(); ++i) {
    const FidelityStats::Parameter& p = stats.parameters[i];
    v1::ParameterFidelity* out = r.add_parameter_fidelity();
    out->set_name(i < names.size() ? names[i] : absl::StrFormat("parameter %d", i));
    out->set_numel(p.numel);
    if (p.samples > 0) {
      out->set_relative_error(p.relative_error_sum / p.samples);
      out->set_cosine(p.cosine_sum / p.samples);
    }
    if (p.windows > 0) out->set_effective_error(p.effective_error_sum / p.windows);
  }
}

std::string FidelitySummary(const v1::RunResult& r) {
  if (r.gradient_error_samples() <= 0) return "";
  std::string out = absl::StrFormat("; gradient error %.2e, cosine %.3f (%d sampled steps)", r.gradient_error(),
                                    r.gradient_cosine(), r.gradient_error_samples());
  if (r.effective_error_size() > 1) {
    const v1::EffectiveError& longest = r.effective_error(r.effective_error_size() - 1);
    absl::StrAppendFormat(&out, ", over %d steps %.2e", longest.steps(), longest.error());
  }
  return out;
}

}  // namespace ddplab
