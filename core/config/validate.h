// The checks of a resolved experiment (its defaults applied): each field's rules, the
// fields that must agree, and its plugins' configurations. Every error points at the
// field through the Locator (core/config/text_location.h).
//
//   ddplab::Locator at(file, &positions, {"experiment[0]", "defaults"}, ...);
//   absl::Status s = ddplab::ValidateExperiment(experiment, at, schema);
#ifndef DDPLAB_CORE_CONFIG_VALIDATE_H_
#define DDPLAB_CORE_CONFIG_VALIDATE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/config/plugin_schema.h"
#include "core/config/text_location.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

// What is wrong with a suite's or an experiment's name, "" if nothing.
std::string BadName(absl::string_view name);

// The first problem of `e`, located by `at`; its plugins read with `schema`, then checked
// by the Locator's ConfigCheck if it has one.
absl::Status ValidateExperiment(const v1::Experiment& e, const Locator& at, const ExperimentSchema& schema);

// Where `e` leaves distributed.device out and will run on CPUs all the same (`why_cpu`:
// "a CPU build", "no GPU on this machine"): its settings that only a GPU run uses, as a
// ConfigCheck's error ("data.pin_memory: ...", so that it is reported at the first of
// them, naming the others). OK where it sets none, or names its device.
absl::Status CheckLeftToCpus(const v1::Experiment& e, absl::string_view why_cpu);

}  // namespace ddplab

#endif  // DDPLAB_CORE_CONFIG_VALIDATE_H_
