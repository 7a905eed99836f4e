// The Vision Transformer, as torchvision's VisionTransformer.
//
// Same layers, initialization and parameter names as torchvision.models.vit_*, so a
// torchvision state dict loads by name ("encoder.layers.encoder_layer_0.ln_1.weight"):
// patch embedding by convolution, a class token, learned position embeddings, pre-norm
// encoder blocks (LayerNorm eps 1e-6, multi-head self-attention through LibTorch's
// scaled dot-product attention, MLP with exact GELU), no dropout, a linear head.
//
//   ddplab::VitConfig config = ddplab::VitConfigForModel(experiment.model(), 224).value();
//   ddplab::Vit model(config);                 // vit_l_32: 306,535,400 parameters
//   at::Tensor logits = model->forward(images);  // [N, 3, 224, 224] -> [N, 1000]
//
// Vit(config, /*initialize=*/false) leaves the large weights uninitialized (no random
// draws, no pages touched) for a caller that fills every parameter itself: MakeVit
// (initial_weights.h).

#ifndef DDPLAB_CORE_MODEL_VIT_H_
#define DDPLAB_CORE_MODEL_VIT_H_

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "absl/status/statusor.h"
#include "core/model/vit_config.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

// torch::nn::Linear's parameters ("weight", "bias") and initialization, which it can
// skip: torch::nn::Linear always draws its weights when constructed.
class VitLinearImpl : public torch::nn::Module {
 public:
  VitLinearImpl(int64_t in_features, int64_t out_features, bool initialize);
  at::Tensor forward(const at::Tensor& x) { return at::linear(x, weight, bias); }

  at::Tensor weight, bias;
};
TORCH_MODULE(VitLinear);

class VitSelfAttentionImpl : public torch::nn::Module {
 public:
  VitSelfAttentionImpl(int64_t hidden_dim, int64_t num_heads, bool initialize = true);
  at::Tensor forward(const at::Tensor& x);
  // The same with the projections' weights and biases given: the parameters() below, or
  // their casts (Note [A block's casts together], vit.cc).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& in_weight, const at::Tensor& in_bias,
                     const at::Tensor& out_weight, const at::Tensor& out_bias);
  // in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias
  std::vector<at::Tensor> projections() const;

 private:
  int64_t num_heads_;
  at::Tensor in_proj_weight_, in_proj_bias_;
  VitLinear out_proj_{nullptr};
};
TORCH_MODULE(VitSelfAttention);

class VitEncoderBlockImpl : public torch::nn::Module {
 public:
  VitEncoderBlockImpl(int64_t hidden_dim, int64_t num_heads, int64_t mlp_dim, bool initialize = true);
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  VitSelfAttention self_attention_{nullptr};
  VitLinear mlp_in_{nullptr}, mlp_out_{nullptr};
};
TORCH_MODULE(VitEncoderBlock);

class VitImpl : public torch::nn::Module {
 public:
  explicit VitImpl(const VitConfig& config, bool initialize = true);
  // images [N, 3, H, W] -> logits [N, num_classes]
  at::Tensor forward(const at::Tensor& images);
  const VitConfig& config() const { return config_; }

 private:
  VitConfig config_;
  torch::nn::Conv2d conv_proj_{nullptr};
  at::Tensor class_token_, pos_embedding_;
  std::vector<VitEncoderBlock> layers_;
  torch::nn::LayerNorm ln_{nullptr};
  VitLinear head_{nullptr};
};
TORCH_MODULE(Vit);

}  // namespace ddplab

#endif  // DDPLAB_CORE_MODEL_VIT_H_
