// static_graph: the graph is the same every step (PyTorch DDP's static_graph=True). A
// parameter that received no gradient in the first step stays unused for the rest of the
// run: its share of every bucket is zeros, and a gradient for it later is an error.
// Without it, every parameter must receive a gradient every step.
#include "core/plugin/plugin_api.h"
#include "plugins/static_graph/static_graph.pb.h"

namespace {

class UnusedFromTheFirstStep : public ddplab::MissingGradients {
 public:
  std::string Accept(const std::vector<size_t>& missing, bool first_step) const override {
    if (first_step) return "";
    std::string names;
    for (size_t i : missing) names += (names.empty() ? "" : ", ") + std::to_string(i);
    return "parameter(s) " + names +
           " received no gradient in this step, but did in the first: with static_graph a "
           "parameter is used in every step or in none";
  }
};

void Register(const ddplab::plugins::static_graph::v1::Config&, ddplab::PluginRegistrar& registrar) {
  registrar.SetMissingGradients(std::make_shared<UnusedFromTheFirstStep>());
  ddplab::PyTorchForm form;
  form.ddp_arguments = {"static_graph=True"};
  registrar.DescribeInPyTorch(form);
}

}  // namespace

DDPLAB_PLUGIN("static_graph", "2.0.0", ddplab::plugins::static_graph::v1::Config, ddplab::PluginStatus::kStable,
              Register)
