"""A training step captured as one CUDA graph and timed by its replays, as the probes
measure it (overlap_probe.py, copy_engine_probe.py, sharded_copy_probe.py).

  graph = capture(torch, step, warmup=3)       # step() run 3 times on a side stream, then captured
  ms = replay_ms(torch, graph, replays=20)     # ms per replay, one timing
  ms = replay_ms(torch, graph, 20, timings=3, before=barrier)   # the median of 3, ranks met before each
"""


def capture(torch, step, warmup):
    """`step` run `warmup` times on a side stream (as torch.cuda.graph asks of a warm-up),
    then captured as one CUDA graph."""
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(warm)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph


def replay_ms(torch, graph, replays, timings=1, before=lambda: None, warm_replays=0):
    """Milliseconds per replay of `graph`: the median of `timings` timings of `replays`
    replays each, `before()` called ahead of each (a barrier between processes), after
    `warm_replays` untimed ones."""
    for _ in range(warm_replays):
        graph.replay()
    times = []
    for _ in range(timings):
        torch.cuda.synchronize()
        before()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / replays)
    return sorted(times)[len(times) // 2]
