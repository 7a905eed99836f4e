#include "plugins/powersgd/settings.h"

#include <algorithm>
#include <sstream>

namespace ddplab::powersgd {

Settings SettingsOf(const plugins::powersgd::v1::Config& config) {
  return Settings{config.matrix_approximation_rank() > 0 ? static_cast<int64_t>(config.matrix_approximation_rank()) : 1,
                  static_cast<int64_t>(config.start_powersgd_iter()),
                  !config.has_use_error_feedback() || config.use_error_feedback(),
                  !config.has_warm_start() || config.warm_start(),
                  config.min_compression_rate() > 0 ? config.min_compression_rate() : 2.0,
                  config.random_seed(),
                  config.bf16_state(),
                  !config.disable_fused_kernels()};
}

PyTorchForm PyTorchFormOf(const Settings& s) {
  PyTorchForm form;
  form.hook = "powerSGD.powerSGD_hook";
  const bool needs_two = s.error_feedback || s.warm_start;
  const int64_t measured = needs_two ? std::max<int64_t>(2, s.start_step) : s.start_step;
  // Note [Compressing from the start is the benchmark's]: a run of tens of steps
  // compresses early to measure compression; training should not (PyTorch's docs advise
  // about 10% of the steps). The code is for pasting into training, so it carries
  // PyTorch's default and says why, unless the experiment asked for more.
  const int64_t start = std::max<int64_t>(measured, kTrainingStart);
  std::ostringstream state;
  state << "powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=" << s.rank
        << ",\n    start_powerSGD_iter=" << start << ",";
  if (start != measured) {
    state << "  # for training: PyTorch's default; its docs advise about 10% of the steps"
          << " (this run compressed from step " << measured << ")";
  }
  state << "\n    min_compression_rate=" << s.min_compression_rate
        << ", use_error_feedback=" << (s.error_feedback ? "True" : "False")
        << ", warm_start=" << (s.warm_start ? "True" : "False") << ", random_seed=" << s.seed << ")";
  form.hook_state = state.str();
  if (measured != s.start_step) form.not_in_pytorch.push_back("powersgd.start_powerSGD_iter below 2");
  if (s.bf16_state) form.not_in_pytorch.push_back("powersgd.bf16_state");
  return form;
}

}  // namespace ddplab::powersgd
