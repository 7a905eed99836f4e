// bucket_sizing: the size of gradient buckets (PyTorch DDP's bucket_cap_mb, in MiB as
// there). Small buckets start reducing early and overlap with the rest of backward;
// one bucket larger than the model reduces everything at the end of backward. The
// values' own checks (> 0, no repeats) are declared in bucket_sizing.proto; a sweep
// (sweep_cap_mb) is expanded into one run per cap by the experiment loader.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/plugin/plugin_api.h"
#include "plugins/bucket_sizing/bucket_sizing.pb.h"

namespace {

std::string Format(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Note [A short tail]
// Whatever a bucket's reduction does after its bucket is handed over, the last bucket's
// is not hidden by anything: it runs after backward. With the sharded optimizer (a
// reduce-scatter, the shard's update, an all-gather) and 100 MiB buckets that tail was
// 0.47 ms of a 17.4 ms step on 2 H200 under bf16 autocast, as a graph (bench/NOTES.md,
// "Where the sharded step's 1.8 ms go"), and every earlier bucket's chain ended before
// the next bucket was ready. A smaller last bucket shortens the tail only if the bucket
// before it also finishes in time, so the last bucket is `last_bucket_cap_mb` and each
// bucket before it twice the next, until they reach bucket_cap_mb: each is reduced in
// about the time backward takes to fill the next. The rest are DDP's buckets (ddp_buckets.h).
class TaperedPlanner : public ddplab::BucketPlanner {
 public:
  TaperedPlanner(int64_t cap, int64_t first_cap, int64_t last_cap, std::string described)
      : caps_(cap, first_cap), cap_(cap), last_cap_(std::max<int64_t>(1, last_cap)), described_(std::move(described)) {}

  std::vector<std::vector<size_t>> Plan(const std::vector<int64_t>& bytes,
                                        const std::vector<size_t>& order) const override {
    // From the end of `order`: a bucket of last_cap_, then of twice that, while below cap_.
    std::vector<std::vector<size_t>> tail;  // last first
    size_t end = order.size();
    for (int64_t cap = last_cap_; cap < cap_ && end > 0; cap *= 2) {
      std::vector<size_t> bucket;
      for (int64_t size = 0; end > 0 && size < cap;) {
        bucket.insert(bucket.begin(), order[--end]);
        size += bytes[order[end]];
      }
      tail.push_back(std::move(bucket));
    }
    std::vector<std::vector<size_t>> buckets =
        caps_.Plan(bytes, std::vector<size_t>(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(end)));
    for (auto it = tail.rbegin(); it != tail.rend(); ++it) buckets.push_back(std::move(*it));
    return buckets;
  }
  std::string Describe() const override { return caps_.Describe() + described_; }

 private:
  ddplab::CapPlanner caps_;
  int64_t cap_, last_cap_;
  std::string described_;
};

void Register(const ddplab::plugins::bucket_sizing::v1::Config& config, ddplab::PluginRegistrar& registrar) {
  const double cap_mb = config.bucket_cap_mb() > 0 ? config.bucket_cap_mb() : ddplab::ddp::kDefaultCapMiB;
  if (config.bucket_cap_mb() > 0 && config.first_bucket_cap_mb() > cap_mb) {
    registrar.RejectField("first_bucket_cap_mb", "must be at most bucket_cap_mb (" + Format(cap_mb) + "), got " +
                                                     Format(config.first_bucket_cap_mb()));
    return;
  }
  // The first bucket: as asked, else PyTorch's 1 MiB, or the cap when that is smaller.
  const double first_mb =
      config.first_bucket_cap_mb() > 0 ? config.first_bucket_cap_mb() : ddplab::ddp::FirstCapMiB(cap_mb);
  const int64_t cap = ddplab::ddp::MiBToBytes(cap_mb), first = ddplab::ddp::MiBToBytes(first_mb);
  // The last buckets halving towards the end (Note [A short tail]), where below the cap.
  const bool tapered = config.last_bucket_cap_mb() > 0 && config.last_bucket_cap_mb() < cap_mb;
  if (tapered) {
    registrar.SetBucketPlanner(std::make_shared<TaperedPlanner>(
        cap, first, ddplab::ddp::MiBToBytes(config.last_bucket_cap_mb()),
        ", the last " + Format(config.last_bucket_cap_mb()) + " MiB and those before it doubling"));
  } else {
    registrar.SetBucketPlanner(std::make_shared<ddplab::CapPlanner>(cap, first));
  }
  ddplab::PyTorchForm form;
  form.ddp_arguments = {"bucket_cap_mb=" + Format(cap_mb)};
  // PyTorch's first bucket is always 1 MiB (or the cap when smaller).
  if (first_mb != ddplab::ddp::FirstCapMiB(cap_mb)) form.not_in_pytorch.push_back("bucket_sizing.first_bucket_cap_mb");
  // DDP's buckets are all of one cap.
  if (tapered) form.not_in_pytorch.push_back("bucket_sizing.last_bucket_cap_mb");
  registrar.DescribeInPyTorch(form);
}

}  // namespace

DDPLAB_PLUGIN("bucket_sizing", "2.1.0", ddplab::plugins::bucket_sizing::v1::Config, ddplab::PluginStatus::kStable,
              Register)
