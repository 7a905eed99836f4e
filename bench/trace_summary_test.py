"""trace_summary.py on a made-up trace whose figures are known."""

import json
import os
import tempfile
import unittest

import trace_summary


def trace(steps=3):
    """Each step: forward kernels 0-9 us and 12-20 us (idle 2 us inside), backward kernel
    20-50 us, optimizer 50-55 us, next step at 60 us; a side stream busy 30-58 us (20 us
    beside the backward kernel, 5 beside the optimizer's)."""
    events, corr = [], [0]

    def launch(t, stream, start, dur, name="k"):
        corr[0] += 1
        events.append({"name": "cudaLaunchKernel", "cat": "cpu", "ph": "X", "pid": 0, "tid": 1,
                       "ts": t, "dur": 0.5, "args": {"correlation": corr[0]}})
        events.append({"name": name, "cat": "gpu", "ph": "X", "pid": 1, "tid": stream, "ts": start,
                       "dur": dur, "args": {"stream": stream, "correlation": corr[0]}})

    for s in range(steps):
        o = 60.0 * s
        events.append({"name": "forward", "cat": "cpu", "ph": "X", "pid": 0, "tid": 1, "ts": o, "dur": 3,
                       "args": {"correlation": 0}})
        launch(o + 1, 7, o + 0, 9, "fwd_a")
        launch(o + 2, 7, o + 12, 8, "fwd_b")
        events.append({"name": "backward", "cat": "cpu", "ph": "X", "pid": 0, "tid": 1, "ts": o + 4,
                        "dur": 3, "args": {"correlation": 0}})
        launch(o + 5, 7, o + 20, 30, "bwd")
        launch(o + 6, 13, o + 30, 28, "side")
        events.append({"name": "optimizer step", "cat": "cpu", "ph": "X", "pid": 0, "tid": 1,
                       "ts": o + 8, "dur": 1, "args": {"correlation": 0}})
        launch(o + 8.5, 7, o + 50, 5, "opt")
        # The profiler's GPU span of a scope, which is no kernel.
        events.append({"name": "backward", "cat": "gpu", "ph": "X", "pid": 1, "tid": 7, "ts": o + 20,
                       "dur": 70, "args": {"stream": 7, "correlation": 1}})
    return {"traceEvents": events}


class TraceSummaryTest(unittest.TestCase):
    def test_known_figures(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            with open(path, "w") as f:
                json.dump(trace(), f)
            s = trace_summary.summarize(path)
        self.assertEqual(s["steps"], 3)
        self.assertEqual(s["compute_stream"], 7)
        self.assertAlmostEqual(s["step_ms"], 0.060)
        self.assertAlmostEqual(s["compute_busy_ms"], 0.052)
        f = s["phases"]["forward"]
        self.assertAlmostEqual(f["before_ms"], 0.005)  # the optimizer's kernel ends at 55, next forward at 60
        self.assertAlmostEqual(s["phases"]["backward"]["before_ms"], 0.0)
        self.assertAlmostEqual(f["span_ms"], 0.020)
        self.assertAlmostEqual(f["kernels_ms"], 0.017)
        self.assertAlmostEqual(s["phases"]["backward"]["span_ms"], 0.030)
        self.assertAlmostEqual(s["phases"]["optimizer step"]["kernels_ms"], 0.005)
        side = s["other_streams"]["13"]
        self.assertAlmostEqual(side["busy_ms"], 0.028)
        self.assertAlmostEqual(side["beside_compute_ms"], 0.025)
        self.assertEqual(side["top_kernel"], "side")

    def test_one_step(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            with open(path, "w") as f:
                json.dump(trace(steps=1), f)
            s = trace_summary.summarize(path)
        self.assertEqual(s["steps"], 1)
        self.assertIsNone(s["step_ms"])
        self.assertAlmostEqual(s["phases"]["forward"]["span_ms"], 0.020)
        self.assertAlmostEqual(s["phases"]["backward"]["kernels_ms"], 0.030)

    def test_cpu_only_trace_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            with open(path, "w") as f:
                json.dump({"traceEvents": [{"name": "forward", "cat": "cpu", "ph": "X", "ts": 0, "dur": 1,
                                            "args": {}}]}, f)
            with self.assertRaises(SystemExit) as e:
                trace_summary.summarize(path)
            self.assertIn("no GPU events", str(e.exception))


if __name__ == "__main__":
    unittest.main()
