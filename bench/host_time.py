#!/usr/bin/env python3
"""Where the host's time goes in a step, from LibTorch's profiles (`vit_ddp --profile=torch`,
Kineto's Chrome traces): each operation's and CUDA runtime call's self time (its time less
the calls inside it on the same thread) and count per step, by name, for two or more
traces side by side, largest differences from the first trace first. trace_summary.py says
the same of the GPU's time.

  host_time.py LABEL=STEPS:TRACE LABEL=STEPS:TRACE... [--top N] [--json FILE]

STEPS: the steps the trace holds (--profile_steps). An eager step that waits for its host
is as long as the host's work on its busiest thread: the table's first lines say each
thread's busy time per step.
"""
import argparse
import collections
import json
import sys

# Host-side events: operations, user scopes, and the CUDA runtime and driver calls.
HOST = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function")


def self_times(events):
    """{name: [count, self microseconds]} and {thread: busy microseconds} of `events`
    (Chrome 'X' events of one trace): a call's self time is its duration less that of the
    calls it encloses on its thread."""
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in HOST and "dur" in e:
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    names = collections.defaultdict(lambda: [0, 0.0])
    busy = {}
    for thread, calls in by_thread.items():
        calls.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [end, event, children's time]
        total = 0.0

        def close(until):
            nonlocal total
            while stack and stack[-1][0] <= until:
                end, e, inner = stack.pop()
                names[e["name"]][0] += 1
                names[e["name"]][1] += e["dur"] - inner
                if stack:
                    stack[-1][2] += e["dur"]
                else:
                    total += e["dur"]

        for e in calls:
            close(e["ts"])
            stack.append([e["ts"] + e["dur"], e, 0.0])
        close(float("inf"))
        busy[f"thread {thread[1]}"] = total
    return names, busy


def main():
    p = argparse.ArgumentParser()
    p.add_argument("traces", nargs="+", help="LABEL=STEPS:TRACE")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--json")
    a = p.parse_args()
    runs = []
    for spec in a.traces:
        label, _, rest = spec.partition("=")
        steps, _, path = rest.partition(":")
        if not label or not steps.isdigit() or int(steps) < 1 or not path:
            sys.exit(f"host_time.py: {spec!r}: LABEL=STEPS:TRACE, STEPS a count of steps")
        with open(path) as f:
            trace = json.load(f)
        names, busy = self_times(trace.get("traceEvents", []))
        n = int(steps)
        runs.append((label, {k: (c / n, us / n / 1000) for k, (c, us) in names.items()},
                     {k: us / n / 1000 for k, us in busy.items()}))
    print("busy host threads, ms per step (threads over 1 ms)")
    for label, _, busy in runs:
        print(f"  {label}: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(busy.items(), key=lambda kv: -kv[1])
                                         if v >= 1))
    first = runs[0][1]
    names = set().union(*(r[1] for r in runs))
    rows = sorted(names, key=lambda k: -max(abs(r[1].get(k, (0, 0))[1] - first.get(k, (0, 0))[1]) for r in runs)
                  if len(runs) > 1 else -first[k][1])
    print(f"\nself time per step (ms, count), largest differences from {runs[0][0]} first")
    print(f"{'name':<60}" + "".join(f"{label[:22]:>24}" for label, _, _ in runs))
    for k in rows[:a.top]:
        cells = []
        for _, r, _ in runs:
            c, ms = r.get(k, (0, 0.0))
            cells.append(f"{ms:>10.3f} ms {c:>8.1f}x")
        print(f"{k[:59]:<60}" + "".join(f"{cell:>24}" for cell in cells))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({label: {"busy_ms": busy, "self": names} for label, names, busy in runs}, f, indent=1)


if __name__ == "__main__":
    main()
