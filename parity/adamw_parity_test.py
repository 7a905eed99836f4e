"""ddplab's AdamW against torch.optim.AdamW on the same gradients: equal bit for bit.

adamw_dump draws three parameters and five steps of gradients from seed 0 (LibTorch's and
PyTorch's CPU generators give the same numbers) and steps them with ddplab's AdamW; this
test draws the same and steps them with torch.optim.AdamW(foreach=True), PyTorch's default
on GPUs, whose operations ddplab's follow one for one. Equal with PyTorch's defaults, with
other betas, eps and weight decay, and with the parameters stepped in two parts each step
(the engine's optimizer overlap). The single-tensor form (foreach=False) is printed beside
it: it may differ in the last bits, which is why ddplab follows the foreach one.
"""
import os
import subprocess
import sys
import tempfile
import unittest

import torch

DUMP = os.path.join(os.environ.get("TEST_SRCDIR", ""), "ddplab", "parity", "adamw_dump")


def pytorch_params(steps, foreach, **options):
    torch.manual_seed(0)
    params = [torch.randn(shape).requires_grad_() for shape in ((37,), (5, 7), (3, 4, 5))]
    adamw = torch.optim.AdamW(params, foreach=foreach, **options)
    for step in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape) * (step + 1)
        adamw.step()
    return torch.cat([p.detach().reshape(-1) for p in params])


def ddplab_params(*flags):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "params.bin")
        subprocess.run([DUMP, "--out=" + out, *flags], check=True)
        with open(out, "rb") as f:
            return torch.frombuffer(bytearray(f.read()), dtype=torch.float32)


class AdamWParityTest(unittest.TestCase):
    def check(self, flags, options):
        ours = ddplab_params(*flags)
        theirs = pytorch_params(5, True, **options)
        single = pytorch_params(5, False, **options)
        print("%s: max |ddplab - foreach| %.3g, max |ddplab - single tensor| %.3g, moved %.3g"
              % (flags or "defaults", (ours - theirs).abs().max(), (ours - single).abs().max(),
                 (theirs - pytorch_params(0, True, **options)).abs().max()))
        self.assertTrue(torch.equal(ours, theirs), (ours - theirs).abs().max())

    def test_defaults(self):
        self.check([], {})

    def test_other_settings(self):
        self.check(["--lr=0.01", "--beta1=0.8", "--beta2=0.99", "--eps=1e-6", "--weight_decay=0.1"],
                   dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1))

    def test_in_parts(self):
        self.check(["--in_parts"], {})


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
