"""ddplab's bf16 and PowerSGD against PyTorch's own hooks, on the same gradients.

pytorch_reference.py writes a case: two ranks' gradients for six steps, of tensors that
PowerSGD compresses and ones it does not. PyTorch reduces them in a real DDP over Gloo
with its bf16_compress_hook, and with its powerSGD_hook (PowerSGDState at rank 1 and 4,
start_powerSGD_iter 2, error feedback and warm start on, random_seed 3); ddplab's plugins
(bf16 {}, powersgd {...} with the same fields) reduce them over Gloo as their own ranks
(hook_worker.cc), in a bucket laid out as DDP's was. Step after step every rank's result
is compared with PyTorch's, tensor by tensor (relative L2 difference), and a table of the
largest differences is printed beside what compression itself changes (the relative
difference of PyTorch's result from the exact mean).

What is asserted, and why:
- bf16, per element, within one bfloat16 rounding of PyTorch's result (2^-8 relative).
  PyTorch casts to bfloat16 and divides by the world in bfloat16 before the all-reduce;
  ddplab casts, sums and divides the sum. With two ranks the division by 2 is exact, so
  the two are equal bit for bit (also asserted); with more ranks PyTorch's division rounds
  once more, within the one rounding allowed.
- PowerSGD, before start_powerSGD_iter (steps 0 and 1): the exact mean, equal bit for bit
  (both divide by 2, exactly, and sum), and within float32's rounding of the mean.
- PowerSGD from step 2 (compressed), per tensor and step, at rank 1 and 4: a relative L2
  difference of at most 1e-5 for the compressed tensors (measured: 4e-7 at the first
  compressed step, growing to 1e-6 at rank 1 and 2e-6 at rank 4 by the fourth), where
  compression itself changes each by more than 1% (asserted; the largest, 30% to 170%);
  and at most 5e-7 (some ulps of float32)
  for the uncompressed ones (measured: 8e-8). ddplab starts from PyTorch's initial Q (the
  same numbers: asserted exactly), and follows its choice of what to compress and its
  order of random draws. It differs on purpose where exact arithmetic is the same, and
  float32 rounds each way differently:
    * it does not orthogonalize Q before P = M Q (PyTorch does, the random Q and every
      warm-started one): P's span is M's image of Q's span either way, and P itself is
      orthogonalized. Its products are its own (thin_products.h), summed in another order;
    * it keeps the column signs Gram-Schmidt gives P where PyTorch's QR (rank 3 and up)
      flips some, and orthogonalizes a batch of more than four matrices of one shape
      (w_d0..w_d4 here) by two passes of Gram-Schmidt where PyTorch's QR does each alone:
      P Q^T is the same to rounding;
    * uncompressed tensors carry no error to the next step; PyTorch's error feedback
      keeps each rank's part of the average it sent (its gradient minus the mean), whose
      mean over the ranks is zero but for rounding;
  and error feedback carries each step's difference into the next, so it grows a little
  step after step (the table shows it).
- The comparison can fail: ddplab with random_seed 4 against PyTorch with 3 differs by
  far more than the bound at the first compressed step (asserted).

Runs under the Python of ddplab's Python tests, one that has torch (tools/python).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_reference as reference  # noqa: E402

WORLD = 2
STEPS = 6
START = 2  # start_powerSGD_iter
GRADIENT_SEED = 1
RANDOM_SEED = 3
BF16_ROUNDING = 2.0 ** -8
POWERSGD_BOUND = 1e-5        # compressed tensors, relative L2 per tensor and step
UNCOMPRESSED_BOUND = 5e-7    # uncompressed ones, at compressed steps
MEAN_ROUNDING = 2.0 ** -23   # float32's mean against the exact one
MIN_COMPRESSION_RATE = 2
RUN_TIMEOUT = 100  # seconds for one side's run (some seconds; the test's limit is 300)


def _runfile(name):
    root = os.environ.get("TEST_SRCDIR") or os.environ.get("RUNFILES_DIR")
    if not root:
        raise RuntimeError("run under bazel test: no runfiles")
    return os.path.join(root, "ddplab", "parity", name)


def _powersgd_plugin(rank, seed):
    return ("plugin { powersgd { matrix_approximation_rank: %d start_powerSGD_iter: %d use_error_feedback: true "
            "warm_start: true min_compression_rate: %d random_seed: %d } }" % (rank, START, MIN_COMPRESSION_RATE, seed))


# PyTorch's runs, name: (hook, matrix_approximation_rank, random_seed).
PYTORCH_RUNS = {
    "pt_bf16": ("bf16", 1, 0),
    "powersgd1": ("powersgd", 1, RANDOM_SEED),
    "powersgd4": ("powersgd", 4, RANDOM_SEED),
}
# ddplab's, name: (its plugins, the PyTorch run whose bucket order it takes).
DDPLAB_RUNS = {
    "dl_bf16": ("plugin { bf16 {} }", "pt_bf16"),
    "dl_powersgd1": (_powersgd_plugin(1, RANDOM_SEED), "powersgd1"),
    "dl_powersgd4": (_powersgd_plugin(4, RANDOM_SEED), "powersgd4"),
    "dl_powersgd1_seed4": (_powersgd_plugin(1, RANDOM_SEED + 1), "powersgd1"),
}


class Case:
    """The case's directory, its gradients, and every run of both sides: PyTorch's in one
    job of WORLD ranks, then ddplab's in another (a process start costs more than a run)."""

    def __init__(self, directory):
        self.dir = directory
        reference.make_gradients(argparse.Namespace(dir=directory, seed=GRADIENT_SEED, steps=STEPS, world=WORLD))
        self.names, self.shapes, _ = reference.read_manifest(directory)
        self.gradients = [[self.read("grad", r, s) for s in range(STEPS)] for r in range(WORLD)]
        runs = []
        for name, (hook, rank, seed) in PYTORCH_RUNS.items():
            runs += ["--run", "%s:%d:%d:%s" % (hook, rank, seed, name)]
        self._check([sys.executable, reference.__file__, "reduce", "--dir", directory] + runs, "PyTorch's runs")
        self._ddplab()

    def _check(self, argv, what):
        print("running " + what, flush=True)
        # The comparison is on the CPU: CUDA hidden, since PyTorch's PowerSGD hook
        # synchronizes CUDA wherever it sees a GPU, and then fails on CPU tensors.
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
        try:
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError("%s timed out:\n%s" % (what, (e.stdout or b"").decode(errors="replace")))
        if done.returncode != 0:
            raise RuntimeError("%s failed (exit %d):\n%s" % (what, done.returncode, done.stdout.decode(errors="replace")))

    def read(self, name, rank, step):
        return reference.read_floats(os.path.join(self.dir, "%s_r%d_s%d.f32" % (name, rank, step)), self.shapes)

    def _ddplab(self):
        """Runs WORLD ranks of hook_worker over DDPLAB_RUNS, each bucket in the order its
        PyTorch run had."""
        print("running ddplab's runs", flush=True)
        runs = os.path.join(self.dir, "ddplab_runs")
        with open(runs, "w") as f:
            for name, (plugins, order_of) in DDPLAB_RUNS.items():
                f.write("%s %s %s\n" % (name, order_of, plugins))
        with tempfile.TemporaryDirectory() as rendezvous:
            procs, logs = [], []
            for rank in range(WORLD):
                env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD),
                           LOCAL_WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT="29500",
                           DDPLAB_RENDEZVOUS_FILE=os.path.join(rendezvous, "store"))
                logs.append(open(os.path.join(rendezvous, "rank%d.log" % rank), "w+b"))
                procs.append(subprocess.Popen([_runfile("hook_worker"), "--dir=" + self.dir, "--runs=" + runs],
                                              env=env, stdout=logs[-1], stderr=subprocess.STDOUT))
            failures = []
            for rank, (p, log) in enumerate(zip(procs, logs)):
                try:
                    p.wait(timeout=RUN_TIMEOUT)
                except subprocess.TimeoutExpired:
                    for q in procs:
                        q.kill()
                    p.wait()
                    log.write(b"\n(timed out)")
                log.seek(0)
                if p.returncode != 0:
                    failures.append("rank %d exit %d:\n%s" % (rank, p.returncode, log.read().decode(errors="replace")))
                log.close()
        if failures and all("this build has no Gloo" in f for f in failures):
            # As the C++ multi-process tests do (core/testing/gloo.h): a LibTorch without
            # Gloo (the CUDA wheels) cannot run CPU ranks.
            raise unittest.SkipTest("this build's LibTorch has no Gloo")
        if failures:
            raise RuntimeError("ddplab's runs failed: %s" % "\n".join(failures))

    def exact_mean(self, step):
        return [sum(self.gradients[r][step][k].double() for r in range(WORLD)) / WORLD for k in range(len(self.shapes))]

    def compressed(self, rank):
        """Which tensors PyTorch's powerSGD_hook compresses at `rank`."""
        out = []
        for shape in self.shapes:
            rows, cols = shape[0], int(np.prod(shape[1:])) if len(shape) > 1 else 1
            r = min(rows, cols, rank)
            out.append(len(shape) > 1 and (rows + cols) * r * MIN_COMPRESSION_RATE < rows * cols)
        return out


def relative(a, b):
    a, b = a.double(), b.double()
    norm = b.norm().item()
    return (a - b).norm().item() / norm if norm > 0 else (a - b).norm().item()


_case = None


def case():
    """The case, made once: every test's runs at the first test's call (or what stopped them)."""
    global _case
    if _case is None:
        try:
            _case = Case(tempfile.mkdtemp(prefix="hooks_parity_", dir=os.environ.get("TEST_TMPDIR")))
        except (unittest.SkipTest, RuntimeError) as e:
            _case = e
    if isinstance(_case, Exception):
        raise _case
    return _case


def differences(c, ours, theirs):
    """Per step: per tensor, the largest relative L2 difference over the ranks of `ours` from
    `theirs`, and of `theirs` from the exact mean. Each side's ranks must agree exactly."""
    table = []
    for step in range(STEPS):
        mine = [c.read(ours, r, step) for r in range(WORLD)]
        pt = [c.read(theirs, r, step) for r in range(WORLD)]
        for r in range(1, WORLD):
            for k in range(len(c.shapes)):
                assert torch.equal(mine[r][k], mine[0][k]), "ddplab's ranks differ: %s step %d" % (c.names[k], step)
                assert torch.equal(pt[r][k], pt[0][k]), "PyTorch's ranks differ: %s step %d" % (c.names[k], step)
        mean = c.exact_mean(step)
        table.append([(max(relative(mine[r][k], pt[r][k]) for r in range(WORLD)), relative(pt[0][k], mean[k]))
                      for k in range(len(c.shapes))])
    return table


def print_table(title, c, table, compressed=None):
    print("\n%s: largest relative L2 difference from PyTorch over the tensors%s (of PyTorch from the exact mean)"
          % (title, "" if compressed is None else ", compressed / uncompressed"))
    for step, row in enumerate(table):
        if compressed is None:
            print("  step %d  %.2e  (%.2e)" % (step, max(d for d, _ in row), max(e for _, e in row)))
            continue
        parts = []
        for kind in (True, False):
            ds = [d for (d, _), comp in zip(row, compressed) if comp == kind]
            es = [e for (_, e), comp in zip(row, compressed) if comp == kind]
            parts.append("%.2e (%.2e)" % (max(ds), max(es)) if ds else "-")
        print("  step %d  %s / %s" % (step, parts[0], parts[1]))
    sys.stdout.flush()


class InitialQTest(unittest.TestCase):
    def test_initial_q_is_pytorchs_number_for_number(self):
        """powersgd's initial Qs (initial_q.h) are PyTorch's for the same random_seed, in the
        order PyTorch's hook fills them for the case's bucket (by shape as shapes first appear,
        then in bucket order), at rank 1 and 4."""
        c = case()
        for rank in (1, 4):
            with open(os.path.join(c.dir, "powersgd%d.order" % rank)) as f:
                order = [int(i) for i in f.read().splitlines()[START].split()[1:]]
            compressed = c.compressed(rank)
            by_shape = {}
            for i in order:
                if compressed[i]:
                    rows = c.shapes[i][0]
                    cols = int(np.prod(c.shapes[i][1:]))
                    by_shape.setdefault((rows, cols), []).append((cols, min(rows, cols, rank)))
            shapes = [s for group in by_shape.values() for s in group]
            state_rng = np.random.RandomState(RANDOM_SEED)  # PowerSGDState's rng
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(state_rng.randint(1_000_000_000))
                theirs = [torch.randn(1, cols, r) for cols, r in shapes]
            out = os.path.join(c.dir, "q%d.f32" % rank)
            c._check([_runfile("initial_q_dump"), "--random_seed=%d" % RANDOM_SEED, "--out=" + out,
                      "--shapes=" + ",".join("%dx%d" % s for s in shapes)], "initial_q_dump")
            ours = reference.read_floats(out, [(1, cols, r) for cols, r in shapes])
            self.assertGreaterEqual(len(shapes), 5)
            for k, (a, b) in enumerate(zip(ours, theirs)):
                self.assertTrue(torch.equal(a, b), "rank %d, Q %d of shape %s" % (rank, k, shapes[k]))


class Bf16ParityTest(unittest.TestCase):
    def test_bf16_is_pytorchs_bf16_compress_hook(self):
        c = case()
        theirs, ours = "pt_bf16", "dl_bf16"
        table = differences(c, ours, theirs)
        print_table("bf16 vs bf16_compress_hook", c, table)
        for step in range(STEPS):
            for r in range(WORLD):
                for k, (a, b) in enumerate(zip(c.read(ours, r, step), c.read(theirs, r, step))):
                    where = "%s, rank %d, step %d" % (c.names[k], r, step)
                    self.assertTrue(torch.all((a - b).abs() <= BF16_ROUNDING * b.abs()).item(), where)
                    self.assertTrue(torch.equal(a, b), where + ": two ranks divide exactly, so equal")


class PowerSgdParityTest(unittest.TestCase):
    def check_rank(self, rank):
        c = case()
        theirs, ours = "powersgd%d" % rank, "dl_powersgd%d" % rank
        compressed = c.compressed(rank)
        table = differences(c, ours, theirs)
        print_table("powersgd rank %d vs powerSGD_hook" % rank, c, table, compressed)
        self.assertTrue(any(compressed) and not all(compressed))
        for step, row in enumerate(table):
            for k, (d, e) in enumerate(row):
                where = "%s (%s), step %d" % (c.names[k], "compressed" if compressed[k] else "uncompressed", step)
                if step < START:
                    self.assertEqual(d, 0.0, where + ": the exact mean, before start_powerSGD_iter")
                    self.assertLessEqual(e, MEAN_ROUNDING, where)
                elif compressed[k]:
                    self.assertLessEqual(d, POWERSGD_BOUND, where)
                    self.assertGreater(e, 1000 * POWERSGD_BOUND, where + ": compression should change it")
                else:
                    self.assertLessEqual(d, UNCOMPRESSED_BOUND, where)
                    self.assertLessEqual(e, MEAN_ROUNDING, where)
        return c, theirs

    def test_rank_1(self):
        self.check_rank(1)

    def test_rank_4(self):
        self.check_rank(4)

    def test_another_seed_is_told_apart(self):
        """The comparison can fail: random_seed 4 against PyTorch's 3 differs by far more than
        the bound at the first compressed step."""
        c = case()
        theirs, ours = "powersgd1", "dl_powersgd1_seed4"
        row = differences(c, ours, theirs)[START]
        worst = max(d for d, _ in row)
        print("\npowersgd rank 1, random_seed %d vs PyTorch's %d: step %d differs by up to %.2e"
              % (RANDOM_SEED + 1, RANDOM_SEED, START, worst))
        self.assertGreater(worst, 1000 * POWERSGD_BOUND)


if __name__ == "__main__":
    unittest.main(verbosity=2)
