#!/usr/bin/env python3
"""Issue #29's acceptance 1 on a GPU machine, in one call: for each model and transport,
`vit_ddp --tune` with the exhaustive sweep after it (tune { exhaustive: true }, the same
caps, 3 repetitions each), then PyTorch's DDP with the tuner's code and with its default
bucket_cap_mb=25, alternately. Writes OUT/<model>_<transport>/ (suite, log, report) and
OUT/summary.json, and prints the table last:

  python3 bench/tune_check.py --out DIR [--models vit_l_32,vit_b_16] [--transports nvlink,host]
  python3 bench/tune_check.py --out DIR --cpu    # the script itself, on CPUs: a tiny ViT, no PyTorch

Each model and transport is about 40 runs of vit_ddp (10 s to 15 s each on H100/H200 for
ViT-L/32): run one or two per call of a device with a 10-minute limit.

Columns: the chosen cap and the sweep's fastest; the tuned cap's steps/s over the sweep's
best (acceptance: at least 0.98); tuning's time over the sweep's (at most 1/3); the
largest |predicted/measured - 1| of the verified candidates (at most 5%); PyTorch's
steps/s with the tuner's code and with cap 25.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRANSPORTS = {"nvlink": ("NVLINK", {}), "host": ("HOST_MEMORY", {"NCCL_P2P_DISABLE": "1"}),
              "gloo": ("TRANSPORT_UNSPECIFIED", {})}
PRESETS = {"vit_l_32": "VIT_L_32", "vit_b_16": "VIT_B_16", "vit_b_32": "VIT_B_32", "tiny": "VIT_TINY_TEST"}

SUITE = """# proto-message: ddplab.v1.Suite
name: "tune_{key}"
tune {{ exhaustive: true repetitions: {reps} verify: {verify} }}
experiment {{
  name: "ddp"
  model {{ preset: {preset} }}
  data {{ batch_size: {batch} num_workers: {workers} {data} }}
  steps {{ warmup: {warmup} measured: {measured} }}
  optimizer {{ sgd {{ learning_rate: 0.01 }} }}
  distributed {{ gpus_per_node: {gpus} transport: {transport} {device} }}
}}
"""


def pytorch(model, gpus, code_file, env, out):
    py = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}",
          os.path.join(HERE, "pytorch_vit.py"), "--model", model, "--warmup", "10", "--measured", "20",
          "--ddp", "--output", out]
    if code_file:
        py += ["--ddp_code", code_file]
    subprocess.run(py, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, check=False)
    try:
        with open(out) as f:
            return json.load(f)["steps_per_s"]
    except (OSError, ValueError, KeyError):
        return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="vit_l_32,vit_b_16")
    p.add_argument("--transports", default="nvlink,host")
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--verify", type=int, default=2)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--measured", type=int, default=20)
    p.add_argument("--cpu", action="store_true", help="a tiny ViT on CPU processes over Gloo, no PyTorch runs")
    p.add_argument("--vit_ddp", default=os.path.join(ROOT, "bazel-bin/experiments/vit_ddp"))
    a = p.parse_args()
    if a.cpu:
        a.models, a.transports = "tiny", "gloo"
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for model in a.models.split(","):
        for transport in a.transports.split(","):
            key = f"{model}_{transport}"
            d = os.path.join(a.out, key)
            os.makedirs(d, exist_ok=True)
            suite = os.path.join(d, "suite.textproto")
            with open(suite, "w") as f:
                f.write(SUITE.format(key=key, reps=a.reps, verify=a.verify, preset=PRESETS[model], gpus=a.gpus,
                                     transport=TRANSPORTS[transport][0], batch=8 if a.cpu else 32,
                                     workers=1 if a.cpu else 8, data="image_size: 32" if a.cpu else "pin_memory: true",
                                     warmup=a.warmup, measured=a.measured, device="device: CPU" if a.cpu else ""))
            start = time.time()
            with open(os.path.join(d, "vit_ddp.log"), "w") as log:
                rc = subprocess.run([a.vit_ddp, f"--experiment={suite}", "--tune", f"--output_dir={d}/results"],
                                    stdout=log, stderr=subprocess.STDOUT, check=False).returncode
            row = {"model": model, "transport": transport, "rc": rc, "seconds": time.time() - start}
            try:
                with open(os.path.join(d, f"results/tune_{key}_tune/report.json")) as f:
                    t = json.load(f).get("tuning", {})
            except (OSError, ValueError):
                t = {}
            row["tuning"] = t
            env = dict(os.environ, **TRANSPORTS[transport][1])
            code = os.path.join(d, "tuned_code.py")
            with open(code, "w") as f:
                f.write(t.get("pytorch", ""))
            row["pytorch_tuned"] = None if a.cpu else pytorch(model, a.gpus, code if t.get("pytorch") else None, env,
                                                              os.path.join(d, "pytorch_tuned.json"))
            row["pytorch_cap25"] = None if a.cpu else pytorch(model, a.gpus, None, env,
                                                              os.path.join(d, "pytorch_cap25.json"))
            rows.append(row)
            with open(os.path.join(a.out, "summary.json"), "w") as f:
                json.dump(rows, f, indent=1)
    print("| model | transport | chosen cap | sweep's best | tuned/best steps/s | tuning/sweep time |"
          " max |error| verified | PyTorch tuned | PyTorch cap 25 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        t = r["tuning"]
        errors = [abs(c.get("error", 0)) for c in t.get("candidates", []) if c.get("verified")]
        ratio = t.get("tuning_seconds", 0) / t["exhaustive_seconds"] if t.get("exhaustive_seconds") else float("nan")
        fmt = lambda v: "-" if v is None else f"{v:.3f}"
        print(f"| {r['model']} | {r['transport']} | {t.get('chosen_cap_mb', '-')} | {t.get('exhaustive_best_cap_mb', '-')} |"
              f" {t.get('vs_exhaustive_best', float('nan')):.3f} | {ratio:.2f} |"
              f" {max(errors) * 100 if errors else float('nan'):.1f}% | {fmt(r['pytorch_tuned'])} |"
              f" {fmt(r['pytorch_cap25'])} |")
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
