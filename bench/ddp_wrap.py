"""The DDP wrapper of bench/pytorch_vit.py: wraps a model as the PyTorch code of a ddplab
report says (a run's "pytorch" field, the recommendation's code), pasted as it is.

  model = ddp_wrap.wrap(model, open("code.py").read(), local_rank=0)

The code names `model` and `local_rank`, as the report's does:
  from torch.nn.parallel import DistributedDataParallel as DDP
  model = DDP(model, device_ids=[local_rank], bucket_cap_mb=25, static_graph=True)
  model.register_comm_hook(None, default_hooks.bf16_compress_hook)
A line "ddplab only: ..." (the levers PyTorch has no form of) is not code and is left out.
Where the experiment trains otherwise than the seed study, the code also makes `optimizer`
(torch.optim.AdamW over the wrapped model) and `autocast` (torch.autocast's arguments for
each step's forward and loss): `training` returns them with the model.
The code's PowerSGD starts at a training value (PyTorch's 1000), which a benchmark of tens
of steps never reaches: `start_powerSGD_iter` sets the start the benchmark measures.
"""


def code_lines(text):
    """The Python lines of a report's PyTorch code, without its "ddplab only:" line."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("ddplab only:"))


def training(model, text, local_rank=None, start_powerSGD_iter=None):
    """(model wrapped as `text` says, its optimizer or None, its autocast arguments or
    None); the process group must be initialized. With `start_powerSGD_iter`, the code's
    PowerSGD state (if any) starts there instead."""
    namespace = {"model": model, "local_rank": local_rank}
    exec(compile(code_lines(text), "<ddplab's PyTorch code>", "exec"), namespace)
    state = namespace.get("state")
    if start_powerSGD_iter is not None and hasattr(state, "start_powerSGD_iter"):
        state.start_powerSGD_iter = start_powerSGD_iter
    return namespace["model"], namespace.get("optimizer"), namespace.get("autocast")


def wrap(model, text, local_rank=None, start_powerSGD_iter=None):
    """`model` wrapped as `text` says (training's first)."""
    return training(model, text, local_rank, start_powerSGD_iter)[0]
