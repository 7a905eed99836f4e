#!/usr/bin/env python3
"""Does work beside a graph's backward cost the step its own length? One GPU, no NCCL.

On 2 H200 (bench/NOTES.md, "On 2 H200, with torch.compile and the seed study") the step
as one CUDA graph with 25 MiB buckets was longer than with nothing sent by about the
all-reduce's own length, and capping NCCL's channels changed nothing: overlap bought
nothing once the host was out of the step. This probe asks the same of one GPU, where
nothing but the work itself can be the cause: amp_study's training in PyTorch
(torchvision's ViT-L/32, batch 32, bf16 autocast, fused AdamW), the whole step captured
as one CUDA graph, and beside backward, on a stream of its own, a stand-in for each
bucket's reduction: each time 25 MiB of gradients are in, out = a + b over buffers of the
bucket's size (reads two, writes one, as a reduction's steps do), launched

  none           no work beside backward
  aten           ATen's add: a grid over every multiprocessor
  ctasN          a kernel of N blocks that loop over the bucket (NCCL's kernels hold a
                 few tens of blocks; N=8 and 32 bracket it)
  ctasN_high     the same on a stream of high priority
  after          the same work as ctas32, after backward (no overlap: the step's length
                 if overlap bought nothing)
  arW            an all-reduce's bytes at W ranks beside backward, ctas32's add over
                 2 (W-1)/W of the bucket (ar2 is ctas32)
  zeroW          the optimizer sharded over W ranks (ZeRO-1), as each bucket would run it
                 beside backward: a reduce-scatter's stand-in (ctas32's add over (W-1)/W
                 of the bucket), fused AdamW over the rank's 1/W of the bucket (flat, in
                 float32, as torch.optim's fused kernel), an all-gather's stand-in (the
                 same add again); after backward no optimizer pass. Together the two
                 stand-ins are arW's bytes.
  optW           arW's stand-in, then the bucket's own parameters stepped by fused AdamW on
                 the same stream, beside backward (no sharding: each rank steps every
                 parameter); after backward no optimizer pass.
  zeroceW        zeroW with the all-gather's stand-in a copy by the GPU's copy engine
                 (cudaMemcpyAsync, no multiprocessor) of the same bytes: what a collective
                 that takes no SM would cost there
  zeroceceW      zeroW with both stand-ins such copies
  arceW          arW's bytes as such a copy

and the stand-ins alone, as a graph of their own, for their own length. The modes run
interleaved, each repetition in turn; one JSON line per run, then a table.

  python3 bench/overlap_probe.py --out DIR [--reps 3] [--steps 30] [--modes none,aten,...]
"""
import argparse
import json
import os
import statistics
import sys

import graph_timing

MODES = ("none", "aten", "ctas8", "ctas32", "ctas32_high", "after", "ar4", "zero2", "zero4", "opt2", "opt4")
BUCKET_BYTES = 25 << 20


def parse_mode(mode):
    """(kind, number): ("ctas", N) for ctasN[_high], (kind, W) for W > 1 of the other kinds
    ranks, (mode, None) for the others of MODES; None for a name it does not know."""
    for kind, least in (("ctas", 1), ("zerocece", 2), ("zeroce", 2), ("zero", 2), ("opt", 2), ("arce", 2), ("ar", 2)):
        digits = mode[len(kind):].removesuffix("_high") if kind == "ctas" else mode[len(kind):]
        if mode.startswith(kind) and digits.isdigit() and int(digits) >= least:
            return kind, int(digits)
    return (mode, None) if mode in MODES else None


def side_kernel(torch, triton, tl):
    @triton.jit
    def add_loop(a, b, out, n, BLOCK: tl.constexpr):
        start = tl.program_id(0) * BLOCK
        stride = tl.num_programs(0) * BLOCK
        for offset in range(start, n, stride):
            idx = offset + tl.arange(0, BLOCK)
            mask = idx < n
            tl.store(out + idx, tl.load(a + idx, mask=mask) + tl.load(b + idx, mask=mask), mask=mask)

    def launch(a, b, out, ctas):
        add_loop[(ctas,)](a, b, out, a.numel(), BLOCK=2048, num_warps=8)
    return launch


def buckets_of(params, cap):
    """Parameters in reverse order (as gradients arrive), cut into buckets of `cap` bytes."""
    out, current, size = [], [], 0
    for p in reversed(params):
        current.append(p)
        size += p.numel() * p.element_size()
        if size >= cap:
            out.append(current)
            current, size = [], 0
    if current:
        out.append(current)
    return out


def run_mode(a, torch, mode, launch):
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.vit_l_32().cuda()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, fused=True, capturable=True)
    criterion = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (a.batch,), device="cuda")
    buckets = buckets_of(params, BUCKET_BYTES)
    numel = max(sum(p.numel() for p in b) for b in buckets)
    bufs = [torch.zeros(3 * numel, device="cuda") for _ in range(3)]
    side = torch.cuda.Stream(priority=-1 if mode.endswith("_high") else 0)
    kind, number = parse_mode(mode)
    ctas = number if kind == "ctas" else 32
    state = {"pending": {}, "active": False}
    world = number if kind in ("ar", "arce", "zero", "zeroce", "zerocece", "opt") else 2
    bucket_opts = [torch.optim.AdamW(b, lr=1e-3, fused=True, capturable=True) for b in buckets] \
        if kind == "opt" else []
    # zeroW: each bucket's shard of parameters and AdamW's state, flat, on this rank.
    shards = []
    if kind.startswith("zero"):
        for bucket in buckets:
            k = sum(p.numel() for p in bucket) // world
            shards.append([torch.randn(k, device="cuda") * 0.02, torch.zeros(k, device="cuda"),
                           torch.zeros(k, device="cuda"), torch.zeros((), device="cuda")])

    def by_copy_engine(part):
        # The bytes of the add over `part` (two read, one written) as one copy's: a read
        # and a write of 1.5 `part`, which ATen hands to cudaMemcpyAsync (copy engine).
        k = 3 * part // 2
        bufs[2][:k].copy_(bufs[0][:k])

    def reduce_bucket(n, index=None):
        if kind.startswith("zero"):
            part = n * (world - 1) // world
            a_, b_, o_ = (t[:part] for t in bufs)
            if kind == "zerocece":
                by_copy_engine(part)  # the reduce-scatter's bytes
            else:
                launch(a_, b_, o_, ctas)
            param, exp_avg, exp_avg_sq, step_count = shards[index]
            step_count.add_(1)
            torch._fused_adamw_([param], [o_[:param.numel()]], [exp_avg], [exp_avg_sq], [], [step_count],
                                lr=1e-3, beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8,
                                amsgrad=False, maximize=False)
            if kind == "zero":
                launch(a_, b_, o_, ctas)  # the all-gather's
            else:
                by_copy_engine(part)
            return
        if kind in ("ar", "arce", "opt"):
            n = 2 * n * (world - 1) // world
        if kind == "arce":
            by_copy_engine(n)
            return
        a_, b_, o_ = (t[:n] for t in bufs)
        if mode == "aten":
            torch.add(a_, b_, out=o_)
        else:
            launch(a_, b_, o_, ctas)
        if kind == "opt" and index is not None:
            bucket_opts[index].step()

    def on_grad(bucket_index, n):
        def hook(_):
            if not state["active"] or mode in ("none", "after"):
                return
            state["pending"][bucket_index] -= 1
            if state["pending"][bucket_index] == 0:
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    reduce_bucket(n, bucket_index)
        return hook

    for i, bucket in enumerate(buckets):
        n = sum(p.numel() for p in bucket)
        for p in bucket:
            p.register_post_accumulate_grad_hook(on_grad(i, n))

    def step():
        state["pending"] = {i: len(b) for i, b in enumerate(buckets)}
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = criterion(model(x), y)
        loss.backward()
        if mode == "after":
            for bucket in buckets:
                reduce_bucket(sum(p.numel() for p in bucket))
        elif mode != "none":
            torch.cuda.current_stream().wait_stream(side)
        if not kind.startswith("zero") and kind != "opt":
            opt.step()
        opt.zero_grad(set_to_none=False)

    state["active"] = True
    graph = graph_timing.capture(torch, step, 3)
    step_ms = graph_timing.replay_ms(torch, graph, a.steps, warm_replays=5)

    # The stand-ins alone, as a graph: their own length.
    alone_ms = None
    if mode not in ("none",):
        g2 = torch.cuda.CUDAGraph()
        s2 = torch.cuda.Stream(priority=side.priority)
        s2.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s2):
            for i, bucket in enumerate(buckets):
                reduce_bucket(sum(p.numel() for p in bucket), i)
        torch.cuda.current_stream().wait_stream(s2)
        with torch.cuda.graph(g2, stream=s2):
            for i, bucket in enumerate(buckets):
                reduce_bucket(sum(p.numel() for p in bucket), i)
        alone_ms = graph_timing.replay_ms(torch, g2, a.steps, warm_replays=1)
    moved = sum(3 * 4 * sum(p.numel() for p in b) for b in buckets)
    return {"mode": mode, "step_ms": step_ms, "steps_per_s": 1000 / step_ms, "side_alone_ms": alone_ms,
            "buckets": len(buckets), "side_gb_per_step": moved / 1e9, "ctas": ctas if kind == "ctas" else None}


def child(a):
    import torch
    import triton
    import triton.language as tl
    torch.backends.cudnn.benchmark = True
    launch = side_kernel(torch, triton, tl)
    print(json.dumps(run_mode(a, torch, a.child, launch)), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        return child(a)
    import subprocess
    os.makedirs(a.out, exist_ok=True)
    modes = [m for m in a.modes.split(",") if m]
    for m in modes:
        if parse_mode(m) is None:
            sys.exit(f"overlap_probe.py: unknown mode {m!r}; modes: {', '.join(MODES)} "
                     "(or ctasN, ctasN_high, arW, arceW, zeroW, zeroceW, zeroceceW, optW)")
    results = []
    with open(os.path.join(a.out, "runs.jsonl"), "w") as log:
        for rep in range(a.reps):
            for m in modes:
                cmd = [sys.executable, __file__, "--out", a.out, "--steps", str(a.steps), "--batch", str(a.batch),
                       "--child", m]
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
                if r.returncode != 0 or not lines:
                    print(f"{m} (rep {rep + 1}) failed:\n{r.stderr[-2000:]}", file=sys.stderr)
                    continue
                row = json.loads(lines[-1])
                row["rep"] = rep + 1
                results.append(row)
                log.write(json.dumps(row) + "\n")
                log.flush()
    base = statistics.median([r["step_ms"] for r in results if r["mode"] == "none"] or [float("nan")])
    print(f"{'mode':<14}{'step ms':>9}{'runs':>24}{'+ms':>7}{'alone ms':>10}{'+ms/alone':>11}")
    for m in modes:
        rows = [r for r in results if r["mode"] == m]
        if not rows:
            print(f"{m:<14}  no run")
            continue
        ms = statistics.median(r["step_ms"] for r in rows)
        alone = [r["side_alone_ms"] for r in rows if r["side_alone_ms"] is not None]
        alone_ms = statistics.median(alone) if alone else None
        extra = ms - base
        runs = ",".join(f"{r['step_ms']:.2f}" for r in rows)
        share = f"{extra / alone_ms:.2f}" if alone_ms else "-"
        print(f"{m:<14}{ms:>9.3f}{runs:>24}{extra:>7.2f}{(alone_ms or 0):>10.3f}{share:>11}")


if __name__ == "__main__":
    main()
