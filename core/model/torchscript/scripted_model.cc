#include "core/model/torchscript/scripted_model.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/serialization/import.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/config/text_location.h"
#include "core/record/content_digest.h"

namespace ddplab {
namespace {

using Loss = v1::ScriptedModel::Loss;

constexpr char kFile[] = "model.torchscript.file";
constexpr char kInputs[] = "model.torchscript.input";

absl::Status Refuse(absl::string_view field, absl::string_view what) {
  return FieldError(absl::StatusCode::kInvalidArgument, field, what);
}

// The line of what LibTorch says that says it: its errors go on with their C++ stack, and
// the TorchScript interpreter's open with its own stack and end with Python's error
// ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x768 and 192x32)").
std::string FirstLine(const char* what) {
  const std::string text(what == nullptr ? "" : what);
  if (absl::StartsWith(text, "The following operation failed in the TorchScript interpreter")) {
    const size_t error = text.rfind("Error: ");
    if (error != std::string::npos) {
      const size_t start = text.rfind('\n', error);
      const std::string line = text.substr(start == std::string::npos ? 0 : start + 1);
      return line.substr(0, line.find('\n'));
    }
  }
  return text.substr(0, text.find('\n'));
}

std::string Shape(at::IntArrayRef sizes) { return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]"); }

Loss LossOf(const v1::ScriptedModel& spec) {
  if (spec.loss() != v1::ScriptedModel::LOSS_UNSPECIFIED) return spec.loss();
  return spec.has_regression() ? v1::ScriptedModel::MEAN_SQUARED_ERROR : v1::ScriptedModel::CROSS_ENTROPY;
}

// forward's arguments after self against the inputs declared (and the target, where the
// module returns its own loss).
absl::Status CheckArguments(const torch::jit::Module& module, const v1::ScriptedModel& spec) {
  const c10::optional<torch::jit::Method> forward = module.find_method("forward");
  if (!forward) return Refuse(kFile, "the module has no forward method");
  const std::vector<c10::Argument>& args = forward->function().getSchema().arguments();
  std::vector<std::string> taken;
  for (size_t i = 1; i < args.size(); ++i) taken.push_back(absl::StrCat(args[i].name(), ": ", args[i].type()->str()));
  const bool own_loss = LossOf(spec) == v1::ScriptedModel::MODULE_RETURNS_LOSS;
  const size_t declared = static_cast<size_t>(spec.input_size()) + (own_loss ? 1 : 0);
  if (taken.size() != declared) {
    return Refuse(kInputs, absl::StrCat("forward takes (", absl::StrJoin(taken, ", "), "): ", taken.size(),
                                        " argument(s), but the file declares ", spec.input_size(), " input(s)",
                                        own_loss ? " and the target (MODULE_RETURNS_LOSS)" : ""));
  }
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i].type()->kind() != c10::TypeKind::TensorType) {
      return Refuse(absl::StrCat(kInputs, "[", std::min<size_t>(i - 1, spec.input_size() - 1), "]"),
                    absl::StrCat("forward's argument ", taken[i - 1], " is not a Tensor"));
    }
  }
  return absl::OkStatus();
}

// What forward gave for `n` samples against the target declared.
absl::Status CheckOutput(const at::Tensor& out, const v1::ScriptedModel& spec, int64_t n) {
  if (LossOf(spec) == v1::ScriptedModel::MODULE_RETURNS_LOSS) {
    if (out.dim() != 0) {
      return Refuse("model.torchscript.loss", absl::StrCat("MODULE_RETURNS_LOSS: forward returned ", Shape(out.sizes()),
                                                           ", not a scalar loss"));
    }
    return absl::OkStatus();
  }
  if (!at::isFloatingType(out.scalar_type())) {
    return Refuse(kFile, absl::StrCat("forward returns ", c10::toString(out.scalar_type()), " values: a loss needs floats"));
  }
  std::vector<int64_t> want{n};
  std::string field = "model.torchscript.classes", what;
  if (spec.has_regression()) {
    for (uint32_t d : spec.regression().shape()) want.push_back(d);
    field = "model.torchscript.regression.shape";
    what = "a regression's output is [batch, shape...]";
  } else {
    want.push_back(spec.classes());
    what = absl::StrCat("a classifier of ", spec.classes(), " classes returns its logits, [batch, ", spec.classes(), "]");
  }
  if (out.sizes() != at::IntArrayRef(want)) {
    return Refuse(field, absl::StrCat("forward returns ", Shape(out.sizes()), " for ", n, " samples, not ",
                                      Shape(want), ": ", what));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ScriptedModel> ScriptedModel::Load(const v1::ScriptedModel& spec, const std::string& base_dir,
                                                  at::Device device, int64_t memory_bytes) {
  const std::string& file = spec.file();
  const std::string path = file.empty() || file[0] == '/' || base_dir.empty() ? file : absl::StrCat(base_dir, "/", file);
  absl::StatusOr<std::string> digest = FileDigest(path);
  if (!digest.ok()) return Refuse(kFile, digest.status().message());
  auto module = std::make_shared<torch::jit::Module>();
  try {
    *module = torch::jit::load(path, device);
  } catch (const std::exception& e) {
    return Refuse(kFile, absl::StrCat(path, " is not a TorchScript module (a file written by torch.jit.script(model)"
                                            ".save(...) or torch.jit.trace(...).save(...)): ", FirstLine(e.what())));
  }
  if (absl::Status s = CheckArguments(*module, spec); !s.ok()) return s;
  ScriptedModel model(std::move(module), spec, path, *std::move(digest), device);
  if (model.parameters().empty()) return Refuse(kFile, absl::StrCat(path, ": the module has no trainable parameters"));
  // Weights, their gradients and the buckets' copy at the least, before any activation.
  if (const int64_t least = 3 * model.parameter_bytes(); memory_bytes > 0 && least > memory_bytes) {
    return Refuse(kFile, absl::StrCat(path, ": its parameters take ", model.parameter_bytes() >> 20,
                                      " MiB; with their gradients and the buckets at least ", least >> 20,
                                      " MiB, more than the device's ", memory_bytes >> 20, " MiB"));
  }
  // A first batch of two samples, so that a shape the module does not take is said here,
  // at the file's place, and not at the first step of a run.
  constexpr int64_t kProbe = 2;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(0);
  const ScriptedBatch batch = model.MakeBatch(kProbe, generator);
  at::Tensor out;
  // In eval mode, so that the probe leaves what it does not check as the file has it (a
  // BatchNorm's running statistics, the dropout's random state); then the file's mode.
  const bool training = model.module_->is_training();
  try {
    at::NoGradGuard no_grad;
    model.Train(false);
    out = model.Forward(batch);
    model.Train(training);
  } catch (const std::exception& e) {
    std::vector<std::string> shapes;
    for (const at::Tensor& t : batch.inputs) shapes.push_back(absl::StrCat(Shape(t.sizes()), " ", c10::toString(t.scalar_type())));
    return Refuse(kInputs, absl::StrCat("forward failed on a first batch of ", kProbe, " samples of the shapes declared (",
                                        absl::StrJoin(shapes, ", "), "): ", FirstLine(e.what())));
  }
  if (absl::Status s = CheckOutput(out, spec, kProbe); !s.ok()) return s;
  return model;
}

std::vector<at::Tensor> ScriptedModel::parameters() const {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : module_->parameters(/*recurse=*/true)) {
    if (p.requires_grad()) out.push_back(p);
  }
  return out;
}

std::vector<at::Tensor> ScriptedModel::buffers() const {
  std::vector<at::Tensor> out;
  for (const at::Tensor& b : module_->buffers(/*recurse=*/true)) out.push_back(b);
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> ScriptedModel::named_parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : module_->named_parameters(/*recurse=*/true)) {
    if (p.value.requires_grad()) out.emplace_back(p.name, p.value);
  }
  return out;
}

int64_t ScriptedModel::parameter_bytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& p : parameters()) bytes += p.numel() * static_cast<int64_t>(p.element_size());
  return bytes;
}

ScriptedBatch ScriptedModel::MakeBatch(int64_t n, at::Generator& generator) const {
  const auto draw = [&](const v1::TensorSpec& spec, int64_t batch) {
    std::vector<int64_t> shape{batch};
    for (uint32_t d : spec.shape()) shape.push_back(d);
    if (spec.dtype() == v1::TensorSpec::INT64) {
      return at::empty(shape, at::kLong).random_(0, static_cast<int64_t>(spec.high()), generator).to(device_);
    }
    return at::empty(shape).normal_(0.0, 1.0, generator).to(device_);
  };
  ScriptedBatch batch;
  for (const v1::TensorSpec& input : spec_.input()) batch.inputs.push_back(draw(input, n));
  if (spec_.has_regression()) {
    batch.target = draw(spec_.regression(), n);
  } else {
    batch.target = at::empty({n}, at::kLong).random_(0, static_cast<int64_t>(spec_.classes()), generator).to(device_);
  }
  return batch;
}

at::Tensor ScriptedModel::Forward(const ScriptedBatch& batch) {
  std::vector<c10::IValue> args(batch.inputs.begin(), batch.inputs.end());
  if (LossOf(spec_) == v1::ScriptedModel::MODULE_RETURNS_LOSS) args.emplace_back(batch.target);
  const c10::IValue out = module_->forward(args);
  if (!out.isTensor()) {
    throw std::runtime_error(absl::StrCat("forward returned a ", out.tagKind(), ", not a Tensor"));
  }
  return out.toTensor();
}

void ScriptedModel::Train(bool on) { module_->train(on); }

at::Tensor ScriptedModel::Loss(const ScriptedBatch& batch) {
  const at::Tensor out = Forward(batch);
  switch (LossOf(spec_)) {
    case v1::ScriptedModel::MEAN_SQUARED_ERROR:
      return at::mse_loss(out, batch.target);
    case v1::ScriptedModel::MODULE_RETURNS_LOSS:
      return out;
    default:
      return at::cross_entropy_loss(out, batch.target);
  }
}

}  // namespace ddplab
