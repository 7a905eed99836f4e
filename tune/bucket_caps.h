// The bucket caps an experiment runs with, as bucket_sizing configures them: the tuner
// chooses a cap, bucket_sizing applies it. The tuner names the plugin it sets (and loads
// it: TunerPlugins), but reads and writes the caps through the roles the plugin declares
// on its fields (ddplab.v1.role: BUCKET_CAP_MB, FIRST_BUCKET_CAP_MB, in
// proto/ddplab/v1/options.proto), never by the fields' names: it compiles in no plugin
// and knows none of its fields.
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

// What `e` runs with: its bucket_sizing entry's caps, by their roles, else PyTorch's
// defaults.
Caps CapsOf(const v1::Experiment& e, const ExperimentSchema& schema);

// bucket_sizing with its BUCKET_CAP_MB field set to `cap_mb`. `schema` must have
// bucket_sizing (CanSetCaps).
v1::Plugin CapEntry(double cap_mb, const ExperimentSchema& schema);

// Whether `schema` has the plugins the tuner sets (bucket_sizing, no_communication), and
// bucket_sizing declares BUCKET_CAP_MB on a double; else an error that says what is
// missing and why.
absl::Status CanSetCaps(const ExperimentSchema& schema);

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_BUCKET_CAPS_H_
