#include "core/config/experiment.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <algorithm>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/config/convergence.h"
#include "core/config/tune_settings.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "core/config/plugin_config.h"
#include "core/config/text_location.h"
#include "core/config/validate.h"

namespace ddplab {
namespace {

using google::protobuf::TextFormat;

constexpr char kExperimentType[] = "ddplab.v1.Experiment";
constexpr char kSuiteType[] = "ddplab.v1.Suite";

// Reads the "# proto-message: NAME" header line, if any, before the first field.
absl::StatusOr<std::string> MessageType(absl::string_view text, absl::string_view file) {
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (!stripped.empty() && stripped[0] != '#') break;
    absl::string_view comment = absl::StripAsciiWhitespace(absl::StripPrefix(stripped, "#"));
    if (absl::ConsumePrefix(&comment, "proto-message:")) {
      std::string type(absl::StripAsciiWhitespace(comment));
      if (type != kExperimentType && type != kSuiteType) {
        size_t column = line.find("proto-message:");
        return absl::InvalidArgumentError(absl::StrCat(
            FormatLocation(file, line_number, static_cast<int>(column)),
            ": proto-message: expected ", kExperimentType, " or ", kSuiteType, ", got \"",
            type, "\""));
      }
      return type;
    }
    line_number++;
  }
  return std::string(kExperimentType);
}

// Fills in the defaults that the schema documents for fields left out.
void ApplyDefaults(v1::Experiment& e) {
  v1::Data& data = *e.mutable_data();
  if (data.image_size() == 0) data.set_image_size(kDefaultImageSize);
  if (data.prefetch() == 0) data.set_prefetch(kDefaultPrefetch);
  if (data.task() == v1::Data::TASK_UNSPECIFIED) data.set_task(v1::Data::RANDOM);
  if (e.steps().accumulation() == 0) e.mutable_steps()->set_accumulation(1);
  v1::Distributed& dist = *e.mutable_distributed();
  if (dist.nodes() == 0) dist.set_nodes(1);
  if (dist.timeout_seconds() == 0) dist.set_timeout_seconds(kDefaultTimeoutSeconds);
  if (e.profiling().profiler() == v1::Profiling::PROFILER_UNSPECIFIED) {
    e.mutable_profiling()->set_profiler(v1::Profiling::NONE);
  }
  if (e.output().directory().empty()) e.mutable_output()->set_directory(kDefaultOutputDirectory);
  if (e.precision() == v1::PRECISION_UNSPECIFIED) e.set_precision(v1::FLOAT32);
  if (e.optimizer().has_adamw()) {  // torch.optim.AdamW's defaults
    v1::AdamW& a = *e.mutable_optimizer()->mutable_adamw();
    if (!a.has_beta1()) a.set_beta1(0.9);
    if (!a.has_beta2()) a.set_beta2(0.999);
    if (!a.has_eps()) a.set_eps(1e-8);
    if (!a.has_weight_decay()) a.set_weight_decay(0.01);
  }
}

// Checks a parsed suite, and resolves and checks each of its experiments (the suite's
// defaults under the experiment's own fields).
absl::Status ResolveSuite(v1::Suite& suite, const TextPositions& positions, const std::string& file,
                          const ExperimentSchema& schema, const ConfigCheck& check) {
  Locator suite_at(file, &positions, {""}, TextFormat::ParseLocation(), "");
  if (suite.name().empty()) return suite_at.Error("name", "is required");
  if (std::string bad = BadName(suite.name()); !bad.empty()) return suite_at.Error("name", bad);
  // Names ddplab derives must not be a suite's or an experiment's own: results would
  // overwrite each other.
  if (suite.name() == "tune_cache") {
    return suite_at.Error("name", "\"tune_cache\" is where --tune keeps its measurements (<output>/tune_cache/): "
                                  "name it otherwise");
  }
  if (absl::EndsWith(suite.name(), "_tune")) {
    return suite_at.Error("name", absl::StrCat("\"", suite.name(), "\" ends in _tune, where --tune files the tuning of \"",
                                               suite.name().substr(0, suite.name().size() - 5), "\": name it otherwise"));
  }
  if (suite.experiment_size() == 0) {
    return suite_at.Error("experiment", "is required: a suite runs at least one");
  }
  std::map<std::string, int> names;
  std::vector<absl::Status> found;
  for (int i = 0; i < suite.experiment_size(); ++i) {
    v1::Experiment resolved = suite.defaults();
    const v1::Experiment& own = suite.experiment(i);
    const std::string own_path = absl::StrCat("experiment[", i, "]");
    // An experiment's lists replace the defaults' (merging would append to them), and
    // its own transport replaces a default transport sweep.
    if (own.plugin_size() > 0) resolved.clear_plugin();
    const v1::Distributed& own_dist = own.distributed();
    if (own_dist.sweep_transport_size() > 0 ||
        own_dist.transport() != v1::Distributed::TRANSPORT_UNSPECIFIED) {
      resolved.mutable_distributed()->clear_sweep_transport();
    }
    if (own_dist.nccl_env_size() > 0) resolved.mutable_distributed()->clear_nccl_env();
    resolved.MergeFrom(own);
    KeepWrittenFields(own, resolved, positions, own_path);
    ApplyDefaults(resolved);
    Locator at(file, &positions, {own_path, "defaults"}, positions.Find(own_path), resolved.name(), &check);
    // Note [A file's errors together]: every experiment is checked.
    found.push_back(ValidateExperiment(resolved, at, schema));
    if (suite.has_convergence() && absl::StrContains(resolved.name(), "-convergence-")) {
      found.push_back(at.Error("name", absl::StrCat("\"", resolved.name(), "\": names with -convergence- are the "
                                                    "convergence check's runs (<experiment>-convergence-<seed>): name "
                                                    "it otherwise")));
    }
    auto [first, inserted] = names.emplace(resolved.name(), i);
    if (!inserted) {
      found.push_back(at.Error("name", absl::StrCat("\"", resolved.name(), "\" is used twice (first by experiment[",
                                                    first->second, "])")));
    }
    *suite.mutable_experiment(i) = std::move(resolved);
  }
  // The suite's own checks read its experiments: only once they hold.
  if (absl::Status s = Together(std::move(found)); !s.ok()) return s;
  if (absl::Status s = ValidateConvergence(suite, suite_at); !s.ok()) return s;
  return ValidateTune(suite, suite_at);
}

// Parses `text` into `readable`, recording where each field stands in `tree` and the
// first error in `errors`; false on an error.
bool ParseReadable(absl::string_view text, google::protobuf::Message& readable, TextFormat::ParseInfoTree& tree,
                   FirstErrorCollector& errors) {
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  return parser.ParseFromString(std::string(text), &readable);
}

// The parser's first error at its file:line:column, in words for people: a renamed field
// says its new name, an unknown plugin where plugins were looked for.
absl::Status ParseError(absl::string_view text, const std::string& file, const FirstErrorCollector& errors,
                        const ExperimentSchema& schema, const std::string& type) {
  if (!errors.has_error() || errors.line() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": ", errors.has_error() ? errors.message() : "not a valid text-format " + type));
  }
  const int column = BlameColumn(text, errors.line(), errors.column(), errors.message());
  std::string message = ExplainUnknownField(errors.message(), schema.pool());
  // A negative number where the schema counts or sizes something (an unsigned field): the
  // parser's "Expected integer, got: -" reads as if no number were written.
  if (message == "Expected integer, got: -") {
    const std::string field = FieldBefore(text, errors.line(), column);
    message = absl::StrCat(field.empty() ? "" : field + ": ",
                           "must be 0 or more (it counts or sizes something), got a negative number");
  }
  const std::string kUnknown = absl::StrCat("Message type \"", v1::Plugin::descriptor()->full_name(),
                                            "\" has no field named \"");
  if (absl::StartsWith(message, kUnknown)) {
    const std::string name = message.substr(kUnknown.size(), message.find('"', kUnknown.size()) - kUnknown.size());
    message = name == "path" ? absl::StrCat("plugin { path: ... } is gone: a plugin is found by its name in the "
                                            "plugin directories (--plugin_dir): plugin { <name> {} }")
                             : schema.Missing(name);
    const std::string closest = Closest(name, schema.found());
    if (!closest.empty() && closest != name && name != "path") {
      absl::StrAppend(&message, ". Did you mean \"", closest, "\"?");
    }
  }
  // A suite's field in a file read as one experiment (no header): say how to read it as a suite.
  const std::string kExperimentField = absl::StrCat("Message type \"", kExperimentType, "\" has no field named \"");
  if (type == kExperimentType && absl::StartsWith(message, kExperimentField)) {
    const std::string name =
        message.substr(kExperimentField.size(), message.find('"', kExperimentField.size()) - kExperimentField.size());
    if (v1::Suite::descriptor()->FindFieldByName(name) != nullptr) {
      if (absl::EndsWith(message, ".")) message.pop_back();
      absl::StrAppend(&message, ": \"", name, "\" is a suite's field, and a file is read as one experiment unless "
                      "it begins with the line \"# proto-message: ", kSuiteType, "\"");
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(FormatLocation(file, errors.line(), column), ": ", message));
}

}  // namespace

absl::Status ErrorAtField(absl::string_view text, absl::string_view filename, const ExperimentSchema& schema,
                          absl::string_view path, absl::string_view what) {
  const std::string file(filename);
  absl::StatusOr<std::string> type = MessageType(text, file);
  FirstErrorCollector errors;
  TextFormat::ParseInfoTree tree;
  std::unique_ptr<google::protobuf::Message> readable = schema.NewReadable(type.ok() ? *type : kSuiteType);
  if (!type.ok() || !ParseReadable(text, *readable, tree, errors)) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", path, ": ", what));
  }
  const TextPositions positions(*readable, tree);
  return Locator(file, &positions, {""}, {}, "").Error(path, what);
}

absl::StatusOr<v1::Suite> ParseExperimentText(absl::string_view text, absl::string_view filename,
                                              const ExperimentSchema& schema, const ConfigCheck& check) {
  std::string file(filename);
  absl::StatusOr<std::string> type = MessageType(text, file);
  if (!type.ok()) return type.status();
  const bool is_suite = *type == kSuiteType;

  FirstErrorCollector errors;
  TextFormat::ParseInfoTree tree;
  std::unique_ptr<google::protobuf::Message> readable = schema.NewReadable(*type);
  if (!ParseReadable(text, *readable, tree, errors)) return ParseError(text, file, errors, schema, *type);
  const TextPositions positions(*readable, tree);
  v1::Suite suite;
  v1::Experiment single;
  google::protobuf::Message& stored = is_suite ? static_cast<google::protobuf::Message&>(suite) : single;
  if (absl::Status s = schema.ToStored(*readable, stored); !s.ok()) {
    // The field travels as the status's payload (FieldError, text_location.h).
    return Locator(file, &positions, {""}, {}, "").Error(FieldOf(s), WhatOf(s));
  }

  if (!is_suite) {
    ApplyDefaults(single);
    Locator at(file, &positions, {""}, TextFormat::ParseLocation(), single.name(), &check);
    if (absl::Status s = ValidateExperiment(single, at, schema); !s.ok()) return s;
    suite.set_name(single.name());
    suite.set_description(single.description());
    *suite.add_experiment() = std::move(single);
    return suite;
  }

  if (absl::Status s = ResolveSuite(suite, positions, file, schema, check); !s.ok()) return s;
  suite.clear_defaults();
  return suite;
}

absl::StatusOr<v1::Suite> LoadExperimentFile(const std::string& path, const ExperimentSchema& schema,
                                             const ConfigCheck& check) {
  absl::StatusOr<std::string> text = ReadExperimentFile(path);
  if (!text.ok()) return text.status();
  return ParseExperimentText(*text, path, schema, check);
}

absl::StatusOr<std::string> ReadExperimentFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open experiment file: ",
                                            std::strerror(errno)));
  }
  // Read in pieces up to a bound, so that /dev/zero or a huge file is refused, not read
  // until memory runs out. A suite of hundreds of experiments is a few hundred KiB.
  constexpr std::streamsize kMaxBytes = 16 << 20;
  std::string text;
  char piece[65536];
  while (in.read(piece, sizeof(piece)) || in.gcount() > 0) {
    text.append(piece, static_cast<size_t>(in.gcount()));
    if (static_cast<std::streamsize>(text.size()) > kMaxBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": more than ", kMaxBytes >> 20, " MiB: not an experiment file (text format)"));
    }
  }
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat(path, ": cannot read experiment file"));
  }
  if (text.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": holds NUL bytes: not an experiment file (text format)"));
  }
  return text;
}

}  // namespace ddplab
