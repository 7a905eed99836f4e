#!/usr/bin/env python3
"""What a NCCL communicator costs a step that sends nothing: one GPU, one process.

On 2026-11-23 (bench/NOTES.md, "One GPU: what each plugin's own work costs, and what a
NCCL communicator costs") a process that had once made a NCCL communicator trained 1.2-1.5%
slower for the rest of its run, backward 1.0 ms longer, even after the communicator was
shut down. Every run of several processes makes one, so every row of several GPUs pays it
against the one GPU it is compared with. This probe trains torchvision's ViT-L/32 (float32
SGD, batch 32, a batch made once on the device) in one process per mode, the modes
interleaved, and writes one JSON line per run:

  plain          no process group
  comm           a NCCL process group of one rank, one all-reduce before the steps (as a
                 DDP run does at its start)
  comm_warm      the same, made after the warm-up steps (autograd's device thread, made at
                 the first backward, then exists before the communicator)
  comm_<ENV>     comm with one more environment setting (--env NAME=VALUE)

  python3 bench/communicator_probe.py --out DIR [--reps 3] [--env NCCL_SET_CPU_STACK_SIZE=0]

Each run also records its threads' CPU affinity, the process's default thread stack size
and RLIMIT_STACK, so that what the communicator changed in the process can be read.
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time


def default_stack_size():
    libc = ctypes.CDLL("libc.so.6")
    attr = ctypes.create_string_buffer(128)
    if libc.pthread_getattr_default_np(attr) != 0:
        return None
    size = ctypes.c_size_t()
    libc.pthread_attr_getstacksize(attr, ctypes.byref(size))
    return size.value


def threads():
    out = []
    for tid in sorted(os.listdir("/proc/self/task")):
        fields = {}
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    fields[key] = value.strip()
        except OSError:
            continue
        out.append({"name": fields.get("Name"), "cpus": fields.get("Cpus_allowed_list")})
    return out


def make_group(torch):
    import torch.distributed as dist
    fd, path = tempfile.mkstemp(prefix="communicator_probe_")
    os.close(fd)
    os.remove(path)
    store = dist.FileStore(path, 1)
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1)
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()


def one_run(a):
    import resource
    import torch
    import torchvision
    torch.backends.cudnn.benchmark = True
    stack_before = default_stack_size()
    model = torchvision.models.vit_l_32().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = torch.nn.CrossEntropyLoss()
    x = torch.randn(32, 3, 224, 224, device="cuda")
    y = torch.randint(1000, (32,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()

    if a.mode == "comm":
        make_group(torch)
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    if a.mode == "comm_warm":
        make_group(torch)
    t0 = time.perf_counter()
    for _ in range(a.measured):
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    # Phases, synchronized around backward (not part of steps/s).
    backward = []
    for _ in range(a.phase_steps):
        opt.zero_grad(set_to_none=True)
        loss = criterion(model(x), y)
        torch.cuda.synchronize()
        b0 = time.perf_counter()
        loss.backward()
        torch.cuda.synchronize()
        backward.append((time.perf_counter() - b0) * 1e3)
        opt.step()
    backward.sort()
    print(json.dumps({
        "mode": a.label or a.mode, "steps_per_s": a.measured / seconds,
        "backward_ms_median": backward[len(backward) // 2],
        "default_stack_before": stack_before, "default_stack_after": default_stack_size(),
        "rlimit_stack": resource.getrlimit(resource.RLIMIT_STACK)[0],
        "threads": threads(),
    }), flush=True)
    if a.mode.startswith("comm"):
        import torch.distributed as dist
        dist.destroy_process_group()


def drive(a):
    os.makedirs(a.out, exist_ok=True)
    modes = [("plain", "plain", {}), ("comm", "comm", {}), ("comm_warm", "comm_warm", {})]
    for setting in a.env:
        name, _, value = setting.partition("=")
        modes.append((f"comm_{name}={value}", "comm", {name: value}))
    path = os.path.join(a.out, "communicator_probe.jsonl")
    rows = {}
    with open(path, "w") as f:
        for rep in range(a.reps):
            for label, mode, env in modes:
                cmd = [sys.executable, __file__, "--one", "--mode", mode, "--label", label,
                       "--warmup", str(a.warmup), "--measured", str(a.measured),
                       "--phase_steps", str(a.phase_steps)]
                r = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True)
                line = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
                if r.returncode != 0 or not line.startswith("{"):
                    print(f"{label} rep {rep}: failed\n{r.stderr[-2000:]}", file=sys.stderr)
                    continue
                f.write(line + "\n")
                f.flush()
                rec = json.loads(line)
                rows.setdefault(label, []).append(rec)
                print(f"rep {rep} {label}: {rec['steps_per_s']:.3f} steps/s, "
                      f"backward {rec['backward_ms_median']:.2f} ms", flush=True)
    base = sorted(r["steps_per_s"] for r in rows.get("plain", []))
    base = base[len(base) // 2] if base else None
    print(f"\n| mode | steps/s (median) | range | of plain | backward ms |")
    print("|---|---|---|---|---|")
    for label, _, _ in modes:
        rs = rows.get(label, [])
        if not rs:
            continue
        s = sorted(r["steps_per_s"] for r in rs)
        b = sorted(r["backward_ms_median"] for r in rs)
        med = s[len(s) // 2]
        share = f"{med / base:.4f}" if base else "-"
        print(f"| {label} | {med:.3f} | {s[0]:.3f}-{s[-1]:.3f} | {share} | {b[len(b) // 2]:.2f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE: a comm mode with it set")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--measured", type=int, default=30)
    p.add_argument("--phase_steps", type=int, default=5)
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", default="plain")
    p.add_argument("--label")
    a = p.parse_args()
    if a.one:
        one_run(a)
    else:
        if not a.out:
            p.error("--out DIR is required")
        drive(a)


if __name__ == "__main__":
    main()
