// PowerSGD's configuration as the hook uses it (the Config message with its documented
// defaults filled in), and the same state as PyTorch's powerSGD_hook takes it.
//
//   const Settings settings = SettingsOf(config);   // rank 1, error feedback on, ...
//   registrar.DescribeInPyTorch(PyTorchFormOf(settings));
#ifndef DDPLAB_PLUGINS_POWERSGD_SETTINGS_H_
#define DDPLAB_PLUGINS_POWERSGD_SETTINGS_H_

#include <cstdint>

#include "core/plugin/plugin_api.h"
#include "plugins/powersgd/powersgd.pb.h"

namespace ddplab::powersgd {

struct Settings {
  int64_t rank;            // matrix_approximation_rank
  int64_t start_step;      // start_powerSGD_iter
  bool error_feedback;     // use_error_feedback
  bool warm_start;
  double min_compression_rate;
  uint64_t seed;           // random_seed
  bool bf16_state;         // M and the error in bfloat16
  bool fused_kernels;      // !disable_fused_kernels
};

// `config` with 0 or unset read as "left out": the defaults its comments give.
Settings SettingsOf(const plugins::powersgd::v1::Config& config);

// PyTorch's start_powerSGD_iter default, which the code for training keeps.
inline constexpr int64_t kTrainingStart = 1000;

// PyTorch's PowerSGDState and powerSGD_hook for `s`, as code for training: PowerSGD starts
// at kTrainingStart (or the experiment's start, if later), with a comment saying from which
// step the run compressed (Note [Compressing from the start is the benchmark's]). PyTorch's
// error feedback and warm start need start_powerSGD_iter >= 2 (DDP regroups buckets after
// the first step): a smaller start is said to be ddplab's alone, as is bf16_state.
PyTorchForm PyTorchFormOf(const Settings& s);

}  // namespace ddplab::powersgd

#endif  // DDPLAB_PLUGINS_POWERSGD_SETTINGS_H_
