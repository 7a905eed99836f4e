#!/usr/bin/env python3
"""Writes where and when a bench ran: device, driver, library versions, date (JSON)."""
import datetime
import json
import subprocess
import sys

import torch


def environment():
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()
    return {
        "device": smi[0].split(", ")[0],
        "driver": smi[0].split(", ")[1],
        "gpu_count": len(smi),
        "pytorch_version": torch.__version__,
        "libtorch_version": torch.__version__.split("+")[0],
        "cuda": torch.version.cuda,
        "nccl_version": ".".join(map(str, torch.cuda.nccl.version())),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        json.dump(environment(), f, indent=1)
