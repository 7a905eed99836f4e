#!/usr/bin/env bash
# vit_ddp --tune end to end on CPUs: the answer, its file run as written, the cache.
set -u
bin="$TEST_SRCDIR/ddplab/experiments/vit_ddp"
suite="$TEST_SRCDIR/ddplab/experiments/e2e/testdata/tune_suite.textproto"
results="$TEST_TMPDIR/results"
out="$TEST_TMPDIR/out.txt"
err="$TEST_TMPDIR/err.txt"
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }

# --print_experiments with --tune says what it would tune and runs nothing.
"$bin" --experiment="$suite" --tune --print_experiments --output_dir="$results" >"$out" 2>"$err" ||
  fail "--tune --print_experiments exited $?"
if ! grep -q "Gloo yes" "$out"; then
  echo "no Gloo in this LibTorch: only the plan is checked"
  exit 0
fi
grep -q -- "--tune would tune ddp (2 processes) over 4 bucket caps, verifying 2 with 2 run(s) each" "$out" ||
  fail "no tuning plan"
[ -e "$results" ] && fail "--print_experiments wrote $results"

# The first tuning measures; the suite's own runs do not run.
"$bin" --experiment="$suite" --tune --output_dir="$results" >"$out" 2>"$err" || fail "--tune exited $?"
grep -q "tune: measuring the probe" "$out" || fail "no probe"
grep -q "^== one " "$out" && fail "the suite's own run ran"
grep -q "^## Tuning ddp" "$out" || fail "no tuning section"
grep -qE "^Tuned ddp: (keep )?bucket_cap_mb [0-9.]+[ .]" "$out" || fail "no answer"
grep -q "^Calibrated on the experiment as given" "$out" || fail "no calibration"
grep -qE "^(Compute|Latency|Bandwidth)-bound" "$out" || fail "no verdict"
# The last question (tune/step_graph.h): on CPUs the graph's plugin refuses, and the text says so.
grep -qE "^The step as one CUDA graph \(cuda_graph\) was not tried: .*runs on the CPU" "$out" ||
  fail "the text does not say why the step as a graph was not tried"
dir="$results/tune_cpu_tune"
for f in report.md report.json report.html ddp_tuned.textproto ddp_probe.json; do
  [ -s "$dir/$f" ] || fail "no $dir/$f"
done
[ -s "$results/tune_cache/ddp.json" ] || fail "no cache"
[ -e "$results/tune_cpu" ] && fail "the suite's own directory was written"
grep -q '"allreduce_sweep"' "$dir/ddp_probe.json" || fail "the probe has no all-reduce sweep"
grep -q '"chosen_cap_mb"' "$dir/report.json" || fail "report.json has no tuning"
cap=$(sed -En 's/^Tuned ddp: (keep )?bucket_cap_mb ([0-9.]*[0-9])[ .].*/\2/p' "$out")
# One answer: the text's cap is the file's, the code's and the verdict's. The PyTorch code
# is the answer's own (its plugins' forms, which //bench:ddp_wrap_test checks against
# DDP), fenced: the cap and the experiment's static_graph.
grep -qE "^model = DDP\(model, bucket_cap_mb=$cap, static_graph=True\)" "$out" ||
  fail "the PyTorch code is not of cap $cap with static_graph"
grep -B3 "^model = DDP" "$out" | grep -q '^```python' || fail "the code is not fenced"
grep -q "bucket_cap_mb: $cap\b" "$dir/ddp_tuned.textproto" || fail "the tuned file is not of cap $cap"
grep -qE "^(Compute|Latency|Bandwidth)-bound: with bucket_cap_mb $cap \(" "$out" || fail "the verdict is not of cap $cap"
grep -qE "[-][0-9.]+% less" "$out" && fail "a negative \"less\""
grep -q "^| ddp_probe " "$out" && fail "the probe is a row of the report"
grep -q "^Recommendation" "$out" && fail "a recommendation beside the tuner's answer"
grep -q "^Run it: bazel run //experiments:vit_ddp -- --experiment=$dir/ddp_tuned.textproto" "$out" ||
  fail "no command to run the answer"

# The answer runs as written, with the chosen cap.
"$bin" --experiment="$dir/ddp_tuned.textproto" --output_dir="$results/answer" >"$out" 2>"$err" ||
  fail "the answer's file exited $?"
grep -q "buckets of $cap MiB" "$out" || fail "the answer's run is not of cap $cap"
grep -q "static_graph" "$out" || fail "the answer lost the experiment's static_graph"

# Nothing to tune: caps of 1 MiB and more make one bucket of the 0.2 MiB of gradients, as
# the experiment's own 25 does. Its cap is the answer, nothing else runs, and a lossy
# lever (bf16, whose convergence the tuner does not check) is left out of the code.
one="$TEST_TMPDIR/one_bucket.textproto"
# Its processes are left to the machine (gpus_per_node unset: 2 on CPUs), as on GPUs.
sed -e 's/bucket_cap_mb: \[0.01, 0.05, 0.1, 1\]/bucket_cap_mb: [1, 5, 25]/' -e 's/plugin { static_graph {} }/plugin { bf16 {} }/' \
  -e 's/distributed { gpus_per_node: 2 device: CPU }/distributed { device: CPU }/' "$suite" >"$one"
"$bin" --experiment="$one" --tune --only=ddp --output_dir="$results/one" >"$out" 2>"$err" || fail "--tune of one bucket exited $?"
grep -q "^Nothing to tune in ddp: every bucket_cap_mb tried (1 to 25) makes the buckets it makes already (1 bucket), so keep bucket_cap_mb 25." "$out" ||
  fail "no nothing-to-tune answer"
grep -q "tune: verifying" "$out" && fail "verified with nothing to tune"
grep -q "^# left out: bf16 (lossy" "$out" || fail "the lossy lever is not said to be left out"
grep -q "register_comm_hook" "$out" && fail "the code has the lossy hook"
grep -q "^model = DDP(model, bucket_cap_mb=25)" "$out" || fail "no PyTorch code for a run whose processes the machine sets"
grep -q "bucket_cap_mb: 25\b" "$results/one/tune_cpu_tune/ddp_tuned.textproto" || fail "the file does not keep cap 25"

# A second tuning reuses the measurements: only the verified candidates run.
"$bin" --experiment="$suite" --tune --output_dir="$results" >"$out" 2>"$err" || fail "second --tune exited $?"
grep -q "tune: reusing this machine's measurements" "$out" || fail "the cache was not reused"
grep -q "tune: measuring the probe" "$out" && fail "measured again"
grep -q "the probe and sweep from this machine's cache" "$out" || fail "the answer does not say it was cached"

# (What it refuses before anything runs is asked in one process: command_test.cc.)
echo PASS
