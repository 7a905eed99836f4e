#include "core/config/validate.h"

#include <cmath>
#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/config/plugin_config.h"

namespace ddplab {
namespace {

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

absl::Status ValidateEnums(const google::protobuf::Message& m, const std::string& path, const Locator& at);

// Each plugin entry against its schema; then, `with_check`, the Locator's ConfigCheck.
absl::Status ValidatePlugins(const v1::Experiment& e, const Locator& at, const ExperimentSchema& schema,
                             bool with_check) {
  std::map<std::string, int> seen;
  for (int i = 0; i < e.plugin_size(); ++i) {
    const v1::Plugin& plugin = e.plugin(i);
    const std::string here = absl::StrCat("plugin[", i, "]");
    const std::string& name = plugin.name();
    if (name.empty()) {
      std::vector<std::string> names = schema.found();
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
    // A plugin's enums are open (proto3): a number no value has would run as the default.
    if (absl::Status s = ValidateEnums(*config, path, at); !s.ok()) return s;
    for (auto [where, what] : {BrokenRule(*config, path), SweepContradiction(*config, path)}) {
      if (!where.empty()) return at.Error(where, what);
    }
  }
  if (const ConfigCheck* check = at.check(); check != nullptr && with_check) {
    // Note [Errors that name a field]: located like the rest.
    if (absl::Status s = (*check)(e); !s.ok()) {
      const std::string field = FieldOf(s);
      return at.Error(field.empty() ? "plugin" : field, WhatOf(s));
    }
  }
  return absl::OkStatus();
}

// model.torchscript: what the file declares, before the module is loaded (the device's
// check loads it: core/model/torchscript).
absl::Status ValidateScriptedModel(const v1::ScriptedModel& m, const Locator& at) {
  if (m.file().empty()) return at.Error("model.torchscript.file", "is required: the module's file (its .save())");
  if (m.input_size() == 0) {
    return at.Error("model.torchscript.input", "is required: one per argument of forward, e.g. input { shape: [3, 224, 224] }");
  }
  const auto check = [&](const v1::TensorSpec& t, const std::string& path) -> absl::Status {
    for (int d = 0; d < t.shape_size(); ++d) {
      if (t.shape(d) == 0) return at.Error(absl::StrCat(path, ".shape"), absl::StrCat("[", d, "] must be > 0"));
    }
    if (t.dtype() == v1::TensorSpec::INT64 && t.high() == 0) {
      return at.Error(absl::StrCat(path, ".high"), "is required for INT64: values are drawn in [0, high)");
    }
    if (t.dtype() != v1::TensorSpec::INT64 && t.high() != 0) {
      return at.Error(absl::StrCat(path, ".high"), "is for INT64 values; float values are drawn from a normal");
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < m.input_size(); ++i) {
    if (absl::Status s = check(m.input(i), absl::StrCat("model.torchscript.input[", i, "]")); !s.ok()) return s;
  }
  // Note [One input for now] (core/model/trained_model.h).
  if (m.input_size() > 1) {
    return at.Error("model.torchscript.input", absl::StrCat("ddplab feeds a module one input for now; this file "
                                                            "declares ", m.input_size()));
  }
  if (m.has_regression()) {
    if (m.regression().dtype() == v1::TensorSpec::INT64) {
      return at.Error("model.torchscript.regression.dtype", "a regression's target is FLOAT32");
    }
    if (absl::Status s = check(m.regression(), "model.torchscript.regression"); !s.ok()) return s;
    if (m.loss() == v1::ScriptedModel::CROSS_ENTROPY) {
      return at.Error("model.torchscript.loss", "CROSS_ENTROPY takes class indices: set classes, not regression");
    }
  } else if (m.classes() == 0) {
    return at.Error("model.torchscript", "needs a target: classes: N (class indices), or regression { shape: [...] }");
  } else if (m.loss() == v1::ScriptedModel::MEAN_SQUARED_ERROR) {
    return at.Error("model.torchscript.loss", "MEAN_SQUARED_ERROR takes a float target: set regression, not classes");
  }
  return absl::OkStatus();
}

// model: a preset, sizes that fit together, or a TorchScript module's declaration.
absl::Status ValidateModel(const v1::Experiment& e, const Locator& at) {
  const v1::Model& model = e.model();
  switch (model.architecture_case()) {
    case v1::Model::kTorchscript:
      return ValidateScriptedModel(model.torchscript(), at);
    case v1::Model::ARCHITECTURE_NOT_SET:
      return at.Error("model", "is required: set model.preset, model.vit or model.torchscript");
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

// Every enum field set to a number its enum has no name for ("task: 99"): an error
// listing the values accepted. `path` is `m`'s ("data").
absl::Status ValidateEnums(const google::protobuf::Message& m, const std::string& path, const Locator& at) {
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    const std::string where = path.empty() ? f->name() : absl::StrCat(path, ".", f->name());
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int k = 0; k < n; ++k) {
      if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
        const google::protobuf::Message& sub = f->is_repeated() ? r->GetRepeatedMessage(m, f, k) : r->GetMessage(m, f);
        if (absl::Status s = ValidateEnums(sub, where, at); !s.ok()) return s;
      } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_ENUM) {
        const int value = f->is_repeated() ? r->GetRepeatedEnumValue(m, f, k) : r->GetEnumValue(m, f);
        if (f->enum_type()->FindValueByNumber(value) != nullptr) continue;
        std::vector<std::string> names;
        for (int v = 0; v < f->enum_type()->value_count(); ++v) names.push_back(f->enum_type()->value(v)->name());
        return at.Error(where, absl::StrCat("has no value ", value, "; accepted: ", absl::StrJoin(names, ", ")));
      }
    }
  }
  return absl::OkStatus();
}

// steps and the optimizer. A step's figures are kept per step, so the counts are bounded.
absl::Status ValidateSteps(const v1::Experiment& e, const Locator& at) {
  if (e.steps().measured() == 0) {
    return at.Error("steps.measured", "is required: steps to time, > 0");
  }
  if (e.steps().measured() > 1000000) {
    return at.Error("steps.measured", absl::StrCat("must be at most 1000000, got ", e.steps().measured()));
  }
  for (const auto& [name, value] : {std::pair<const char*, uint32_t>{"steps.warmup", e.steps().warmup()},
                                    {"steps.cooldown", e.steps().cooldown()}}) {
    if (value > 100000) return at.Error(name, absl::StrCat("must be at most 100000, got ", value));
  }

  if (e.steps().repetitions() > 20) {
    return at.Error("steps.repetitions", absl::StrCat("must be at most 20, got ", e.steps().repetitions()));
  }
  if (e.steps().accumulation() > 1024) {
    return at.Error("steps.accumulation",
                    absl::StrCat("must be at most 1024, got ", e.steps().accumulation()));
  }

  return absl::OkStatus();
}

// A rate in [0, 1): momentum, Adam's betas.
bool IsRate(double x) { return x >= 0 && x < 1; }

absl::Status ValidateOptimizer(const v1::Experiment& e, const Locator& at) {
  const v1::Optimizer& o = e.optimizer();
  if (o.has_adamw()) {
    const v1::AdamW& a = o.adamw();
    if (!(a.learning_rate() > 0) || !std::isfinite(a.learning_rate())) {
      return at.Error("optimizer.adamw.learning_rate", absl::StrCat("must be > 0, got ", FormatNumber(a.learning_rate())));
    }
    for (const auto& [name, has, value] : {std::tuple<const char*, bool, double>{"beta1", a.has_beta1(), a.beta1()},
                                           {"beta2", a.has_beta2(), a.beta2()}}) {
      if (has && !IsRate(value)) {
        return at.Error(absl::StrCat("optimizer.adamw.", name), absl::StrCat("must be in [0, 1), got ", FormatNumber(value)));
      }
    }
    if (a.has_eps() && (!(a.eps() > 0) || !std::isfinite(a.eps()))) {
      return at.Error("optimizer.adamw.eps", absl::StrCat("must be > 0, got ", FormatNumber(a.eps())));
    }
    if (a.has_weight_decay() && (a.weight_decay() < 0 || !std::isfinite(a.weight_decay()))) {
      return at.Error("optimizer.adamw.weight_decay", absl::StrCat("must be >= 0, got ", FormatNumber(a.weight_decay())));
    }
    return absl::OkStatus();
  }
  if (!o.has_sgd()) return at.Error("optimizer", "is required: set optimizer.sgd or optimizer.adamw");
  const v1::Sgd& sgd = o.sgd();
  if (!(sgd.learning_rate() > 0) || !std::isfinite(sgd.learning_rate())) {
    return at.Error("optimizer.sgd.learning_rate",
                    absl::StrCat("must be > 0, got ", FormatNumber(sgd.learning_rate())));
  }
  if (!IsRate(sgd.momentum())) {
    return at.Error("optimizer.sgd.momentum",
                    absl::StrCat("must be in [0, 1), got ", FormatNumber(sgd.momentum())));
  }
  if (sgd.weight_decay() < 0 || !std::isfinite(sgd.weight_decay())) {
    return at.Error("optimizer.sgd.weight_decay",
                    absl::StrCat("must be >= 0, got ", FormatNumber(sgd.weight_decay())));
  }
  return absl::OkStatus();
}

// TF32 is a mode of GPUs' matmuls: asked for on CPUs it would measure nothing.
absl::Status ValidatePrecision(const v1::Experiment& e, const Locator& at) {
  if (e.precision() == v1::TF32 && e.distributed().device() == v1::Distributed::CPU) {
    return at.Error("precision", "TF32 is a mode of GPUs' matrix units, and distributed.device is CPU: "
                                 "use FLOAT32 or BF16_AUTOCAST on CPUs");
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

}  // namespace

absl::Status ValidateExperiment(const v1::Experiment& e, const Locator& at, const ExperimentSchema& schema) {
  // Note [A file's errors together]: the first error of each part.
  std::vector<absl::Status> found;
  if (e.name().empty()) {
    found.push_back(at.Error("name", "is required"));
  } else if (std::string bad = BadName(e.name()); !bad.empty()) {
    found.push_back(at.Error("name", bad));
  }
  found.push_back(ValidateEnums(e, "", at));
  if (e.profiling().profiler() == v1::Profiling::NSYS) {
    found.push_back(at.Error("profiling.profiler", "NSYS is asked for on the command line, not in a file: --profile=nsys"));
  }
  for (auto check : {ValidateModel, ValidateData, ValidateSteps, ValidateOptimizer, ValidatePrecision,
                     ValidateDistributed}) {
    found.push_back(check(e, at));
  }
  if (e.output().directory().find('\0') != std::string::npos) {
    found.push_back(at.Error("output.directory", "must not contain NUL"));
  }
  // The plugin host's own check (at.check()) configures the plugins for this experiment:
  // only once the rest of it holds.
  const bool rest_holds = std::all_of(found.begin(), found.end(), [](const absl::Status& s) { return s.ok(); });
  found.push_back(ValidatePlugins(e, at, schema, /*with_check=*/rest_holds));
  return Together(std::move(found));
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

absl::Status CheckLeftToCpus(const v1::Experiment& e, absl::string_view why_cpu) {
  const v1::Distributed& dist = e.distributed();
  if (dist.device() != v1::Distributed::DEVICE_UNSPECIFIED) return absl::OkStatus();
  // data, precision, then distributed's.
  std::vector<std::pair<std::string, std::string>> gpu_only;
  if (e.data().pin_memory()) gpu_only.push_back({"data.pin_memory", "pins host memory for copies to a GPU"});
  if (e.precision() == v1::TF32) gpu_only.push_back({"precision", "TF32 is a mode of GPUs' matrix units"});
  if (dist.backend() == v1::Distributed::NCCL) gpu_only.push_back({"distributed.backend", "NCCL runs on GPUs only"});
  if (dist.transport() != v1::Distributed::TRANSPORT_UNSPECIFIED) {
    gpu_only.push_back({"distributed.transport", "selects NCCL's transport"});
  }
  if (dist.nccl_env_size() > 0) gpu_only.push_back({"distributed.nccl_env[0]", "sets NCCL's variables"});
  if (dist.high_priority_compute()) gpu_only.push_back({"distributed.high_priority_compute", "chooses a CUDA stream"});
  if (dist.sweep_transport_size() > 0) {
    gpu_only.push_back({"distributed.sweep_transport[0]", "sweeps NCCL's transports"});
  }
  if (dist.nccl_channels() > 0) gpu_only.push_back({"distributed.nccl_channels", "sets NCCL's channels"});
  if (gpu_only.empty()) return absl::OkStatus();
  std::string others;
  for (size_t i = 1; i < gpu_only.size(); ++i) {
    absl::StrAppend(&others, i == 1 ? "; so do " : ", ", gpu_only[i].first.substr(0, gpu_only[i].first.find('[')));
  }
  return FieldError(absl::StatusCode::kInvalidArgument, gpu_only[0].first,
                    absl::StrCat(gpu_only[0].second, ", but this experiment runs on CPUs (distributed.device is left "
                                 "out, and this is ", why_cpu, ")", others,
                                 ": remove them, or name distributed { device: CUDA } for a GPU machine"));
}

}  // namespace ddplab
