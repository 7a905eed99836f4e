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

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
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

absl::Status ValidatePlugins(const v1::Experiment& e, const Locator& at) {
  const Descriptor* root = v1::Experiment::descriptor();
  std::map<std::string, int> seen;
  for (int i = 0; i < e.plugin_size(); ++i) {
    const v1::Plugin& plugin = e.plugin(i);
    std::string here = absl::StrCat("plugin[", i, "]");
    std::string name = PluginName(plugin);
    if (name.empty()) {
      std::vector<std::string> names;
      const google::protobuf::OneofDescriptor* oneof =
          v1::Plugin::descriptor()->FindOneofByName("config");
      for (int f = 0; f < oneof->field_count(); ++f) names.push_back(oneof->field(f)->name());
      return at.Error(root, here,
                      absl::StrCat("names no plugin: set one of ", absl::StrJoin(names, ", ")));
    }
    auto [first, inserted] = seen.emplace(name, i);
    if (!inserted) {
      return at.Error(root, absl::StrCat(here, ".", name),
                      absl::StrCat("plugin \"", name, "\" is listed twice (first as plugin[",
                                   first->second, "])"));
    }
    const FieldDescriptor* field = v1::Plugin::descriptor()->FindFieldByName(name);
    const google::protobuf::Message& config = plugin.GetReflection()->GetMessage(plugin, field);
    const std::string path = absl::StrCat(here, ".", name);
    for (auto [where, what] : {BrokenRule(config, path), SweepContradiction(config, path)}) {
      if (!where.empty()) return at.Error(root, where, what);
    }
  }
  if (const ConfigCheck* check = at.check()) {
    // "plugin[1].bucket_sizing.first_bucket_cap_mb: what": located like the rest.
    if (absl::Status s = (*check)(e); !s.ok()) {
      const std::string message(s.message());
      const size_t colon = message.find(": ");
      if (colon == std::string::npos || !absl::StartsWith(message, "plugin[")) return at.Error(root, "plugin", message);
      return at.Error(root, message.substr(0, colon), message.substr(colon + 2));
    }
  }
  return absl::OkStatus();
}

// model: a preset, or sizes that fit together.
absl::Status ValidateModel(const v1::Experiment& e, const Locator& at) {
  const Descriptor* root = v1::Experiment::descriptor();
  const v1::Model& model = e.model();
  switch (model.architecture_case()) {
    case v1::Model::ARCHITECTURE_NOT_SET:
      return at.Error(root, "model", "is required: set model.preset or model.vit");
    case v1::Model::kPreset:
      if (model.preset() == v1::Model::PRESET_UNSPECIFIED) {
        return at.Error(root, "model.preset", "must name a preset, e.g. VIT_L_32");
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
        if (value == 0) return at.Error(root, absl::StrCat("model.vit.", field), "is required (> 0)");
      }
      if (v.hidden_dim() % v.num_heads() != 0) {
        return at.Error(root, "model.vit.hidden_dim",
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
  const Descriptor* root = v1::Experiment::descriptor();
  const v1::Model& model = e.model();
  const v1::Data& data = e.data();
  if (data.batch_size() == 0) {
    return at.Error(root, "data.batch_size", "is required: samples per GPU per step, > 0");
  }
  uint32_t patch = PatchSize(model);
  if (patch > 0 && data.image_size() % patch != 0) {
    return at.Error(root, "data.image_size",
                    absl::StrCat("must be a multiple of the patch size (", patch, "), got ",
                                 data.image_size()));
  }
  if (data.num_workers() > 256) {
    return at.Error(root, "data.num_workers",
                    absl::StrCat("must be at most 256, got ", data.num_workers()));
  }
  if (data.prefetch() > 64) {
    return at.Error(root, "data.prefetch", absl::StrCat("must be at most 64, got ", data.prefetch()));
  }

  return absl::OkStatus();
}

// steps and the optimizer.
absl::Status ValidateSteps(const v1::Experiment& e, const Locator& at) {
  const Descriptor* root = v1::Experiment::descriptor();
  if (e.steps().measured() == 0) {
    return at.Error(root, "steps.measured", "is required: steps to time, > 0");
  }

  if (e.steps().repetitions() > 20) {
    return at.Error(root, "steps.repetitions", absl::StrCat("must be at most 20, got ", e.steps().repetitions()));
  }
  if (e.steps().accumulation() > 1024) {
    return at.Error(root, "steps.accumulation",
                    absl::StrCat("must be at most 1024, got ", e.steps().accumulation()));
  }

  if (!e.optimizer().has_sgd()) return at.Error(root, "optimizer", "is required: set optimizer.sgd");
  const v1::Sgd& sgd = e.optimizer().sgd();
  if (!(sgd.learning_rate() > 0) || !std::isfinite(sgd.learning_rate())) {
    return at.Error(root, "optimizer.sgd.learning_rate",
                    absl::StrCat("must be > 0, got ", FormatNumber(sgd.learning_rate())));
  }
  if (sgd.momentum() < 0 || !(sgd.momentum() < 1)) {
    return at.Error(root, "optimizer.sgd.momentum",
                    absl::StrCat("must be in [0, 1), got ", FormatNumber(sgd.momentum())));
  }
  if (sgd.weight_decay() < 0 || !std::isfinite(sgd.weight_decay())) {
    return at.Error(root, "optimizer.sgd.weight_decay",
                    absl::StrCat("must be >= 0, got ", FormatNumber(sgd.weight_decay())));
  }

  return absl::OkStatus();
}

// distributed.sweep_transport: NCCL transports, each once.
absl::Status ValidateTransports(const v1::Experiment& e, const Locator& at) {
  const Descriptor* root = v1::Experiment::descriptor();
  const v1::Distributed& dist = e.distributed();
  const bool cpu = dist.device() == v1::Distributed::CPU;
  for (int i = 0; i < dist.sweep_transport_size(); ++i) {
    std::string path = absl::StrCat("distributed.sweep_transport[", i, "]");
    if (dist.transport() != v1::Distributed::TRANSPORT_UNSPECIFIED) {
      return at.Error(root, "distributed.transport",
                      "contradicts sweep_transport: a sweep sets the transport of each run; leave "
                      "transport out");
    }
    if (dist.sweep_transport(i) == v1::Distributed::TRANSPORT_UNSPECIFIED) {
      return at.Error(root, path, "must name a transport: NVLINK, HOST_MEMORY or NETWORK");
    }
    if (cpu || dist.backend() == v1::Distributed::GLOO) {
      return at.Error(root, path, "selects NCCL's transport, but this experiment uses Gloo");
    }
    for (int j = 0; j < i; ++j) {
      if (dist.sweep_transport(j) == dist.sweep_transport(i)) {
        return at.Error(root, path,
                        absl::StrCat("repeats ", v1::Distributed::Transport_Name(dist.sweep_transport(i)),
                                     " (sweep_transport[", j, "])"));
      }
    }
  }
  return absl::OkStatus();
}

// distributed.nccl_env: NCCL's variables, each once, only for NCCL.
absl::Status ValidateNcclEnv(const v1::Experiment& e, const Locator& at) {
  const Descriptor* root = v1::Experiment::descriptor();
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
      return at.Error(root, path + ".name",
                      absl::StrCat("must be an NCCL variable (NCCL_ and capitals, digits, _), got \"",
                                   absl::CHexEscape(name), "\""));
    }
    if (var.value().empty() || var.value().find('\0') != std::string::npos) {
      return at.Error(root, path + ".value", absl::StrCat("is required for ", name));
    }
    for (int j = 0; j < i; ++j) {
      if (dist.nccl_env(j).name() == name) {
        return at.Error(root, path + ".name",
                        absl::StrCat(name, " is set twice (first as distributed.nccl_env[", j, "])"));
      }
    }
    if (cpu || dist.backend() == v1::Distributed::GLOO) {
      return at.Error(root, path, "sets NCCL's environment, but this experiment uses Gloo");
    }
  }
  return absl::OkStatus();
}

// distributed: processes, backend, NCCL's settings.
absl::Status ValidateDistributed(const v1::Experiment& e, const Locator& at) {
  const Descriptor* root = v1::Experiment::descriptor();
  const v1::Data& data = e.data();
  const v1::Distributed& dist = e.distributed();
  if (dist.gpus_per_node() > 1024) {
    return at.Error(root, "distributed.gpus_per_node",
                    absl::StrCat("must be at most 1024, got ", dist.gpus_per_node()));
  }
  if (dist.nodes() > 65536) {
    return at.Error(root, "distributed.nodes", absl::StrCat("must be at most 65536, got ", dist.nodes()));
  }
  bool cpu = dist.device() == v1::Distributed::CPU;
  if (cpu && dist.backend() == v1::Distributed::NCCL) {
    return at.Error(root, "distributed.backend",
                    "NCCL runs on GPUs only, but distributed.device is CPU: use GLOO or leave "
                    "backend out");
  }
  if (dist.transport() != v1::Distributed::TRANSPORT_UNSPECIFIED &&
      (cpu || dist.backend() == v1::Distributed::GLOO)) {
    return at.Error(root, "distributed.transport",
                    "selects NCCL's transport, but this experiment uses Gloo: leave transport "
                    "out or use the NCCL backend on GPUs");
  }
  if (absl::Status s = ValidateTransports(e, at); !s.ok()) return s;
  if (absl::Status s = ValidateNcclEnv(e, at); !s.ok()) return s;
  if (dist.nccl_channels() > 0) {
    if (cpu || dist.backend() == v1::Distributed::GLOO) {
      return at.Error(root, "distributed.nccl_channels",
                      "sets NCCL's channels, but this experiment uses Gloo");
    }
    if (dist.nccl_channels() > kMaxNcclChannels) {
      return at.Error(root, "distributed.nccl_channels",
                      absl::StrCat("must be at most ", kMaxNcclChannels, " (NCCL's most), got ",
                                   dist.nccl_channels()));
    }
  }
  if (dist.high_priority_compute() && cpu) {
    return at.Error(root, "distributed.high_priority_compute",
                    "chooses a CUDA stream, but distributed.device is CPU");
  }
  if (cpu && data.pin_memory()) {
    return at.Error(root, "data.pin_memory",
                    "pins host memory for copies to a GPU, but distributed.device is CPU");
  }

  return absl::OkStatus();
}

// Checks a resolved experiment (defaults applied). Returns the first problem found.
absl::Status ValidateExperiment(const v1::Experiment& e, const Locator& at) {
  const Descriptor* root = v1::Experiment::descriptor();
  if (e.name().empty()) return at.Error(root, "name", "is required");
  if (std::string bad = BadName(e.name()); !bad.empty()) return at.Error(root, "name", bad);
  for (auto check : {ValidateModel, ValidateData, ValidateSteps, ValidateDistributed, ValidatePlugins}) {
    if (absl::Status s = check(e, at); !s.ok()) return s;
  }
  const v1::Distributed& dist = e.distributed();
  if (e.plugin_size() > 0 && dist.gpus_per_node() == 1 && dist.nodes() == 1 &&
      !dist.force_engine()) {
    return at.Error(root, "plugin",
                    "plugins configure the data-parallel engine, which a run of one process "
                    "skips: set distributed.force_engine: true or run more processes");
  }

  // Output.
  if (e.output().directory().find('\0') != std::string::npos) {
    return at.Error(root, "output.directory", "must not contain NUL");
  }
  return absl::OkStatus();
}

// Checks a parsed suite, and resolves and checks each of its experiments (the suite's
// defaults under the experiment's own fields).
absl::Status ResolveSuite(v1::Suite& suite, const TextFormat::ParseInfoTree& tree, const std::string& file,
                          const ConfigCheck& check) {
  const Descriptor* suite_descriptor = v1::Suite::descriptor();
  Locator suite_at(file, {&tree}, TextFormat::ParseLocation(), "");
  if (suite.name().empty()) return suite_at.Error(suite_descriptor, "name", "is required");
  if (std::string bad = BadName(suite.name()); !bad.empty()) return suite_at.Error(suite_descriptor, "name", bad);
  if (suite.experiment_size() == 0) {
    return suite_at.Error(suite_descriptor, "experiment", "is required: a suite runs at least one");
  }
  const FieldDescriptor* experiment_field = suite_descriptor->FindFieldByName("experiment");
  const FieldDescriptor* defaults_field = suite_descriptor->FindFieldByName("defaults");
  const TextFormat::ParseInfoTree* defaults_tree = tree.GetTreeForNested(defaults_field, -1);
  std::map<std::string, int> names;
  for (int i = 0; i < suite.experiment_size(); ++i) {
    v1::Experiment resolved = suite.defaults();
    const v1::Experiment& own = suite.experiment(i);
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
    KeepWrittenFields(own, resolved, tree.GetTreeForNested(experiment_field, i));
    ApplyDefaults(resolved);
    Locator at(file, {tree.GetTreeForNested(experiment_field, i), defaults_tree},
               tree.GetLocation(experiment_field, i), resolved.name(), &check);
    if (absl::Status s = ValidateExperiment(resolved, at); !s.ok()) return s;
    auto [first, inserted] = names.emplace(resolved.name(), i);
    if (!inserted) {
      return at.Error(v1::Experiment::descriptor(), "name",
                      absl::StrCat("\"", resolved.name(), "\" is used twice (first by experiment[",
                                   first->second, "])"));
    }
    *suite.mutable_experiment(i) = std::move(resolved);
  }
  if (absl::Status s = ValidateConvergence(suite, suite_at); !s.ok()) return s;
  return ValidateTune(suite, suite_at);
}

}  // namespace

absl::StatusOr<v1::Suite> ParseExperimentText(absl::string_view text, absl::string_view filename,
                                               const ConfigCheck& check) {
  std::string file(filename);
  absl::StatusOr<std::string> type = MessageType(text, file);
  if (!type.ok()) return type.status();
  bool is_suite = *type == kSuiteType;

  TextFormat::Parser parser;
  FirstErrorCollector errors;
  TextFormat::ParseInfoTree tree;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);

  v1::Suite suite;
  v1::Experiment single;
  google::protobuf::Message* target = is_suite ? static_cast<google::protobuf::Message*>(&suite)
                                               : static_cast<google::protobuf::Message*>(&single);
  std::string owned(text);
  if (!parser.ParseFromString(owned, target)) {
    if (errors.has_error() && errors.line() >= 0) {
      int column = BlameColumn(text, errors.line(), errors.column(), errors.message());
      return absl::InvalidArgumentError(absl::StrCat(FormatLocation(file, errors.line(), column), ": ",
                                                     ExplainRenamedField(errors.message())));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": ", errors.has_error() ? errors.message() : "not a valid text-format " + *type));
  }

  if (!is_suite) {
    ApplyDefaults(single);
    Locator at(file, {&tree}, TextFormat::ParseLocation(), single.name(), &check);
    if (absl::Status s = ValidateExperiment(single, at); !s.ok()) return s;
    suite.set_name(single.name());
    suite.set_description(single.description());
    *suite.add_experiment() = std::move(single);
    return suite;
  }

  if (absl::Status s = ResolveSuite(suite, tree, file, check); !s.ok()) return s;
  suite.clear_defaults();
  return suite;
}

absl::StatusOr<v1::Suite> LoadExperimentFile(const std::string& path, const ConfigCheck& check) {
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
  return ParseExperimentText(buffer.str(), path, check);
}

}  // namespace ddplab
