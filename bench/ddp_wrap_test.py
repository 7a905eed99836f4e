"""The report's PyTorch code, pasted into bench/pytorch_vit.py's DDP wrapper
(bench/ddp_wrap.py), gives the DDP that the ddplab configuration is: the same bucket cap
(MiB), static graph, gradient-as-bucket-view, and communication hook with the same
PowerSGD settings; and the wrapped model trains. On the CPU over Gloo (one process) with
Debian's python3-torch; the code comes from the plugins themselves (//plugins/testing:
pytorch_code), for configurations written as users write them.
"""
import copy
import os
import subprocess
import sys
import tempfile
import unittest

import numpy
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

import ddp_wrap

MIB = 1024 * 1024

# (ddplab configuration, what the DDP must be). Hooks: None, "bf16", "powersgd" or
# "bf16(powersgd)"; PowerSGD's state fields as PowerSGDState has them.
CASES = [
    ("plugin { bucket_sizing { bucket_cap_mb: 5 } } plugin { static_graph {} } plugin { bucket_view {} }",
     dict(cap_mib=5, static_graph=True, view=True, hook=None, ddplab_only="")),
    ("plugin { bf16 {} }",
     dict(cap_mib=25, static_graph=False, view=False, hook="bf16", ddplab_only="")),
    ("plugin { bucket_sizing { bucket_cap_mb: 100 } } plugin { powersgd { matrix_approximation_rank: 4 } }",
     # ddplab compresses from the first step by default; PyTorch's state can start at 2 at the
     # earliest with error feedback, and the code says that it differs there. The code is for
     # training: PowerSGD starts at PyTorch's default, with a comment saying why.
     dict(cap_mib=100, static_graph=False, view=False, hook="powersgd",
          ddplab_only="powersgd.start_powerSGD_iter below 2",
          comment="start_powerSGD_iter=1000,  # for training: PyTorch's default; its docs advise about "
                  "10% of the steps (this run compressed from step 2)",
          state=dict(matrix_approximation_rank=4, start_powerSGD_iter=1000, use_error_feedback=True,
                     warm_start=True))),
    ("plugin { static_graph {} } plugin { bf16 {} } plugin { powersgd { matrix_approximation_rank: 1 "
     "use_error_feedback: false warm_start: false random_seed: 7 start_powerSGD_iter: 10 } }",
     dict(cap_mib=25, static_graph=True, view=False, hook="bf16(powersgd)", ddplab_only="",
          comment="(this run compressed from step 10)",
          state=dict(matrix_approximation_rank=1, start_powerSGD_iter=1000, use_error_feedback=False,
                     warm_start=False, random_seed=7))),
    ("plugin { zero_copy {} }",
     dict(cap_mib=25, static_graph=False, view=False, hook=None, ddplab_only="zero_copy")),
]


# An experiment that trains as users do: its code makes the optimizer and the autocast.
AMP = ("precision: BF16_AUTOCAST optimizer { adamw { learning_rate: 0.001 weight_decay: 0.05 } } "
       "plugin { static_graph {} }")


def pytorch_code(configurations):
    """The report's code for each configuration, from the plugins (a dict)."""
    binary = os.path.join(os.environ["TEST_SRCDIR"], "ddplab/plugins/testing/pytorch_code")
    out = subprocess.run([binary] + configurations, capture_output=True, text=True, check=True).stdout
    codes = {}
    for block in out.split("=== ")[1:]:
        configuration, _, code = block.partition("\n")
        codes[configuration] = code
    return codes


# On a GPU where there is one (PyTorch's PowerSGD hook synchronizes CUDA whenever CUDA is
# there), else on the CPU.
DEVICE = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")


class RecordingDDP(torch.nn.parallel.DistributedDataParallel):
    """DDP as it is, but on the CPU without device_ids (which DDP takes only for GPU
    modules: the code is for GPUs) and with bf16 hooks allowed (DDP 1.13 refuses them
    without CUDA); and remembering the hook registered."""

    def __init__(self, module, device_ids=None, **kwargs):
        super().__init__(module, device_ids=device_ids if DEVICE.type == "cuda" else None, **kwargs)
        self.recorded_device_ids = device_ids
        self.hook = self.hook_state = None

    def register_comm_hook(self, state, hook):
        self.hook, self.hook_state = hook, state
        super().register_comm_hook(state, hook)

    def _check_comm_hook(self, hook):
        if not callable(hook):
            raise TypeError("Communication hook must be callable.")


def hook_kind(hook):
    if hook is None:
        return None
    if hook is default_hooks.bf16_compress_hook:
        return "bf16"
    if hook is powerSGD_hook.powerSGD_hook:
        return "powersgd"
    if hook.__qualname__.startswith("bf16_compress_wrapper"):
        inner = [c.cell_contents for c in hook.__closure__ if callable(c.cell_contents)]
        return "bf16(%s)" % hook_kind(inner[0])
    return repr(hook)


class DdpWrapTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        cls.codes = pytorch_code([c for c, _ in CASES] + [AMP])
        torch.nn.parallel.DistributedDataParallel = RecordingDDP

    def test_the_code_is_the_configuration(self):
        for configuration, want in CASES:
            with self.subTest(configuration=configuration):
                code = self.codes[configuration]
                self.assertIn("ddplab only: " + want["ddplab_only"] + "\n", code + "\n")
                if "comment" in want:
                    self.assertIn(want["comment"], code)
                torch.manual_seed(0)
                model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(),
                                            torch.nn.Linear(96, 10)).to(DEVICE)
                ddp = ddp_wrap.wrap(model, code, local_rank=0)
                self.assertIsInstance(ddp, RecordingDDP)
                self.assertEqual(ddp.recorded_device_ids, [0])
                self.assertEqual(ddp.bucket_bytes_cap, want["cap_mib"] * MIB)
                self.assertEqual(bool(getattr(ddp, "static_graph", False)), want["static_graph"])
                self.assertEqual(ddp.gradient_as_bucket_view, want["view"])
                self.assertEqual(hook_kind(ddp.hook), want["hook"])
                for field, value in want.get("state", {}).items():
                    if field == "random_seed":  # PowerSGDState keeps the generator it seeds
                        drawn = copy.deepcopy(ddp.hook_state.rng).randint(1_000_000_000)
                        self.assertEqual(drawn, numpy.random.RandomState(value).randint(1_000_000_000))
                    else:
                        self.assertEqual(getattr(ddp.hook_state, field), value, field)
                if "bf16" in (want["hook"] or "") and DEVICE.type == "cpu":
                    continue  # Debian's Gloo has no bfloat16 all-reduce: it cannot train here
                # It trains as the benchmark runs it: PowerSGD from step 2 (ddp_wrap's
                # start_powerSGD_iter), a few steps past its uncompressed ones.
                ddp = ddp_wrap.wrap(model, code, local_rank=0, start_powerSGD_iter=2)
                if "powersgd" in (want["hook"] or ""):
                    self.assertEqual(ddp.hook_state.start_powerSGD_iter, 2)
                optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
                for step in range(12):
                    x, y = torch.randn(8, 64, device=DEVICE), torch.randint(10, (8,), device=DEVICE)
                    loss = torch.nn.functional.cross_entropy(ddp(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    self.assertTrue(torch.isfinite(loss), step)

    def test_bf16_autocast_and_adamw(self):
        code = self.codes[AMP]
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 10)).to(DEVICE)
        ddp, optimizer, autocast = ddp_wrap.training(model, code, local_rank=0)
        self.assertTrue(ddp.static_graph)
        self.assertIsInstance(optimizer, torch.optim.AdamW)
        group = optimizer.param_groups[0]
        self.assertEqual((group["lr"], group["weight_decay"], group["betas"], group["eps"]),
                         (0.001, 0.05, (0.9, 0.999), 1e-8))  # left out: PyTorch's defaults
        self.assertEqual(autocast, dict(device_type="cuda", dtype=torch.bfloat16))
        self.assertEqual([p.data_ptr() for p in group["params"]], [p.data_ptr() for p in ddp.parameters()])
        # It trains as the benchmark runs it, the forward in bfloat16 (on this device).
        autocast = dict(autocast, device_type=DEVICE.type)
        before = [p.detach().clone() for p in ddp.parameters()]
        for step in range(3):
            x, y = torch.randn(8, 64, device=DEVICE), torch.randint(10, (8,), device=DEVICE)
            with torch.autocast(**autocast):
                logits = ddp(x)
                loss = torch.nn.functional.cross_entropy(logits, y)
            self.assertEqual(logits.dtype, torch.bfloat16)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        self.assertTrue(all(not torch.equal(a, b) for a, b in zip(before, ddp.parameters())))
        # The seed study's code makes no autocast, and an optimizer only where this LibTorch
        # has fused kernels (at::_fused_sgd_, 2.3 on): then torch.optim.SGD with fused=True,
        # as the run used it; elsewhere the benchmark's own foreach SGD.
        _, optimizer, autocast = ddp_wrap.training(torch.nn.Linear(4, 4).to(DEVICE), self.codes[CASES[0][0]], 0)
        self.assertIsNone(autocast)
        if hasattr(torch, "_fused_sgd_"):
            self.assertIsInstance(optimizer, torch.optim.SGD)
            self.assertTrue(optimizer.param_groups[0]["fused"])
        else:
            self.assertIsNone(optimizer)

    def test_a_different_configuration_is_told_apart(self):
        # The checks above can fail: another configuration's code gives another DDP.
        code = self.codes[CASES[0][0]]
        ddp = ddp_wrap.wrap(torch.nn.Linear(4, 4).to(DEVICE), code, local_rank=0)
        self.assertNotEqual(ddp.bucket_bytes_cap, CASES[1][1]["cap_mib"] * MIB)
        self.assertNotEqual(hook_kind(ddp.hook), CASES[1][1]["hook"])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
