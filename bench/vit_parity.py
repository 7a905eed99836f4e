#!/usr/bin/env python3
"""Exports what ddplab's ViT must reproduce: torchvision's vit_l_32 weights, an input
batch, its logits and loss, and the weights after one SGD step, all in fp32 without TF32.
bench/vit_parity_main.cc loads the same weights into ddplab's model and compares.
"""
import argparse
import os

import torch
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--model", default="vit_l_32")
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--lr", type=float, default=0.01)
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)()
    # torchvision zero-initializes the head, which would make every logit 0.
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)
    torch.nn.init.normal_(model.heads.head.bias, std=0.02)
    model = model.cuda().train()
    before = {n: t.detach().cpu().clone() for n, t in model.named_parameters()}
    images = torch.randn(a.batch_size, 3, 224, 224)
    labels = torch.randint(1000, (a.batch_size,))
    logits = model(images.cuda())
    loss = torch.nn.functional.cross_entropy(logits, labels.cuda())
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    after = {n: t.detach().cpu().clone() for n, t in model.named_parameters()}
    torch.save(before, os.path.join(a.dir, "before.pt"))
    torch.save(after, os.path.join(a.dir, "after.pt"))
    torch.save({"images": images, "labels": labels, "logits": logits.detach().cpu(),
                "loss": loss.detach().cpu(), "lr": torch.tensor(a.lr)},
               os.path.join(a.dir, "io.pt"))
    print(f"exported {len(before)} tensors of {a.model} to {a.dir}, loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
