#!/usr/bin/env python3
"""On a GPU machine: the cuda_graph plugin trains as the same levers do without it.

For each combination of levers that a graph can replay (bucket sizing, static graph,
bucket views, bf16, fp8, zero_copy, the optimizer overlapped or sharded), trains the same experiment
twice on --gpus GPUs (NCCL), eagerly and with `plugin { cuda_graph {} }`, from the same
seed, and compares the loss of every step: the graph's steps after its capture compute
with the gradients the captured collectives averaged, so any difference in what they
reduce shows in the next step's loss. Prints a table (the largest relative difference of
any step's loss, both runs' steps/s) and exits non-zero where a difference passes
--tolerance or a run fails. Run from the repository root after building vit_ddp.

With --against BINARY (another build's vit_ddp), each run, eager and as a graph, is
compared with the same run of that build instead: a change that should not move a value
(say, where gradients are written) shows a difference at --tolerance 0.

  python3 bench/cuda_graph_check.py --out DIR [--gpus 2] [--model VIT_B_32] [--combos a,b]
  python3 bench/cuda_graph_check.py --out DIR --gpus 1 --against BEFORE/vit_ddp --tolerance 0
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
    # Lossless: under amp the blocks' linear layers' gradients go as bfloat16 (decided in
    # the eager steps before the capture).
    "bf16_exact": "plugin { bucket_sizing { bucket_cap_mb: 4 } } " + LEVERS + " plugin { bf16_exact {} }",
    "zero_copy": "plugin { bucket_sizing { bucket_cap_mb: 4 } } plugin { static_graph {} } plugin { zero_copy {} }",
    "optimizer_overlap": "plugin { bucket_sizing { bucket_cap_mb: 4 } } " + LEVERS + " plugin { optimizer_overlap {} }",
    # The optimizer sharded over the ranks: a reduce-scatter, the shard's step and an
    # all-gather in place, captured.
    "sharded": "plugin { bucket_sizing { bucket_cap_mb: 4 } } " + LEVERS + " plugin { sharded_optimizer {} }",
    "sharded_after": "plugin { bucket_sizing { bucket_cap_mb: 4 } } " + LEVERS +
                     " plugin { sharded_optimizer { during_backward: false } }",
    # The same by copy engines between the GPUs' buckets, with signals the graph replays.
    "sharded_copies": "plugin { bucket_sizing { bucket_cap_mb: 4 } } " + LEVERS +
                      " plugin { sharded_optimizer { by_copy_engines: true } }",
    # The engine on with one GPU (a hook in the chain): bucket views, nothing sent.
    "no_comm": "plugin { bucket_sizing { bucket_cap_mb: 4 } } " + LEVERS + " plugin { no_communication {} }",
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
    p.add_argument("--against", default="", help="another build's vit_ddp: each run against its own there")
    a = p.parse_args()
    os.makedirs(os.path.join(a.out, "against") if a.against else a.out, exist_ok=True)
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
                if a.against:
                    runs[mode + " against"] = train(os.path.join(a.out, "against"), name, text, a.against)
            pairs = [("eager", "graph")] if not a.against else [("eager against", "eager"), ("graph against", "graph")]
            for first, second in pairs:
                (x, x_error), (y, y_error) = runs[first], runs[second]
                label = training if not a.against else f"{training} {second}"
                if x is None or y is None:
                    failed += 1
                    rows.append((combo, label, "FAILED", x_error or y_error))
                    continue
                diff = max(abs(u - v) / max(abs(u), 1e-12) for u, v in zip(x["loss"], y["loss"]))
                ok = diff <= a.tolerance and len(x["loss"]) == len(y["loss"])
                failed += not ok
                rows.append((combo, label, "ok" if ok else "DIFFERS",
                             f"max rel loss diff {diff:.2e}, loss {x['loss'][-1]:.4f} / {y['loss'][-1]:.4f}, "
                             f"steps/s {x['steps_per_s']:.2f} {first}, {y['steps_per_s']:.2f} {second}"))
    with open(os.path.join(a.out, "check.json"), "w") as f:
        json.dump(rows, f, indent=1)
    against = f"each run against {a.against}" if a.against else "cuda_graph against eager"
    print(f"{against}, {a.model}, {a.gpus} GPU(s), batch {a.batch} per GPU")
    for combo, training, verdict, detail in rows:
        print(f"{combo:18s} {training:4s} {verdict:8s} {detail.strip()}")
    print(f"{len(rows) - failed} of {len(rows)} as " + ("the other build's" if a.against else "without the graph"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
