#include "core/model/vit.h"

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/gradient_targets/gradient_targets.h"
#include "core/torch_compat.h"

namespace ddplab {
namespace {

// Note [A block's casts together]
// Under bf16 autocast each linear layer casts its float32 weight and bias to bfloat16 in
// the forward, one kernel each, and autograd casts each bfloat16 gradient back to
// float32 in the backward, one kernel each again: 8 of each per encoder block. On a GPU
// the casts back are LibTorch's slowest copy (bfloat16 to float32 has no vectorized
// kernel; 1.5 ms a step for ViT-L/32's weights on an H200, against 0.8 for the casts
// forward), and eager, each launch is host time in a step bound by launches. So a
// block casts its eight tensors together: one autograd node whose forward casts them
// and whose backward casts their gradients back, each in one multi-tensor kernel on GPUs
// (compat::CopyEach; a copy per tensor on CPUs and LibTorch 1.13). The values are
// autocast's exactly (the same rounding, and the same gradients in float32); what
// changes is that the block's eight gradients reach their parameters together, once the
// block's first linear layer has its gradient, rather than one by one within the block.
// Each cast back is written where the parameter's gradient goes, where the engine names a
// place (Note [Gradients written where they go], core/gradient_targets).
// Measured: bench/NOTES.md, "A block's casts together".
struct CastTogether : public torch::autograd::Function<CastTogether> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, at::TensorList tensors,
                                                int64_t dtype) {
    ctx->saved_data["from"] = static_cast<int64_t>(tensors.front().scalar_type());
    // The tensors themselves (parameters: held, not saved for their values), to find
    // their gradients' targets in the backward.
    ctx->saved_data["inputs"] = c10::List<at::Tensor>(tensors.vec());
    return CastEach(tensors, static_cast<at::ScalarType>(dtype));
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto from = static_cast<at::ScalarType>(ctx->saved_data["from"].toInt());
    const c10::List<at::Tensor> inputs = ctx->saved_data["inputs"].toTensorList();
    std::vector<at::Tensor> defined, cast;
    torch::autograd::variable_list out(grads.size() + 1);  // and none for dtype
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;
      // Note [Gradients written where they go]
      at::Tensor into = gradient_targets::Take(inputs.get(i));
      if (!into.defined()) into = at::empty(grads[i].sizes(), grads[i].options().dtype(from));
      defined.push_back(grads[i]);
      cast.push_back(into);
      out[i] = into;
    }
    if (!cast.empty()) compat::CopyEach(cast, defined);
    return out;
  }
  static std::vector<at::Tensor> CastEach(at::TensorList tensors, at::ScalarType dtype) {
    std::vector<at::Tensor> cast;
    cast.reserve(tensors.size());
    for (const at::Tensor& t : tensors) cast.push_back(at::empty(t.sizes(), t.options().dtype(dtype)));
    if (!cast.empty()) compat::CopyEach(cast, tensors);
    return cast;
  }
};

// A linear layer on its float32 parameters, over rows [M, in], whose backward writes the
// weight's and the bias's gradients where the engine names a place for them (Note
// [Gradients written where they go]), else into tensors of their own as LibTorch's. Its
// products and sum are those of LibTorch's backward of at::linear (addmm's on the
// input's rows), in the same order, so the values are LibTorch's bit for bit
// (VitTest.ALinearLayersGradientsAreLibTorchs); the forward is at::linear itself.
struct LinearIntoTargets : public torch::autograd::Function<LinearIntoTargets> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& rows, const at::Tensor& weight,
                            const at::Tensor& bias) {
    ctx->save_for_backward({rows, weight});
    ctx->saved_data["bias"] = bias;  // its identity, to find its gradient's target
    return at::linear(rows, weight, bias);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor& rows = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor bias = ctx->saved_data["bias"].toTensor();
    const at::Tensor& g = grads[0];
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) dx = g.mm(weight);
    if (ctx->needs_input_grad(1)) {
      dw = gradient_targets::Take(weight);
      dw = dw.defined() ? at::mm_out(dw, g.t(), rows) : g.t().mm(rows);
    }
    if (ctx->needs_input_grad(2)) {
      db = gradient_targets::Take(bias);
      db = db.defined() ? at::sum_out(db, g, {0}) : g.sum(0);
    }
    return {dx, dw, db};
  }
};

// x W^T + b: through LinearIntoTargets where W and b are parameters being trained (not
// autocast's casts of them, which write their gradients themselves: Note [A block's
// casts together]) and x and W are contiguous, as LibTorch's linear does it there: the
// rows of x, then their view back (outside the function, so that the output is a plain
// view of it, as at::linear's).
at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!at::GradMode::is_enabled() || !weight.requires_grad() || !weight.is_leaf() || !bias.defined() ||
      !bias.is_leaf() || weight.dim() != 2 || x.dim() < 2 || !x.is_contiguous() || !weight.is_contiguous() ||
      compat::AutocastDtype(x.device().type())) {
    return at::linear(x, weight, bias);
  }
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return LinearIntoTargets::apply(x.reshape({-1, x.size(-1)}), weight, bias).view(sizes);
}

// `tensors` as the forward uses them: cast together to autocast's dtype where autocast is
// on for their device and they are of another floating dtype, as they are otherwise.
std::vector<at::Tensor> CastForAutocast(std::vector<at::Tensor> tensors) {
  const at::Tensor& first = tensors.front();
  std::optional<at::ScalarType> dtype = compat::AutocastDtype(first.device().type());
  if (!dtype || !first.is_floating_point() || first.scalar_type() == *dtype) return tensors;
  return CastTogether::apply(at::TensorList(tensors), static_cast<int64_t>(*dtype));
}

}  // namespace

VitLinearImpl::VitLinearImpl(int64_t in_features, int64_t out_features, bool initialize) {
  if (initialize) {
    // torch::nn::Linear's own draws, in its order: the same weights for the same seed.
    torch::nn::Linear drawn(in_features, out_features);
    weight = register_parameter("weight", drawn->weight);
    bias = register_parameter("bias", drawn->bias);
  } else {
    weight = register_parameter("weight", torch::empty({out_features, in_features}));
    bias = register_parameter("bias", torch::empty({out_features}));
  }
}

VitSelfAttentionImpl::VitSelfAttentionImpl(int64_t hidden_dim, int64_t num_heads, bool initialize)
    : num_heads_(num_heads) {
  // As torch.nn.MultiheadAttention: packed q/k/v projection (Xavier uniform, zero bias)
  // and an output projection with zero bias.
  in_proj_weight_ = register_parameter("in_proj_weight", torch::empty({3 * hidden_dim, hidden_dim}));
  in_proj_bias_ = register_parameter("in_proj_bias", initialize ? torch::zeros({3 * hidden_dim})
                                                                : torch::empty({3 * hidden_dim}));
  if (initialize) torch::nn::init::xavier_uniform_(in_proj_weight_);  // drawn before out_proj's
  out_proj_ = register_module("out_proj", VitLinear(hidden_dim, hidden_dim, initialize));
  if (!initialize) return;
  torch::NoGradGuard no_grad;
  out_proj_->bias.zero_();
}

at::Tensor VitSelfAttentionImpl::forward(const at::Tensor& x) {
  return forward(x, in_proj_weight_, in_proj_bias_, out_proj_->weight, out_proj_->bias);
}

at::Tensor VitSelfAttentionImpl::forward(const at::Tensor& x, const at::Tensor& in_weight, const at::Tensor& in_bias,
                                         const at::Tensor& out_weight, const at::Tensor& out_bias) {
  const int64_t n = x.size(0), s = x.size(1), h = x.size(2);
  // Note [q, k and v unbound]
  // The packed projection [N, S, 3h] is viewed as [N, S, 3, heads, head_dim] and
  // unbound along its 3, each of q, k and v then [N, heads, S, head_dim] as attention
  // takes them: the same views, strides and values as indexing the permuted projection
  // (qkv[0], qkv[1], qkv[2]), but a different backward. Indexing's backward is one
  // select_backward each: a zero-filled tensor of the projection's full size, the
  // gradient copied into its slice, and the three summed, then a copy back to the
  // projection's layout (9 kernels a block on a GPU). unbind's is one stack, written
  // straight in the projection's layout. Measured: bench/NOTES.md, "q, k and v unbound".
  std::vector<at::Tensor> qkv = Linear(x, in_weight, in_bias)
                                    .view({n, s, 3, num_heads_, h / num_heads_})
                                    .unbind(2);
  at::Tensor out = compat::ScaledDotProductAttention(qkv[0].transpose(1, 2), qkv[1].transpose(1, 2),
                                                     qkv[2].transpose(1, 2));
  return Linear(out.transpose(1, 2).reshape({n, s, h}), out_weight, out_bias);
}

std::vector<at::Tensor> VitSelfAttentionImpl::projections() const {
  return {in_proj_weight_, in_proj_bias_, out_proj_->weight, out_proj_->bias};
}

VitEncoderBlockImpl::VitEncoderBlockImpl(int64_t hidden_dim, int64_t num_heads, int64_t mlp_dim, bool initialize) {
  ln_1_ = register_module(
      "ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden_dim}).eps(1e-6)));
  self_attention_ = register_module("self_attention", VitSelfAttention(hidden_dim, num_heads, initialize));
  ln_2_ = register_module(
      "ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden_dim}).eps(1e-6)));
  // torchvision's MLPBlock is a Sequential: 0 Linear, 1 GELU, 2 Dropout, 3 Linear, 4 Dropout.
  auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
  mlp_in_ = mlp->register_module("0", VitLinear(hidden_dim, mlp_dim, initialize));
  mlp_out_ = mlp->register_module("3", VitLinear(mlp_dim, hidden_dim, initialize));
  if (!initialize) return;
  torch::NoGradGuard no_grad;
  for (VitLinear& linear : {std::ref(mlp_in_), std::ref(mlp_out_)}) {
    torch::nn::init::xavier_uniform_(linear->weight);
    linear->bias.normal_(0.0, 1e-6);
  }
}

at::Tensor VitEncoderBlockImpl::forward(const at::Tensor& x) {
  // Note [A block's casts together]
  std::vector<at::Tensor> w = self_attention_->projections();
  for (const VitLinear& linear : {mlp_in_, mlp_out_}) w.insert(w.end(), {linear->weight, linear->bias});
  w = CastForAutocast(std::move(w));
  at::Tensor y = x + self_attention_->forward(ln_1_->forward(x), w[0], w[1], w[2], w[3]);
  return y + Linear(at::gelu(Linear(ln_2_->forward(y), w[4], w[5])), w[6], w[7]);
}

VitImpl::VitImpl(const VitConfig& config, bool initialize) : config_(config) {
  const int64_t h = config.hidden_dim;
  conv_proj_ = register_module(
      "conv_proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, h, config.patch_size)
                                         .stride(config.patch_size)));
  class_token_ = register_parameter("class_token", torch::zeros({1, 1, h}));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  at::Tensor pos_embedding = torch::empty({1, config.seq_length(), h});
  if (initialize) pos_embedding.normal_(0.0, 0.02);
  pos_embedding_ = encoder->register_parameter("pos_embedding", pos_embedding);
  auto layers = encoder->register_module("layers", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < config.num_layers; ++i) {
    layers_.push_back(layers->register_module(absl::StrCat("encoder_layer_", i),
                                              VitEncoderBlock(h, config.num_heads, config.mlp_dim, initialize)));
  }
  ln_ = encoder->register_module("ln",
                                 torch::nn::LayerNorm(torch::nn::LayerNormOptions({h}).eps(1e-6)));
  auto heads = register_module("heads", std::make_shared<torch::nn::Module>());
  head_ = heads->register_module("head", VitLinear(h, config.num_classes, initialize));
  if (!initialize) return;

  torch::NoGradGuard no_grad;
  // torchvision: truncated normal with std sqrt(1 / fan_in) (its +-2 bounds are far
  // outside that), zero bias; a zero-initialized head.
  int64_t fan_in = 3 * config.patch_size * config.patch_size;
  conv_proj_->weight.normal_(0.0, std::sqrt(1.0 / static_cast<double>(fan_in)));
  conv_proj_->bias.zero_();
  head_->weight.zero_();
  head_->bias.zero_();
}

at::Tensor VitImpl::forward(const at::Tensor& images) {
  const int64_t n = images.size(0);
  // [N, 3, H, W] -> [N, h, H/p, W/p] -> [N, patches, h]
  at::Tensor x = conv_proj_->forward(images).flatten(2).transpose(1, 2);
  x = at::cat({class_token_.expand({n, -1, -1}), x}, 1) + pos_embedding_;
  for (VitEncoderBlock& layer : layers_) x = layer->forward(x);
  x = ln_->forward(x);
  return head_->forward(x.select(1, 0));
}

}  // namespace ddplab
