#include "core/model/initial_weights.h"

#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

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
