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
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "ddplab/v1/options.pb.h"

namespace ddplab {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::TextFormat;

constexpr char kExperimentType[] = "ddplab.v1.Experiment";
constexpr char kSuiteType[] = "ddplab.v1.Suite";

// Keeps the first error the text-format parser reports.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}

  bool has_error() const { return has_error_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  bool has_error_ = false;
  int line_ = -1;
  int column_ = -1;
  std::string message_;
};

// The parser reports some errors at the token after the one at fault (an unknown field
// name, an unknown enum value). When its message quotes a name that stands earlier on
// the same line, point at that name instead.
int BlameColumn(absl::string_view text, int line, int column, absl::string_view message) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (line < 0 || static_cast<size_t>(line) >= lines.size()) return column;
  absl::string_view before =
      lines[line].substr(0, std::min(static_cast<size_t>(std::max(column, 0)), lines[line].size()));
  // Quoted words alternate with the text between them: "a \"x\" b \"y\"" splits into
  // a, x, b, y, so the odd pieces are the quoted names.
  std::vector<absl::string_view> pieces = absl::StrSplit(message, '"');
  for (size_t i = 1; i + 1 < pieces.size(); i += 2) {
    if (pieces[i].empty()) continue;
    size_t found = before.rfind(pieces[i]);
    if (found != absl::string_view::npos) return static_cast<int>(found);
  }
  return column;
}

std::string FormatLocation(absl::string_view file, int line, int column) {
  // The parser counts from 0; editors and compilers count from 1.
  return absl::StrCat(file, ":", line + 1, ":", column + 1);
}

// One step of a field path: a field and, for repeated fields, an element.
struct PathStep {
  const FieldDescriptor* field;
  int index;  // -1 for singular fields
};

// Resolves "data.batch_size" or "plugin[1].bucket_sizing.sweep_cap_mb[0]" against
// `root`. The paths are written in this file, so a bad one is a programming error.
std::vector<PathStep> ResolvePath(const Descriptor* root, absl::string_view path) {
  std::vector<PathStep> steps;
  const Descriptor* message = root;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    int index = -1;
    size_t bracket = part.find('[');
    if (bracket != absl::string_view::npos) {
      absl::string_view number = part.substr(bracket + 1, part.size() - bracket - 2);
      if (!absl::SimpleAtoi(number, &index)) index = 0;
      part = part.substr(0, bracket);
    }
    const FieldDescriptor* field = message ? message->FindFieldByName(std::string(part)) : nullptr;
    if (field == nullptr) break;
    steps.push_back({field, index});
    message = field->message_type();
  }
  return steps;
}

// Finds where fields stand in the parsed text, for error messages.
class Locator {
 public:
  // `roots` are searched in order (an experiment's own block, then the suite's
  // defaults); `fallback` is where the experiment's block starts (line -1 if unknown).
  Locator(std::string file, std::vector<const TextFormat::ParseInfoTree*> roots,
          TextFormat::ParseLocation fallback, std::string experiment, const ConfigCheck* check = nullptr)
      : file_(std::move(file)),
        roots_(std::move(roots)),
        fallback_(fallback),
        experiment_(std::move(experiment)),
        check_(check) {}

  const std::string& file() const { return file_; }
  // The caller's check of the experiment's plugins (ParseExperimentText), if any.
  const ConfigCheck* check() const { return check_ != nullptr && *check_ ? check_ : nullptr; }

  // An error about the field at `path` (relative to `root`): "file:line:col: path: what".
  absl::Status Error(const Descriptor* root, absl::string_view path,
                     absl::string_view what) const {
    std::vector<PathStep> steps = ResolvePath(root, path);
    TextFormat::ParseLocation best;
    size_t best_depth = 0;
    for (const TextFormat::ParseInfoTree* tree : roots_) {
      size_t depth = 0;
      TextFormat::ParseLocation found;
      for (const PathStep& step : steps) {
        if (tree == nullptr) break;
        if (step.field->is_repeated() && step.index < 0) {
          // The field as a whole: its first element's location.
          found = tree->GetLocation(step.field, 0);
          if (found.line >= 0) depth++;
          break;
        }
        if (step.field->is_repeated() && !step.field->message_type() &&
            tree->GetLocation(step.field, step.index).line < 0) {
          // A list ("f: [1, 2, 3]") records one location, its field name's.
          found = tree->GetLocation(step.field, 0);
          if (found.line >= 0) depth++;
          break;
        }
        TextFormat::ParseLocation loc = tree->GetLocation(step.field, step.index);
        if (loc.line < 0) break;
        found = loc;
        depth++;
        tree = step.field->message_type() ? tree->GetTreeForNested(step.field, step.index)
                                          : nullptr;
      }
      if (depth > best_depth) {
        best_depth = depth;
        best = found;
      }
    }
    if (best_depth > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(FormatLocation(file_, best.line, best.column), ": ", path, ": ", what));
    }
    if (fallback_.line >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          FormatLocation(file_, fallback_.line, fallback_.column), ": experiment \"",
          experiment_, "\": ", path, ": ", what));
    }
    return absl::InvalidArgumentError(absl::StrCat(file_, ": ", path, ": ", what));
  }

 private:
  std::string file_;
  std::vector<const TextFormat::ParseInfoTree*> roots_;
  TextFormat::ParseLocation fallback_;
  std::string experiment_;
  const ConfigCheck* check_;
};

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

bool ValidName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

std::string FormatNumber(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Singular fields an experiment writes out win over the suite's defaults even when they
// hold their type's default (false, 0, "", an enum's first value), which MergeFrom skips
// (proto3 keeps no presence for them): e.g. profiling { bucket_timing: false } under
// defaults that turn it on. `tree` is where the experiment was parsed from.
void KeepWrittenFields(const google::protobuf::Message& own, google::protobuf::Message& resolved,
                       const TextFormat::ParseInfoTree* tree) {
  if (tree == nullptr) return;
  const Descriptor* descriptor = own.GetDescriptor();
  const google::protobuf::Reflection* from = own.GetReflection();
  const google::protobuf::Reflection* to = resolved.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->is_repeated()) continue;
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      const TextFormat::ParseInfoTree* nested = tree->GetTreeForNested(field, -1);
      if (nested != nullptr && from->HasField(own, field)) {
        KeepWrittenFields(from->GetMessage(own, field), *to->MutableMessage(&resolved, field), nested);
      }
      continue;
    }
    if (tree->GetLocation(field, -1).line < 0) continue;  // not written
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_BOOL:
        to->SetBool(&resolved, field, from->GetBool(own, field));
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        to->SetInt32(&resolved, field, from->GetInt32(own, field));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        to->SetInt64(&resolved, field, from->GetInt64(own, field));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        to->SetUInt32(&resolved, field, from->GetUInt32(own, field));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        to->SetUInt64(&resolved, field, from->GetUInt64(own, field));
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        to->SetFloat(&resolved, field, from->GetFloat(own, field));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        to->SetDouble(&resolved, field, from->GetDouble(own, field));
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        to->SetEnumValue(&resolved, field, from->GetEnumValue(own, field));
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        to->SetString(&resolved, field, from->GetString(own, field));
        break;
      default:
        break;
    }
  }
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

// The field rules (ddplab.v1.rules) of a plugin's configuration message, checked for
// every number field that has them; `path` is the message's ("plugin[1].bucket_sizing").
// Returns the first broken rule as {field path, what}, or an empty path.
std::pair<std::string, std::string> BrokenRule(const google::protobuf::Message& config, const std::string& path) {
  const Descriptor* d = config.GetDescriptor();
  const google::protobuf::Reflection* r = config.GetReflection();
  for (int f = 0; f < d->field_count(); ++f) {
    const FieldDescriptor* field = d->field(f);
    if (!field->options().HasExtension(v1::rules)) continue;
    const v1::FieldRules& rules = field->options().GetExtension(v1::rules);
    auto value_at = [&](int k) {
      const bool rep = field->is_repeated();
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_DOUBLE: return rep ? r->GetRepeatedDouble(config, field, k) : r->GetDouble(config, field);
        case FieldDescriptor::CPPTYPE_FLOAT: return double{rep ? r->GetRepeatedFloat(config, field, k) : r->GetFloat(config, field)};
        case FieldDescriptor::CPPTYPE_UINT32: return double(rep ? r->GetRepeatedUInt32(config, field, k) : r->GetUInt32(config, field));
        case FieldDescriptor::CPPTYPE_INT32: return double(rep ? r->GetRepeatedInt32(config, field, k) : r->GetInt32(config, field));
        default: return 0.0;
      }
    };
    const int n = field->is_repeated() ? r->FieldSize(config, field) : 1;
    for (int k = 0; k < n; ++k) {
      const double v = value_at(k);
      const std::string at = field->is_repeated() ? absl::StrCat(path, ".", field->name(), "[", k, "]")
                                                  : absl::StrCat(path, ".", field->name());
      if (!field->is_repeated() && v == 0) continue;  // left out: the plugin's default
      if (!std::isfinite(v) || (rules.has_gt() && !(v > rules.gt()))) {
        return {at, absl::StrCat("must be > ", FormatNumber(rules.gt()), ", got ", FormatNumber(v))};
      }
      if (rules.has_lte() && !(v <= rules.lte())) {
        return {at, absl::StrCat("must be at most ", FormatNumber(rules.lte()), ", got ", FormatNumber(v))};
      }
      for (int t = 0; rules.unique() && t < k; ++t) {
        if (value_at(t) == v) return {at, absl::StrCat("repeats ", FormatNumber(v), " (", field->name(), "[", t, "])")};
      }
    }
  }
  return {};
}

// A sweep field (ddplab.v1.sweep) set beside the field it sets: {field path, what}.
std::pair<std::string, std::string> SweepContradiction(const google::protobuf::Message& config,
                                                       const std::string& path) {
  const Descriptor* d = config.GetDescriptor();
  const google::protobuf::Reflection* r = config.GetReflection();
  for (int f = 0; f < d->field_count(); ++f) {
    const FieldDescriptor* field = d->field(f);
    if (!field->is_repeated() || !field->options().HasExtension(v1::sweep)) continue;
    const FieldDescriptor* of = d->FindFieldByName(field->options().GetExtension(v1::sweep).of());
    if (of == nullptr || r->FieldSize(config, field) == 0 || !r->HasField(config, of)) continue;
    return {absl::StrCat(path, ".", of->name()),
            absl::StrCat("contradicts ", field->name(), ": a sweep sets the ", of->name(),
                         " of each run; leave ", of->name(), " out")};
  }
  return {};
}

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

// Checks a resolved experiment (defaults applied). Returns the first problem found.
absl::Status ValidateExperiment(const v1::Experiment& e, const Locator& at) {
  const Descriptor* root = v1::Experiment::descriptor();
  if (e.name().empty()) return at.Error(root, "name", "is required");
  if (!ValidName(e.name())) {
    return at.Error(root, "name",
                    absl::StrCat("must be letters, digits, '_' and '-', got \"", e.name(), "\""));
  }

  // Model.
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

  // Data.
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

  // Steps.
  if (e.steps().measured() == 0) {
    return at.Error(root, "steps.measured", "is required: steps to time, > 0");
  }

  if (e.steps().accumulation() > 1024) {
    return at.Error(root, "steps.accumulation",
                    absl::StrCat("must be at most 1024, got ", e.steps().accumulation()));
  }

  // Optimizer.
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

  // Distributed.
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
  if (dist.backward_sm_carveout() > 0 && cpu) {
    return at.Error(root, "distributed.backward_sm_carveout",
                    "leaves multiprocessors of a GPU to communication, but distributed.device is CPU");
  }
  if (cpu && data.pin_memory()) {
    return at.Error(root, "data.pin_memory",
                    "pins host memory for copies to a GPU, but distributed.device is CPU");
  }

  // Plugins.
  if (absl::Status s = ValidatePlugins(e, at); !s.ok()) return s;
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

}  // namespace

std::string PluginName(const v1::Plugin& plugin) {
  const google::protobuf::OneofDescriptor* oneof = v1::Plugin::descriptor()->FindOneofByName("config");
  const FieldDescriptor* field =
      plugin.GetReflection()->GetOneofFieldDescriptor(plugin, oneof);
  return field ? field->name() : "";
}

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
      return absl::InvalidArgumentError(
          absl::StrCat(FormatLocation(file, errors.line(), column), ": ", errors.message()));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": ", errors.has_error() ? errors.message() : "not a valid text-format " + *type));
  }

  const Descriptor* suite_descriptor = v1::Suite::descriptor();
  if (!is_suite) {
    ApplyDefaults(single);
    Locator at(file, {&tree}, TextFormat::ParseLocation(), single.name(), &check);
    if (absl::Status s = ValidateExperiment(single, at); !s.ok()) return s;
    suite.set_name(single.name());
    suite.set_description(single.description());
    *suite.add_experiment() = std::move(single);
    return suite;
  }

  Locator suite_at(file, {&tree}, TextFormat::ParseLocation(), "");
  if (suite.name().empty()) return suite_at.Error(suite_descriptor, "name", "is required");
  if (!ValidName(suite.name())) {
    return suite_at.Error(
        suite_descriptor, "name",
        absl::StrCat("must be letters, digits, '_' and '-', got \"", suite.name(), "\""));
  }
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

namespace {

// A plugin's sweep field (ddplab.v1.sweep) becomes one run per value, named
// <name>_<value><suffix>, with the field it sweeps set to the value.
std::vector<SuiteRun> ExpandPluginSweeps(const v1::Suite& suite) {
  std::vector<SuiteRun> out;
  for (const v1::Experiment& e : suite.experiment()) {
    bool swept = false;
    for (int i = 0; i < e.plugin_size() && !swept; ++i) {
      const v1::Plugin& plugin = e.plugin(i);
      const FieldDescriptor* entry = v1::Plugin::descriptor()->FindFieldByName(PluginName(plugin));
      if (entry == nullptr) continue;
      const google::protobuf::Message& config = plugin.GetReflection()->GetMessage(plugin, entry);
      const Descriptor* d = config.GetDescriptor();
      const google::protobuf::Reflection* r = config.GetReflection();
      for (int f = 0; f < d->field_count() && !swept; ++f) {
        const FieldDescriptor* field = d->field(f);
        if (!field->is_repeated() || field->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE ||
            !field->options().HasExtension(v1::sweep) || r->FieldSize(config, field) == 0) {
          continue;
        }
        const v1::Sweep& sweep = field->options().GetExtension(v1::sweep);
        const FieldDescriptor* of = d->FindFieldByName(sweep.of());
        swept = true;
        for (int k = 0; k < r->FieldSize(config, field); ++k) {
          const double value = r->GetRepeatedDouble(config, field, k);
          v1::Experiment one = e;
          one.set_name(absl::StrCat(e.name(), "_", value, sweep.suffix()));
          v1::Plugin& mine = *one.mutable_plugin(i);
          google::protobuf::Message* own = mine.GetReflection()->MutableMessage(&mine, entry);
          own->GetReflection()->ClearField(own, field);
          own->GetReflection()->SetDouble(own, of, value);
          out.push_back({one, e.name()});
        }
      }
    }
    if (!swept) out.push_back({e, ""});
  }
  return out;
}

}  // namespace

// Then a transport sweep becomes one run per transport, named <name>_<transport>: all the
// suite's runs over the first transport, then all over the next. Runs of one process use
// no transport and run once, among the first.
std::vector<SuiteRun> ExpandSweeps(const v1::Suite& suite) {
  std::vector<SuiteRun> runs = ExpandPluginSweeps(suite);
  std::vector<v1::Distributed::Transport> order;
  for (const SuiteRun& run : runs) {
    for (int t : run.experiment.distributed().sweep_transport()) {
      auto transport = static_cast<v1::Distributed::Transport>(t);
      if (std::find(order.begin(), order.end(), transport) == order.end()) order.push_back(transport);
    }
  }
  if (order.empty()) return runs;
  std::vector<SuiteRun> out;
  for (size_t k = 0; k < order.size(); ++k) {
    for (const SuiteRun& run : runs) {
      const v1::Distributed& d = run.experiment.distributed();
      const bool one_process = d.gpus_per_node() == 1 && d.nodes() <= 1;
      if (d.sweep_transport_size() == 0 || one_process) {
        if (k > 0) continue;
        out.push_back(run);
        out.back().experiment.mutable_distributed()->clear_sweep_transport();
        continue;
      }
      if (std::find(d.sweep_transport().begin(), d.sweep_transport().end(), order[k]) ==
          d.sweep_transport().end()) {
        continue;
      }
      const std::string suffix = absl::AsciiStrToLower(v1::Distributed::Transport_Name(order[k]));
      SuiteRun one = run;
      one.experiment.set_name(absl::StrCat(run.experiment.name(), "_", suffix));
      one.experiment.mutable_distributed()->clear_sweep_transport();
      one.experiment.mutable_distributed()->set_transport(order[k]);
      if (!run.sweep.empty()) one.sweep = absl::StrCat(run.sweep, "_", suffix);
      out.push_back(std::move(one));
    }
  }
  return out;
}

}  // namespace ddplab
