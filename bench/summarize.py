#!/usr/bin/env python3
"""Collects one bench run's records into bench/results' format and prints a table.

  summarize.py --name single-gpu --dir RUN_DIR --output FILE.json

RUN_DIR holds environment.json and, per configuration and repetition,
ddplab/<config>/<rep>/<suite>/<experiment>.json (ddplab's record) and
pytorch/<config>/<rep>.json (PyTorch's). Medians are taken over repetitions.
"""
import argparse
import glob
import json
import os
import statistics


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--output", required=True)
    a = p.parse_args()
    env = load(os.path.join(a.dir, "environment.json"))
    rows = []
    for config_dir in sorted(glob.glob(os.path.join(a.dir, "ddplab", "*"))):
        config = os.path.basename(config_dir)
        ours = [load(f) for f in sorted(glob.glob(os.path.join(config_dir, "*", "*", "*.json")))]
        theirs = [load(f) for f in sorted(glob.glob(os.path.join(a.dir, "pytorch", config, "*.json")))]
        if not ours or not theirs:
            continue
        meta = load(os.path.join(a.dir, "configs", config + ".json"))
        row = dict(meta)
        row.update({
            "ddplab_steps_per_s": statistics.median(r["steps_per_s"] for r in ours),
            "pytorch_steps_per_s": statistics.median(r["steps_per_s"] for r in theirs),
            "ddplab_peak_gib": statistics.median(r["peak_memory_gib"] for r in ours),
            "pytorch_peak_gib": statistics.median(r["peak_memory_gib"] for r in theirs),
            "ddplab_runs_steps_per_s": [round(r["steps_per_s"], 4) for r in ours],
            "pytorch_runs_steps_per_s": [round(r["steps_per_s"], 4) for r in theirs],
            "ddplab_tflops_per_gpu": statistics.median(r["tflops_per_gpu"] for r in ours),
            "ddplab_data_wait_fraction": max(r["data_wait_fraction"] for r in ours),
            "ddplab_phases_ms": ours[len(ours) // 2]["phases"],
        })
        row["ratio"] = row["ddplab_steps_per_s"] / row["pytorch_steps_per_s"]
        rows.append(row)
    result = dict(env)
    result["bench"] = a.name
    result["rows"] = rows
    with open(a.output, "w") as f:
        json.dump(result, f, indent=1)

    print(f"\n{a.name} on {env['device']} x{env['gpu_count']}, driver {env['driver']}, "
          f"PyTorch {env['pytorch_version']}, LibTorch {env['libtorch_version']}, "
          f"NCCL {env['nccl_version']}, {env['date']}")
    print(f"{'config':<24}{'gpus':>5} {'transport':<10}{'ddplab/s':>10}{'pytorch/s':>11}"
          f"{'ratio':>8}{'ddplab GiB':>12}{'pytorch GiB':>13}{'data wait':>11}")
    for r in rows:
        print(f"{r['config']:<24}{r['gpus']:>5} {r['transport']:<10}{r['ddplab_steps_per_s']:>10.3f}"
              f"{r['pytorch_steps_per_s']:>11.3f}{r['ratio']:>8.3f}{r['ddplab_peak_gib']:>12.2f}"
              f"{r['pytorch_peak_gib']:>13.2f}{100 * r['ddplab_data_wait_fraction']:>10.2f}%")


if __name__ == "__main__":
    main()
