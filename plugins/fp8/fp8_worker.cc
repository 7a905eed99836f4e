// One rank of fp8_hook_test's checks of the hook itself over several Gloo processes
// (fp8_hook_test.cc), started by the launcher as one of N ranks, checking at each world
// of --worlds in turn (plugins/testing/each_world.h).
//
// Every rank's gradients come from a seed, the rank and the step, so that each rank makes
// all of them, and the references, without communicating. Their values are of mixed
// magnitude (normal values times 2^k, k from -12 to 12), so that a block's small values
// fall into the format's subnormals. For each configuration of kCases, on buckets of 1,
// 3, 1000 and 65539 elements (fewer than the ranks, padded, read from the bucket or
// from gradients handed over where they lie beside a bucket of NaN), every rank checks
// that the hook's result
//   - equals, bit for bit, the reduction its top comment (fp8.cc) describes, computed
//     here in scalar loops by reference.h, which shares nothing with codec.h: each rank's
//     padded values quantized in blocks (scale float(amax) / largest), dequantized in
//     float64, summed in rank order, divided by W, rounded to float32; that mean quantized
//     again with fresh scales and dequantized in float32 (or rounded to bfloat16); and
//   - is within the two roundings' bound of the exact mean (float64) of the values each
//     rank quantized: per element, 2^-p |v| + 2^-q scale per rank's value v (p, q: 4, 10
//     for E4M3; 3, 17 for E5M2), averaged over the ranks, then the same again for the
//     mean's value and its block's scale (2^-8 of it in bfloat16), all in a factor
//     1 + 2^-20 for float32's own roundings.
// With error feedback the configuration runs two steps on the same bucket indices: the
// reference carries each rank's residual (its quantized values minus what they
// dequantize to, in float32) into the second step, and the hook's second result must be
// that one and not the one without the residual (on the largest bucket).
// Rank 0 writes to --out.<world>, one "name value" a line: per configuration without
// error feedback, <name> the relative (L2) error of the largest bucket's result against
// the exact mean of the gradients; for every configuration <name>.compression_ratio and
// <name>.wire_bytes_per_step, the hook's Stats() after its steps (the last bucket of each
// step is_last).
//
// Exit codes: 0 pass, 13 setup error, 20 the result is not the reference's, 21 not within
// the bound, 22 the hook failed, 23 --out.<world> could not be written, 24 the second
// step with error feedback did not carry the first step's residual.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ATen.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "core/config/experiment.h"
#include "core/engine/allreduce_hook.h"
#include "core/plugin/plugin_host.h"
#include "plugins/fp8/reference.h"
#include "plugins/testing/each_world.h"

ABSL_FLAG(uint64_t, seed, 7, "seed of every rank's gradients");

namespace ddplab {
namespace {

using fp8::reference::ScalarFp8;
using Vectors = std::vector<std::vector<float>>;  // one per rank

const std::vector<int64_t> kBucketSizes{1, 3, 1000, 65539};

// A configuration of the hook (its plugin entry) and what the reference makes of it.
struct Case {
  const char* name;
  const char* plugin;
  ScalarFp8 fp8;
  size_t block;
  bool gather_bf16, error_feedback;
};

const std::vector<Case>& Cases() {
  using fp8::reference::kE4M3;
  using fp8::reference::kE5M2;
  static const std::vector<Case> cases{
      {"default", "fp8 {}", ScalarFp8(kE4M3), 128, false, false},
      {"e5m2", "fp8 { format: E5M2 }", ScalarFp8(kE5M2), 128, false, false},
      {"block16", "fp8 { block_size: 16 }", ScalarFp8(kE4M3), 16, false, false},
      {"block256", "fp8 { block_size: 256 }", ScalarFp8(kE4M3), 256, false, false},
      {"bf16_gather", "fp8 { gather: BF16 }", ScalarFp8(kE4M3), 128, true, false},
      {"error_feedback", "fp8 { error_feedback: true }", ScalarFp8(kE4M3), 128, false, true},
      // Every field at once, and a block that is not a power of two.
      {"all_options", "fp8 { format: E5M2 block_size: 48 gather: BF16 error_feedback: true }", ScalarFp8(kE5M2), 48,
       true, true},
  };
  return cases;
}

// Rank `rank`'s gradient for a bucket of `numel` elements at `step`.
at::Tensor Gradient(int rank, int64_t numel, int step) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(
      absl::GetFlag(FLAGS_seed) * 1000003 + static_cast<uint64_t>(rank) * 7919 + numel + step * 104729);
  at::Tensor normal = at::empty({numel}).normal_(0.0, 1.0, gen);
  at::Tensor exponent = at::empty({numel}).random_(-12, 13, gen);
  return normal * at::exp2(exponent);
}

std::vector<float> ToVector(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// Elements per rank's padded buffer: W shards of whole blocks, at least one block each.
size_t Padded(size_t numel, size_t world, size_t block) {
  return std::max<size_t>(1, (numel + world * block - 1) / (world * block)) * world * block;
}

// One bucket's reduction as fp8.cc's top comment describes it, in scalar loops: what
// every rank's bucket should hold. `sent` gets what each rank quantized (its padded
// gradient, plus with error feedback its residual from `residuals`, which then holds what
// this step's quantizing lost).
std::vector<float> Reference(const Case& c, const Vectors& gradients, Vectors* residuals, Vectors* sent) {
  const size_t world = gradients.size(), numel = gradients[0].size(), padded = Padded(numel, world, c.block);
  std::vector<double> sum(padded);
  sent->clear();
  residuals->resize(world);  // empty before the first step
  for (size_t r = 0; r < world; ++r) {
    std::vector<float> values(padded, 0.0f);
    std::copy(gradients[r].begin(), gradients[r].end(), values.begin());
    std::vector<float>& residual = (*residuals)[r];
    if (c.error_feedback && residual.size() == padded) {
      for (size_t i = 0; i < padded; ++i) values[i] += residual[i];
    }
    const fp8::reference::Blocks q = fp8::reference::Quantize(values, c.block, c.fp8);
    if (c.error_feedback) {
      const std::vector<float> back = fp8::reference::Dequantize<float>(q, c.block, c.fp8);
      residual.resize(padded);
      for (size_t i = 0; i < padded; ++i) residual[i] = values[i] - back[i];
    }
    const std::vector<double> exact = fp8::reference::Dequantize<double>(q, c.block, c.fp8);
    for (size_t i = 0; i < padded; ++i) sum[i] = r == 0 ? exact[i] : sum[i] + exact[i];
    sent->push_back(std::move(values));
  }
  std::vector<float> mean(padded), result;
  for (size_t i = 0; i < padded; ++i) mean[i] = static_cast<float>(sum[i] / static_cast<double>(world));
  if (c.gather_bf16) {
    for (float m : mean) result.push_back(fp8::reference::RoundToBfloat16(m));
  } else {
    result = fp8::reference::Dequantize<float>(fp8::reference::Quantize(mean, c.block, c.fp8), c.block, c.fp8);
  }
  result.resize(numel);
  return result;
}

// The exact mean (float64) of what the ranks quantized, `sent`, over the bucket's
// elements.
std::vector<double> ExactMean(const Vectors& sent, size_t numel) {
  std::vector<double> mean(numel, 0.0);
  for (const std::vector<float>& v : sent) {
    for (size_t i = 0; i < numel; ++i) mean[i] += v[i];
  }
  for (double& m : mean) m /= static_cast<double>(sent.size());
  return mean;
}

// "" if every element of `got` is within the two roundings' bound (see the top) of the
// exact mean of `sent`, else the first element that is not.
std::string OutOfBound(const Case& c, const Vectors& sent, const std::vector<float>& got) {
  const bool e4m3 = c.fp8.format().mantissa_bits == 3;
  const double unit = std::ldexp(1.0, e4m3 ? -4 : -3), below = std::ldexp(1.0, e4m3 ? -10 : -17);
  const double largest = c.fp8.largest(), world = static_cast<double>(sent.size());
  const size_t padded = sent[0].size(), block = c.block;
  // The first rounding's bound (each rank's), and a bound on the mean's magnitude.
  const std::vector<double> exact = ExactMean(sent, padded);
  std::vector<double> first(padded, 0.0), magnitude(padded);
  for (const std::vector<float>& v : sent) {
    for (size_t b = 0; b < padded; b += block) {
      double amax = 0;
      for (size_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(static_cast<double>(v[i])));
      for (size_t i = b; i < b + block; ++i) first[i] += (unit * std::fabs(v[i]) + below * amax / largest) / world;
    }
  }
  for (size_t i = 0; i < padded; ++i) magnitude[i] = std::fabs(exact[i]) + first[i];
  for (size_t b = 0; b < padded; b += block) {
    double amax = 0;
    for (size_t i = b; i < b + block; ++i) amax = std::max(amax, magnitude[i]);
    for (size_t i = b; i < b + block && i < got.size(); ++i) {
      const double second =
          c.gather_bf16 ? std::ldexp(magnitude[i], -8) : unit * magnitude[i] + below * amax / largest;
      const double allowed = (first[i] + second) * (1 + std::ldexp(1.0, -20)) + std::ldexp(magnitude[i], -23);
      if (!(std::fabs(got[i] - exact[i]) <= allowed)) {
        std::ostringstream said;
        said << "element " << i << ": " << got[i] << ", exact mean " << exact[i] << ", allowed " << allowed;
        return said.str();
      }
    }
  }
  return "";
}

bool SameBits(const std::vector<float>& a, const at::Tensor& b) {
  return b.scalar_type() == at::kFloat && b.numel() == static_cast<int64_t>(a.size()) && b.is_contiguous() &&
         std::memcmp(a.data(), b.data_ptr<float>(), a.size() * sizeof(float)) == 0;
}

double RelativeError(const at::Tensor& got, const std::vector<double>& exact) {
  const at::Tensor want = at::tensor(exact, at::kDouble);
  return ((got.to(at::kDouble) - want).norm() / want.norm()).item<double>();
}

// Bucket `index`'s for `gradient` (two parameters of its own: error feedback keeps a
// residual per set of parameters): held in the bucket, or (`hand_over`) given as two
// gradients where they lie beside a bucket of NaN that the hook must write whole.
GradBucket MakeBucket(size_t index, const at::Tensor& gradient, bool hand_over) {
  GradBucket bucket;
  bucket.buffer = gradient.clone();
  const int64_t numel = gradient.numel(), first = numel / 2;
  bucket.offsets = {0, first};
  bucket.sizes = {{first}, {numel - first}};
  bucket.parameters = {2 * index, 2 * index + 1};
  if (hand_over) {
    for (size_t k = 0; k < 2; ++k) {
      bucket.gradients.push_back(gradient.narrow(0, bucket.offsets[k], bucket.sizes[k][0]).clone());
    }
    bucket.buffer.fill_(std::nan(""));
  }
  return bucket;
}

// What one case's run keeps: every bucket's residuals (per rank, error feedback), and on
// rank 0 the lines for --out.<world>.
struct CaseState {
  CaseState() { lines.precision(17); }  // doubles back as they were
  std::vector<Vectors> residuals = std::vector<Vectors>(kBucketSizes.size());
  std::ostringstream lines;
};

// Bucket `i`'s result at `step` against the reference: 0 if it held, else the exit code.
int CheckBucket(const Case& c, const at::Tensor& got, size_t i, int step, int rank, int world, CaseState& state) {
  const std::string where = absl::StrCat(c.name, ": rank ", rank, " step ", step, " bucket ", i, ": ");
  Vectors gradients, sent;
  for (int r = 0; r < world; ++r) gradients.push_back(ToVector(Gradient(r, kBucketSizes[i], step)));
  const std::vector<float> want = Reference(c, gradients, &state.residuals[i], &sent);
  if (!SameBits(want, got)) {
    std::cerr << where << "not the reference's result\n";
    return 20;
  }
  if (std::string out = OutOfBound(c, sent, want); !out.empty()) {
    std::cerr << where << "beyond the bound: " << out << "\n";
    return 21;
  }
  const bool largest = i + 1 == kBucketSizes.size();
  if (c.error_feedback && step > 0 && largest) {
    Vectors none(world), unused;
    if (SameBits(Reference(c, gradients, &none, &unused), got)) {
      std::cerr << where << "the same as without the first step's residual\n";
      return 24;
    }
  }
  if (rank == 0 && largest && step == 0 && !c.error_feedback) {
    state.lines << c.name << " " << RelativeError(got, ExactMean(gradients, gradients[0].size())) << "\n";
  }
  return 0;
}

// Runs the hook of `c` on every bucket (all started before any is waited for) for one
// step, or two with error feedback, checking each result: 0 or the exit code.
int RunCase(const Case& c, CommHook& hook, int rank, int world, CaseState& state) {
  for (int step = 0; step < (c.error_feedback ? 2 : 1); ++step) {
    std::vector<c10::intrusive_ptr<c10::ivalue::Future>> futures;
    for (size_t i = 0; i < kBucketSizes.size(); ++i) {
      GradBucket bucket = MakeBucket(i, Gradient(rank, kBucketSizes[i], step), /*hand_over=*/i % 2 == 1);
      bucket.index = i;
      bucket.step = step;
      bucket.is_last = i + 1 == kBucketSizes.size();
      futures.push_back(hook.Run(bucket));
    }
    for (size_t i = 0; i < futures.size(); ++i) {
      futures[i]->wait();
      if (futures[i]->hasError()) {
        std::cerr << c.name << ": rank " << rank << " bucket " << i << ": " << futures[i]->tryRetrieveErrorMessage()
                  << "\n";
        return 22;
      }
      if (int failed = CheckBucket(c, futures[i]->value().toTensor(), i, step, rank, world, state)) return failed;
    }
  }
  for (const auto& [name, value] : hook.Stats()) state.lines << c.name << "." << name << " " << value << "\n";
  return 0;
}

absl::StatusOr<PluginSet> Configure(PluginHost& host, const std::string& plugin) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(
      absl::StrCat("name: \"w\" model { preset: VIT_TINY_TEST } data { batch_size: 4 } steps { measured: 1 } "
                   "optimizer { sgd { learning_rate: 0.1 } } distributed { device: CPU gpus_per_node: 2 } plugin { ",
                   plugin, " }"),
      "plugins", host.schema());
  if (!suite.ok()) return suite.status();
  return host.Configure(suite->experiment(0));
}

// One world's checks (testing::RunAtEachWorld): every configuration of kCases; rank 0
// writes the values to `out`.
int CheckAt(PluginHost& host, compat::CollectiveGroup& group, int rank, int world, const std::string& out) {
  const CommContext context{&group, rank, world, /*nccl=*/false, {}, nullptr, {}, {}};
  std::ostringstream lines;
  for (const Case& c : Cases()) {
    absl::StatusOr<PluginSet> set = Configure(host, c.plugin);
    if (!set.ok()) {
      std::cerr << c.name << ": " << set.status() << "\n";
      return 13;
    }
    CaseState state;
    {
      // The plugin's hook chain, as the engine makes it: core's all-reduce, wrapped.
      std::unique_ptr<CommHook> hook = MakeHookChain(set->engine_parts().hooks, context);
      if (int failed = RunCase(c, *hook, rank, world, state)) return failed;
    }  // its thread is done with the group
    lines << state.lines.str();
  }
  if (rank == 0) {
    std::ofstream file(out);
    file << lines.str();
    if (!file.flush()) return 23;
  }
  return 0;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::testing::RunAtEachWorld(argc, argv, ddplab::CheckAt); }
