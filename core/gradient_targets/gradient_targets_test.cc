#include "core/gradient_targets/gradient_targets.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/types.h>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

// Take is asked from a backward, where autograd records nothing.
class GradientTargetsTest : public ::testing::Test {
 protected:
  torch::NoGradGuard no_grad_;
};

// A target is given once, as a new alias of the memory it names.
TEST_F(GradientTargetsTest, TakenOnceAsANewAlias) {
  at::Tensor param = torch::zeros({2, 3}, torch::requires_grad());
  at::Tensor bucket = torch::zeros({24});
  at::Tensor view = bucket.narrow(0, 16, 6).view({2, 3});  // 64 bytes in, as a fresh tensor
  gradient_targets::Set(param, view);
  EXPECT_TRUE(gradient_targets::Has(param));
  at::Tensor into = gradient_targets::Take(param);
  ASSERT_TRUE(into.defined());
  EXPECT_TRUE(into.is_alias_of(bucket));
  EXPECT_EQ(into.data_ptr(), view.data_ptr());
  EXPECT_NE(into.unsafeGetTensorImpl(), view.unsafeGetTensorImpl());
  EXPECT_EQ(into.use_count(), 1);
  EXPECT_FALSE(gradient_targets::Has(param));
  EXPECT_FALSE(gradient_targets::Take(param).defined());
}

// Not to a parameter that already has a gradient (a later micro-step accumulates), not
// where the target could not be the parameter's gradient as it is or is not aligned as a
// fresh tensor, and not while autograd records.
TEST_F(GradientTargetsTest, NoneWhereTheGradientCouldNotGoThere) {
  at::Tensor param = torch::zeros({2, 3}, torch::requires_grad());
  param.mutable_grad() = torch::ones({2, 3});
  gradient_targets::Set(param, torch::zeros({2, 3}));
  EXPECT_FALSE(gradient_targets::Take(param).defined());
  EXPECT_FALSE(gradient_targets::Has(param));  // forgotten all the same
  param.mutable_grad() = at::Tensor();
  for (const at::Tensor& wrong : {torch::zeros({3, 2}), torch::zeros({2, 3}, torch::kDouble),
                                  torch::zeros({3, 2}).t(), torch::zeros({7}).narrow(0, 1, 6).view({2, 3})}) {
    gradient_targets::Set(param, wrong);
    EXPECT_FALSE(gradient_targets::Take(param).defined()) << wrong.sizes() << " " << wrong.scalar_type();
  }
  gradient_targets::Set(param, torch::zeros({2, 3}));
  {
    torch::AutoGradMode recording(true);
    EXPECT_FALSE(gradient_targets::Take(param).defined());
  }
}

// An undefined target clears the parameter's; other parameters keep theirs.
TEST_F(GradientTargetsTest, ClearedByAnUndefinedTarget) {
  at::Tensor a = torch::zeros({4}, torch::requires_grad());
  at::Tensor b = torch::zeros({4}, torch::requires_grad());
  gradient_targets::Set(a, torch::zeros({4}));
  gradient_targets::Set(b, torch::zeros({4}));
  gradient_targets::Set(a, at::Tensor());
  EXPECT_FALSE(gradient_targets::Has(a));
  EXPECT_TRUE(gradient_targets::Has(b));
  gradient_targets::Set(b, at::Tensor());
}

// What the note relies on: autograd makes a gradient that nothing else holds the
// parameter's gradient as it is, so an operation that returns the target's alias leaves
// the gradient in the target's memory.
TEST(GradientTargetsAutogradTest, KeepsTheAliasAsTheGradient) {
  at::Tensor param = torch::randn({5}, torch::requires_grad());
  at::Tensor bucket = torch::full({22}, -1.0);
  gradient_targets::Set(param, bucket.narrow(0, 16, 5));
  struct Doubled : public torch::autograd::Function<Doubled> {
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, at::Tensor x) {
      ctx->saved_data["x"] = x;
      return {x * 2};
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
      at::Tensor into = gradient_targets::Take(ctx->saved_data["x"].toTensor());
      if (!into.defined()) into = at::empty_like(grads[0]);
      into.copy_(grads[0] * 2);
      return {into};
    }
  };
  Doubled::apply(param)[0].sum().backward();
  ASSERT_TRUE(param.grad().defined());
  EXPECT_TRUE(param.grad().is_alias_of(bucket));
  EXPECT_TRUE(at::equal(bucket.narrow(0, 15, 7), torch::tensor({-1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 2.0f, -1.0f})));
  // A second backward accumulates into that gradient, as autograd does.
  gradient_targets::Set(param, bucket.narrow(0, 16, 5));
  Doubled::apply(param)[0].sum().backward();
  EXPECT_TRUE(at::equal(bucket.narrow(0, 15, 7), torch::tensor({-1.0f, 4.0f, 4.0f, 4.0f, 4.0f, 4.0f, -1.0f})));
}

}  // namespace
}  // namespace ddplab
