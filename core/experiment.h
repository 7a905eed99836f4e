// Loading and validating experiment files.
//
// An experiment file is a text-format ddplab.v1.Experiment or ddplab.v1.Suite
// (proto/ddplab/v1/experiment.proto). Loading parses it, merges a suite's defaults into
// each experiment, fills in the documented defaults and validates the result. Every error
// names the file and the line and column of the offending text, or the field when the
// text has none (a required field left out):
//
//   absl::StatusOr<ddplab::v1::Suite> suite =
//       ddplab::LoadExperimentFile("experiments/naive_ddp.textproto");
//   if (!suite.ok()) {
//     // "experiments/naive_ddp.textproto:7:15: data.batch_size: must be > 0, got 0"
//     std::cerr << suite.status().message() << "\n";
//   }
//
// A file holding one Experiment is returned as a Suite of one, named after it.

#ifndef DDPLAB_CORE_EXPERIMENT_H_
#define DDPLAB_CORE_EXPERIMENT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

// A further check of each resolved experiment's plugins, by whoever can load them (the
// plugin host: PluginHost::Configure). A failure's message starts with the field at fault
// ("plugin[1].bucket_sizing.first_bucket_cap_mb: must be ...") so that it is reported at
// that field's file:line:column.
using ConfigCheck = std::function<absl::Status(const v1::Experiment&)>;

// Reads, parses, resolves and validates the experiment file at `path`. Each plugin's
// configuration is checked against the rules its .proto declares (ddplab.v1.rules), then
// by `check` if given.
absl::StatusOr<v1::Suite> LoadExperimentFile(const std::string& path, const ConfigCheck& check = {});

// As LoadExperimentFile, from text; `filename` is used in error messages.
absl::StatusOr<v1::Suite> ParseExperimentText(absl::string_view text, absl::string_view filename,
                                              const ConfigCheck& check = {});

// The defaults the schema documents, in force where a field is left out (or zero).
inline constexpr uint32_t kDefaultImageSize = 224;
inline constexpr uint32_t kDefaultPrefetch = 2;
inline constexpr uint32_t kDefaultTimeoutSeconds = 300;
inline constexpr char kDefaultOutputDirectory[] = "ddplab_results";

// The name of the plugin a Plugin entry selects (the field set in its oneof), or "" when
// none is set.
std::string PluginName(const v1::Plugin& plugin);

// One run of a suite: an experiment with its sweeps resolved.
struct SuiteRun {
  v1::Experiment experiment;
  std::string sweep;  // the plugin sweep it belongs to (for "the fastest"), or ""
};

// The suite's runs in order. A plugin's sweep field (ddplab.v1.sweep) becomes one run per
// value, named <name>_<value><suffix> (bucket_sizing's sweep_cap_mb: <name>_<cap>mb); then a transport sweep (distributed.sweep_transport) one run per
// transport, named <name>_<transport in lower case>: every run over the first transport,
// then every run over the next. Runs of one process use no transport and run once.
std::vector<SuiteRun> ExpandSweeps(const v1::Suite& suite);

}  // namespace ddplab

#endif  // DDPLAB_CORE_EXPERIMENT_H_
