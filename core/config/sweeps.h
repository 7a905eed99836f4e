// A suite as the runs it makes: each plugin sweep (ddplab.v1.sweep, e.g. bucket_sizing's
// sweep_cap_mb) and transport sweep (distributed.sweep_transport) expanded.
//
//   for (const ddplab::SuiteRun& run : ddplab::ExpandSweeps(suite, host.schema())) Run(run.experiment);
#ifndef DDPLAB_CORE_CONFIG_SWEEPS_H_
#define DDPLAB_CORE_CONFIG_SWEEPS_H_

#include <string>
#include <vector>

#include "core/config/plugin_schema.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

// One run of a suite: an experiment with its sweeps resolved.
struct SuiteRun {
  v1::Experiment experiment;
  std::string sweep;  // the plugin sweep it belongs to (for "the fastest"), or ""
  std::string origin;  // the suite's experiment it comes from (its name there)
};

// The suite's runs in order. A plugin's sweep field becomes one run per value, named
// <name>_<value><suffix> (sweep_cap_mb: <name>_<cap>mb); then a transport sweep one run per
// transport, named <name>_<transport in lower case>: every run over the first transport,
// then every run over the next. Runs of one process use no transport and run once.
// `schema` reads the plugins' entries.
std::vector<SuiteRun> ExpandSweeps(const v1::Suite& suite, const ExperimentSchema& schema);

}  // namespace ddplab

#endif  // DDPLAB_CORE_CONFIG_SWEEPS_H_
