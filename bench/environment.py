#!/usr/bin/env python3
"""Writes where and when a bench ran: device, driver, library versions, date (JSON)."""
import datetime
import json
import os
import subprocess
import sys

import torch


def environment(device="cuda"):
    """The record of `device`'s runs: "cuda" (the GPUs nvidia-smi lists) or "cpu"."""
    if device == "cpu" or not torch.cuda.is_available():
        return cpu_environment()
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


def cpu_environment():
    """The same record on a machine without a GPU: its processor and cores."""
    name = "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
    except OSError:
        pass
    return {
        "device": f"{name}, {os.cpu_count()} cores",
        "driver": "-",
        "gpu_count": 0,
        "pytorch_version": torch.__version__,
        "libtorch_version": torch.__version__.split("+")[0],
        "cuda": None,
        "nccl_version": "-",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        json.dump(environment(), f, indent=1)
