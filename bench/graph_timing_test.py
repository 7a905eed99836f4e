"""graph_timing.py against a made-up torch.cuda that records what it is asked: the
warm-up runs on a side stream before the capture, the capture holds one step, the timings
replay the graph as asked, meet the other ranks before each, and give the median."""
import contextlib
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import graph_timing  # noqa: E402


def fake_torch(log, elapsed):
    """A torch whose cuda module logs each call in `log`; timed spans take `elapsed` ms in turn."""
    spans = iter(elapsed)
    state = {"stream": "main"}

    class Stream:
        def __init__(self):
            self.name = "side"

        def wait_stream(self, other):
            log.append(f"{self.name} waits")

    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing

        def record(self):
            log.append("record")

        def elapsed_time(self, end):
            return next(spans)

    class Graph:
        def replay(self):
            log.append("replay")

    @contextlib.contextmanager
    def stream(s):
        state["stream"] = s.name
        yield
        state["stream"] = "main"

    @contextlib.contextmanager
    def graph(g):
        log.append("capture")
        yield
        log.append("captured")

    main = Stream()
    main.name = "main"
    cuda = types.SimpleNamespace(Stream=Stream, current_stream=lambda: main, stream=stream, CUDAGraph=Graph,
                                 graph=graph, Event=Event, synchronize=lambda: log.append("sync"))
    return types.SimpleNamespace(cuda=cuda), state


class GraphTimingTest(unittest.TestCase):
    def test_warms_up_on_a_side_stream_then_captures_one_step(self):
        log = []
        torch, state = fake_torch(log, [])
        graph_timing.capture(torch, lambda: log.append(f"step on {state['stream']}"), 2)
        self.assertEqual(log, ["side waits", "step on side", "step on side", "main waits", "sync",
                               "capture", "step on main", "captured"])

    def test_the_median_of_the_timings_per_replay(self):
        log = []
        torch, _ = fake_torch(log, [40.0, 20.0, 30.0])
        ms = graph_timing.replay_ms(torch, torch.cuda.CUDAGraph(), 10, timings=3, before=lambda: log.append("barrier"),
                                    warm_replays=2)
        self.assertEqual(ms, 3.0)  # 30 ms over 10 replays
        self.assertEqual(log.count("replay"), 2 + 3 * 10)
        self.assertEqual(log.count("barrier"), 3)
        self.assertEqual(log[:3], ["replay", "replay", "sync"])  # the warm replays untimed, first
        self.assertEqual(log[3:5], ["barrier", "record"])  # the ranks meet before the clock starts


if __name__ == "__main__":
    unittest.main()
