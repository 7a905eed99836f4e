#include "core/gradient_targets/gradient_targets.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/types.h>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

// A target is given once, as a new alias of the memory it names.
TEST(GradientTargetsTest, TakenOnceAsANewAlias) {
  at::Tensor param = torch::zeros({2, 3}, torch::requires_grad());
  at::Tensor bucket = torch::zeros({8});
  at::Tensor view = bucket.narrow(0, 2, 6).view({2, 3});
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

// Not to a parameter that already has a gradient (a later micro-step accumulates), and not
// where the target could not be the parameter's gradient as it is.
TEST(GradientTargetsTest, NoneWhereTheGradientCouldNotGoThere) {
  at::Tensor param = torch::zeros({2, 3}, torch::requires_grad());
  param.mutable_grad() = torch::ones({2, 3});
  gradient_targets::Set(param, torch::zeros({2, 3}));
  EXPECT_FALSE(gradient_targets::Take(param).defined());
  EXPECT_FALSE(gradient_targets::Has(param));  // forgotten all the same
  param.mutable_grad() = at::Tensor();
  for (const at::Tensor& wrong : {torch::zeros({3, 2}), torch::zeros({2, 3}, torch::kDouble),
                                  torch::zeros({3, 2}).t()}) {
    gradient_targets::Set(param, wrong);
    EXPECT_FALSE(gradient_targets::Take(param).defined()) << wrong.sizes() << " " << wrong.scalar_type();
  }
}

// An undefined target clears the parameter's; other parameters keep theirs.
TEST(GradientTargetsTest, ClearedByAnUndefinedTarget) {
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
TEST(GradientTargetsTest, AutogradKeepsTheAliasAsTheGradient) {
  at::Tensor param = torch::randn({5}, torch::requires_grad());
  at::Tensor bucket = torch::full({7}, -1.0);
  gradient_targets::Set(param, bucket.narrow(0, 1, 5));
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
  EXPECT_TRUE(at::equal(bucket, torch::tensor({-1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 2.0f, -1.0f})));
  // A second backward accumulates into that gradient, as autograd does.
  gradient_targets::Set(param, bucket.narrow(0, 1, 5));
  Doubled::apply(param)[0].sum().backward();
  EXPECT_TRUE(at::equal(bucket, torch::tensor({-1.0f, 4.0f, 4.0f, 4.0f, 4.0f, 4.0f, -1.0f})));
}

}  // namespace
}  // namespace ddplab
