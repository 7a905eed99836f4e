// A model the user brings: a TorchScript module exported from Python (torch.jit.script or
// torch.jit.trace, then .save()), as experiment.proto's ScriptedModel declares it. Load
// reads the file, checks forward against the inputs declared, runs a first batch of two
// samples, and checks what comes out against the target; every refusal names the field at
// fault (Note [Errors that name a field]), so that the loader reports it at its place in
// the experiment file. Then batches of synthetic data of the shapes declared, and the loss.
//
//   absl::StatusOr<ddplab::ScriptedModel> model =
//       ddplab::ScriptedModel::Load(e.model().torchscript(), "/experiments", at::kCPU);
//   if (!model.ok()) return model.status();  // "model.torchscript.input: forward takes 2 ..."
//   ddplab::ScriptedBatch batch = model->MakeBatch(32, generator);
//   model->Loss(batch).backward();
#ifndef DDPLAB_CORE_MODEL_TORCHSCRIPT_SCRIPTED_MODEL_H_
#define DDPLAB_CORE_MODEL_TORCHSCRIPT_SCRIPTED_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "ddplab/v1/experiment.pb.h"

namespace torch::jit {
struct Module;  // torch/csrc/jit/api/module.h, which only scripted_model.cc compiles
}  // namespace torch::jit

namespace ddplab {

// One batch: forward's inputs in order, and the target ([N] class indices, or [N, shape...]).
struct ScriptedBatch {
  std::vector<at::Tensor> inputs;
  at::Tensor target;
};

class ScriptedModel {
 public:
  // Loads `spec.file` (relative to `base_dir` unless absolute) onto `device` and checks it.
  // With `memory_bytes` > 0, refuses a module whose parameters, their gradients and one
  // copy for the buckets do not fit in it.
  static absl::StatusOr<ScriptedModel> Load(const v1::ScriptedModel& spec, const std::string& base_dir,
                                            at::Device device, int64_t memory_bytes = 0);

  // The trainable parameters (requires_grad), in the module's order, with their names.
  std::vector<at::Tensor> parameters() const;
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const;
  int64_t parameter_bytes() const;
  // The module's buffers (a BatchNorm's running statistics), in the module's order.
  std::vector<at::Tensor> buffers() const;
  const std::string& path() const { return path_; }
  // The digest of the file's bytes as loaded (core/record/content_digest.h).
  const std::string& digest() const { return digest_; }

  // `n` samples of the declared inputs and target, drawn from `generator` on the host and
  // moved to the model's device.
  ScriptedBatch MakeBatch(int64_t n, at::Generator& generator) const;
  // forward and the declared loss (a scalar).
  at::Tensor Loss(const ScriptedBatch& batch);
  void Train(bool on);

 private:
  ScriptedModel(std::shared_ptr<torch::jit::Module> module, v1::ScriptedModel spec, std::string path,
                std::string digest, at::Device device)
      : module_(std::move(module)),
        spec_(std::move(spec)),
        path_(std::move(path)),
        digest_(std::move(digest)),
        device_(device) {}

  at::Tensor Forward(const ScriptedBatch& batch);

  std::shared_ptr<torch::jit::Module> module_;
  v1::ScriptedModel spec_;
  std::string path_;
  std::string digest_;
  at::Device device_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_MODEL_TORCHSCRIPT_SCRIPTED_MODEL_H_
