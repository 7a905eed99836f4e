// What the experiment loader checks and expands in every plugin's configuration alike,
// from the options declared beside its fields (proto/ddplab/v1/options.proto): the field
// rules (ddplab.v1.rules) and sweeps (ddplab.v1.sweep).
//
//   std::pair<std::string, std::string> bad = ddplab::BrokenRule(*schema.Config(entry), "plugin[0].bucket_sizing");
//   // {"plugin[0].bucket_sizing.bucket_cap_mb", "must be > 0, got -1"}
#ifndef DDPLAB_CORE_CONFIG_PLUGIN_CONFIG_H_
#define DDPLAB_CORE_CONFIG_PLUGIN_CONFIG_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/config/plugin_schema.h"
#include "ddplab/v1/experiment.pb.h"
#include "google/protobuf/message.h"

namespace ddplab {

// The first broken field rule of `config` (a plugin's configuration, at `path`, e.g.
// "plugin[1].bucket_sizing") as {field path, what is wrong}; an empty path if none. A
// singular field left at 0 is not checked (it means the plugin's default).
std::pair<std::string, std::string> BrokenRule(const google::protobuf::Message& config, const std::string& path);

// A sweep field set beside the field it sweeps, as {that field's path, what is wrong}.
std::pair<std::string, std::string> SweepContradiction(const google::protobuf::Message& config,
                                                       const std::string& path);

// The runs of `e`'s first plugin sweep: one per value, named <name>_<value><suffix>, with
// the swept field set to the value; none if no plugin sweeps. `schema` reads the entries.
std::vector<v1::Experiment> ExpandPluginSweeps(const v1::Experiment& e, const ExperimentSchema& schema);

// The text parser's "Message type \"T\" has no field named \"x\"." when a field of T
// (in `pool`) was called x before (ddplab.v1.formerly): the message, saying what x is
// called now; when x is a typo of a field of T, the message and "Did you mean ...?"; an
// unknown enum value, the values accepted and the closest.
// Any other message as it is.
std::string ExplainUnknownField(const std::string& parser_message, const google::protobuf::DescriptorPool& pool);

// Of `candidates`, the one closest to `name` (a typo away: an edit distance of at most a
// third of its length, or 2), or "".
std::string Closest(absl::string_view name, const std::vector<std::string>& candidates);

// A number as people write it: 25, 0.5, 1e+300.
std::string FormatNumber(double value);

}  // namespace ddplab

#endif  // DDPLAB_CORE_CONFIG_PLUGIN_CONFIG_H_
