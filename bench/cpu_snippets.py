#!/usr/bin/env python3
"""bench/cpu_default_repeat.sh's check of N runs of the CPU suite (DIR/run1 ... runN): each
run's recommendation per transport side by side; whether they agree (the same recommended
configuration, or no winner, in every run); and each PyTorch snippet the reports print run
through bench/ddp_wrap.py on a small model over Gloo (one process, this machine's python3
torch), or the report's reason why PyTorch has no form of it on CPUs. Exit 1 where runs
disagree or a snippet fails.

  python3 bench/cpu_snippets.py DIR N
"""
import glob
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_wrap  # noqa: E402


def reports(root, n):
    """[(run, report.json)] of each run, its suite's report."""
    out = []
    for i in range(1, n + 1):
        found = sorted(glob.glob(os.path.join(root, f"run{i}", "*", "report.json")))
        out.append((i, json.load(open(found[0])) if found else None))
    return out


def answer(rec):
    """What a recommendation tells the user to use: a configuration, or that none wins."""
    if rec.get("within_noise") or not rec.get("recommended"):
        return "no winner"
    return rec["recommended"]


def run_snippet(code):
    """"" if the snippet wraps a model and trains a step on CPU over Gloo, else why not."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    try:
        wrapped, optimizer, _ = ddp_wrap.training(model, code)
        optimizer = optimizer or torch.optim.SGD(wrapped.parameters(), lr=0.1)
        for _ in range(3):
            loss = wrapped(torch.randn(4, 8)).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return ""
    except Exception as e:  # what PyTorch says, for the summary
        return f"{type(e).__name__}: {e}"


def main():
    root, n = sys.argv[1], int(sys.argv[2])
    runs = reports(root, n)
    status = 0
    answers = {}
    for i, report in runs:
        if report is None:
            print(f"run {i}: no report.json")
            status = 1
            continue
        for rec in report.get("recommendations", []):
            answers.setdefault(rec.get("transport", ""), []).append(answer(rec))
            print(f"run {i} [{rec.get('transport', '')}]: {rec.get('text', '').splitlines()[0] if rec.get('text') else ''}")
    for transport, said in sorted(answers.items()):
        same = len(set(said)) == 1 and len(said) == n
        print(f"{transport or '(one transport)'}: {', '.join(said)} -> {'the same in every run' if same else 'NOT the same'}")
        status |= 0 if same else 1

    with tempfile.TemporaryDirectory() as scratch:
        dist.init_process_group("gloo", init_method=f"file://{scratch}/store", rank=0, world_size=1)
        checked = {}
        for i, report in runs:
            for rec in (report or {}).get("recommendations", []):
                code = rec.get("pytorch", "")
                if not code or code in checked:
                    continue
                why = run_snippet(code)
                checked[code] = why
                where = f"printed with run {i}'s recommendation"
                if why and "on CPU" not in code and "no form" not in code:
                    print(f"snippet ({where}) fails on CPU: {why}\n{code}")
                    status = 1
                else:
                    print(f"snippet ({where}): {'runs on CPU over Gloo' if not why else 'the report says: ' + code.splitlines()[0]}")
        dist.destroy_process_group()
    print("every run the same, every snippet runs or says why not" if status == 0 else "FAILED")
    return status


if __name__ == "__main__":
    sys.exit(main())
