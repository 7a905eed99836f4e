#include "core/model/vit_config.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ddplab {

absl::StatusOr<VitConfig> VitConfigForModel(const v1::Model& model, int64_t image_size) {
  VitConfig c;
  c.image_size = image_size;
  if (model.has_torchscript()) {
    // Callers that handle any model ask MakeTrainedModel (trained_model.h); this is for
    // what only a ViT's sizes give (its FLOPs, the memory its activations need).
    return absl::InvalidArgumentError("model.torchscript: a module the user brings has no ViT sizes");
  }
  if (model.has_vit()) {
    const v1::VitSizes& v = model.vit();
    c.patch_size = v.patch_size();
    c.hidden_dim = v.hidden_dim();
    c.num_layers = v.num_layers();
    c.num_heads = v.num_heads();
    c.mlp_dim = v.mlp_dim();
    c.num_classes = v.num_classes();
  } else {
    switch (model.preset()) {
      case v1::Model::VIT_L_32:
      case v1::Model::VIT_L_16:
        c.patch_size = model.preset() == v1::Model::VIT_L_32 ? 32 : 16;
        c.hidden_dim = 1024;
        c.num_layers = 24;
        c.num_heads = 16;
        c.mlp_dim = 4096;
        c.num_classes = 1000;
        break;
      case v1::Model::VIT_B_32:
      case v1::Model::VIT_B_16:
        c.patch_size = model.preset() == v1::Model::VIT_B_32 ? 32 : 16;
        c.hidden_dim = 768;
        c.num_layers = 12;
        c.num_heads = 12;
        c.mlp_dim = 3072;
        c.num_classes = 1000;
        break;
      case v1::Model::VIT_TINY_TEST:
        c.patch_size = 8;
        c.hidden_dim = 32;
        c.num_layers = 2;
        c.num_heads = 2;
        c.mlp_dim = 64;
        c.num_classes = 10;
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("model.preset: unknown preset ", static_cast<int>(model.preset())));
    }
  }
  if (c.patch_size <= 0 || image_size % c.patch_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("image size ", image_size,
                                                   " is not a multiple of patch size ",
                                                   c.patch_size));
  }
  return c;
}

double VitTrainingFlopsPerSample(const VitConfig& c) {
  double s = static_cast<double>(c.seq_length());
  double h = static_cast<double>(c.hidden_dim);
  double patches = s - 1;
  double macs = patches * 3.0 * c.patch_size * c.patch_size * h;  // patch embedding
  double per_layer = s * 3 * h * h        // q, k, v projections
                     + 2 * s * s * h      // scores and weighted sum
                     + s * h * h          // output projection
                     + 2 * s * h * c.mlp_dim;  // MLP
  macs += c.num_layers * per_layer + h * c.num_classes;  // head on the class token
  return 3.0 * 2.0 * macs;
}

int64_t VitParameterCount(const VitConfig& c) {
  const int64_t h = c.hidden_dim, m = c.mlp_dim;
  const int64_t embedding = 3 * c.patch_size * c.patch_size * h + h  // patch projection
                            + h                                      // class token
                            + c.seq_length() * h;                    // positions
  const int64_t layer = 2 * h                  // ln_1
                        + 3 * h * h + 3 * h    // q, k, v
                        + h * h + h            // output projection
                        + 2 * h                // ln_2
                        + h * m + m + m * h + h;  // MLP
  return embedding + c.num_layers * layer + 2 * h + h * c.num_classes + c.num_classes;
}

TrainingMemory VitTrainingMemory(const VitConfig& c, int64_t batch, int optimizer_states) {
  TrainingMemory m;
  m.state_bytes = static_cast<double>(VitParameterCount(c)) * 4 * (2 + optimizer_states);
  // Per token and layer: the inputs of ln_1, the q/k/v projection and its output, the
  // attention's output, ln_2's input and output, the MLP's hidden layer before and after GELU.
  const double per_token_layer = 6.0 * c.hidden_dim + 2.0 * c.mlp_dim;
  m.activation_bytes = 4.0 * static_cast<double>(batch) * static_cast<double>(c.seq_length()) *
                       static_cast<double>(c.num_layers) * per_token_layer;
  return m;
}

}  // namespace ddplab
