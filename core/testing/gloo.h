// For tests that need c10d's Gloo process group: LibTorch builds without Gloo headers (the
// CUDA wheels) skip them instead of failing.
//
//   TEST(X, Y) {
//     REQUIRE_GLOO();
//     ...
//   }
#ifndef DDPLAB_CORE_TESTING_GLOO_H_
#define DDPLAB_CORE_TESTING_GLOO_H_

#include "gtest/gtest.h"

#if defined(USE_C10D_GLOO)
#define REQUIRE_GLOO()
#else
#define REQUIRE_GLOO() GTEST_SKIP() << "this build's LibTorch has no Gloo"
#endif

#endif  // DDPLAB_CORE_TESTING_GLOO_H_
