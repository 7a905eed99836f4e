#include "core/config/sweeps.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/config/plugin_config.h"

namespace ddplab {

// Then a transport sweep becomes one run per transport, named <name>_<transport>: all the
// suite's runs over the first transport, then all over the next. Runs of one process use
// no transport and run once, among the first.
std::vector<SuiteRun> ExpandSweeps(const v1::Suite& suite, const ExperimentSchema& schema) {
  std::vector<SuiteRun> runs;
  for (const v1::Experiment& e : suite.experiment()) {
    std::vector<v1::Experiment> swept = ExpandPluginSweeps(e, schema);
    if (swept.empty()) {
      runs.push_back({e, "", e.name()});
      continue;
    }
    for (v1::Experiment& one : swept) runs.push_back({std::move(one), e.name(), e.name()});
  }
  std::vector<v1::Distributed::Transport> order;
  for (const SuiteRun& run : runs) {
    for (int t : run.experiment.distributed().sweep_transport()) {
      auto transport = static_cast<v1::Distributed::Transport>(t);
      if (std::find(order.begin(), order.end(), transport) == order.end()) order.push_back(transport);
    }
  }
  if (order.empty()) return runs;
  std::vector<SuiteRun> out;
  for (size_t k = 0; k < order.size(); ++k) {
    for (const SuiteRun& run : runs) {
      const v1::Distributed& d = run.experiment.distributed();
      const bool one_process = d.gpus_per_node() == 1 && d.nodes() <= 1;
      if (d.sweep_transport_size() == 0 || one_process) {
        if (k > 0) continue;
        out.push_back(run);
        out.back().experiment.mutable_distributed()->clear_sweep_transport();
        continue;
      }
      if (std::find(d.sweep_transport().begin(), d.sweep_transport().end(), order[k]) ==
          d.sweep_transport().end()) {
        continue;
      }
      const std::string suffix = absl::AsciiStrToLower(v1::Distributed::Transport_Name(order[k]));
      SuiteRun one = run;
      one.experiment.set_name(absl::StrCat(run.experiment.name(), "_", suffix));
      one.experiment.mutable_distributed()->clear_sweep_transport();
      one.experiment.mutable_distributed()->set_transport(order[k]);
      if (!run.sweep.empty()) one.sweep = absl::StrCat(run.sweep, "_", suffix);
      out.push_back(std::move(one));
    }
  }
  return out;
}

}  // namespace ddplab
