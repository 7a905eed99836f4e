#!/usr/bin/env bash
# vit_ddp runs the CPU suite, and stops with the exact location of a bad file.
set -u
bin="$TEST_SRCDIR/ddplab/experiments/vit_ddp"
out="$TEST_TMPDIR/out.txt"
err="$TEST_TMPDIR/err.txt"
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }

# The CPU suite runs in either build (the default suite of a CUDA build trains ViT-L/32).
results="$TEST_TMPDIR/results"
"$bin" --experiment="$TEST_SRCDIR/ddplab/experiments/cpu_smoke.textproto" --output_dir="$results" \
  >"$out" 2>"$err"
code=$?
grep -q "c10d          Gloo yes" "$out" && [ "$code" -ne 0 ] && fail "cpu_smoke suite exited $code"
grep -q "^Device report" "$out" || fail "no device report"
grep -q "^Suite \"cpu_smoke\"" "$out" || fail "no suite line"
grep -qE "^single_process: [0-9.]+ steps/s" "$out" || fail "no summary of the single-process run"
grep -q '"steps_per_s"' "$results/cpu_smoke/single_process.json" || fail "no result record"
if grep -q "c10d          Gloo yes" "$out"; then
  grep -q "5 of 5 run(s) completed" "$out" || fail "not every run completed"
  grep -q "compression [0-9.]*x" "$out" || fail "no compression ratio for PowerSGD"
  grep -q '"world_size": 2' "$results/cpu_smoke/naive_ddp.json" || fail "no 2-process result record"
else
  # A LibTorch without Gloo (a CUDA wheel) cannot run CPU processes together: it says so.
  grep -q "this build has no Gloo" "$err" || fail "no Gloo, and no message saying so"
fi

bad="$TEST_SRCDIR/ddplab/core/testdata/bad/unknown_plugin.textproto"
"$bin" --experiment="$bad" >"$out" 2>"$err"
code=$?
[ "$code" -eq 2 ] || fail "bad file exited $code, want 2"
grep -qF "unknown_plugin.textproto:7:10: Message type \"ddplab.v1.Plugin\" has no field named \"fancy_hook\"." "$err" \
  || fail "bad file's error"

"$bin" --experiment=/nonexistent.textproto >"$out" 2>"$err"
[ $? -eq 2 ] || fail "missing file did not exit 2"
grep -qF "/nonexistent.textproto: cannot open experiment file" "$err" || fail "missing file's error"
echo "vit_ddp smoke: 3 passed, 0 failed"
