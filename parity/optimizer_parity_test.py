"""ddplab's optimizers against torch.optim's on the same gradients.

optimizer_dump draws three parameters and five steps of gradients from seed 0 (LibTorch's
and PyTorch's CPU generators give the same numbers) and steps them with ddplab's AdamW or
SGD; this test draws the same and steps them with torch.optim's.

- On the CPU, against foreach=True (PyTorch's default on GPUs), whose operations ddplab's
  follow one for one: equal bit for bit, with PyTorch's defaults, with other settings, and
  with the parameters stepped in two parts each step (the engine's optimizer overlap). The
  single-tensor form (foreach=False) is printed beside it: it may differ in the last bits.
- On a GPU (skipped without one, or where LibTorch has no fused kernels), ddplab takes
  LibTorch's fused kernels: against fused=True, within float32's rounding (the same
  kernels: in practice equal), whole and in parts.
"""
import os
import subprocess
import sys
import tempfile
import unittest

import torch

DUMP = os.path.join(os.environ.get("TEST_SRCDIR", ""), "ddplab", "parity", "optimizer_dump")


def pytorch_params(steps, kind="adamw", device="cpu", **options):
    torch.manual_seed(0)
    params = [torch.randn(shape).to(device).requires_grad_() for shape in ((37,), (5, 7), (3, 4, 5))]
    optimizer = (torch.optim.SGD if kind == "sgd" else torch.optim.AdamW)(params, **options)
    for step in range(steps):
        for p in params:
            p.grad = (torch.randn(p.shape) * (step + 1)).to(device)
        optimizer.step()
    return torch.cat([p.detach().cpu().reshape(-1) for p in params])


def ddplab_params(*flags):
    """(parameters after the steps, whether ddplab used fused kernels)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "params.bin")
        printed = subprocess.run([DUMP, "--out=" + out, *flags], check=True, capture_output=True, text=True).stdout
        with open(out, "rb") as f:
            return torch.frombuffer(bytearray(f.read()), dtype=torch.float32), "fused: yes" in printed


class CpuParityTest(unittest.TestCase):
    def check(self, flags, options, kind="adamw"):
        ours, fused = ddplab_params("--optimizer=" + kind, *flags)
        self.assertFalse(fused, "no fused kernels on the CPU")
        theirs = pytorch_params(5, kind, foreach=True, **options)
        single = pytorch_params(5, kind, foreach=False, **options)
        print("%s %s: max |ddplab - foreach| %.3g, max |ddplab - single tensor| %.3g, moved %.3g"
              % (kind, flags or "defaults", (ours - theirs).abs().max(), (ours - single).abs().max(),
                 (theirs - pytorch_params(0, kind, foreach=True, **options)).abs().max()))
        self.assertTrue(torch.equal(ours, theirs), (ours - theirs).abs().max())

    def test_adamw_defaults(self):
        self.check([], {})

    def test_adamw_other_settings(self):
        self.check(["--lr=0.01", "--beta1=0.8", "--beta2=0.99", "--eps=1e-6", "--weight_decay=0.1"],
                   dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1))

    def test_adamw_in_parts(self):
        self.check(["--in_parts"], {})

    def test_sgd_momentum_weight_decay(self):
        self.check(["--lr=0.05", "--momentum=0.9", "--weight_decay=0.01"],
                   dict(lr=0.05, momentum=0.9, weight_decay=0.01), kind="sgd")


@unittest.skipUnless(torch.cuda.is_available(), "no GPU")
class FusedParityTest(unittest.TestCase):
    def check(self, flags, options, kind="adamw"):
        ours, fused = ddplab_params("--device=cuda", "--optimizer=" + kind, *flags)
        if not fused:
            self.skipTest("this LibTorch has no fused %s kernel" % kind)
        theirs = pytorch_params(5, kind, device="cuda", fused=True, **options)
        moved = (theirs - pytorch_params(0, kind, fused=True, **options)).abs().max()
        print("%s %s on the GPU: max |ddplab - fused| %.3g, moved %.3g"
              % (kind, flags or "defaults", (ours - theirs).abs().max(), moved))
        self.assertTrue(torch.allclose(ours, theirs, rtol=1e-6, atol=1e-7), (ours - theirs).abs().max())
        self.assertGreater(moved, 1e-4)

    def test_adamw(self):
        self.check(["--lr=0.01", "--weight_decay=0.1"], dict(lr=0.01, weight_decay=0.1))

    def test_adamw_in_parts(self):
        self.check(["--in_parts"], {})

    def test_sgd_plain(self):
        self.check(["--lr=0.1", "--weight_decay=0"], dict(lr=0.1), kind="sgd")

    def test_sgd_momentum_in_parts(self):
        self.check(["--lr=0.05", "--momentum=0.9", "--in_parts"], dict(lr=0.05, momentum=0.9, weight_decay=0.01),
                   kind="sgd")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
