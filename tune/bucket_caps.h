// The bucket caps an experiment runs with, as the bucket_sizing plugin configures them:
// the tuner chooses a cap, bucket_sizing applies it. Its configuration is read and written
// through the experiment schema (the plugin's own message, by its field names), so the
// tuner compiles in no plugin.
//
//   ddplab::tune::Caps caps = ddplab::tune::CapsOf(experiment, host.schema());   // {25, 1}
//   v1::Plugin entry = ddplab::tune::CapEntry(50, host.schema());
#ifndef DDPLAB_TUNE_BUCKET_CAPS_H_
#define DDPLAB_TUNE_BUCKET_CAPS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/config/plugin_schema.h"
#include "core/engine/ddp_buckets.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab::tune {

inline constexpr char kBucketSizing[] = "bucket_sizing";
inline constexpr char kNoCommunication[] = "no_communication";

// Whether `e` lists plugin `name`.
bool HasPlugin(const v1::Experiment& e, absl::string_view name);

// MiB, as PyTorch's bucket_cap_mb: the engine's defaults where no plugin sets them.
struct Caps {
  double cap_mb = ddp::kDefaultCapMiB;
  double first_mb = ddp::kFirstBucketMiB;
};

// What `e` runs with: its bucket_sizing entry's caps, else PyTorch's defaults.
Caps CapsOf(const v1::Experiment& e, const ExperimentSchema& schema);

// bucket_sizing { bucket_cap_mb: cap_mb }. `schema` must have bucket_sizing (CanSetCaps).
v1::Plugin CapEntry(double cap_mb, const ExperimentSchema& schema);

// Whether `schema` has the plugins the tuner sets (bucket_sizing, no_communication); else
// an error that says which is missing and why.
absl::Status CanSetCaps(const ExperimentSchema& schema);

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_BUCKET_CAPS_H_
