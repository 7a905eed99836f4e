#!/usr/bin/env python3
"""What the GPU ran per step, kernel by kernel, in two or more profiles of the same
training: which kinds of kernel one side runs more of, or longer, than the other.

Each TRACE is a Chrome trace with CUDA kernels (`vit_ddp --profile=torch`, or
bench/pytorch_vit.py --profile_trace) over STEPS steps, given as LABEL=STEPS:TRACE. For
each, the kernels' summed time and count per step, by kind (GEMM, attention, layer norm,
the optimizer, casts and other elementwise kernels, reductions, copies, NCCL) and by
kernel family (the name without its template arguments), and the GPU's busy time (the
union of every kernel, copy and memset) against the span from the first to the last.

  kernel_table.py ddplab=5:rank0.json compile=5:compile.json [--top 25] [--json OUT]
"""

import argparse
import json
import re
from collections import defaultdict

from trace_summary import union_length

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}

# (kind, pattern on the kernel's name), first match wins.
KINDS = (
    ("nccl", r"nccl"),
    ("attention", r"flash|fmha|attention|sdpa|efficient_attention"),
    ("gemm", r"gemm|cutlass|sm90_xmma|xmma|cublas|nvjet|ampere_|sm80_|splitK"),
    ("optimizer", r"fused_adam|FusedAdam|adam|sgd|multi_tensor_apply"),
    ("layer norm", r"layer_norm|LayerNorm|layernorm"),
    ("softmax / loss", r"softmax|nll_loss|cross_entropy|log_softmax"),
    ("reduction", r"reduce_kernel|reduction|Reduce"),
    ("triton (inductor)", r"^triton_"),
    ("copy / cast", r"copy|cast|Memcpy|Memset|fill|cat_"),
    ("elementwise", r"elementwise|vectorized|unrolled|gelu|GeluCUDAKernel"),
)


def kind_of(name):
    for kind, pattern in KINDS:
        if re.search(pattern, name, re.IGNORECASE):
            return kind
    return "other"


def family(name, full=False):
    """The kernel's name without its template arguments and parameters; with `full`, with
    the functors named in its template arguments (which ATen's elementwise kernels carry)."""
    base = name.replace("void ", "").strip()
    short = base
    for cut in ("<", "("):
        if cut in short:
            short = short[: short.index(cut)]
    if not full or "<" not in base:
        return short[:90]
    inner = base[base.index("<"):]
    named = re.findall(r"([A-Za-z_]\w*(?:Functor|functor|_kernel\w*|_impl\w*|Op\b|lambda)\w*)", inner)
    seen = [n for i, n in enumerate(named) if n not in named[:i]][:3]
    return (short + "<" + ",".join(seen) + ">")[:140]


def summarize(path, steps, full=False):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
    if not gpu:
        raise SystemExit(f"{path}: no GPU kernels (a CPU run, or a profiler without CUPTI)")
    kinds, families = defaultdict(lambda: [0.0, 0]), defaultdict(lambda: [0.0, 0, ""])
    for e in gpu:
        name = e["name"] if e["cat"] == "kernel" else e["cat"]
        k = kinds[kind_of(name)]
        k[0] += e["dur"] / 1000.0 / steps
        k[1] += 1 / steps
        f = families[family(name, full)]
        f[0] += e["dur"] / 1000.0 / steps
        f[1] += 1 / steps
        f[2] = kind_of(name)
    busy = union_length([(e["ts"], e["ts"] + e["dur"]) for e in gpu]) / 1000.0 / steps
    span = (max(e["ts"] + e["dur"] for e in gpu) - min(e["ts"] for e in gpu)) / 1000.0 / steps
    return {"busy_ms": busy, "span_ms": span, "kernels": len(gpu) / steps,
            "kernels_ms": sum(k[0] for k in kinds.values()),
            "kinds": {k: {"ms": v[0], "count": v[1]} for k, v in kinds.items()},
            "families": {k: {"ms": v[0], "count": v[1], "kind": v[2]} for k, v in families.items()}}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("traces", nargs="+", help="LABEL=STEPS:TRACE")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--full_names", action="store_true",
                   help="families split by the functors in their template arguments")
    p.add_argument("--json")
    a = p.parse_args()
    runs = {}
    for arg in a.traces:
        label, _, rest = arg.partition("=")
        steps, _, path = rest.partition(":")
        if not label or not steps.isdigit() or not path:
            raise SystemExit(f"{arg}: expected LABEL=STEPS:TRACE")
        runs[label] = summarize(path, int(steps), a.full_names)
    labels = list(runs)
    print("per step | " + " | ".join(labels))
    print("--- | " + " | ".join("---" for _ in labels))
    for key, what in (("busy_ms", "GPU busy ms"), ("span_ms", "first to last kernel ms"),
                      ("kernels_ms", "kernels' summed ms"), ("kernels", "kernels")):
        print(f"{what} | " + " | ".join(f"{runs[l][key]:.2f}" for l in labels))
    kinds = sorted({k for r in runs.values() for k in r["kinds"]},
                   key=lambda k: -max(r["kinds"].get(k, {"ms": 0})["ms"] for r in runs.values()))
    for k in kinds:
        cells = [runs[l]["kinds"].get(k, {"ms": 0.0, "count": 0}) for l in labels]
        print(f"{k} | " + " | ".join(f"{c['ms']:.2f} ms, {c['count']:.1f}" for c in cells))
    print()
    for l in labels:
        print(f"{l}: the {a.top} longest kernel families per step (ms, count, kind)")
        top = sorted(runs[l]["families"].items(), key=lambda kv: -kv[1]["ms"])[: a.top]
        for name, v in top:
            print(f"  {v['ms']:7.3f} {v['count']:6.1f}  {v['kind']:<17} {name}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
