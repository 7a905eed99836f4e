#!/usr/bin/env python3
"""The sharded optimizer's step (plugins/sharded_optimizer) with its collectives by NCCL's
kernels or by copy engines, each rank ordered after the others by signals a CUDA graph
replays: what the copy-engine lever would buy in the step's own shape, before building it
(bench/NOTES.md, "Copy engines beside a graph's backward").

Every GPU trains amp_study's way (torchvision's vit_l_32, batch 32, bf16 autocast), one
process each, the whole step captured as one CUDA graph. The model's own optimizer does
not step; instead, as each bucket of 100 MiB of gradients is ready in backward (parameters
in reverse order), a side stream runs that bucket's sharded step over a flat stand-in of
its gradients and parameters (the bytes, not the model's values):

  none         nothing beside backward (the model's fused AdamW after it, as one GPU)
  nccl         NCCL's reduce-scatter of the bucket, fused AdamW over this rank's shard,
               NCCL's all-gather of the shards (the plugin today)
  copy         the same by copy engines, in c10d's symmetric memory: the rank signals its
               peers that the bucket is ready and waits for theirs, pulls its shard of
               each peer's bucket over NVLink, sums (a kernel) and steps, writes the
               stepped shard into its own range of its bucket, signals, pulls each peer's
               stepped shard, and signals that it is done with the peers' buckets, which
               each rank waits for before the step ends (its next backward overwrites
               them)

  python3 bench/sharded_copy_probe.py --output probe.json [--modes none,nccl,copy,none]
"""
import argparse
import datetime
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import graph_timing
import overlap_probe

BUCKET_BYTES = 100 << 20


def buckets_of(params, world):
    """overlap_probe's buckets of BUCKET_BYTES (parameters in reverse order), each as
    (offset in a flat buffer, its parameters, numel rounded up to a multiple of `world`)."""
    out, offset = [], 0
    for bucket in overlap_probe.buckets_of(params, BUCKET_BYTES):
        n = -(-sum(p.numel() for p in bucket) // world) * world
        out.append((offset, bucket, n))
        offset += n
    return out


def run(rank, world, a, results):
    import torchvision
    import torch.distributed._symmetric_memory as symm_mem

    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"file://{a.store}", rank=rank, world_size=world, device_id=dev)
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.vit_l_32().to(dev)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, fused=True, capturable=True)
    x = torch.randn(32, 3, 224, 224, device=dev)
    y = torch.randint(1000, (32,), device=dev)
    buckets = buckets_of(params, world)
    total = sum(n for _, _, n in buckets)
    peers = [j for j in range(world) if j != rank]

    group = dist.group.WORLD.group_name
    grads = symm_mem.empty(total, device=dev).normal_()  # each bucket's gradients, flat
    handle = symm_mem.rendezvous(grads, group)
    peer_grads = {j: handle.get_buffer(j, (total,), torch.float32) for j in peers}
    params_flat = torch.zeros(total, device=dev)  # the bucket's parameters, flat
    staging = torch.empty(len(peers), max(n for _, _, n in buckets) // world, device=dev)
    shards = []
    for _, _, n in buckets:
        k = n // world
        shards.append([torch.randn(k, device=dev) * 0.02, torch.zeros(k, device=dev),
                       torch.zeros(k, device=dev), torch.zeros((), device=dev), torch.empty(k, device=dev)])
    side = torch.cuda.Stream(dev)
    state = {"mode": "none", "pending": {}}

    def adamw(index, grad):
        param, exp_avg, exp_avg_sq, step_count, _ = shards[index]
        step_count.add_(1)
        torch._fused_adamw_([param], [grad], [exp_avg], [exp_avg_sq], [], [step_count], lr=1e-3, beta1=0.9,
                            beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False)

    def sharded_step(index):
        offset, _, n = buckets[index]
        k = n // world
        mine = slice(offset + rank * k, offset + (rank + 1) * k)
        reduced = shards[index][4]
        if state["mode"] == "nccl":
            dist.reduce_scatter_tensor(reduced, grads[offset:offset + n])
            adamw(index, reduced)
            dist.all_gather_into_tensor(params_flat[offset:offset + n], shards[index][0])
            return
        for j in peers:  # channel 3 index: the bucket is ready
            handle.put_signal(j, 3 * index)
        for j in peers:
            handle.wait_signal(j, 3 * index)
        for s, j in enumerate(peers):  # copy engine: this rank's shard of the peer's bucket
            staging[s, :k].copy_(peer_grads[j][mine])
        torch.sum(staging[:, :k], 0, out=reduced)
        reduced.add_(grads[mine])
        adamw(index, reduced)
        grads[mine].copy_(shards[index][0])  # the stepped shard where the peers read it
        for j in peers:  # channel 3 index + 1: the stepped shard is there
            handle.put_signal(j, 3 * index + 1)
        for j in peers:
            handle.wait_signal(j, 3 * index + 1)
            theirs = slice(offset + j * k, offset + (j + 1) * k)
            params_flat[theirs].copy_(peer_grads[j][theirs])
        for j in peers:  # channel 3 index + 2: done reading the peer's bucket
            handle.put_signal(j, 3 * index + 2)

    def on_grad(index):
        def hook(_):
            if state["mode"] == "none":
                return
            state["pending"][index] -= 1
            if state["pending"][index] == 0:
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    sharded_step(index)
        return hook

    for i, (_, bucket, _) in enumerate(buckets):
        for p in bucket:
            p.register_post_accumulate_grad_hook(on_grad(i))

    def step():
        state["pending"] = {i: len(b) for i, (_, b, _) in enumerate(buckets)}
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if state["mode"] == "copy":
            with torch.cuda.stream(side):
                for i in range(len(buckets)):
                    for j in peers:
                        handle.wait_signal(j, 3 * i + 2)
        if state["mode"] == "none":
            opt.step()
        else:
            torch.cuda.current_stream().wait_stream(side)
        opt.zero_grad(set_to_none=False)

    record = {"rank": rank, "buckets": len(buckets), "numel": total, "modes": {}, "errors": {}}
    for mode in a.modes.split(","):
        state["mode"] = mode
        try:
            graph = graph_timing.capture(torch, step, 3)
            ms = graph_timing.replay_ms(torch, graph, a.steps, timings=3,
                                        before=lambda: dist.barrier(device_ids=[rank]))
            del graph
            record["modes"].setdefault(mode, []).append(ms)
        except Exception as e:  # a mode that cannot run here: say so, go on
            record["errors"][mode] = f"{type(e).__name__}: {str(e)[:1500]}; handle has {dir(handle)}"
            print(f"rank {rank}: {mode}: {str(e)[:500]}", file=sys.stderr, flush=True)
            break  # a failed collective or signal leaves the ranks out of step
    results.put(record)
    dist.barrier(device_ids=[rank])
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--modes", default="none,nccl,copy,none")
    p.add_argument("--output", required=True)
    a = p.parse_args()
    a.store = os.path.join(tempfile.mkdtemp(prefix="sharded_copy_probe_"), "store")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=run, args=(r, a.gpus, a, results)) for r in range(a.gpus)]
    for pr in procs:
        pr.start()
    records = sorted((results.get(timeout=600) for _ in procs), key=lambda r: r["rank"])
    for pr in procs:
        pr.join(timeout=60)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(0), "gpus": a.gpus, "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())), "bucket_bytes": BUCKET_BYTES}
    with open(a.output, "w") as f:
        json.dump({"meta": meta, "ranks": records}, f, indent=1)
    print(f"{a.gpus} GPUs, {records[0]['buckets']} buckets; step ms (each rank's median of 3 timings)")
    for mode in records[0]["modes"]:
        runs = [" / ".join(f"{ms:.2f}" for ms in r["modes"].get(mode, [])) for r in records]
        print(f"  {mode:<8} " + "  |  ".join(f"rank {r['rank']}: {s}" for r, s in zip(records, runs)))
    for r in records:
        for mode, error in r["errors"].items():
            print(f"rank {r['rank']}, {mode}: not measured: {error[:600]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
