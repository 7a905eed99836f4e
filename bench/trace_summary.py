#!/usr/bin/env python3
"""Where a step's GPU time goes, from `vit_ddp --profile=torch` traces.

Each trace (<experiment>.torch_traces/rank<R>.json) holds a few steps run after the
measured ones: the trainer's phase scopes ("get batch", "forward", "backward",
"optimizer step") on the CPU, the CUDA runtime's launches, and every kernel, copy and
memset on the stream that ran it, with the correlation id that ties a kernel to its
launch. For each trace this prints, per profiled step (means over the steps):

- each phase's GPU work on the compute stream (the stream of the forward's kernels): how
  long the stream was idle between the previous phase's last kernel and this phase's
  first, the span from its first kernel's start to its last kernel's end, and the
  kernels' summed time (span - sum = the stream idle inside the phase: waiting for
  another stream or for launches); means over the steps after the first, which starts
  on an idle GPU;
- the step: from the first forward kernel to the next step's first forward kernel;
- every other stream: its busy time, and how much of it ran beside the compute
  stream's kernels.

Usage: trace_summary.py TRACE... [--json OUT]
"""

import argparse
import bisect
import json
import sys
from collections import defaultdict

PHASES = ("forward", "backward", "optimizer step")
SCOPES = PHASES + ("get batch",)
CPU_CATEGORIES = {"cpu", "cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"}
GPU_CATEGORIES = {"gpu", "kernel", "gpu_memcpy", "gpu_memset"}


def union_length(intervals):
    total, end = 0.0, None
    start = None
    for a, b in sorted(intervals):
        if end is None or a > end:
            if end is not None:
                total += end - start
            start, end = a, b
        else:
            end = max(end, b)
    if end is not None:
        total += end - start
    return total


def overlap_length(a_intervals, b_union):
    """Length of the intersection of intervals `a` (any) with the sorted disjoint `b_union`."""
    starts = [s for s, _ in b_union]
    total = 0.0
    for a, b in merge(a_intervals):
        i = max(bisect.bisect_right(starts, a) - 1, 0)
        while i < len(b_union) and b_union[i][0] < b:
            s, e = b_union[i]
            total += max(0.0, min(b, e) - max(a, s))
            i += 1
    return total


def merge(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def kernel_family(name):
    """A kernel's name without its template arguments and parameters, for comparing runs."""
    for cut in ("<", "("):
        if cut in name:
            name = name[: name.index(cut)]
    return name.replace("void ", "").strip()[:80]


def summarize(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    # LibTorch 1.13's legacy profiler writes two categories, "cpu" and "gpu"; Kineto's
    # (LibTorch 2.x with CUPTI) writes one per kind of event (CPU_CATEGORIES, GPU_CATEGORIES).
    cpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in CPU_CATEGORIES]
    # The profiler also puts each user scope on the GPU's timeline (the span of the work
    # launched inside it); those are not kernels.
    gpu = [e for e in events
           if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES and e["name"] not in SCOPES]
    if not gpu:
        raise SystemExit(f"{path}: no GPU events (a CPU run, or LibTorch without CUPTI)")
    # Phase scopes, in time order; each step starts with its "forward".
    scopes = sorted((e for e in cpu if e["name"] in PHASES), key=lambda e: e["ts"])
    launches = {}
    for e in cpu:
        if "aunch" in e["name"] or e["name"].startswith("cuda") or e["name"].startswith("cu"):
            launches.setdefault(e["args"].get("correlation"), e)

    def phase_of(kernel):
        launch = launches.get(kernel["args"].get("correlation"))
        if launch is None:
            return None
        t = launch["ts"]
        for s in scopes:
            if s["ts"] <= t <= s["ts"] + s["dur"]:
                return s
        return None

    by_phase = defaultdict(list)  # id(scope) -> kernels
    streams = defaultdict(list)
    for k in gpu:
        streams[k["args"]["stream"]].append(k)
        s = phase_of(k)
        if s is not None:
            by_phase[id(s)].append(k)
    forward_streams = defaultdict(float)
    for s in scopes:
        if s["name"] == "forward":
            for k in by_phase[id(s)]:
                forward_streams[k["args"]["stream"]] += k["dur"]
    if not forward_streams:
        raise SystemExit(f"{path}: no kernel launched inside a \"forward\" scope (a trace of vit_ddp --profile=torch?)")
    compute = max(forward_streams, key=forward_streams.get)
    compute_union = merge([(k["ts"], k["ts"] + k["dur"]) for k in streams[compute]])

    forwards = [s for s in scopes if s["name"] == "forward"]
    steps = len(forwards)
    # Means over the steps after the first: the first starts on an idle GPU (the trainer
    # synchronizes before the profiler starts), so its launches pace it.
    per_phase = {p: {"before_ms": 0.0, "span_ms": 0.0, "kernels_ms": 0.0, "count": 0, "steps": 0} for p in PHASES}
    previous_end = None
    for s in scopes:
        ks = [k for k in by_phase[id(s)] if k["args"]["stream"] == compute]
        if not ks:
            continue
        a = min(k["ts"] for k in ks)
        b = max(k["ts"] + k["dur"] for k in ks)
        # (With one step, that step.)
        if s["ts"] >= forwards[min(1, steps - 1)]["ts"] and (previous_end is not None or steps == 1):
            d = per_phase[s["name"]]
            d["before_ms"] += max(a - previous_end, 0.0) / 1e3 if previous_end is not None else 0.0
            d["span_ms"] += (b - a) / 1e3
            d["kernels_ms"] += sum(k["dur"] for k in ks) / 1e3
            d["count"] += len(ks)
            d["steps"] += 1
            for k in ks:
                names = d.setdefault("by_kernel_ms", defaultdict(float))
                names[kernel_family(k["name"])] += k["dur"] / 1e3
        previous_end = b
    for d in per_phase.values():
        n = max(d.pop("steps"), 1)
        by_kernel = d.pop("by_kernel_ms", {})
        for key in d:
            d[key] /= n
        d["by_kernel_ms"] = {name: ms / n for name, ms in by_kernel.items()}
    # Step time on the GPU: between consecutive forwards' first compute kernels.
    firsts = []
    for s in forwards:
        ks = [k for k in by_phase[id(s)] if k["args"]["stream"] == compute]
        if ks:
            firsts.append(min(k["ts"] for k in ks))
    step_ms = (firsts[-1] - firsts[0]) / 1e3 / (len(firsts) - 1) if len(firsts) > 1 else None
    window = (firsts[0], firsts[-1]) if len(firsts) > 1 else None

    def clip(intervals):
        if window is None:
            return intervals
        a, b = window
        return [(max(x, a), min(y, b)) for x, y in intervals if y > a and x < b]

    other = {}
    for stream, ks in streams.items():
        if stream == compute:
            continue
        iv = clip([(k["ts"], k["ts"] + k["dur"]) for k in ks])
        if not iv:
            continue
        names = defaultdict(float)
        for k in ks:
            names[k["name"][:60]] += k["dur"]
        top = max(names, key=names.get)
        n = max(len(firsts) - 1, 1)
        other[str(stream)] = {
            "busy_ms": union_length(iv) / 1e3 / n,
            "beside_compute_ms": overlap_length(iv, clip(compute_union)) / 1e3 / n,
            "kernels": len(ks),
            "top_kernel": top,
        }
    n = max(len(firsts) - 1, 1)
    compute_busy = union_length(clip(compute_union)) / 1e3 / n
    return {
        "trace": path,
        "steps": steps,
        "compute_stream": compute,
        "step_ms": step_ms,
        "compute_busy_ms": compute_busy,
        "phases": per_phase,
        "other_streams": other,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--json", help="write the summaries here too")
    parser.add_argument("--top", type=int, default=6,
                        help="kernels whose time per phase differs most from the first trace's (0: none)")
    args = parser.parse_args()
    out = []
    for path in args.traces:
        s = summarize(path)
        out.append(s)
        print(f"{path}: {s['steps']} steps, compute stream {s['compute_stream']}")
        step = f"{s['step_ms']:.2f}" if s["step_ms"] is not None else "-"
        print(f"  step {step} ms on the GPU, compute stream busy {s['compute_busy_ms']:.2f} ms")
        for p, d in s["phases"].items():
            print(f"  {p:15s} waited {d['before_ms']:5.2f} ms, then span {d['span_ms']:7.2f} ms, kernels "
                  f"{d['kernels_ms']:7.2f} ms, idle inside {d['span_ms'] - d['kernels_ms']:6.2f} ms "
                  f"({d['count']:.0f} kernels)")
        if args.top and out[0] is not s:
            for p in PHASES:
                mine, base = s["phases"][p]["by_kernel_ms"], out[0]["phases"][p]["by_kernel_ms"]
                delta = {n: mine.get(n, 0.0) - base.get(n, 0.0) for n in set(mine) | set(base)}
                top = sorted(delta.items(), key=lambda kv: -abs(kv[1]))[: args.top]
                if top:
                    print(f"    {p} against the first trace: " +
                          ", ".join(f"{n} {ms:+.2f}" for n, ms in top if abs(ms) >= 0.01))
        for stream, d in sorted(s["other_streams"].items(), key=lambda kv: -kv[1]["busy_ms"]):
            print(f"  stream {stream:>4s}: busy {d['busy_ms']:6.2f} ms, beside compute {d['beside_compute_ms']:6.2f} ms, "
                  f"{d['kernels']} kernels, mostly {d['top_kernel']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
