"""bench/ddp_matrix.py --device cpu, the form of the benchmarks' one command that runs
without a GPU (bench/own_model.sh with DEVICE=cpu): ddplab's vit_ddp and PyTorch's DDP
(bench/pytorch_vit.py) train the same TorchScript module on 2 Gloo processes each, in
turn, and the table has both sides' rows. Also: the rows that only a GPU has are refused
before anything runs, a group of ranks stops when one of them fails, and each
repetition runs every row in turn.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ddp_matrix  # noqa: E402


def runfile(path):
    return os.path.join(os.environ["TEST_SRCDIR"], "ddplab", path)


def scratch():
    return tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))


MATRIX = [sys.executable, os.path.join(HERE, "ddp_matrix.py"), "--device", "cpu", "--gpus", "2",
          "--baselines", "single_gpu", "--reps", "1", "--warmup", "1", "--measured", "2", "--batch", "4",
          "--module", runfile("core/model/torchscript/testdata/encoder.pt"), "--module_input", "16:int64:100",
          "--module_classes", "3", "--binary", runfile("experiments/vit_ddp")]


class DdpMatrixCpuTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.out = scratch()
        cls.done = subprocess.run(MATRIX + ["--out", cls.out, "--configs", "naive,bf16_cap25"],
                                  capture_output=True, text=True)
        print(cls.done.stdout[-3000:], cls.done.stderr[-3000:])
        ours = []
        for log in glob.glob(os.path.join(cls.out, "logs", "ddplab_*_2gpu_gloo_1.log")):
            with open(log) as f:
                ours.append(f.read())
        if ours and all("this build has no Gloo" in text for text in ours):
            # As the C++ multi-process tests do (core/testing/gloo.h): a LibTorch without
            # Gloo (the CUDA wheels) cannot run CPU ranks.
            raise unittest.SkipTest("this build's LibTorch has no Gloo")

    def row(self, key):
        with open(os.path.join(self.out, "ddp.json")) as f:
            rows = {f"{r['config']}_{r['gpus']}gpu_{r['transport']}": r for r in json.load(f)["rows"]}
        self.assertIn(key, rows)
        return rows[key]

    def test_both_sides_train_the_module_over_gloo(self):
        self.assertEqual(self.done.returncode, 0)
        for key in ("single_gpu_1gpu_none", "naive_2gpu_gloo"):
            row = self.row(key)
            self.assertGreater(row["ddplab_steps_per_s"], 0, key)
            self.assertGreater(row["pytorch_steps_per_s"], 0, key)
        self.assertEqual(self.row("naive_2gpu_gloo")["ddplab_buckets"], 1)
        with open(os.path.join(self.out, "configs", "naive_2gpu_gloo.textproto")) as f:
            experiment = f.read()
        self.assertIn("device: CPU", experiment)
        self.assertIn("batch_size: 4", experiment)
        self.assertNotIn("NCCL", experiment)
        with open(os.path.join(self.out, "pytorch", "naive_2gpu_gloo", "1.json")) as f:
            theirs = json.load(f)
        self.assertEqual((theirs["world_size"], theirs["device"], theirs["fused"]), (2, "cpu", False))
        with open(os.path.join(self.out, "environment.json")) as f:
            self.assertEqual(json.load(f)["gpu_count"], 0)

    def test_bf16_without_pytorchs_form_says_why(self):
        # ddplab's bf16 runs; PyTorch's, where its Gloo has no bfloat16 all-reduce (1.13),
        # stops saying so, and the row has no PyTorch figure rather than a wrong one.
        row = self.row("bf16_cap25_2gpu_gloo")
        self.assertGreater(row["ddplab_steps_per_s"], 0)
        if row["pytorch_steps_per_s"] is None:
            with open(os.path.join(self.out, "logs", "pytorch_bf16_cap25_2gpu_gloo_1.log")) as f:
                self.assertIn("Gloo has no bfloat16 all-reduce", f.read())
            self.assertIn("FAILED", self.done.stdout)

    def test_the_last_bucket_suffix_tapers_the_buckets(self):
        plugins, _, _, _, base = ddp_matrix.config_entry("sharded_during_cap100_last2p5_graph")
        self.assertIn("bucket_sizing { last_bucket_cap_mb: 2.5 bucket_cap_mb: 100 }", plugins)
        self.assertIn("cuda_graph", plugins)
        self.assertEqual(base, "sharded_cap100")  # PyTorch's row: the configuration's, untapered
        self.assertEqual(ddp_matrix.config_entry("cap25_last4")[4], "cap25")

    def test_nccl_variable_suffixes_compose(self):
        _, _, env, fields, base = ddp_matrix.config_entry("bf16_cap25_p2p4_shmce")
        self.assertEqual(env, {"NCCL_MIN_P2P_NCHANNELS": "4", "NCCL_NCHANNELS_PER_NET_PEER": "4",
                               "NCCL_SHM_USE_CUDA_MEMCPY": "1", "NCCL_SHM_MEMCPY_MODE": "3",
                               "NCCL_CREATE_THREAD_CONTEXT": "1"})
        for name, value in env.items():
            self.assertIn(f'nccl_env {{ name: "{name}" value: "{value}" }}', fields)
        self.assertEqual(base, "bf16_cap25")  # PyTorch's row: the configuration's
        self.assertEqual(ddp_matrix.config_entry("cap25_cta1_graph")[2], {"NCCL_CTA_POLICY": "1"})
        _, _, env, _, base = ddp_matrix.config_entry("bf16_fp32_sum_cap25_p2p4_socks4x2")
        self.assertEqual(env, {"NCCL_MIN_P2P_NCHANNELS": "4", "NCCL_NCHANNELS_PER_NET_PEER": "4",
                               "NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "2"})
        self.assertEqual(base, "bf16_cap25")  # PyTorch has no float32 sum: its bf16 hook

    def test_a_gpu_only_row_is_refused_before_it_runs(self):
        for configs, baselines, refused in (("naive,powersgd_rank1_tuned", "single_gpu", "powersgd_rank1_tuned"),
                                            ("naive,cap25_ch4", "single_gpu", "cap25_ch4"),
                                            ("naive,cap25_win", "single_gpu", "cap25_win"),
                                            ("naive,cap25_graph", "single_gpu", "cap25_graph"),
                                            ("naive", "single_gpu,single_gpu_high_priority",
                                             "single_gpu_high_priority")):
            out = scratch()
            done = subprocess.run(MATRIX + ["--out", out, "--configs", configs, "--baselines", baselines],
                                  capture_output=True, text=True)
            self.assertNotEqual(done.returncode, 0, refused)
            self.assertIn(f"{refused!r} sets NCCL", done.stderr)
            self.assertEqual(os.listdir(os.path.join(out, "ddplab")), [], refused)

    def test_ranks_stop_when_one_fails(self):
        log = os.path.join(scratch(), "ranks.log")
        rank = "import os, sys, time; r = int(os.environ['RANK']); print('rank', r, 'of', os.environ['WORLD_SIZE']); "
        start = time.time()
        code = ddp_matrix.run([sys.executable, "-c", rank + "sys.exit(3) if r == 1 else time.sleep(60)"], log,
                              ranks=2)
        self.assertEqual(code, 3)
        self.assertLess(time.time() - start, 30)
        with open(log) as f:
            text = f.read()
        self.assertIn("rank 1 of 2", text)
        self.assertEqual(ddp_matrix.run([sys.executable, "-c", rank], log, ranks=2), 0)

    def test_ranks_stop_at_the_runs_time_limit(self):
        log = os.path.join(scratch(), "ranks.log")
        limit, ddp_matrix.RUN_TIMEOUT = ddp_matrix.RUN_TIMEOUT, 2
        try:
            start = time.time()
            code = ddp_matrix.run([sys.executable, "-c", "import time; time.sleep(60)"], log, ranks=2)
        finally:
            ddp_matrix.RUN_TIMEOUT = limit
        self.assertEqual(code, 124)
        self.assertLess(time.time() - start, 30)
        with open(log) as f:
            self.assertIn("stopped after 2 s", f.read())


class RepetitionOrderTest(unittest.TestCase):
    """The runs' order, with the runs themselves and the clock made up: each repetition
    runs every row in turn, a deadline leaves out the last repetitions of every row, and
    --more_reps repeats only the rows whose ratios to PyTorch fall on both sides of 1."""

    def runs_of(self, extra, seconds_per_run=0.0, rate=None):
        """The runs ddp_matrix.py starts, by log name. `rate(side, key, rep)`, where given,
        is the steps/s each run records where its side writes it."""
        started, clock = [], [1000.0]

        def fake_run(cmd, log, env=None, ranks=1):
            name = os.path.basename(log)[:-len(".log")]
            started.append(name)
            clock[0] += seconds_per_run
            if rate is not None:
                side, rest = name.split("_", 1)
                key, rep = rest.rsplit("_", 1)
                if side == "ddplab":
                    output_dir = next(c for c in cmd if c.startswith("--output_dir="))[len("--output_dir="):]
                    path = os.path.join(output_dir, key, key + ".json")
                else:
                    path = cmd[cmd.index("--output") + 1]
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    json.dump({"steps_per_s": rate(side, key, int(rep))}, f)
            return 0

        argv = ["ddp_matrix.py", "--out", scratch(), "--device", "cpu", "--gpus", "2", "--baselines", "single_gpu",
                "--configs", "naive,cap25", "--binary", "vit_ddp"] + extra
        saved = (ddp_matrix.run, ddp_matrix.subprocess.check_call, ddp_matrix.time.time, sys.argv)
        try:
            ddp_matrix.run, ddp_matrix.subprocess.check_call = fake_run, lambda *a, **k: 0
            ddp_matrix.time.time, sys.argv = (lambda: clock[0]), argv
            ddp_matrix.main()
        finally:
            ddp_matrix.run, ddp_matrix.subprocess.check_call, ddp_matrix.time.time, sys.argv = saved
        return started

    def test_each_repetition_runs_every_row_in_turn(self):
        rows = ["single_gpu", "naive_2gpu_gloo", "cap25_2gpu_gloo"]
        expected = [f"{side}_{row}_{rep}" for rep in (1, 2) for row in rows for side in ("ddplab", "pytorch")]
        self.assertEqual(self.runs_of(["--reps", "2"]), expected)

    def test_more_repetitions_of_the_rows_whose_ratios_cross_one(self):
        # naive: ddplab behind PyTorch in repetition 2 and ahead in every other, so its
        # ratios cross 1 after each repetition and it runs until --more_reps is spent; the
        # one GPU and cap25 are ahead in every repetition and get none.
        def rate(side, key, rep):
            if side == "pytorch":
                return 10.0
            return {"naive_2gpu_gloo": 9.0 if rep == 2 else 11.0}.get(key, 12.0)

        started = self.runs_of(["--reps", "2", "--more_reps", "2"], rate=rate)
        self.assertEqual([n for n in started if n.endswith(("_3", "_4"))],
                         ["ddplab_naive_2gpu_gloo_3", "pytorch_naive_2gpu_gloo_3",
                          "ddplab_naive_2gpu_gloo_4", "pytorch_naive_2gpu_gloo_4"])

    def test_no_more_repetitions_where_every_ratio_is_on_one_side(self):
        started = self.runs_of(["--reps", "2", "--more_reps", "3"],
                               rate=lambda side, key, rep: 11.0 if side == "ddplab" else 10.0)
        self.assertEqual(len(started), 12)  # 3 rows, 2 sides, 2 repetitions

    def test_no_run_starts_that_its_last_repetition_says_would_end_after_the_deadline(self):
        # Each run 10 s, a row's repetition 20 s (ddplab's and PyTorch's): the first
        # repetition ends at 60 s; at 100 s the second has run two rows, and the third
        # row's would end at 120 s, after the deadline, so it does not start.
        started = self.runs_of(["--reps", "2", "--deadline", "100"], seconds_per_run=10)
        self.assertEqual([name for name in started if name.endswith("_2")],
                         ["ddplab_single_gpu_2", "pytorch_single_gpu_2", "ddplab_naive_2gpu_gloo_2",
                          "pytorch_naive_2gpu_gloo_2"])

    def test_a_deadline_leaves_out_repetitions_not_rows(self):
        # Each run takes 10 s: after the first repetition's 6 runs the clock is 60 s on.
        started = self.runs_of(["--reps", "3", "--deadline", "55"], seconds_per_run=10)
        self.assertEqual([name for name in started if name.endswith("_1")], started)
        self.assertEqual(len(started), 6)


class SummarizeTest(unittest.TestCase):
    """summarize.py over a made-up run directory: each repetition's ratio pairs the two
    sides' runs of that repetition (one of PyTorch's is missing), a row whose step is
    one CUDA graph is divided by one GPU's graph, and a row that shares another's PyTorch
    runs is paired with that row's runs of each repetition."""

    def test_ratios_by_repetition_and_graph_rows_over_one_gpus_graph(self):
        out = scratch()

        def record(path, steps_per_s):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                json.dump({"steps_per_s": steps_per_s, "peak_memory_gib": 1.0, "tflops_per_gpu": 1.0,
                           "data_wait_fraction": 0.0, "phases": {}}, f)

        with open(os.path.join(out, "environment.json"), "w") as f:
            json.dump({"device": "d", "gpu_count": 4, "driver": "-", "pytorch_version": "-",
                       "libtorch_version": "-", "nccl_version": "-", "date": "-"}, f)
        rows = {"single_gpu": (1, None, [20.0, 20.0, 20.0], [10.0, 10.0, 10.0]),
                "single_gpu_graph": (1, "single_gpu", [50.0, 50.0, 50.0], []),
                "cap25": (4, None, [9.0, 11.0, 10.0], [10.0, None, 10.0]),
                "cap25_graph": (4, "cap25", [45.0, 45.0, 45.0], []),
                # Its repetitions drift as cap25's do: 0.9 by the medians, 1.0 by each pair.
                "fp8_cap25": (4, "cap25", [9.0, 11.0, 9.0], [])}
        for config, (gpus, pytorch_key, ours, theirs) in rows.items():
            meta = {"config": config, "gpus": gpus, "transport": "nvlink" if gpus > 1 else "none"}
            if pytorch_key:
                meta["pytorch_key"] = pytorch_key
            os.makedirs(os.path.join(out, "configs"), exist_ok=True)
            with open(os.path.join(out, "configs", config + ".json"), "w") as f:
                json.dump(meta, f)
            for rep, rate in enumerate(ours, 1):
                record(os.path.join(out, "ddplab", config, str(rep), "s", config + ".json"), rate)
            for rep, rate in enumerate(theirs, 1):
                if rate is not None:
                    record(os.path.join(out, "pytorch", config, f"{rep}.json"), rate)
        done = subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), "--name", "t", "--dir", out,
                               "--output", os.path.join(out, "t.json")], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(out, "t.json")) as f:
            by_config = {r["config"]: r for r in json.load(f)["rows"]}
        self.assertEqual(by_config["cap25"]["ratio_runs"], [0.9, 1.0])  # repetitions 1 and 3
        self.assertAlmostEqual(by_config["cap25_graph"]["ddplab_vs_single_gpu_graph"], 0.9)
        self.assertAlmostEqual(by_config["cap25_graph"]["ddplab_vs_single_gpu"], 2.25)
        table = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.startswith("cap25")}
        self.assertEqual(table["cap25_graph"][6], "0.900")  # d/1gpu: over single_gpu_graph
        self.assertEqual(table["cap25"][6], "0.500")
        self.assertIn("ratio by repetition, cap25 (4, nvlink): [0.9, 1.0]: on no one side of 1", done.stdout)
        self.assertEqual(by_config["fp8_cap25"]["vs_base_runs"], [1.0, 1.0, 0.9])
        self.assertAlmostEqual(by_config["fp8_cap25"]["vs_base"], 1.0)
        self.assertAlmostEqual(by_config["fp8_cap25"]["ddplab_steps_per_s"] / by_config["cap25"]["ddplab_steps_per_s"],
                               0.9)
        self.assertIn("by repetition, fp8_cap25 over cap25 (4, nvlink): [1.0, 1.0, 0.9], median 1.000: on no one "
                      "side of 1", done.stdout)
        self.assertIn("by repetition, cap25_graph over cap25 (4, nvlink): [5.0, 4.0909, 4.5], median 4.500: ahead in "
                      "every repetition", done.stdout)
        self.assertNotIn("by repetition, single_gpu over", done.stdout)  # a row of its own PyTorch runs

if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
