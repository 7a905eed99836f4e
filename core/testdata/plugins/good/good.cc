// A well-formed test plugin: plans every parameter into one bucket.
#include "core/plugin/plugin_api.h"
#include "core/testdata/plugins/good/good.pb.h"

namespace {

class OneBucket : public ddplab::BucketPlanner {
 public:
  std::vector<std::vector<size_t>> Plan(const std::vector<int64_t>&, const std::vector<size_t>& order) const override {
    return {order};
  }
  std::string Describe() const override { return "one bucket"; }
};

// Refuses 13, as a plugin's own check of its configuration.
void Register(const ddplab::testdata::good::v1::Config& config, ddplab::PluginRegistrar& registrar) {
  if (config.number() == 13) {
    registrar.RejectField("number", "must not be 13");
    return;
  }
  registrar.SetBucketPlanner(std::make_shared<OneBucket>());
}

}  // namespace

DDPLAB_PLUGIN("good", "1.2.3", ddplab::testdata::good::v1::Config, ddplab::PluginStatus::kExperimental, Register)
