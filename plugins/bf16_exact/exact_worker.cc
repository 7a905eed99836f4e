// One rank of bf16_exact_test's checks of the hook itself over several Gloo processes
// (bf16_exact_test.cc), started by the launcher as one of N ranks, checking at each world
// of --worlds in turn (plugins/testing/each_world.h).
//
// Every rank's gradients come from a seed, the rank and the step, so that each rank makes
// all of them, and the references, without communicating. One bucket of three parameters,
// reduced at four steps (Note [Which gradients are bfloat16], bf16_exact.cc):
//   step 0 (not timed): p0 bfloat16 values, p1 float32 values, p2 zeros (undecided);
//   step 1 (timed):     the same, p2 now bfloat16 values (undecided still: nothing is
//                       asked on a timed step, so it goes as float32);
//   step 2 (not timed): p0 float32 values on rank 1 alone (asked again: it goes as
//                       float32 from then on, on every rank); p2 decided bfloat16;
//   step 3 (timed):     p2 float32 values on rank 0 alone: sent as bfloat16 unasked, so
//                       rounded there, and counted (rounded_values).
// The gradients are of mixed magnitude (normal values times 2^k, k from -12 to 12) and
// alternate between the bucket and handed over where they lie. Every rank checks that
// each parameter's mean
//   - for one sent as bfloat16, equals bit for bit the float32 sum in rank order of the
//     values rounded to bfloat16 (a no-op but at step 3), divided by the ranks (over two
//     ranks a/2 + b/2, as a float32 all-reduce computes it), computed here;
//   - for one sent as float32, is within float32's rounding of the exact mean (in double).
// Rank 0 writes the hook's stats to --out.<world> (bf16_fraction, demoted_parameters,
// compression_ratio, rounded_values) and expected_rounded: the values of its own step-3
// p2 that bfloat16 does not hold.
//
// Exit codes: 0 pass, 13 setup error, 20 a bfloat16 mean is not the reference's, 21 a
// float32 mean is not within rounding, 22 the hook failed, 23 --out.<world> could not be
// written.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "core/config/experiment.h"
#include "core/engine/allreduce_hook.h"
#include "core/plugin/plugin_host.h"
#include "plugins/testing/each_world.h"

ABSL_FLAG(uint64_t, seed, 11, "seed of every rank's gradients");

namespace ddplab {
namespace {

const std::vector<int64_t> kSizes{1000, 37, 500};

enum class Values { kBf16, kFloat32, kZeros };

// What parameter `p` holds at `step` on `rank` (see the top).
Values ValuesOf(size_t p, int step, int rank) {
  if (p == 0) return step == 2 && rank == 1 ? Values::kFloat32 : Values::kBf16;
  if (p == 1) return Values::kFloat32;
  if (step == 3 && rank == 0) return Values::kFloat32;
  return step == 0 ? Values::kZeros : Values::kBf16;
}

constexpr int kSteps = 4;

at::Tensor Bf16(const at::Tensor& t) { return t.to(at::kBFloat16).to(at::kFloat); }

at::Tensor Gradient(size_t p, int step, int rank) {
  const Values values = ValuesOf(p, step, rank);
  if (values == Values::kZeros) return at::zeros({kSizes[p]});
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(absl::GetFlag(FLAGS_seed) * 1000003 + p * 7919 +
                                                               static_cast<uint64_t>(step) * 131 + rank);
  at::Tensor g = at::empty({kSizes[p]}).normal_(0.0, 1.0, gen) * at::exp2(at::empty({kSizes[p]}).random_(-12, 13, gen));
  return values == Values::kBf16 ? g.to(at::kBFloat16).to(at::kFloat) : g;
}

// Whether the hook sends parameter `p` as bfloat16 at `step`, by the Note's rule.
bool SentAsBf16(size_t p, int step) {
  if (p == 0) return step < 2;
  if (p == 1) return false;
  return step >= 2;
}

GradBucket MakeBucket(int step, int rank) {
  GradBucket bucket;
  int64_t numel = 0;
  for (int64_t size : kSizes) numel += size;
  bucket.buffer = at::empty({numel});
  int64_t at = 0;
  for (size_t p = 0; p < kSizes.size(); ++p) {
    const at::Tensor g = Gradient(p, step, rank);
    bucket.buffer.narrow(0, at, kSizes[p]).copy_(g);
    bucket.offsets.push_back(at);
    bucket.sizes.push_back({kSizes[p]});
    bucket.parameters.push_back(p);
    if (step % 2 == 1) bucket.gradients.push_back(g.clone());
    at += kSizes[p];
  }
  if (step % 2 == 1) bucket.buffer.fill_(std::nan(""));  // handed over: the hook writes it whole
  bucket.index = 0;
  bucket.step = step;
  bucket.is_last = true;
  bucket.may_measure = step % 2 == 0;
  return bucket;
}

// Parameter p's mean in `got` against the references: 0 if it held, else the exit code.
int Check(const at::Tensor& got, size_t p, int step, int rank, int world) {
  std::vector<at::Tensor> g;
  for (int r = 0; r < world; ++r) g.push_back(Gradient(p, step, r));
  if (SentAsBf16(p, step)) {
    at::Tensor mean;
    if (world == 2) {
      mean = Bf16(g[0]).mul_(0.5).add_(Bf16(g[1]).mul_(0.5));
    } else {
      mean = Bf16(g[0]);
      for (int r = 1; r < world; ++r) mean.add_(Bf16(g[r]));
      mean.div_(world);
    }
    if (!at::equal(got, mean)) {
      std::cerr << "rank " << rank << " step " << step << " p" << p << ": not the float32 sum in rank order\n";
      return 20;
    }
    return 0;
  }
  at::Tensor exact = at::zeros({kSizes[p]}, at::kDouble), magnitude = at::zeros({kSizes[p]}, at::kDouble);
  for (const at::Tensor& t : g) {
    exact.add_(t.to(at::kDouble));
    magnitude.add_(t.abs().to(at::kDouble));
  }
  exact.div_(world);
  const at::Tensor allowed = magnitude * std::ldexp(1.0, -21);
  if (!at::all((got.to(at::kDouble) - exact).abs() <= allowed).item<bool>()) {
    std::cerr << "rank " << rank << " step " << step << " p" << p << ": not within float32's rounding\n";
    return 21;
  }
  return 0;
}

int CheckAt(PluginHost& host, compat::CollectiveGroup& group, int rank, int world, const std::string& out) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(
      "name: \"w\" model { preset: VIT_TINY_TEST } data { batch_size: 4 } steps { measured: 1 } "
      "optimizer { sgd { learning_rate: 0.1 } } distributed { device: CPU gpus_per_node: 2 } "
      "plugin { bf16_exact {} }",
      "plugins", host.schema());
  if (!suite.ok()) {
    std::cerr << suite.status() << "\n";
    return 13;
  }
  absl::StatusOr<PluginSet> set = host.Configure(suite->experiment(0));
  if (!set.ok()) {
    std::cerr << "rank " << rank << ": " << set.status() << "\n";
    return 13;
  }
  const CommContext context{&group, rank, world, /*nccl=*/false, {}, nullptr, {}, {}};
  std::unique_ptr<CommHook> hook = MakeHookChain(set->engine_parts().hooks, context);
  for (int step = 0; step < kSteps; ++step) {
    GradBucket bucket = MakeBucket(step, rank);
    c10::intrusive_ptr<c10::ivalue::Future> future = hook->Run(bucket);
    future->wait();
    if (future->hasError()) {
      std::cerr << "rank " << rank << " step " << step << ": " << future->tryRetrieveErrorMessage() << "\n";
      return 22;
    }
    const at::Tensor result = future->value().toTensor();
    int64_t at = 0;
    for (size_t p = 0; p < kSizes.size(); ++p) {
      if (int failed = Check(result.narrow(0, at, kSizes[p]), p, step, rank, world)) return failed;
      at += kSizes[p];
    }
  }
  if (rank == 0) {
    std::ofstream file(out);
    for (const auto& [name, value] : hook->Stats()) file << name << " " << value << "\n";
    const at::Tensor own = Gradient(2, 3, 0);
    file << "expected_rounded " << own.ne(Bf16(own)).sum().item<int64_t>() << "\n";
    if (!file.flush()) return 23;
  }
  return 0;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::testing::RunAtEachWorld(argc, argv, ddplab::CheckAt); }
