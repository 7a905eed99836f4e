#!/usr/bin/env python3
"""What autocast's casts of ViT-L/32's weights cost in a step replayed as a CUDA graph,
and what the same bytes cost cast another way, before building one (#61).

Under bf16 autocast every linear layer's float32 weight and bias is cast to bfloat16 in
the forward, one kernel each, and each bfloat16 weight gradient is cast back to float32
in the backward. Each way below is captured once in a CUDA graph and replayed; the GPU
time per replay is the median over REPLAYS, and the kernels' names come from the
profiler:

  per_tensor   forward casts, one .to(bfloat16) per weight and bias (as autocast)
  per_tensor_back  backward casts, one .to(float32) per gradient
  foreach      torch._foreach_copy_ into bfloat16 tensors made once
  flat         one cast of the weights laid end to end (306M floats)
  flat_back    one cast of the gradients laid end to end, bfloat16 to float32

  python3 bench/cast_probe.py --output probe.json
"""
import argparse
import json

import torch

import graph_timing


def vit_l32_linear_shapes():
    shapes = []
    for _ in range(24):
        for out_f, in_f in ((3072, 1024), (1024, 1024), (4096, 1024), (1024, 4096)):
            shapes += [(out_f, in_f), (out_f,)]
    return shapes + [(1000, 1024), (1000,)]


def graph_ms(fn, replays):
    graph = graph_timing.capture(torch, fn, 3)
    ms = graph_timing.replay_ms(torch, graph, 1, timings=replays)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    kernels = sorted({e.name[:120] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    return ms, kernels


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--output", required=True)
    p.add_argument("--replays", type=int, default=50)
    a = p.parse_args()
    dev = torch.device("cuda", 0)
    shapes = vit_l32_linear_shapes()
    weights = [torch.randn(s, device=dev) for s in shapes]
    grads = [torch.randn(s, device=dev, dtype=torch.bfloat16) for s in shapes]
    casts = [torch.empty(s, device=dev, dtype=torch.bfloat16) for s in shapes]
    flat = torch.randn(sum(w.numel() for w in weights), device=dev)
    flat_grads = flat.to(torch.bfloat16)
    held = []

    def per_tensor():
        held[:] = [w.to(torch.bfloat16) for w in weights]

    def per_tensor_back():
        held[:] = [g.to(torch.float32) for g in grads]

    def foreach():
        torch._foreach_copy_(casts, weights)

    def flat_cast():
        held[:] = [flat.to(torch.bfloat16)]

    def flat_back():
        held[:] = [flat_grads.to(torch.float32)]

    results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "tensors": len(shapes), "floats": flat.numel()}
    for name, fn in (("per_tensor", per_tensor), ("per_tensor_back", per_tensor_back), ("foreach", foreach),
                     ("flat", flat_cast), ("flat_back", flat_back)):
        try:
            ms, kernels = graph_ms(fn, a.replays)
            results[name] = {"ms": ms, "kernels": kernels}
            print(f"{name:16} {ms:7.3f} ms  {kernels[:2]}", flush=True)
        except Exception as e:  # a way this LibTorch lacks: say so, go on
            results[name] = {"error": str(e)[:300]}
            print(f"{name:16} failed: {str(e)[:200]}", flush=True)
        held.clear()
    with open(a.output, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
