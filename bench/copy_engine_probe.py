#!/usr/bin/env python3
"""What an all-reduce by copy engines would cost beside ViT-L/32's training step, before
building one: every GPU trains (torchvision's vit_l_32, batch 32, SGD, one process per
GPU) while a side stream moves the bytes that reducing its 1.22 GB of gradients needs,
and the step time is compared with the step alone and with NCCL's all-reduce beside it.

Traffic per GPU and step (n GPUs, G bytes of gradients, 25 MB chunks):
  nccl       NCCL all-reduce of G in chunks (c10d, its own stream), as the engine does
  peer       reduce-scatter and all-gather by pulls over NVLink with cudaMemcpyAsync from
             peers' memory (CUDA IPC): 2 (n-1)/n G in, plus the sums of the shards
  host       the same staged through pinned host memory: (1 + 1/n) G out, 2 (n-1)/n G in,
             device-to-host and host-to-device on two streams
  nccl_rsag  NCCL reduce-scatter then all-gather of G in chunks, as the sharded
             optimizer's collectives (plugins/sharded_optimizer)
  nccl_rs_ceag  the same with the all-gathers NCCL's copy-engine collective (NCCL 2.28+:
             a communicator of CTA policy zero, buffers in symmetric memory windows)
The bytes are moved and summed but nothing waits for the other ranks: this measures
contention and bandwidth, not a correct all-reduce.

--amp trains as amp_study does (bf16 autocast, fused AdamW); --graph captures each step,
traffic included, as one CUDA graph and times its replays (the step alone: no phases).

  python3 bench/copy_engine_probe.py --output probe.json      # all visible GPUs
  python3 bench/copy_engine_probe.py --output probe.json --amp --graph --modes none,nccl_rsag,peer
"""
import argparse
import datetime
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import graph_timing

CHUNK = 25 * 1000 * 1000 // 4  # floats per chunk


def run(rank, world, a, queues, results):
    import cupy
    import torchvision

    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"file://{a.store}", rank=rank, world_size=world,
                            device_id=dev)
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.vit_l_32().to(dev)
    opt = (torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True, capturable=a.graph) if a.amp
           else torch.optim.SGD(model.parameters(), lr=0.01))
    x = torch.randn(32, 3, 224, 224, device=dev)
    y = torch.randint(1000, (32,), device=dev)
    numel = sum(p.numel() for p in model.parameters())
    shard = (numel + world - 1) // world
    shard = (shard + CHUNK - 1) // CHUNK * CHUNK
    total = shard * world

    # Buffers peers read, from cudaMalloc (IPC shares whole allocations).
    keep = []
    def shared_zeros(n):
        mem = cupy.cuda.Memory(n * 4)  # its own cudaMalloc, not a pool's block
        arr = cupy.ndarray((n,), cupy.float32, cupy.cuda.MemoryPointer(mem, 0))
        arr.fill(0)
        keep.append(mem)
        return arr, torch.from_dlpack(arr)

    grads_cp, grads = shared_zeros(total)
    reduced_cp, reduced = shared_zeros(shard)
    for j in range(world):
        if j != rank:
            queues[j].put((rank, cupy.cuda.runtime.ipcGetMemHandle(grads_cp.data.ptr),
                           cupy.cuda.runtime.ipcGetMemHandle(reduced_cp.data.ptr)))
    peers = {}
    for _ in range(world - 1):
        r, hg, hr = queues[rank].get()
        peers[r] = (cupy.cuda.runtime.ipcOpenMemHandle(hg), cupy.cuda.runtime.ipcOpenMemHandle(hr))
    staging = torch.empty(world - 1, shard, device=dev)
    out = torch.empty(total, device=dev)
    host_out = torch.empty(4 * CHUNK * 16, pin_memory=True)  # 400 MB, cycled through
    host_in = torch.empty(4 * CHUNK * 16, pin_memory=True)
    side = torch.cuda.Stream(dev)
    side2 = torch.cuda.Stream(dev)
    flat = torch.ones(total, device=dev)
    memcpy = cupy.cuda.runtime.memcpyAsync
    kind = cupy.cuda.runtime.memcpyDefault

    # nccl_rs_ceag's all-gathers: a communicator of CTA policy zero, over windows.
    ce_group = ce_in = ce_out = None
    if "nccl_rs_ceag" in a.modes.split(","):
        import torch.distributed._symmetric_memory as symm_mem
        symm_mem.set_backend("NCCL")
        opts = dist.ProcessGroupNCCL.Options()
        opts.config.cta_policy = dist.ProcessGroupNCCL.NCCL_CTA_POLICY_ZERO
        ce_group = dist.new_group(list(range(world)), backend="nccl", pg_options=opts)
        dist.all_reduce(torch.ones(1, device=dev), group=ce_group)
        ce_in = symm_mem.empty(shard, device=dev).zero_()
        ce_out = symm_mem.empty(total, device=dev)
        symm_mem.rendezvous(ce_in, group=ce_group.group_name)
        symm_mem.rendezvous(ce_out, group=ce_group.group_name)

    def traffic(mode):
        if mode == "none":
            return
        if mode == "nccl":
            with torch.cuda.stream(side):
                for c in range(0, numel, CHUNK):
                    dist.all_reduce(flat[c:c + CHUNK])
            return
        if mode in ("nccl_rsag", "nccl_rs_ceag"):
            # nccl_rs_ceag's all-gathers read and write the windows, on the zero-CTA communicator.
            gather_out, gather_in, group = (ce_out, ce_in, ce_group) if mode == "nccl_rs_ceag" else (out, reduced, None)
            with torch.cuda.stream(side):
                for c in range(0, total, CHUNK * world):
                    part = reduced[(c // world):(c // world) + CHUNK]
                    dist.reduce_scatter_tensor(part, flat[c:c + CHUNK * world])
                    dist.all_gather_into_tensor(gather_out[c:c + CHUNK * world],
                                                gather_in[(c // world):(c // world) + CHUNK], group=group)
            return
        if mode == "peer":
            with torch.cuda.stream(side):
                s = side.cuda_stream
                others = [j for j in range(world) if j != rank]
                for c in range(0, shard, CHUNK):
                    for k, j in enumerate(others):
                        src = peers[j][0] + (rank * shard + c) * 4
                        memcpy(staging[k, c:].data_ptr(), src, CHUNK * 4, kind, s)
                    torch.sum(staging[:, c:c + CHUNK], 0, out=reduced[c:c + CHUNK])
                    reduced[c:c + CHUNK].add_(grads[rank * shard + c: rank * shard + c + CHUNK])
                for c in range(0, shard, CHUNK):
                    for j in others:
                        memcpy(out[j * shard + c:].data_ptr(), peers[j][1] + c * 4, CHUNK * 4, kind, s)
            return
        if mode == "host":
            # device-to-host: the own gradients, then the own reduced shard
            with torch.cuda.stream(side):
                slots = host_out.numel() // CHUNK
                out_chunks = (total + shard) // CHUNK
                for i in range(out_chunks):
                    h = host_out[(i % slots) * CHUNK:]
                    memcpy(h.data_ptr(), grads.data_ptr() + (i * CHUNK % total) * 4, CHUNK * 4, kind,
                           side.cuda_stream)
            # host-to-device: peers' shards of the own quarter, then peers' reduced shards
            with torch.cuda.stream(side2):
                slots = host_in.numel() // CHUNK
                in_chunks = 2 * (world - 1) * shard // CHUNK
                for i in range(in_chunks):
                    h = host_in[(i % slots) * CHUNK:]
                    memcpy(out.data_ptr() + (i * CHUNK % total) * 4, h.data_ptr(), CHUNK * 4, kind,
                           side2.cuda_stream)
                    if i % (world - 1) == world - 2 and i < in_chunks // 2:
                        c = (i // (world - 1)) * CHUNK % shard
                        torch.sum(staging[:, c:c + CHUNK], 0, out=reduced[c:c + CHUNK])
            return
        raise ValueError(mode)

    def body(mode):
        side.wait_stream(torch.cuda.current_stream())
        side2.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.amp):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        traffic(mode)  # launched as backward starts
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.current_stream().wait_stream(side2)

    def graph_step_ms(mode):
        graph = graph_timing.capture(torch, lambda: body(mode), a.warmup)
        ms = graph_timing.replay_ms(torch, graph, a.steps, timings=3, before=lambda: dist.barrier(device_ids=[rank]))
        del graph
        return ms

    def step(mode, times):
        torch.cuda.current_stream().synchronize()
        start = torch.cuda.Event(enable_timing=True)
        fwd = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        comm_end = torch.cuda.Event(enable_timing=True)
        start.record()
        side.wait_stream(torch.cuda.current_stream())
        side2.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.amp):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        fwd.record()
        traffic(mode)  # launched as backward starts
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        end.record()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.current_stream().wait_stream(side2)
        comm_end.record()
        torch.cuda.synchronize()
        times.append((start.elapsed_time(end), fwd.elapsed_time(end), fwd.elapsed_time(comm_end)))

    def traffic_alone(mode):
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(5):
            side.wait_stream(torch.cuda.current_stream())
            side2.wait_stream(torch.cuda.current_stream())
            traffic(mode)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.current_stream().wait_stream(side2)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / 5 * 1000

    record = {"rank": rank, "numel": numel, "modes": {}}
    for mode in a.modes.split(","):
        if a.graph:
            try:
                ms = graph_step_ms(mode)
            except Exception as e:  # a mode that cannot be captured: say so, go on
                record.setdefault("errors", {})[mode] = str(e)[:2000]
                print(f"rank {rank}: {mode}: {str(e)[:500]}", file=sys.stderr, flush=True)
                continue
            record["modes"].setdefault(mode, []).append(
                {"step_ms": ms, "backward_ms": float("nan"), "backward_or_traffic_ms": float("nan"),
                 "traffic_alone_ms": traffic_alone(mode) if mode != "none" else 0.0})
            continue
        times = []
        for i in range(a.warmup + a.steps):
            dist.barrier(device_ids=[rank])
            step(mode, times if i >= a.warmup else [])
        t = torch.tensor(times)
        med = t.median(0).values.tolist()
        alone = traffic_alone(mode) if mode != "none" else 0.0
        record["modes"].setdefault(mode, []).append(
            {"step_ms": med[0], "backward_ms": med[1], "backward_or_traffic_ms": med[2],
             "traffic_alone_ms": alone})
    results.put(record)
    dist.barrier(device_ids=[rank])
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--output", required=True)
    p.add_argument("--amp", action="store_true", help="bf16 autocast and fused AdamW (amp_study's training)")
    p.add_argument("--graph", action="store_true", help="each step, traffic included, as one CUDA graph")
    p.add_argument("--modes", default="none,nccl,peer,host,none")
    a = p.parse_args()
    a.store = os.path.join(tempfile.mkdtemp(prefix="ce_probe_"), "store")
    ctx = mp.get_context("spawn")
    queues = [ctx.Queue() for _ in range(a.gpus)]
    results = ctx.Queue()
    procs = [ctx.Process(target=run, args=(r, a.gpus, a, queues, results)) for r in range(a.gpus)]
    for pr in procs:
        pr.start()
    records = [results.get(timeout=600) for _ in procs]
    for pr in procs:
        pr.join(timeout=60)
    records.sort(key=lambda r: r["rank"])
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(0), "gpus": a.gpus, "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "nccl_env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
            "amp": a.amp, "graph": a.graph}
    with open(a.output, "w") as f:
        json.dump({"meta": meta, "ranks": records}, f, indent=1)
    gb = records[0]["numel"] * 4 / 1e9
    print(f"{a.gpus} GPUs, {gb:.2f} GB of gradients; medians over ranks' medians (ms)")
    print("| traffic | step | backward+opt | until traffic done | traffic alone |")
    print("| --- | --- | --- | --- | --- |")
    for mode in records[0]["modes"]:
        for i in range(len(records[0]["modes"][mode])):
            rows = [r["modes"][mode][i] for r in records if len(r["modes"].get(mode, [])) > i]
            m = lambda k: sorted(x[k] for x in rows)[len(rows) // 2]
            print(f"| {mode} | {m('step_ms'):.2f} | {m('backward_ms'):.2f} | "
                  f"{m('backward_or_traffic_ms'):.2f} | {m('traffic_alone_ms'):.2f} |")
    for r in records:
        for mode, error in r.get("errors", {}).items():
            print(f"rank {r['rank']}, {mode}: not measured: {error[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
