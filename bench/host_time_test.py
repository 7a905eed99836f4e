"""host_time.py's arithmetic on a made-up trace: a call's self time is its duration less
the calls it encloses on its thread; a thread's busy time is its outermost calls'; counts
and times are per step; GPU kernels are not the host's."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import host_time  # noqa: E402

EVENTS = [
    {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": 10, "dur": 30},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15, "dur": 5},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 50, "dur": 5},
    {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 200, "dur": 20},
    {"ph": "X", "cat": "kernel", "name": "a kernel", "pid": 0, "tid": 7, "ts": 50, "dur": 500},
    {"ph": "X", "cat": "cpu_op", "name": "other", "pid": 1, "tid": 2, "ts": 0, "dur": 2000},
]


class HostTimeTest(unittest.TestCase):

    def test_self_times_and_busy_threads(self):
        names, busy = host_time.self_times(EVENTS)
        self.assertEqual(names["outer"], [2, 65 + 20])
        self.assertEqual(names["inner"], [1, 25])
        self.assertEqual(names["cudaLaunchKernel"], [2, 10])
        self.assertEqual(names["other"], [1, 2000])
        self.assertNotIn("a kernel", names)
        self.assertEqual(busy, {"thread 1": 120, "thread 2": 2000})

    def test_the_table_per_step(self):
        path = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "trace.json")
        with open(path, "w") as f:
            json.dump({"traceEvents": EVENTS}, f)
        out = subprocess.run([sys.executable, os.path.join(HERE, "host_time.py"), f"one=1:{path}", f"two=2:{path}"],
                             capture_output=True, text=True, check=True).stdout
        self.assertIn("one: thread 2 2.00", out)
        self.assertIn("two: thread 2 1.00", out)
        other = next(line for line in out.splitlines() if line.startswith("other"))
        self.assertEqual(other.split(), ["other", "2.000", "ms", "1.0x", "1.000", "ms", "0.5x"])

    def test_a_bad_argument_says_what(self):
        done = subprocess.run([sys.executable, os.path.join(HERE, "host_time.py"), "one=x:trace.json"],
                              capture_output=True, text=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("'one=x:trace.json': LABEL=STEPS:TRACE", done.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
