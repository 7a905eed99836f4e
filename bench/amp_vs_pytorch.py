#!/usr/bin/env python3
"""On a GPU machine, in one call (#42): ddplab's amp_study (bf16 autocast and AdamW) and
PyTorch on the same configurations, each row's PyTorch run being the report's own code for
it (a run's "pytorch" field: the DDP wrapper, the hook, the AdamW and the autocast),
pasted into bench/pytorch_vit.py. Also PyTorch on one GPU eager and with torch.compile (for
information). Run from the repository root after building vit_ddp; prints the table last.

  python3 bench/amp_vs_pytorch.py --out DIR [--only NAME[,NAME]] [--deadline S] [--skip_one_gpu]

The whole study with a PyTorch run for each row takes longer than one 10-minute call on 2
GPUs: --only splits it by rows (each row's ddplab and PyTorch runs stay in one call), e.g.
the NVLink rows in one call and the host-memory rows in another.

Rows whose configuration PyTorch has no form of (the report's "ddplab only") get none. On
one GPU the suite's runs of several processes are left out by vit_ddp's plan (it says so).
Writes DIR/suite/ (the report and results), DIR/pytorch/<row>.json and DIR/table.json.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ddp_matrix import TRAINING, TRANSPORTS, prepare_output, pytorch_command, run  # noqa: E402

NCCL_ENV = {name: env for name, env in TRANSPORTS.values()}
AMP = TRAINING["amp"][1]  # pytorch_vit.py trains as amp_study does


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--binary", default="bazel-bin/experiments/vit_ddp")
    p.add_argument("--only", default="", help="vit_ddp --only, names comma-separated (default: the whole study)")
    p.add_argument("--deadline", type=float, default=540, help="no PyTorch run starts after this many seconds")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--measured", type=int, default=20)
    p.add_argument("--skip_one_gpu", action="store_true",
                   help="no PyTorch runs on one GPU (eager, torch.compile): a call that splits the rows")
    a = p.parse_args()
    out = prepare_output(a.out)
    start = time.monotonic()
    cmd = [a.binary, "--experiment=experiments/amp_study.textproto", f"--output_dir={out}/suite"]
    if a.only:
        cmd.append(f"--only={a.only}")
    run(cmd, os.path.join(out, "logs", "suite.txt"))
    results = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/suite/amp_study/*.json"))
               if os.path.basename(f) != "report.json" and f.count(".") == 1]
    # A row's figure is its median over the suite's repetitions (report.json), not the last
    # repetition's result file.
    report = os.path.join(out, "suite", "amp_study", "report.json")
    medians = {r["experiment"]: r["steps_per_s"] for r in json.load(open(report))["rows"]} \
        if os.path.exists(report) else {}
    rows = []
    # One GPU: eager as the suite's single_gpu row, and torch.compile.
    for name, extra in () if a.skip_one_gpu else (("pytorch_1gpu_eager", []), ("pytorch_1gpu_compile", ["--compile"])):
        if time.monotonic() - start < a.deadline:
            path = os.path.join(out, "pytorch", name + ".json")
            if run(pytorch_command(1, a.warmup, a.measured, path, None, AMP + extra),
                   os.path.join(out, "logs", name + ".txt")) == 0:
                rows.append({"row": name, "pytorch": json.load(open(path))["steps_per_s"]})
    for r in results:
        median = medians.get(r["experiment"], {})
        row = {"row": r["experiment"], "ddplab": median.get("median", r["steps_per_s"]), "gpus": r["world_size"],
               "repetitions": median.get("count", 1)}
        code = r.get("pytorch", "")
        only = r.get("ddplab_only", [])
        if r["world_size"] > 1 and code and not only and time.monotonic() - start < a.deadline:
            code_file = os.path.join(out, "pytorch", r["experiment"] + ".py")
            with open(code_file, "w") as f:
                f.write(code)
            path = os.path.join(out, "pytorch", r["experiment"] + ".json")
            env = dict(os.environ, **NCCL_ENV.get(r.get("transport", ""), {}))
            cmd = pytorch_command(r["world_size"], a.warmup, a.measured, path, ["--ddp_code", code_file], AMP)
            if run(cmd, os.path.join(out, "logs", r["experiment"] + ".txt"), env) == 0:
                row["pytorch"] = json.load(open(path))["steps_per_s"]
        elif r["world_size"] == 1 and r["experiment"] == "single_gpu":
            eager = next((x for x in rows if x["row"] == "pytorch_1gpu_eager"), None)
            row["pytorch"] = eager and eager["pytorch"]
        if only:
            row["note"] = "ddplab only: " + ", ".join(only)
        elif r["world_size"] > 1 and not code:
            row["note"] = "no PyTorch code in the result"
        elif r["world_size"] > 1 and "pytorch" not in row:
            row["note"] = "PyTorch not run (deadline or failure: logs/)"
        row["peak_fraction"] = r.get("peak_fraction")
        rows.append(row)
    with open(os.path.join(out, "table.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(f"{'row':<34} {'gpus':>4} {'ddplab':>8} {'pytorch':>8} {'ratio':>6} {'of peak':>8}")
    for row in rows:
        d, t = row.get("ddplab"), row.get("pytorch")
        ratio = f"{d / t:.2f}x" if d and t else "-"
        peak = f"{100 * row['peak_fraction']:.1f}%" if row.get("peak_fraction") else "-"
        print(f"{row['row']:<34} {row.get('gpus', 1):>4} {d or 0:>8.3f} {t or 0:>8.3f} {ratio:>6} {peak:>8}"
              f"  {row.get('note', '')}")


if __name__ == "__main__":
    main()
