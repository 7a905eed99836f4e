// What the trainer trains, whichever model it is: a ViT of ddplab's presets or sizes, or a
// TorchScript module the user brings (core/model/torchscript). The trainer, the engine and
// the plugins see its parameters, its loss and its data, never its kind.
//
//   absl::StatusOr<std::unique_ptr<ddplab::TrainedModel>> model =
//       ddplab::MakeTrainedModel(experiment, device);
//   std::unique_ptr<ddplab::BatchSource> data = (*model)->MakeData(experiment, rank, device);
//   (*model)->Loss(data->Next()).backward();
//
// Note [One input for now]
// A module the user brings gets its one input where a ViT gets its images (Batch::images,
// and the plugins' StepInputs::images), and its target where a ViT gets its labels: the
// step, the engine and the plugins (cuda_graph's static copies among them) carry the two
// tensors as they are, whatever their shapes and dtypes. A module whose forward takes
// several inputs is refused where the experiment file names it, until StepInputs carries
// a list (an SDK change: every plugin is rebuilt for it).
#ifndef DDPLAB_CORE_MODEL_TRAINED_MODEL_H_
#define DDPLAB_CORE_MODEL_TRAINED_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/data/batch_source.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

class TrainedModel {
 public:
  virtual ~TrainedModel() = default;
  // The trainable parameters in the module's order, and their names in the same order.
  virtual std::vector<at::Tensor> parameters() const = 0;
  virtual std::vector<std::string> parameter_names() const = 0;
  // Its buffers (a BatchNorm's running statistics), which the engine makes rank 0's before
  // each forward, as PyTorch's DDP does; none for a ViT.
  virtual std::vector<at::Tensor> buffers() const = 0;
  // Forward of the batch's input and the loss against its target: a scalar.
  virtual at::Tensor Loss(const Batch& batch) = 0;
  // The batches of `e` for `rank`, on `device`: each rank draws its own.
  virtual std::unique_ptr<BatchSource> MakeData(const v1::Experiment& e, int rank, at::Device device) const = 0;
  // Forward and backward FLOPs of one sample; 0 where they are not known (a module the
  // user brings), and the result then has no TFLOPs.
  virtual double training_flops_per_sample() const = 0;
  // For results: the preset's name, "custom" for ViT sizes, "torchscript <file name>".
  virtual std::string name() const = 0;
  // A module's file's digest (RunResult.model_digest); "" for a ViT.
  virtual std::string digest() const = 0;
};

// The model `e` names, in training mode on `device`, with its initial weights: a ViT's
// drawn from the experiment's seed (Note [Initial weights kept], initial_weights.h), a
// module's as its file holds them. A module's file is read from where `file` says (vit_ddp
// makes it absolute when it reads the experiment file).
absl::StatusOr<std::unique_ptr<TrainedModel>> MakeTrainedModel(const v1::Experiment& e, at::Device device);

}  // namespace ddplab

#endif  // DDPLAB_CORE_MODEL_TRAINED_MODEL_H_
