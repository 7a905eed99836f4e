// A suite's tune field (vit_ddp --tune; Note [The tuner], tune/tuner.h): its defaults
// applied, and checked where the file says it.
//
//   absl::Status ok = ddplab::ValidateTune(suite, at);      // file:line:column errors
//   ddplab::TuneSettings s = ddplab::ResolveTune(suite.tune());
//   for (double cap : s.caps_mib) ...
#ifndef DDPLAB_CORE_CONFIG_TUNE_SETTINGS_H_
#define DDPLAB_CORE_CONFIG_TUNE_SETTINGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/config/text_location.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

struct TuneSettings {
  std::string experiment;  // empty: the caller's choice (--only's, or the suite's first)
  std::vector<double> caps_mib = {1, 2, 5, 10, 25, 50, 100, 200, 400, 2000};
  int verify = 2;
  int repetitions = 3;
  bool exhaustive = false;
  bool remeasure = false;
  bool try_step_graph = true;  // tune.skip_step_graph's opposite
  bool try_sharded_optimizer = true;  // tune.skip_sharded_optimizer's opposite
};

TuneSettings ResolveTune(const v1::Tune& t);

// OK where the suite has no tune field or a valid one: its experiment one of the suite's,
// caps above 0 and none twice, verify within the caps, repetitions from 1 to 20.
absl::Status ValidateTune(const v1::Suite& suite, const Locator& at);

}  // namespace ddplab

#endif  // DDPLAB_CORE_CONFIG_TUNE_SETTINGS_H_
