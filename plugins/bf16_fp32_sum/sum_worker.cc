// One rank of bf16_fp32_sum_test's checks of the hook itself over several Gloo processes
// (bf16_fp32_sum_test.cc), started by the launcher as one of N ranks, checking at each
// world of --worlds in turn (plugins/testing/each_world.h).
//
// Every rank's gradients come from a seed and the rank, so that each rank makes all of
// them, and the references, without communicating. Their values are of mixed magnitude
// (normal values times 2^k, k from -12 to 12), where rounding a partial sum loses the
// smaller terms. Per bucket (1, 3, 1000 and 262147 elements: fewer than the ranks, with
// padding, read from the bucket or from gradients handed over where they lie), every rank
// checks that the hook's result
//   - equals, bit for bit, the float32 sum in rank order of the gradients rounded to
//     bfloat16, divided by the ranks and rounded once to bfloat16, computed here the same
//     way; and
//   - is within one bfloat16 rounding of their exact mean (in double): 2^-8 relative per
//     element, besides float32's own rounding of the sum.
// Then, on the largest bucket, it measures the relative (L2) error against the exact mean
// of the float32 gradients of: the hook; plugins/bf16's all-reduce (its codec over this
// Gloo); and an average in bfloat16 that rounds each hop's partial sum, computed here (as
// NCCL's ring does, and Gloo's bfloat16 sum in LibTorch 2.x: each rank's value scaled by
// 1/ranks, then added one rank after another, rounding to bfloat16 each time). Rank 0
// writes them to --out.<world>, one "name error" a line: hook, bf16, rounded_hops; and the same
// against the exact mean of the gradients rounded to bfloat16 (the reduction's own error,
// without the gradients' rounding that all three share): <name>_reduction.
//
// Exit codes: 0 pass, 13 setup error, 20 the result is not the reference's, 21 not within
// one rounding of the exact mean, 22 the hook failed, 23 --out.<world> could not be written.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ATen.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "core/engine/allreduce_hook.h"
#include "core/config/experiment.h"
#include "core/plugin/plugin_host.h"
#include "plugins/testing/each_world.h"

ABSL_FLAG(uint64_t, seed, 7, "seed of every rank's gradients");

namespace ddplab {
namespace {

const std::vector<int64_t> kBucketSizes{1, 3, 1000, 262147};

// Rank `rank`'s gradient for a bucket of `numel` elements.
at::Tensor Gradient(int rank, int64_t numel) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(absl::GetFlag(FLAGS_seed) * 1000003 +
                                                               static_cast<uint64_t>(rank) * 7919 + numel);
  at::Tensor normal = at::empty({numel}).normal_(0.0, 1.0, gen);
  at::Tensor exponent = at::empty({numel}).random_(-12, 13, gen);
  return normal * at::exp2(exponent);
}

at::Tensor Bf16(const at::Tensor& t) { return t.to(at::kBFloat16).to(at::kFloat); }

// What the hook computes, the same way: the float32 sum in rank order of the bfloat16
// gradients, over the ranks, rounded once.
at::Tensor SameWay(const std::vector<at::Tensor>& gradients) {
  at::Tensor sum = Bf16(gradients[0]);
  for (size_t r = 1; r < gradients.size(); ++r) sum.add_(gradients[r].to(at::kBFloat16));
  return Bf16(sum.div_(static_cast<int64_t>(gradients.size())));
}

// The average in bfloat16 with each hop's partial sum rounded (see the top).
at::Tensor RoundedHops(const std::vector<at::Tensor>& gradients) {
  const double world = static_cast<double>(gradients.size());
  at::Tensor partial = Bf16(Bf16(gradients[0]) / world);
  for (size_t r = 1; r < gradients.size(); ++r) partial = Bf16(partial + Bf16(Bf16(gradients[r]) / world));
  return partial;
}

at::Tensor ExactMean(const std::vector<at::Tensor>& gradients, bool rounded) {
  at::Tensor sum = at::zeros(gradients[0].sizes(), at::kDouble);
  for (const at::Tensor& g : gradients) sum.add_((rounded ? Bf16(g) : g).to(at::kDouble));
  return sum / static_cast<double>(gradients.size());
}

double RelativeError(const at::Tensor& got, const at::Tensor& exact) {
  return ((got.to(at::kDouble) - exact).norm() / exact.norm()).item<double>();
}

// The hook's bucket for `gradient`: held in the bucket, or (`hand_over`) given as two
// gradients where they lie beside a bucket of NaN that the hook must write whole.
GradBucket MakeBucket(const at::Tensor& gradient, bool hand_over) {
  GradBucket bucket;
  bucket.buffer = gradient.clone();
  const int64_t numel = gradient.numel(), first = numel / 2;
  bucket.offsets = {0, first};
  bucket.sizes = {{first}, {numel - first}};
  bucket.parameters = {0, 1};
  bucket.is_last = true;
  if (hand_over) {
    for (size_t k = 0; k < 2; ++k) {
      bucket.gradients.push_back(gradient.narrow(0, bucket.offsets[k], bucket.sizes[k][0]).clone());
    }
    bucket.buffer.fill_(std::nan(""));
  }
  return bucket;
}

// The result of bucket `index` against both references: 0 if it held, else the exit code.
int Check(const at::Tensor& got, const std::vector<at::Tensor>& gradients, int rank, size_t index) {
  if (!at::equal(got, SameWay(gradients))) {
    std::cerr << "rank " << rank << " bucket " << index << ": not the float32 sum rounded once\n";
    return 20;
  }
  at::Tensor magnitude = at::zeros(got.sizes(), at::kDouble);
  for (const at::Tensor& g : gradients) magnitude.add_(Bf16(g).abs().to(at::kDouble));
  const at::Tensor mean = ExactMean(gradients, /*rounded=*/true);
  const at::Tensor allowed = mean.abs() * std::ldexp(1.0, -8) + magnitude * std::ldexp(1.0, -22);
  if (!at::all((got.to(at::kDouble) - mean).abs() <= allowed).item<bool>()) {
    std::cerr << "rank " << rank << " bucket " << index << ": more than one rounding from the exact mean\n";
    return 21;
  }
  return 0;
}

absl::StatusOr<PluginSet> Configure(PluginHost& host, const std::string& plugins) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(
      absl::StrCat("name: \"w\" model { preset: VIT_TINY_TEST } data { batch_size: 4 } steps { measured: 1 } "
                   "optimizer { sgd { learning_rate: 0.1 } } distributed { device: CPU gpus_per_node: 2 } ",
                   plugins),
      "plugins", host.schema());
  if (!suite.ok()) return suite.status();
  return host.Configure(suite->experiment(0));
}

// Runs the hook on every bucket (all started before any is waited for), checks each
// result; the largest's in `last`.
int ReduceAll(CommHook& hook, int rank, int world, at::Tensor& last) {
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> futures;
  for (size_t i = 0; i < kBucketSizes.size(); ++i) {
    GradBucket bucket = MakeBucket(Gradient(rank, kBucketSizes[i]), /*hand_over=*/i % 2 == 1);
    bucket.index = i;
    futures.push_back(hook.Run(bucket));
  }
  for (size_t i = 0; i < futures.size(); ++i) {
    futures[i]->wait();
    if (futures[i]->hasError()) {
      std::cerr << "rank " << rank << " bucket " << i << ": " << futures[i]->tryRetrieveErrorMessage() << "\n";
      return 22;
    }
    std::vector<at::Tensor> gradients;
    for (int r = 0; r < world; ++r) gradients.push_back(Gradient(r, kBucketSizes[i]));
    last = futures[i]->value().toTensor();
    if (int failed = Check(last, gradients, rank, i)) return failed;
  }
  return 0;
}

// One world's checks (testing::RunAtEachWorld); rank 0 writes the errors to `out`.
int CheckAt(PluginHost& host, compat::CollectiveGroup& group, int rank, int world, const std::string& out) {
  absl::StatusOr<PluginSet> ours = Configure(host, "plugin { bf16_fp32_sum {} }");
  absl::StatusOr<PluginSet> bf16 = Configure(host, "plugin { bf16 {} }");
  if (!ours.ok() || !bf16.ok()) {
    std::cerr << "rank " << rank << ": " << ours.status() << " " << bf16.status() << "\n";
    return 13;
  }
  // Each plugin's hook chain, as the engine makes it: core's all-reduce, wrapped.
  const CommContext context{&group, rank, world, /*nccl=*/false, {}, nullptr, {}, {}};
  auto chain = [&](const PluginSet& set) { return MakeHookChain(set.engine_parts().hooks, context); };
  at::Tensor hook_result;
  {
    std::unique_ptr<CommHook> hook = chain(*ours);
    if (int failed = ReduceAll(*hook, rank, world, hook_result)) return failed;
  }  // its thread is done with the group
  const int64_t numel = kBucketSizes.back();
  GradBucket bucket = MakeBucket(Gradient(rank, numel), /*hand_over=*/false);
  at::Tensor bf16_result;
  {
    std::unique_ptr<CommHook> bf16_hook = chain(*bf16);
    c10::intrusive_ptr<c10::ivalue::Future> done = bf16_hook->Run(bucket);
    done->wait();
    bf16_result = done->value().toTensor();
  }
  std::vector<at::Tensor> gradients;
  for (int r = 0; r < world; ++r) gradients.push_back(Gradient(r, numel));
  if (rank == 0) {
    const at::Tensor exact = ExactMean(gradients, /*rounded=*/false), of_rounded = ExactMean(gradients, true);
    const at::Tensor hops = RoundedHops(gradients);
    std::ofstream file(out);
    file << "hook " << RelativeError(hook_result, exact) << "\nbf16 " << RelativeError(bf16_result, exact)
         << "\nrounded_hops " << RelativeError(hops, exact) << "\nhook_reduction "
         << RelativeError(hook_result, of_rounded) << "\nbf16_reduction " << RelativeError(bf16_result, of_rounded)
         << "\nrounded_hops_reduction " << RelativeError(hops, of_rounded) << "\n";
    if (!file.flush()) return 23;
  }
  return 0;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::testing::RunAtEachWorld(argc, argv, ddplab::CheckAt); }
