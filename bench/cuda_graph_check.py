#!/usr/bin/env python3
"""On a GPU machine: the cuda_graph plugin trains as the same levers do without it.

For each combination of levers that a graph can replay (bucket sizing, static graph,
bucket views, bf16, fp8, zero_copy, the optimizer overlapped), trains the same experiment
twice on --gpus GPUs (NCCL), eagerly and with `plugin { cuda_graph {} }`, from the same
seed, and compares the loss of every step: the graph's steps after its capture compute
with the gradients the captured collectives averaged, so any difference in what they
reduce shows in the next step's loss. Prints a table (the largest relative difference of
any step's loss, both runs' steps/s) and exits non-zero where a difference passes
--tolerance or a run fails. Run from the repository root after building vit_ddp.

  python3 bench/cuda_graph_check.py --out DIR [--gpus 2] [--model VIT_B_32] [--combos a,b]
"""
import argparse
import json
import os
import subprocess
import sys

LEVERS = "plugin { static_graph {} } plugin { bucket_view {} }"
COMBOS = {
    "buckets": "plugin { bucket_sizing { bucket_cap_mb: 4 first_bucket_cap_mb: 1 } }",
    "one_bucket": "plugin { bucket_sizing { bucket_cap_mb: 2000 } }",
    "levers": "plugin { bucket_sizing { bucket_cap_mb: 4 } } " + LEVERS,
    "bf16": "plugin { bucket_sizing { bucket_cap_mb: 4 } } " + LEVERS + " plugin { bf16 { sample_error_every: 0 } }",
    "fp8": "plugin { bucket_sizing { bucket_cap_mb: 4 } } " + LEVERS + " plugin { fp8 { sample_error_every: 0 } }",
    "zero_copy": "plugin { bucket_sizing { bucket_cap_mb: 4 } } plugin { static_graph {} } plugin { zero_copy {} }",
    "optimizer_overlap": "plugin { bucket_sizing { bucket_cap_mb: 4 } } " + LEVERS + " plugin { optimizer_overlap {} }",
}
TRAINING = {
    "sgd": "optimizer { sgd { learning_rate: 0.01 momentum: 0.9 } }",
    "amp": "optimizer { adamw { learning_rate: 0.0005 } } precision: BF16_AUTOCAST",
}

EXPERIMENT = """# proto-message: ddplab.v1.Experiment
name: "{name}"
model {{ preset: {model} }}
data {{ batch_size: {batch} num_workers: 2 }}
steps {{ warmup: 8 measured: 10 }}
{training}
distributed {{ gpus_per_node: {gpus} device: CUDA {force} }}
{plugins}
"""


def train(out, name, text, binary):
    path = os.path.join(out, name + ".textproto")
    with open(path, "w") as f:
        f.write(text)
    log = os.path.join(out, name + ".log")
    with open(log, "w") as f:
        code = subprocess.call([binary, f"--experiment={path}", f"--output_dir={out}/{name}"], stdout=f,
                               stderr=subprocess.STDOUT)
    result = os.path.join(out, name, name, name + ".json")
    if code != 0 or not os.path.exists(result):
        with open(log) as f:
            return None, "".join(f.readlines()[-8:])
    with open(result) as f:
        return json.load(f), ""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--model", default="VIT_B_32")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--combos", default=",".join(COMBOS))
    p.add_argument("--training", default="sgd,amp")
    p.add_argument("--tolerance", type=float, default=1e-3, help="largest relative difference of a step's loss")
    p.add_argument("--binary", default="bazel-bin/experiments/vit_ddp")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows, failed = [], 0
    for training in a.training.split(","):
        for combo in a.combos.split(","):
            runs = {}
            for mode in ("eager", "graph"):
                name = f"{combo}_{training}_{mode}"
                plugins = COMBOS[combo] + (" plugin { cuda_graph {} }" if mode == "graph" else "")
                text = EXPERIMENT.format(name=name, model=a.model, batch=a.batch, training=TRAINING[training],
                                         gpus=a.gpus, force="force_engine: true" if a.gpus == 1 else "",
                                         plugins=plugins)
                runs[mode] = train(a.out, name, text, a.binary)
            (eager, eager_error), (graph, graph_error) = runs["eager"], runs["graph"]
            if eager is None or graph is None:
                failed += 1
                rows.append((combo, training, "FAILED", eager_error or graph_error))
                continue
            diff = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(eager["loss"], graph["loss"]))
            ok = diff <= a.tolerance and len(eager["loss"]) == len(graph["loss"])
            failed += not ok
            rows.append((combo, training, "ok" if ok else "DIFFERS",
                         f"max rel loss diff {diff:.2e}, loss {eager['loss'][-1]:.4f} / {graph['loss'][-1]:.4f}, "
                         f"steps/s {eager['steps_per_s']:.2f} eager, {graph['steps_per_s']:.2f} graph"))
    with open(os.path.join(a.out, "check.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(f"cuda_graph against eager, {a.model}, {a.gpus} GPU(s), batch {a.batch} per GPU")
    for combo, training, verdict, detail in rows:
        print(f"{combo:18s} {training:4s} {verdict:8s} {detail.strip()}")
    print(f"{len(rows) - failed} of {len(rows)} as without the graph")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
