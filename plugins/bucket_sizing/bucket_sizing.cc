// bucket_sizing: the size of gradient buckets (PyTorch DDP's bucket_cap_mb, in MiB as
// there). Small buckets start reducing early and overlap with the rest of backward;
// one bucket larger than the model reduces everything at the end of backward. The
// values' own checks (> 0, no repeats) are declared in bucket_sizing.proto; a sweep
// (sweep_cap_mb) is expanded into one run per cap by the experiment loader.
#include <cstdint>
#include <sstream>

#include "core/plugin/plugin_api.h"
#include "plugins/bucket_sizing/bucket_sizing.pb.h"

namespace {

std::string Format(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

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
  registrar.SetBucketPlanner(
      std::make_shared<ddplab::CapPlanner>(ddplab::ddp::MiBToBytes(cap_mb), ddplab::ddp::MiBToBytes(first_mb)));
  ddplab::PyTorchForm form;
  form.ddp_arguments = {"bucket_cap_mb=" + Format(cap_mb)};
  // PyTorch's first bucket is always 1 MiB (or the cap when smaller).
  if (first_mb != ddplab::ddp::FirstCapMiB(cap_mb)) form.not_in_pytorch.push_back("bucket_sizing.first_bucket_cap_mb");
  registrar.DescribeInPyTorch(form);
}

}  // namespace

DDPLAB_PLUGIN("bucket_sizing", "2.0.0", ddplab::plugins::bucket_sizing::v1::Config, ddplab::PluginStatus::kStable,
              Register)
