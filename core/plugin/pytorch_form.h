// A run's levers as PyTorch code, assembled from what each plugin says of itself
// (PyTorchForm, core/plugin/plugin_api.h) and the experiment's own settings; the levers PyTorch
// has no form of are listed apart, as needing ddplab's engine.
//
//   std::vector<std::string> ddplab_only;
//   std::string code = ddplab::PyTorchCode(experiment, /*processes=*/2, plugin_names, plugins.pytorch_forms(),
//                                          &ddplab_only);
//   // model = DDP(model, device_ids=[local_rank], bucket_cap_mb=25, static_graph=True)
#ifndef DDPLAB_CORE_PLUGIN_PYTORCH_FORM_H_
#define DDPLAB_CORE_PLUGIN_PYTORCH_FORM_H_

#include <map>
#include <string>
#include <vector>

#include "core/plugin/plugin_api.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

// Whether a run of `e` steps with LibTorch's fused optimizer kernels, as
// core/optim/optimizer.h decides: this LibTorch has them, the run is on a GPU, and the
// experiment does not ask for foreach kernels (torch.optim's fused=True).
bool UsesFusedOptimizer(const v1::Experiment& e);

// Python lines that wrap `model` in DDP as `e` with `plugins` (in the order listed)
// configures ddplab for a run of `processes` in all (the run's, not the experiment's
// gpus_per_node: 0 there means every GPU of the node); `forms` by plugin name. Plugins
// without a form, and settings PyTorch lacks, go into `ddplab_only`. A run of one process
// without the engine: "".
std::string PyTorchCode(const v1::Experiment& e, int processes, const std::vector<std::string>& plugins,
                        const std::map<std::string, PyTorchForm>& forms, std::vector<std::string>* ddplab_only);

}  // namespace ddplab

#endif  // DDPLAB_CORE_PLUGIN_PYTORCH_FORM_H_
