#include "core/plugin/pytorch_form.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/torch_compat.h"

#include <algorithm>

namespace ddplab {

namespace {

// The optimizer and autocast of `e` where they are not the seed study's (SGD, float32,
// foreach kernels): `optimizer` over the wrapped model, and `autocast`, the arguments of
// the torch.autocast that each step's forward and loss run in.
void AppendTraining(const v1::Experiment& e, const std::string& device, std::string& code) {
  const char* fused = UsesFusedOptimizer(e) ? ", fused=True" : "";
  if (e.optimizer().has_adamw()) {
    // A resolved experiment has every field; one left out is PyTorch's default.
    const v1::AdamW& a = e.optimizer().adamw();
    absl::StrAppend(&code, "optimizer = torch.optim.AdamW(model.parameters(), lr=", a.learning_rate());
    if (a.has_beta1() && a.has_beta2()) absl::StrAppend(&code, ", betas=(", a.beta1(), ", ", a.beta2(), ")");
    if (a.has_eps()) absl::StrAppend(&code, ", eps=", a.eps());
    if (a.has_weight_decay()) absl::StrAppend(&code, ", weight_decay=", a.weight_decay());
    absl::StrAppend(&code, fused, ")\n");
  } else if (*fused) {
    const v1::Sgd& g = e.optimizer().sgd();
    absl::StrAppend(&code, "optimizer = torch.optim.SGD(model.parameters(), lr=", g.learning_rate());
    if (g.momentum() != 0) absl::StrAppend(&code, ", momentum=", g.momentum());
    if (g.weight_decay() != 0) absl::StrAppend(&code, ", weight_decay=", g.weight_decay());
    absl::StrAppend(&code, fused, ")\n");
  }
  if (e.precision() == v1::BF16_AUTOCAST) {
    absl::StrAppend(&code, "autocast = dict(device_type=\"", device,
                    "\", dtype=torch.bfloat16)  # each step: with torch.autocast(**autocast): loss = ...\n");
  }
}

}  // namespace

bool UsesFusedOptimizer(const v1::Experiment& e) {
  return compat::kFusedOptimizers && e.distributed().device() != v1::Distributed::CPU && !e.optimizer().foreach();
}

std::string PyTorchCode(const v1::Experiment& e, int processes, const std::vector<std::string>& plugins,
                        const std::map<std::string, PyTorchForm>& forms, std::vector<std::string>* ddplab_only) {
  const v1::Distributed& dist = e.distributed();
  if (processes <= 1 && !dist.force_engine()) return "";
  std::vector<std::string> arguments = {"model"};
  if (dist.device() != v1::Distributed::CPU) arguments.push_back("device_ids=[local_rank]");
  std::string hook, state;
  bool wrappers_own = false;  // `hook` is a wrapper's own, standing alone
  std::vector<std::string> wrappers;  // in the order listed: the first listed wraps outermost
  for (const std::string& plugin : plugins) {
    auto it = forms.find(plugin);
    if (it == forms.end()) {
      ddplab_only->push_back(plugin);
      continue;
    }
    const PyTorchForm& f = it->second;
    if (!f.only_on_gpus.empty() && dist.device() == v1::Distributed::CPU) {
      ddplab_only->push_back(absl::StrCat(plugin, " (PyTorch's form ", f.only_on_gpus, ")"));
      continue;
    }
    arguments.insert(arguments.end(), f.ddp_arguments.begin(), f.ddp_arguments.end());
    if (!f.hook_wrapper.empty()) {
      wrappers.push_back(f.hook_wrapper);
      if (hook.empty()) {
        hook = f.hook;
        wrappers_own = true;
      }
    } else if (!f.hook.empty()) {
      hook = f.hook;
      state = f.hook_state;
      wrappers_own = false;
    }
    ddplab_only->insert(ddplab_only->end(), f.not_in_pytorch.begin(), f.not_in_pytorch.end());
  }
  // A wrapper with no hook to wrap is its own hook, not wrapped again.
  if (wrappers_own && wrappers.size() == 1) wrappers.clear();
  if (dist.high_priority_compute()) ddplab_only->push_back("distributed.high_priority_compute");
  std::string code;
  if (dist.nccl_channels() > 0) absl::StrAppend(&code, "# environment: NCCL_MAX_NCHANNELS=", dist.nccl_channels(), "\n");
  for (const v1::EnvironmentVariable& v : dist.nccl_env()) absl::StrAppend(&code, "# environment: ", v.name(), "=", v.value(), "\n");
  if (e.precision() == v1::TF32 || e.precision() == v1::BF16_AUTOCAST || e.optimizer().has_adamw() ||
      UsesFusedOptimizer(e)) {
    absl::StrAppend(&code, "import torch\n");
  }
  if (e.precision() == v1::TF32) absl::StrAppend(&code, "torch.backends.cuda.matmul.allow_tf32 = True\n");
  absl::StrAppend(&code, "from torch.nn.parallel import DistributedDataParallel as DDP\n");
  if (!hook.empty()) {
    absl::StrAppend(&code, "from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook as powerSGD\n");
  }
  absl::StrAppend(&code, "model = DDP(", absl::StrJoin(arguments, ", "), ")\n");
  if (!hook.empty()) {
    std::string registered = hook;
    for (auto w = wrappers.rbegin(); w != wrappers.rend(); ++w) registered = absl::StrCat(*w, "(", registered, ")");
    if (!state.empty()) absl::StrAppend(&code, "state = ", state, "\n");
    absl::StrAppend(&code, "model.register_comm_hook(", state.empty() ? "None" : "state", ", ", registered, ")\n");
  }
  AppendTraining(e, dist.device() == v1::Distributed::CPU ? "cpu" : "cuda", code);
  return code;
}

}  // namespace ddplab
