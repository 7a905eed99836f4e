#!/usr/bin/env python3
"""Checks a run's traces as #27 asks, on any machine: the merged trace of the measured
steps (<experiment>.trace.json) has every rank on one clock and each bucket's collective
on the communication track; LibTorch's profile (<experiment>.torch_traces/rank<R>.json),
where LibTorch has Kineto, says which rank of which job it is.

  trace_check.py RUN_DIR EXPERIMENT

Prints what it found, one line each; exits 1 if a check fails.
"""
import glob
import json
import os
import sys


def spans(events, **match):
    return [e for e in events if e.get("ph") == "X" and all(e.get(k) == v for k, v in match.items())]


def check_steps_trace(path):
    events = json.load(open(path))["traceEvents"]
    ranks = sorted({e["pid"] for e in events})
    failed = []
    ends = {}
    for r in ranks:
        backward = sorted(spans(events, pid=r, name="backward"), key=lambda e: e["ts"])
        buckets = sorted(spans(events, pid=r, tid=1), key=lambda e: e["ts"])
        inside = sum(1 for b in buckets if any(s["ts"] <= b["ts"] and b["ts"] + b["dur"] <= s["ts"] + s["dur"] + 1
                                                for s in backward))
        print(f"rank {r}: {len(backward)} steps, {len(buckets)} bucket spans, {inside} of them inside a "
              f"step's backward, {sum(b['dur'] for b in buckets) / max(len(backward), 1) / 1e3:.3f} ms of "
              f"collectives per step")
        if not buckets:
            failed.append(f"rank {r} has no bucket spans")
        barrier = spans(events, pid=r, name="barrier")
        if barrier:
            ends[r] = barrier[0]["ts"] + barrier[0]["dur"]
    if len(ends) > 1:
        skew = max(ends.values()) - min(ends.values())
        print(f"the closing barrier ends within {skew:.0f} us on {len(ends)} ranks")
        if skew >= 1000:
            failed.append(f"the closing barrier ends {skew:.0f} us apart")
    return failed


def check_torch_traces(run_dir, experiment):
    failed = []
    for path in sorted(glob.glob(os.path.join(run_dir, f"{experiment}.torch_traces/rank*.json"))):
        trace = json.load(open(path))
        info = trace.get("distributedInfo")
        kinds = {e.get("cat") for e in trace["traceEvents"]}
        print(f"{os.path.basename(path)}: {len(trace['traceEvents'])} events, distributedInfo {info}, "
              f"categories {sorted(k for k in kinds if k)[:8]}")
        if "schemaVersion" in trace and not info:
            failed.append(f"{path}: Kineto's file without distributedInfo")
    return failed


def main():
    run_dir, experiment = sys.argv[1], sys.argv[2]
    failed = check_steps_trace(os.path.join(run_dir, f"{experiment}.trace.json"))
    failed += check_torch_traces(run_dir, experiment)
    for f in failed:
        print("FAILED:", f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
