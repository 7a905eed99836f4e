#!/usr/bin/env python3
"""PyTorch's own single-GPU ViT training, the reference ddplab's single-GPU path is measured
against: torchvision's vit_l_32, batch 32, SGD, synthetic normal images with uniform labels
from a DataLoader with worker processes and pinned memory, as in the seed experiment.

Writes one JSON record: steps/s over the measured steps and the peak memory allocated
for tensors during them (torch.cuda.max_memory_allocated, reset after warm-up).
"""
import argparse
import json
import time

import torch
import torchvision


class SyntheticImages(torch.utils.data.Dataset):
    def __init__(self, length, image_size, num_classes):
        self.length, self.image_size, self.num_classes = length, image_size, num_classes

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        image = torch.randn(3, self.image_size, self.image_size)
        label = torch.randint(self.num_classes, ())
        return image, label


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="vit_l_32")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--image_size", type=int, default=224)
    p.add_argument("--num_workers", type=int, default=8)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--measured", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--output", required=True)
    a = p.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda", 0)
    model = getattr(torchvision.models, a.model)().to(device)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr)
    criterion = torch.nn.CrossEntropyLoss()
    steps = a.warmup + a.measured
    loader = torch.utils.data.DataLoader(
        SyntheticImages(steps * a.batch_size, a.image_size, 1000),
        batch_size=a.batch_size, num_workers=a.num_workers, pin_memory=True)

    start = None
    for step, (images, labels) in enumerate(loader):
        if step == a.warmup:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        loss = criterion(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    record = {
        "steps_per_s": a.measured / seconds,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
        "measured_steps": a.measured,
        "measured_seconds": seconds,
        "torch_version": torch.__version__,
        "device": torch.cuda.get_device_name(0),
    }
    with open(a.output, "w") as f:
        json.dump(record, f, indent=1)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
