#!/usr/bin/env python3
"""What a suite's runs cost beyond their training steps: runs a suite (cpu_smoke by
default) with vit_ddp into a fresh directory, timed, and prints per run the time that is
not steps: starting processes, the process group, building the model, writing results.

  bazel build //experiments:vit_ddp && python3 bench/run_overhead.py [--experiment FILE] [--reps N]

A run's steps take (warm-up + measured + cool-down) times its median step (each
repetition's own, from its result); the overhead per run is the suite's wall time less
every run's steps, over the runs. --reps repeats the whole suite and reports each.
"""
import argparse
import glob
import json
import os
import subprocess
import tempfile
import time


def steps_seconds(result):
    """Seconds of training steps in every repetition the result holds."""
    steps = result["resolved"]["steps"]
    count = int(steps.get("warmup", 0)) + int(steps.get("measured", 0)) + int(steps.get("cooldown", 0))
    reps = result.get("repetitions") or [{"phases": result["phases"]}]
    return sum(count * rep["phases"]["step_ms"] / 1000 for rep in reps), len(reps)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--experiment", default="experiments/cpu_smoke.textproto")
    p.add_argument("--binary", default="bazel-bin/experiments/vit_ddp")
    p.add_argument("--reps", type=int, default=1)
    a = p.parse_args()
    print(f"{'suite run':>9} {'runs':>5} {'wall s':>8} {'steps s':>8} {'overhead s/run':>15}")
    for rep in range(1, a.reps + 1):
        with tempfile.TemporaryDirectory() as out:
            start = time.monotonic()
            subprocess.run([a.binary, f"--experiment={a.experiment}", f"--output_dir={out}"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall = time.monotonic() - start
            runs, steps = 0, 0.0
            for path in glob.glob(os.path.join(out, "*", "*.json")):
                name = os.path.basename(path)[:-len(".json")]
                if name == "report" or "." in name:
                    continue
                s, n = steps_seconds(json.load(open(path)))
                steps += s
                runs += n
        print(f"{rep:>9} {runs:>5} {wall:>8.2f} {steps:>8.2f} {(wall - steps) / max(runs, 1):>15.3f}")


if __name__ == "__main__":
    main()
