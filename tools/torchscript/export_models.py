#!/usr/bin/env python3
"""Exports models to TorchScript for ddplab's `model { torchscript { ... } }`: your own
model the same way (torch.jit.script or torch.jit.trace, then .save()).

  python3 tools/torchscript/export_models.py --model resnet50 --out resnet50.pt
  python3 tools/torchscript/export_models.py --model encoder --out encoder.pt
  python3 tools/torchscript/export_models.py --test_files DIR

resnet50: torchvision's ResNet-50 (needs torchvision): input [3, 224, 224] float32, 1000
classes. encoder: a BERT-base-sized encoder built from torch.nn (12 layers, hidden 768, 12
heads, MLP 3072, vocabulary 30522, 128 tokens): input [128] int64 token ids below 30522,
the first token's features classified in 2 classes; --small makes it 2 layers of hidden
64 with a vocabulary of 1000. --test_files writes the small modules ddplab's tests load,
good and bad (core/model/torchscript/BUILD.bazel). Each prints the experiment's model {}
entry that feeds it.
"""
import argparse
import os

import torch


class Encoder(torch.nn.Module):
    """Token ids [N, S] -> logits [N, classes]: embeddings, a Transformer encoder, a head."""

    def __init__(self, vocab=30522, tokens=128, hidden=768, layers=12, heads=12, mlp=3072, classes=2):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.position = torch.nn.Parameter(torch.zeros(1, tokens, hidden))
        layer = torch.nn.TransformerEncoderLayer(hidden, heads, mlp, dropout=0.0, batch_first=True,
                                                 activation="gelu", norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.norm = torch.nn.LayerNorm(hidden)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.encoder(self.embed(ids) + self.position)
        return self.head(self.norm(x[:, 0]))


class Mlp(torch.nn.Module):
    """Images [N, 3, 8, 8] -> logits [N, 10]."""

    def __init__(self, outputs=10):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class WithLoss(torch.nn.Module):
    """forward(images, target) -> its own loss: mean squared error against [N, 4]."""

    def __init__(self):
        super().__init__()
        self.net = Mlp(outputs=4)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.net(x), target)


class MlpBatchNorm(torch.nn.Module):
    """An Mlp with a BatchNorm: buffers (running statistics) beside its parameters."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 32), torch.nn.BatchNorm1d(32),
                                       torch.nn.ReLU(), torch.nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class WithUnused(torch.nn.Module):
    """An Mlp beside a layer forward never uses: its parameters get no gradient."""

    def __init__(self):
        super().__init__()
        self.net = Mlp()
        self.unused = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class TwoInputs(torch.nn.Module):
    """forward(images, scale): two inputs, for a file that declares one."""

    def __init__(self):
        super().__init__()
        self.net = Mlp()

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return self.net(x) * scale


def save(module, path, entry):
    torch.jit.script(module).save(path)
    print(f"{path}: model {{ torchscript {{ file: \"{os.path.basename(path)}\" {entry} }} }}")


def test_files(out):
    torch.manual_seed(0)
    image = 'input { shape: [3, 8, 8] }'
    save(Mlp(), os.path.join(out, "mlp.pt"), f"{image} classes: 10")
    save(Mlp(outputs=4), os.path.join(out, "regressor.pt"), f"{image} regression {{ shape: [4] }}")
    save(WithLoss(), os.path.join(out, "with_loss.pt"),
         f"{image} regression {{ shape: [4] }} loss: MODULE_RETURNS_LOSS")
    save(WithUnused(), os.path.join(out, "with_unused.pt"), f"{image} classes: 10")
    save(MlpBatchNorm(), os.path.join(out, "mlp_bn.pt"), f"{image} classes: 10")
    save(TwoInputs(), os.path.join(out, "two_inputs.pt"), f"{image} input {{ shape: [1] }} classes: 10")
    save(Encoder(vocab=100, tokens=16, hidden=32, layers=2, heads=2, mlp=64, classes=3),
         os.path.join(out, "encoder.pt"), "input { shape: [16] dtype: INT64 high: 100 } classes: 3")
    with open(os.path.join(out, "not_torchscript.pt"), "wb") as f:
        f.write(b"not a TorchScript archive\n" * 10)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["resnet50", "encoder"])
    p.add_argument("--small", action="store_true", help="encoder: 2 layers, hidden 64, vocabulary 1000")
    p.add_argument("--out", help="the file to write (--model), or a directory (--test_files)")
    p.add_argument("--test_files", help="write the tests' modules into this directory")
    a = p.parse_args()
    if a.test_files:
        os.makedirs(a.test_files, exist_ok=True)
        test_files(a.test_files)
        return
    if a.model == "resnet50":
        import torchvision
        save(torchvision.models.resnet50(), a.out, "input { shape: [3, 224, 224] } classes: 1000")
    elif a.model == "encoder":
        sizes = dict(vocab=1000, hidden=64, layers=2, heads=2, mlp=128) if a.small else {}
        encoder = Encoder(**sizes)
        save(encoder, a.out,
             f"input {{ shape: [128] dtype: INT64 high: {encoder.embed.num_embeddings} }} classes: 2")
    else:
        p.error("--model or --test_files")


if __name__ == "__main__":
    main()
