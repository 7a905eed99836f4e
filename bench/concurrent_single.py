#!/usr/bin/env python3
"""On a GPU machine: the single-GPU experiment on one GPU alone, then on N GPUs at the
same time as N independent processes (no engine, nothing exchanged). The second is the
ceiling data-parallel training can reach on this host: whatever the GPUs share (power,
host CPU and memory, PCIe) slows it down, communication or not. Run from the repository
root after building vit_ddp.

  python3 bench/concurrent_single.py --out DIR [--gpus 4]

Writes DIR/alone/..., DIR/gpu<i>/..., DIR/concurrent.json and prints one line each.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import environment  # noqa: E402

EXPERIMENT = "experiments/single_gpu.textproto"


def result(directory):
    found = glob.glob(f"{directory}/*/single_gpu.json")
    if not found:
        return None
    with open(found[0]) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--gpus", type=int, default=4)
    p.add_argument("--timeout", type=int, default=180)
    a = p.parse_args()
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    binary = "bazel-bin/experiments/vit_ddp"

    def start(name, gpu):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu))
        log = open(os.path.join(out, name + ".log"), "w")
        return subprocess.Popen([binary, f"--experiment={EXPERIMENT}", f"--output_dir={out}/{name}"],
                                env=env, stdout=log, stderr=subprocess.STDOUT)

    alone = start("alone", 0)
    alone.wait(timeout=a.timeout)
    together = [start(f"gpu{i}", i) for i in range(a.gpus)]
    for proc in together:
        proc.wait(timeout=a.timeout)
    rows = {"alone": result(f"{out}/alone")}
    for i in range(a.gpus):
        rows[f"gpu{i}"] = result(f"{out}/gpu{i}")
    summary = dict(environment.environment(), bench="concurrent_single", gpus=a.gpus, rows=[])
    base = rows["alone"]["steps_per_s"] if rows["alone"] else None
    for name, r in rows.items():
        if r is None:
            print(f"{name}: FAILED (see {out}/{name}.log)")
            summary["rows"].append({"run": name, "failed": True})
            continue
        row = {"run": name, "steps_per_s": r["steps_per_s"], "backward_ms": r["phases"]["backward_ms"],
               "forward_ms": r["phases"]["forward_ms"], "step_ms": r["phases"]["step_ms"],
               "vs_alone": r["steps_per_s"] / base if base else None}
        summary["rows"].append(row)
        print(f"{name}: {row['steps_per_s']:.3f} steps/s, forward {row['forward_ms']:.1f} ms, "
              f"backward {row['backward_ms']:.1f} ms" + (f", {row['vs_alone']:.3f} of alone" if base else ""))
    with open(os.path.join(out, "concurrent.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
