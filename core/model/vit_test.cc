#include "core/model/vit.h"

#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <torch/cuda.h>

#include "core/gradient_targets/gradient_targets.h"
#include "core/model/initial_weights.h"
#include "core/torch_compat.h"
#include "gtest/gtest.h"

namespace ddplab {
namespace {

// (The weights' values do not matter to a count: left uninitialized, the largest models
// cost their allocation alone.)
int64_t CountParameters(const VitConfig& config) {
  Vit model(config, /*initialize=*/false);
  int64_t n = 0;
  for (const at::Tensor& p : model->parameters()) n += p.numel();
  return n;
}

VitConfig Preset(v1::Model::Preset preset) {
  v1::Model model;
  model.set_preset(preset);
  return VitConfigForModel(model, 224).value();
}

// torchvision.models.vit_*: sum(p.numel() for p in model.parameters()).
TEST(VitTest, ParameterCountsEqualTorchvisions) {
  EXPECT_EQ(CountParameters(Preset(v1::Model::VIT_L_32)), 306'535'400);
  EXPECT_EQ(CountParameters(Preset(v1::Model::VIT_B_32)), 88'224'232);
  EXPECT_EQ(CountParameters(Preset(v1::Model::VIT_B_16)), 86'567'656);
  EXPECT_EQ(CountParameters(Preset(v1::Model::VIT_L_16)), 304'326'632);
}

// The count from the sizes alone (for checks before anything is built) is the model's.
TEST(VitTest, ParameterCountFromTheSizesIsTheModels) {
  for (v1::Model::Preset preset : {v1::Model::VIT_L_32, v1::Model::VIT_B_16, v1::Model::VIT_TINY_TEST}) {
    v1::Model model;
    model.set_preset(preset);
    VitConfig config = VitConfigForModel(model, 32 * 7).value();
    EXPECT_EQ(VitParameterCount(config), CountParameters(config)) << v1::Model::Preset_Name(preset);
  }
}

TEST(VitTest, ParameterNamesMatchTorchvisionsStateDict) {
  v1::Model model;
  model.set_preset(v1::Model::VIT_TINY_TEST);
  Vit vit(VitConfigForModel(model, 32).value());
  auto params = vit->named_parameters();
  for (const char* name :
       {"conv_proj.weight", "conv_proj.bias", "class_token", "encoder.pos_embedding",
        "encoder.layers.encoder_layer_0.ln_1.weight",
        "encoder.layers.encoder_layer_0.self_attention.in_proj_weight",
        "encoder.layers.encoder_layer_0.self_attention.in_proj_bias",
        "encoder.layers.encoder_layer_0.self_attention.out_proj.weight",
        "encoder.layers.encoder_layer_1.mlp.0.weight", "encoder.layers.encoder_layer_1.mlp.3.bias",
        "encoder.ln.weight", "heads.head.weight", "heads.head.bias"}) {
    EXPECT_NE(params.find(name), nullptr) << name;
  }
  // 6 outside the encoder blocks, 12 per block, 2 for the encoder's final LayerNorm.
  EXPECT_EQ(params.size(), 6u + 2 * 12 + 2);
}

TEST(VitTest, ForwardGivesLogitsPerSample) {
  v1::Model model;
  model.set_preset(v1::Model::VIT_TINY_TEST);
  Vit vit(VitConfigForModel(model, 32).value());
  at::Tensor logits = vit->forward(torch::randn({3, 3, 32, 32}));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 10}));
}

// Attention through the fused op equals the textbook formula.
TEST(VitTest, SelfAttentionMatchesTheFormula) {
  torch::manual_seed(1);
  VitSelfAttention attention(8, 2);
  for (auto& p : attention->parameters()) p.data().normal_();
  at::Tensor x = torch::randn({2, 5, 8});
  at::Tensor got = attention->forward(x);
  auto named = attention->named_parameters();
  at::Tensor qkv = at::linear(x, named["in_proj_weight"], named["in_proj_bias"]);
  std::vector<at::Tensor> parts = qkv.chunk(3, -1);
  auto heads = [](const at::Tensor& t) { return t.view({2, 5, 2, 4}).transpose(1, 2); };
  at::Tensor scores = at::matmul(heads(parts[0]), heads(parts[1]).transpose(-2, -1)) / 2.0;
  at::Tensor out = at::matmul(at::softmax(scores, -1), heads(parts[2])).transpose(1, 2).reshape({2, 5, 8});
  at::Tensor want = at::linear(out, named["out_proj.weight"], named["out_proj.bias"]);
  EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-6));
}

// A block's output and every parameter's gradient against the block written out with
// its float32 parameters and at::linear, under bf16 autocast or not, bit for bit. The
// block written out also indexes q, k and v from the permuted projection, so the
// gradients are those of Note [q, k and v unbound]'s indexing too.
void ExpectTheBlockWrittenOut(bool autocast) {
  torch::manual_seed(2);
  VitEncoderBlock block(16, 2, 32);
  for (auto& p : block->parameters()) p.data().normal_(0.0, 0.5);
  at::Tensor x = torch::randn({3, 5, 16});
  auto named = block->named_parameters();
  auto reference = [&] {
    auto ln = [&](const at::Tensor& t, const std::string& name) {
      return at::layer_norm(t, {16}, named[name + ".weight"], named[name + ".bias"], 1e-6);
    };
    at::Tensor h = ln(x, "ln_1");
    at::Tensor qkv = at::linear(h, named["self_attention.in_proj_weight"], named["self_attention.in_proj_bias"])
                         .view({3, 5, 3, 2, 8})
                         .permute({2, 0, 3, 1, 4});
    at::Tensor a = compat::ScaledDotProductAttention(qkv[0], qkv[1], qkv[2]).transpose(1, 2).reshape({3, 5, 16});
    at::Tensor y = x + at::linear(a, named["self_attention.out_proj.weight"], named["self_attention.out_proj.bias"]);
    at::Tensor m = at::gelu(at::linear(ln(y, "ln_2"), named["mlp.0.weight"], named["mlp.0.bias"]));
    return y + at::linear(m, named["mlp.3.weight"], named["mlp.3.bias"]);
  };
  std::vector<std::vector<at::Tensor>> grads;
  std::vector<at::Tensor> outs;
  for (bool ours : {true, false}) {
    for (auto& p : block->parameters()) p.mutable_grad() = at::Tensor();
    at::Tensor out;
    {
      std::optional<compat::AutocastScope> scope;
      if (autocast) scope.emplace(at::kCPU, at::kBFloat16);
      out = ours ? block->forward(x) : reference();
    }
    out.pow(2).sum().backward();
    outs.push_back(out);
    grads.emplace_back();
    for (auto& p : block->parameters()) grads.back().push_back(p.grad());
  }
  EXPECT_TRUE(at::equal(outs[0], outs[1]));
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) {
    ASSERT_TRUE(grads[0][i].defined()) << i;
    EXPECT_EQ(grads[0][i].scalar_type(), at::kFloat) << i;
    EXPECT_TRUE(at::equal(grads[0][i], grads[1][i])) << i;
  }
}

// Note [A block's casts together]: under bf16 autocast those of autocast's own casts, one
// per linear layer's weight and bias.
TEST(VitTest, ABlocksCastsTogetherAreAutocastsExactly) { ExpectTheBlockWrittenOut(/*autocast=*/true); }

// In float32 the linear layers' backward is LinearIntoTargets' (Note [Gradients written
// where they go]): LibTorch's own values.
TEST(VitTest, ALinearLayersGradientsAreLibTorchs) { ExpectTheBlockWrittenOut(/*autocast=*/false); }

// A linear layer's output is at::linear's: a plain tensor in-place operations may change
// (LinearIntoTargets's own output, a view made inside a custom function, would refuse).
TEST(VitTest, ALinearLayersOutputTakesInPlaceOperations) {
  torch::manual_seed(4);
  VitSelfAttention attention(16, 2);
  at::Tensor x = torch::randn({3, 5, 16});
  at::Tensor out = attention->forward(x);
  out.mul_(2);
  out.sum().backward();
  for (const at::Tensor& p : attention->parameters()) EXPECT_TRUE(p.grad().defined());
}

// Note [Gradients written where they go]: a block writes its linear layers' gradients into
// their targets (under autocast its casts back, in float32 its products), the same values
// as without, and the parameters' gradients are then those targets' memory. A parameter
// that already has a gradient accumulates into it as autograd does, its target untouched.
// On the CPU, and on a GPU where there is one (autograd's device thread, CUDA's kernels).
void WritesGradientsWhereTheyGo(at::Device device, bool autocast) {
  torch::manual_seed(3);
  VitEncoderBlock block(16, 2, 32);
  block->to(device);
  at::Tensor x = torch::randn({3, 5, 16}).to(device);
  std::vector<at::Tensor> params = block->parameters();
  auto backward = [&] {
    std::optional<compat::AutocastScope> scope;
    if (autocast) scope.emplace(device.type(), at::kBFloat16);
    at::Tensor out = block->forward(x);
    out.pow(2).sum().backward();
  };
  backward();
  std::vector<at::Tensor> want;
  for (const at::Tensor& p : params) want.push_back(p.grad().clone());
  // Each view where a fresh tensor would start (64 floats: 256 bytes), but for one linear
  // layer's weight, a float further on: not aligned so, it is not written there.
  const size_t misaligned = 2;  // self_attention.in_proj_weight, after ln_1's two
  auto aligned = [](int64_t n) { return (n + 63) / 64 * 64; };
  int64_t numel = 0;
  for (const at::Tensor& p : params) numel += aligned(p.numel()) + 64;
  at::Tensor bucket = torch::full({numel}, 7.0, torch::TensorOptions().device(device));
  std::vector<at::Tensor> views(params.size());
  int64_t offset = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t start = offset + (i == misaligned ? 1 : 0);
    views[i] = bucket.narrow(0, start, params[i].numel()).view(params[i].sizes());
    offset += aligned(params[i].numel()) + 64;
    params[i].mutable_grad() = at::Tensor();
    gradient_targets::Set(params[i], views[i]);
  }
  backward();
  int written = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(at::equal(params[i].grad(), want[i])) << i;
    if (params[i].grad().is_alias_of(bucket)) {
      ++written;
      EXPECT_TRUE(at::equal(views[i], want[i])) << i;
    } else {
      EXPECT_TRUE(at::equal(views[i], torch::full_like(views[i], 7.0))) << i;  // the layer norms'
    }
    gradient_targets::Set(params[i], at::Tensor());
  }
  EXPECT_EQ(written, 7);  // the four linear layers' weights and biases, but the misaligned one
  EXPECT_FALSE(params[misaligned].grad().is_alias_of(bucket));
  EXPECT_EQ(params[misaligned].sizes(), at::IntArrayRef({48, 16}));
  // The next backward accumulates, its targets left alone.
  std::vector<at::Tensor> unused;
  for (const at::Tensor& p : params) {
    unused.push_back(torch::zeros_like(p));
    gradient_targets::Set(p, unused.back());
  }
  backward();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(at::allclose(params[i].grad(), want[i] * 2)) << i;
    EXPECT_TRUE(at::equal(unused[i], torch::zeros_like(unused[i]))) << i;
    gradient_targets::Set(params[i], at::Tensor());
  }
}

TEST(VitTest, ABlockWritesGradientsWhereTheyGo) {
  for (bool autocast : {true, false}) {
    SCOPED_TRACE(autocast ? "bf16 autocast" : "float32");
    WritesGradientsWhereTheyGo(at::kCPU, autocast);
  }
}

TEST(VitTest, ABlockWritesGradientsWhereTheyGoOnAGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  for (bool autocast : {true, false}) {
    SCOPED_TRACE(autocast ? "bf16 autocast" : "float32");
    WritesGradientsWhereTheyGo(at::Device(at::kCUDA, 0), autocast);
  }
}

// torchvision lists vit_l_32 at 15.38 GFLOPS, vit_b_16 at 17.56, vit_b_32 at 4.41: their
// figures count multiply-adds. A training step is 3 forward passes of 2 FLOPs per MAC.
TEST(VitTest, FlopsMatchTorchvisionsFigures) {
  EXPECT_NEAR(VitTrainingFlopsPerSample(Preset(v1::Model::VIT_L_32)) / 6e9, 15.38, 0.02);
  EXPECT_NEAR(VitTrainingFlopsPerSample(Preset(v1::Model::VIT_B_16)) / 6e9, 17.56, 0.02);
  EXPECT_NEAR(VitTrainingFlopsPerSample(Preset(v1::Model::VIT_B_32)) / 6e9, 4.41, 0.02);
}

// Initial weights kept (initial_weights.h): one translation unit for the package's tests,
// which all parse LibTorch's frontend.

VitConfig Small() {
  VitConfig c;
  c.image_size = 32;
  c.patch_size = 8;
  c.hidden_dim = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.mlp_dim = 64;
  c.num_classes = 10;
  return c;
}

// What a fresh process does: seed, draw, and the next draw after it.
struct Drawn {
  std::vector<at::Tensor> parameters;
  at::Tensor next;
};

Drawn Fresh(const VitConfig& c, uint64_t seed) {
  torch::manual_seed(seed);
  Vit model(c);
  return {model->parameters(), torch::rand({8})};
}

Drawn Made(const VitConfig& c, uint64_t seed) {
  Vit model = MakeVit(c, seed, at::Device(at::kCPU));
  return {model->parameters(), torch::rand({8})};
}

void ExpectSame(const Drawn& a, const Drawn& b) {
  ASSERT_EQ(a.parameters.size(), b.parameters.size());
  for (size_t i = 0; i < a.parameters.size(); ++i) {
    EXPECT_TRUE(at::equal(a.parameters[i], b.parameters[i])) << "parameter " << i;
    EXPECT_TRUE(a.parameters[i].requires_grad());
    EXPECT_TRUE(b.parameters[i].requires_grad()) << "parameter " << i;
    EXPECT_TRUE(b.parameters[i].is_leaf()) << "parameter " << i;
  }
  EXPECT_TRUE(at::equal(a.next, b.next)) << "the host generator after the weights";
}

TEST(InitialWeightsTest, KeptWeightsAreTheSeedsAndTheGeneratorGoesOnAsAfterDrawing) {
  ForgetInitialWeights();
  const Drawn fresh = Fresh(Small(), 7);
  const Drawn first = Made(Small(), 7);   // draws and keeps
  const Drawn second = Made(Small(), 7);  // copies the kept weights
  ExpectSame(fresh, first);
  ExpectSame(fresh, second);
  // The copy is the model's own: training one model leaves the next one's weights alone.
  {
    Vit model = MakeVit(Small(), 7, at::Device(at::kCPU));
    torch::NoGradGuard no_grad;
    for (at::Tensor& p : model->parameters()) p.add_(1.0);
  }
  ExpectSame(fresh, Made(Small(), 7));
}

TEST(InitialWeightsTest, AnotherSeedOrOtherSizesAreDrawnAgain) {
  ForgetInitialWeights();
  Made(Small(), 7);
  ExpectSame(Fresh(Small(), 8), Made(Small(), 8));
  VitConfig wider = Small();
  wider.mlp_dim = 96;
  ExpectSame(Fresh(wider, 8), Made(wider, 8));
  ExpectSame(Fresh(Small(), 7), Made(Small(), 7));
}

TEST(InitialWeightsTest, UndrawnModelHasTheSameParametersByName) {
  torch::manual_seed(1);
  Vit drawn(Small());
  Vit undrawn(Small(), /*initialize=*/false);
  const auto a = drawn->named_parameters();
  const auto b = undrawn->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].key(), b[i].key());
    EXPECT_EQ(a[i].value().sizes(), b[i].value().sizes()) << a[i].key();
  }
}

}  // namespace
}  // namespace ddplab
