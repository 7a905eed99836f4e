// A ViT's sizes, and what follows from them without building it: parameters, FLOPs,
// and the least memory a training step can take.
//
//   absl::StatusOr<ddplab::VitConfig> config = ddplab::VitConfigForModel(experiment.model(), 224);
//   int64_t n = ddplab::VitParameterCount(*config);  // vit_l_32: 306,535,400
#ifndef DDPLAB_CORE_MODEL_VIT_CONFIG_H_
#define DDPLAB_CORE_MODEL_VIT_CONFIG_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

struct VitConfig {
  int64_t image_size = 224;
  int64_t patch_size = 32;
  int64_t hidden_dim = 1024;
  int64_t num_layers = 24;
  int64_t num_heads = 16;
  int64_t mlp_dim = 4096;
  int64_t num_classes = 1000;

  // Patches plus the class token.
  int64_t seq_length() const {
    return (image_size / patch_size) * (image_size / patch_size) + 1;
  }
};

// The sizes of a preset (torchvision's, for the vit_* presets) or of explicit sizes.
absl::StatusOr<VitConfig> VitConfigForModel(const v1::Model& model, int64_t image_size);

// Floating-point operations of one training step (forward and backward) per sample:
// 2 per multiply-add, backward counted as twice the forward, as is customary.
double VitTrainingFlopsPerSample(const VitConfig& config);

// Parameters of the model, as torchvision's VisionTransformer has them.
int64_t VitParameterCount(const VitConfig& config);

// The least memory one process's training step takes, in bytes: weights, gradients and
// `optimizer_states` more float32 copies (SGD's momentum: 1, AdamW's moments: 2), 4 bytes
// each per parameter, and the activations
// backward keeps for a batch of `batch` (a lower bound: each layer's inputs of its
// projections and of the MLP, in float32). The allocator and the engine's buckets add
// to it.
struct TrainingMemory {
  double state_bytes = 0;
  double activation_bytes = 0;
  double total() const { return state_bytes + activation_bytes; }
};
TrainingMemory VitTrainingMemory(const VitConfig& config, int64_t batch, int optimizer_states);

}  // namespace ddplab

#endif  // DDPLAB_CORE_MODEL_VIT_CONFIG_H_
