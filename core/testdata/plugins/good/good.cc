// A well-formed test plugin: plans every parameter into one bucket.
#include "core/plugin_api.h"

namespace {

class OneBucket : public ddplab::BucketPlanner {
 public:
  std::vector<std::vector<size_t>> Plan(const std::vector<int64_t>&, const std::vector<size_t>& order) const override {
    return {order};
  }
  std::string Describe() const override { return "one bucket"; }
};

void Register(ddplab::PluginRegistrar& registrar) { registrar.SetBucketPlanner(std::make_shared<OneBucket>()); }

}  // namespace

DDPLAB_PLUGIN("good", "1.2.3", "ddplab.plugins.bucket_view.v1.Config", ddplab::PluginStatus::kExperimental, Register)
