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

#ifndef DDPLAB_CORE_CONFIG_EXPERIMENT_H_
#define DDPLAB_CORE_CONFIG_EXPERIMENT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/config/plugin_config.h"
#include "core/config/plugin_schema.h"
#include "core/config/sweeps.h"  // ExpandSweeps, for the loader's users
#include "core/config/text_location.h"  // ConfigCheck
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

// Reads, parses, resolves and validates the experiment file at `path`, reading plugin
// entries with `schema` (the plugins found: PluginHost::schema(); Note [Plugin configs by
// name], core/config/plugin_schema.h). Each plugin's configuration is checked against the rules
// its own .proto declares (ddplab.v1.rules), then by `check` if given.
absl::StatusOr<v1::Suite> LoadExperimentFile(const std::string& path, const ExperimentSchema& schema,
                                             const ConfigCheck& check = {});

// The text of the experiment file at `path`, as LoadExperimentFile reads it: refused
// where it cannot be read, is over 16 MiB or holds NUL bytes.
absl::StatusOr<std::string> ReadExperimentFile(const std::string& path);

// As LoadExperimentFile, from text; `filename` is used in error messages.
absl::StatusOr<v1::Suite> ParseExperimentText(absl::string_view text, absl::string_view filename,
                                              const ExperimentSchema& schema, const ConfigCheck& check = {});

// An error about the field at `path` of the file's text (a suite's "convergence.exact"),
// at its file:line:column: for a check that can only be made once the file is read
// whole (what its experiments' plugins say of themselves).
absl::Status ErrorAtField(absl::string_view text, absl::string_view filename, const ExperimentSchema& schema,
                          absl::string_view path, absl::string_view what);

// The defaults the schema documents, in force where a field is left out (or zero).
inline constexpr uint32_t kDefaultImageSize = 224;
inline constexpr uint32_t kDefaultPrefetch = 2;
inline constexpr uint32_t kDefaultTimeoutSeconds = 300;
inline constexpr char kDefaultOutputDirectory[] = "ddplab_results";

}  // namespace ddplab

#endif  // DDPLAB_CORE_CONFIG_EXPERIMENT_H_
