#!/usr/bin/env python3
"""On a GPU machine, in one call: ddplab's default suite (`vit_ddp` with no experiment:
seed_study, over NVLink and host memory), timed, then PyTorch's DDP on the same
configurations, in priority order until a deadline, and the table (bench/summarize.py).
Run from the repository root after building vit_ddp.

  python3 bench/suite_vs_pytorch.py --out DIR [--deadline 540] [--only name,name,...]

Writes DIR/suite/ (ddplab's report, results, traces, NCCL logs), DIR/suite.txt (its
output), DIR/ddplab|pytorch|configs/<run>... (summarize.py's layout) and DIR/suite.json.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ddp_matrix import CONFIGS, EXTRA, TRANSPORTS, prepare_output, pytorch_command, run  # noqa: E402

# PyTorch's counterparts, most wanted first (the acceptance rows of the issues).
PRIORITY = ["single_gpu", "ddp_1gpu", "overlap_tuned", "bucket_caps_25mb", "bucket_caps_100mb",
            "naive_ddp", "powersgd_rank1_25mb", "powersgd_rank4_25mb", "bf16_25mb", "powersgd_rank1_2000mb",
            "powersgd_rank4_2000mb", "bf16_100mb",
            "static_graph_bucket_view", "static_graph", "bucket_view", "bucket_caps_50mb",
            "bucket_caps_200mb", "bf16_2000mb"]


def bench_config(base):
    """ddp_matrix's configuration for a suite experiment's name (without transport)."""
    if base == "naive_ddp":
        return "naive"
    m = re.fullmatch(r"bucket_caps_(\d+)mb", base)
    if m:
        return f"cap{m.group(1)}"
    m = re.fullmatch(r"bf16_(\d+)mb", base)
    if m:
        return f"bf16_cap{m.group(1)}"
    m = re.fullmatch(r"(powersgd_rank\d+)_(\d+)mb", base)
    if m:
        return m.group(1) + ("" if m.group(2) == "2000" else f"_cap{m.group(2)}")
    return base if base in CONFIGS else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--deadline", type=float, default=540, help="seconds after start: no new run after")
    a = p.parse_args()
    start = time.time()
    out = prepare_output(a.out)

    t0 = time.time()
    with open(os.path.join(out, "suite.txt"), "w") as f:
        code = subprocess.call(["bazel-bin/experiments/vit_ddp", f"--output_dir={out}/suite"],
                               stdout=f, stderr=subprocess.STDOUT)
    suite_seconds = time.time() - t0
    print(f"suite: exit {code}, {suite_seconds:.0f} s", flush=True)

    records = {}
    for path in sorted(glob.glob(f"{out}/suite/*/*.json")):
        with open(path) as f:
            r = json.load(f)
        if not isinstance(r, dict) or "steps_per_s" not in r:
            continue  # the report, traces
        records[r["experiment"]] = (path, r)
    todo = []
    for name, (path, r) in records.items():
        transport = "none"
        base = name
        for suffix, t in (("_nvlink", "nvlink"), ("_host_memory", "host")):
            if name.endswith(suffix):
                base, transport = name[: -len(suffix)], t
        config = "naive" if base == "ddp_1gpu" else bench_config(base)
        if base != "single_gpu" and config is None:
            continue
        meta = {"config": base, "gpus": r["world_size"], "transport": transport, "batch_size": r["batch_size"],
                "model": r["model"], "measured_steps": r["measured_steps"]}
        with open(os.path.join(out, "configs", name + ".json"), "w") as f:
            json.dump(meta, f)
        dest = os.path.join(out, "ddplab", name, "1", r["suite"])
        os.makedirs(dest, exist_ok=True)
        shutil.copy(path, dest)
        rank = PRIORITY.index(base) if base in PRIORITY else len(PRIORITY)
        todo.append((rank, transport != "host", name, base, config, meta, r))
    todo.sort(key=lambda t: t[:2])

    for _, _, name, base, config, meta, r in todo:
        if time.time() - start > a.deadline:
            print(f"deadline: PyTorch not run for {name}", flush=True)
            continue
        env = dict(os.environ)
        if meta["transport"] != "none":
            env.update(TRANSPORTS[meta["transport"]][1])
        nccl_env = EXTRA.get(config, ({}, ""))[0]
        env.update(nccl_env)
        os.makedirs(f"{out}/pytorch/{name}", exist_ok=True)
        py = pytorch_command(meta["gpus"], 10, meta["measured_steps"], f"{out}/pytorch/{name}/1.json",
                             None if base == "single_gpu" else CONFIGS[config][1])
        print(f"pytorch {name}", flush=True)
        run(py, f"{out}/logs/pytorch_{name}.log", env=env)

    with open(os.path.join(out, "suite_seconds.json"), "w") as f:
        json.dump({"suite_exit_code": code, "suite_seconds": suite_seconds}, f)
    subprocess.call([sys.executable, os.path.join(HERE, "summarize.py"), "--name", "suite",
                     "--dir", out, "--output", os.path.join(out, "suite.json")])
    print(f"suite: exit {code}, {suite_seconds:.0f} s (under 600: {suite_seconds < 600})")


if __name__ == "__main__":
    main()
