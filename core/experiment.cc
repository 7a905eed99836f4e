#include "core/experiment.h"

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
#include "core/convergence.h"
#include "core/tune_settings.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "core/plugin_config.h"
#include "core/text_location.h"

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

// What is wrong with a suite's or an experiment's name, "" if nothing: it names files
// (<name>.trace.json, <name>_rank0.nsys-rep), which hold 255 bytes.
constexpr size_t kMaxNameLength = 200;
std::string BadName(absl::string_view name) {
  if (name.size() > kMaxNameLength) {
    return absl::StrCat("must be at most ", kMaxNameLength, " characters (it names files), got ", name.size());
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      return absl::StrCat("must be letters, digits, '_' and '-', got \"", name, "\"");
    }
  }
  return "";
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
}

// The patch size an experiment's model uses, 0 if the model is not set.
uint32_t PatchSize(const v1::Model& model) {
  switch (model.architecture_case()) {
    case v1::Model::kPreset:
      switch (model.preset()) {
        case v1::Model::VIT_L_32:
        case v1::Model::VIT_B_32:
          return 32;
        case v1::Model::VIT_L_16:
        case v1::Model::VIT_B_16:
          return 16;
        case v1::Model::VIT_TINY_TEST:
          return 8;
        default:
          return 0;
      }
    case v1::Model::kVit:
      return model.vit().patch_size();
    default:
      return 0;
  }
}

// NCCL's MAXCHANNELS.
constexpr uint32_t kMaxNcclChannels = 64;

absl::Status ValidatePlugins(const v1::Experiment& e, const Locator& at, const ExperimentSchema& schema) {
  std::map<std::string, int> seen;
  for (int i = 0; i < e.plugin_size(); ++i) {
    const v1::Plugin& plugin = e.plugin(i);
    const std::string here = absl::StrCat("plugin[", i, "]");
    const std::string& name = plugin.name();
    if (name.empty()) {
      std::vector<std::string> names = schema.plugins();
      return at.Error(here, absl::StrCat("names no plugin: write one of ",
                                         names.empty() ? "(none found)" : absl::StrJoin(names, ", "),
                                         ", e.g. plugin { ", names.empty() ? "name" : names[0], " {} }"));
    }
    auto [first, inserted] = seen.emplace(name, i);
    if (!inserted) {
      return at.Error(absl::StrCat(here, ".", name),
                      absl::StrCat("plugin \"", name, "\" is listed twice (first as plugin[", first->second, "])"));
    }
    if (schema.ConfigType(name) == nullptr) return at.Error(here, schema.Missing(name));
    std::unique_ptr<google::protobuf::Message> config = schema.Config(plugin);
    const std::string path = absl::StrCat(here, ".", name);
    if (config == nullptr) return at.Error(path, absl::StrCat("is not a ", schema.ConfigType(name)->full_name()));
    for (auto [where, what] : {BrokenRule(*config, path), SweepContradiction(*config, path)}) {
      if (!where.empty()) return at.Error(where, what);
    }
  }
  if (const ConfigCheck* check = at.check()) {
    // "plugin[1].bucket_sizing.first_bucket_cap_mb: what": located like the rest.
    if (absl::Status s = (*check)(e); !s.ok()) {
      const std::string message(s.message());
      const size_t colon = message.find(": ");
      if (colon == std::string::npos || !absl::StartsWith(message, "plugin[")) return at.Error("plugin", message);
      return at.Error(message.substr(0, colon), message.substr(colon + 2));
    }
  }
  return absl::OkStatus();
}

// model: a preset, or sizes that fit together.
absl::Status ValidateModel(const v1::Experiment& e, const Locator& at) {
  const v1::Model& model = e.model();
  switch (model.architecture_case()) {
    case v1::Model::ARCHITECTURE_NOT_SET:
      return at.Error("model", "is required: set model.preset or model.vit");
    case v1::Model::kPreset:
      if (model.preset() == v1::Model::PRESET_UNSPECIFIED) {
        return at.Error("model.preset", "must name a preset, e.g. VIT_L_32");
      }
      break;
    case v1::Model::kVit: {
      const v1::VitSizes& v = model.vit();
      const std::pair<const char*, uint32_t> sizes[] = {
          {"patch_size", v.patch_size()}, {"hidden_dim", v.hidden_dim()},
          {"num_layers", v.num_layers()}, {"num_heads", v.num_heads()},
          {"mlp_dim", v.mlp_dim()},       {"num_classes", v.num_classes()},
      };
      for (const auto& [field, value] : sizes) {
        if (value == 0) return at.Error(absl::StrCat("model.vit.", field), "is required (> 0)");
      }
      if (v.hidden_dim() % v.num_heads() != 0) {
        return at.Error("model.vit.hidden_dim",
                        absl::StrCat("must be a multiple of num_heads (", v.num_heads(), "), got ",
                                     v.hidden_dim()));
      }
      break;
    }
  }

  return absl::OkStatus();
}

// data: sizes and the loader.
absl::Status ValidateData(const v1::Experiment& e, const Locator& at) {
  const v1::Model& model = e.model();
  const v1::Data& data = e.data();
  if (data.batch_size() == 0) {
    return at.Error("data.batch_size", "is required: samples per GPU per step, > 0");
  }
  uint32_t patch = PatchSize(model);
  if (patch > 0 && data.image_size() % patch != 0) {
    return at.Error("data.image_size",
                    absl::StrCat("must be a multiple of the patch size (", patch, "), got ",
                                 data.image_size()));
  }
  if (data.num_workers() > 256) {
    return at.Error("data.num_workers",
                    absl::StrCat("must be at most 256, got ", data.num_workers()));
  }
  if (data.prefetch() > 64) {
    return at.Error("data.prefetch", absl::StrCat("must be at most 64, got ", data.prefetch()));
  }

  return absl::OkStatus();
}

// steps and the optimizer.
absl::Status ValidateSteps(const v1::Experiment& e, const Locator& at) {
  if (e.steps().measured() == 0) {
    return at.Error("steps.measured", "is required: steps to time, > 0");
  }

  if (e.steps().repetitions() > 20) {
    return at.Error("steps.repetitions", absl::StrCat("must be at most 20, got ", e.steps().repetitions()));
  }
  if (e.steps().accumulation() > 1024) {
    return at.Error("steps.accumulation",
                    absl::StrCat("must be at most 1024, got ", e.steps().accumulation()));
  }

  if (!e.optimizer().has_sgd()) return at.Error("optimizer", "is required: set optimizer.sgd");
  const v1::Sgd& sgd = e.optimizer().sgd();
  if (!(sgd.learning_rate() > 0) || !std::isfinite(sgd.learning_rate())) {
    return at.Error("optimizer.sgd.learning_rate",
                    absl::StrCat("must be > 0, got ", FormatNumber(sgd.learning_rate())));
  }
  if (sgd.momentum() < 0 || !(sgd.momentum() < 1)) {
    return at.Error("optimizer.sgd.momentum",
                    absl::StrCat("must be in [0, 1), got ", FormatNumber(sgd.momentum())));
  }
  if (sgd.weight_decay() < 0 || !std::isfinite(sgd.weight_decay())) {
    return at.Error("optimizer.sgd.weight_decay",
                    absl::StrCat("must be >= 0, got ", FormatNumber(sgd.weight_decay())));
  }

  return absl::OkStatus();
}

// distributed.sweep_transport: NCCL transports, each once.
absl::Status ValidateTransports(const v1::Experiment& e, const Locator& at) {
  const v1::Distributed& dist = e.distributed();
  const bool cpu = dist.device() == v1::Distributed::CPU;
  for (int i = 0; i < dist.sweep_transport_size(); ++i) {
    std::string path = absl::StrCat("distributed.sweep_transport[", i, "]");
    if (dist.transport() != v1::Distributed::TRANSPORT_UNSPECIFIED) {
      return at.Error("distributed.transport",
                      "contradicts sweep_transport: a sweep sets the transport of each run; leave "
                      "transport out");
    }
    if (dist.sweep_transport(i) == v1::Distributed::TRANSPORT_UNSPECIFIED) {
      return at.Error(path, "must name a transport: NVLINK, HOST_MEMORY or NETWORK");
    }
    if (cpu || dist.backend() == v1::Distributed::GLOO) {
      return at.Error(path, "selects NCCL's transport, but this experiment uses Gloo");
    }
    for (int j = 0; j < i; ++j) {
      if (dist.sweep_transport(j) == dist.sweep_transport(i)) {
        return at.Error(path,
                        absl::StrCat("repeats ", v1::Distributed::Transport_Name(dist.sweep_transport(i)),
                                     " (sweep_transport[", j, "])"));
      }
    }
  }
  return absl::OkStatus();
}

// distributed.nccl_env: NCCL's variables, each once, only for NCCL.
absl::Status ValidateNcclEnv(const v1::Experiment& e, const Locator& at) {
  const v1::Distributed& dist = e.distributed();
  const bool cpu = dist.device() == v1::Distributed::CPU;
  for (int i = 0; i < dist.nccl_env_size(); ++i) {
    const v1::EnvironmentVariable& var = dist.nccl_env(i);
    std::string path = absl::StrCat("distributed.nccl_env[", i, "]");
    const std::string& name = var.name();
    bool word = name.size() > 5 && absl::StartsWith(name, "NCCL_");
    for (char c : name) {
      if (!absl::ascii_isupper(static_cast<unsigned char>(c)) &&
          !absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '_') {
        word = false;
      }
    }
    if (!word) {
      return at.Error(path + ".name",
                      absl::StrCat("must be an NCCL variable (NCCL_ and capitals, digits, _), got \"",
                                   absl::CHexEscape(name), "\""));
    }
    if (var.value().empty() || var.value().find('\0') != std::string::npos) {
      return at.Error(path + ".value", absl::StrCat("is required for ", name));
    }
    for (int j = 0; j < i; ++j) {
      if (dist.nccl_env(j).name() == name) {
        return at.Error(path + ".name",
                        absl::StrCat(name, " is set twice (first as distributed.nccl_env[", j, "])"));
      }
    }
    if (cpu || dist.backend() == v1::Distributed::GLOO) {
      return at.Error(path, "sets NCCL's environment, but this experiment uses Gloo");
    }
  }
  return absl::OkStatus();
}

// distributed: processes, backend, NCCL's settings.
absl::Status ValidateDistributed(const v1::Experiment& e, const Locator& at) {
  const v1::Data& data = e.data();
  const v1::Distributed& dist = e.distributed();
  if (dist.gpus_per_node() > 1024) {
    return at.Error("distributed.gpus_per_node",
                    absl::StrCat("must be at most 1024, got ", dist.gpus_per_node()));
  }
  if (dist.nodes() > 65536) {
    return at.Error("distributed.nodes", absl::StrCat("must be at most 65536, got ", dist.nodes()));
  }
  bool cpu = dist.device() == v1::Distributed::CPU;
  if (cpu && dist.backend() == v1::Distributed::NCCL) {
    return at.Error("distributed.backend",
                    "NCCL runs on GPUs only, but distributed.device is CPU: use GLOO or leave "
                    "backend out");
  }
  if (dist.transport() != v1::Distributed::TRANSPORT_UNSPECIFIED &&
      (cpu || dist.backend() == v1::Distributed::GLOO)) {
    return at.Error("distributed.transport",
                    "selects NCCL's transport, but this experiment uses Gloo: leave transport "
                    "out or use the NCCL backend on GPUs");
  }
  if (absl::Status s = ValidateTransports(e, at); !s.ok()) return s;
  if (absl::Status s = ValidateNcclEnv(e, at); !s.ok()) return s;
  if (dist.nccl_channels() > 0) {
    if (cpu || dist.backend() == v1::Distributed::GLOO) {
      return at.Error("distributed.nccl_channels",
                      "sets NCCL's channels, but this experiment uses Gloo");
    }
    if (dist.nccl_channels() > kMaxNcclChannels) {
      return at.Error("distributed.nccl_channels",
                      absl::StrCat("must be at most ", kMaxNcclChannels, " (NCCL's most), got ",
                                   dist.nccl_channels()));
    }
  }
  if (dist.high_priority_compute() && cpu) {
    return at.Error("distributed.high_priority_compute",
                    "chooses a CUDA stream, but distributed.device is CPU");
  }
  if (cpu && data.pin_memory()) {
    return at.Error("data.pin_memory",
                    "pins host memory for copies to a GPU, but distributed.device is CPU");
  }

  return absl::OkStatus();
}

// Checks a resolved experiment (defaults applied). Returns the first problem found.
absl::Status ValidateExperiment(const v1::Experiment& e, const Locator& at, const ExperimentSchema& schema) {
  if (e.name().empty()) return at.Error("name", "is required");
  if (std::string bad = BadName(e.name()); !bad.empty()) return at.Error("name", bad);
  for (auto check : {ValidateModel, ValidateData, ValidateSteps, ValidateDistributed}) {
    if (absl::Status s = check(e, at); !s.ok()) return s;
  }
  if (absl::Status s = ValidatePlugins(e, at, schema); !s.ok()) return s;
  const v1::Distributed& dist = e.distributed();
  if (e.plugin_size() > 0 && dist.gpus_per_node() == 1 && dist.nodes() == 1 &&
      !dist.force_engine()) {
    return at.Error("plugin",
                    "plugins configure the data-parallel engine, which a run of one process "
                    "skips: set distributed.force_engine: true or run more processes");
  }

  // Output.
  if (e.output().directory().find('\0') != std::string::npos) {
    return at.Error("output.directory", "must not contain NUL");
  }
  return absl::OkStatus();
}

// Checks a parsed suite, and resolves and checks each of its experiments (the suite's
// defaults under the experiment's own fields).
absl::Status ResolveSuite(v1::Suite& suite, const TextPositions& positions, const std::string& file,
                          const ExperimentSchema& schema, const ConfigCheck& check) {
  Locator suite_at(file, &positions, {""}, TextFormat::ParseLocation(), "");
  if (suite.name().empty()) return suite_at.Error("name", "is required");
  if (std::string bad = BadName(suite.name()); !bad.empty()) return suite_at.Error("name", bad);
  if (suite.experiment_size() == 0) {
    return suite_at.Error("experiment", "is required: a suite runs at least one");
  }
  std::map<std::string, int> names;
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
    if (absl::Status s = ValidateExperiment(resolved, at, schema); !s.ok()) return s;
    auto [first, inserted] = names.emplace(resolved.name(), i);
    if (!inserted) {
      return at.Error("name", absl::StrCat("\"", resolved.name(), "\" is used twice (first by experiment[",
                                           first->second, "])"));
    }
    *suite.mutable_experiment(i) = std::move(resolved);
  }
  if (absl::Status s = ValidateConvergence(suite, suite_at); !s.ok()) return s;
  return ValidateTune(suite, suite_at);
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
  std::string message = ExplainRenamedField(errors.message(), schema.pool());
  const std::string kUnknown = absl::StrCat("Message type \"", v1::Plugin::descriptor()->full_name(),
                                            "\" has no field named \"");
  if (absl::StartsWith(message, kUnknown)) {
    const std::string name = message.substr(kUnknown.size(), message.find('"', kUnknown.size()) - kUnknown.size());
    message = name == "path" ? "plugin { path: ... } is gone: a plugin is found by its name in the plugin "
                               "directories (--plugin_dir), e.g. plugin { bf16 {} }"
                             : schema.Missing(name);
  }
  return absl::InvalidArgumentError(absl::StrCat(FormatLocation(file, errors.line(), column), ": ", message));
}

}  // namespace

absl::StatusOr<v1::Suite> ParseExperimentText(absl::string_view text, absl::string_view filename,
                                              const ExperimentSchema& schema, const ConfigCheck& check) {
  std::string file(filename);
  absl::StatusOr<std::string> type = MessageType(text, file);
  if (!type.ok()) return type.status();
  const bool is_suite = *type == kSuiteType;

  TextFormat::Parser parser;
  FirstErrorCollector errors;
  TextFormat::ParseInfoTree tree;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  std::unique_ptr<google::protobuf::Message> readable = schema.NewReadable(*type);
  if (!parser.ParseFromString(std::string(text), readable.get())) {
    return ParseError(text, file, errors, schema, *type);
  }
  const TextPositions positions(*readable, tree);
  v1::Suite suite;
  v1::Experiment single;
  google::protobuf::Message& stored = is_suite ? static_cast<google::protobuf::Message&>(suite) : single;
  if (absl::Status s = schema.ToStored(*readable, stored); !s.ok()) {
    const std::string message(s.message());
    const size_t colon = message.find(": ");
    return Locator(file, &positions, {""}, {}, "").Error(message.substr(0, colon), message.substr(colon + 2));
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
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open experiment file: ",
                                            std::strerror(errno)));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat(path, ": cannot read experiment file"));
  }
  return ParseExperimentText(buffer.str(), path, schema, check);
}

}  // namespace ddplab
