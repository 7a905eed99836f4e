#!/usr/bin/env bash
# The runs of one transport share a pool of workers (Note [Persistent workers]): the
# workers that start with the suite's first run of two processes still run its second.
# A worker killed in the middle of a run ends that run with its error; a new pool runs
# the rest. Each run a pool ran after another gives what a fresh process gives, bit for
# bit: its loss curve, and the gradient error of its sampled steps.
set -u
bin="$TEST_SRCDIR/ddplab/experiments/vit_ddp"
suite="$TEST_SRCDIR/ddplab/experiments/e2e/testdata/pool_suite.textproto"
source "$TEST_SRCDIR/ddplab/experiments/e2e/testing/workers.sh"
err="$TEST_TMPDIR/pooled.err"
fail() { echo "FAIL: $*"; echo "--- stderr"; tail -20 "$err"; exit 1; }

if [ "${DDPLAB_GLOO:-}" != 1 ]; then echo "no Gloo in this build: 0 passed, 0 failed, 2 skipped"; exit 0; fi

export TMPDIR="$TEST_TMPDIR/tmp"
mkdir -p "$TMPDIR"
out="$TEST_TMPDIR/pooled"
"$bin" --experiment="$suite" --output_dir="$out" >"$TEST_TMPDIR/pooled.out" 2>"$err" &
job=$!
first=$(worker_of "$job" 1) || { kill -9 "$job"; fail "no worker of rank 1"; }
for _ in $(seq 1 600); do grep -q '^\[2/5\] long: step' "$err" && break; sleep 0.1; done
grep -q '^\[2/5\] long: step' "$err" || { kill -9 "$job"; fail "\"long\" never started"; }
sleep 1
victim=$(worker_of "$job" 1) || { kill -9 "$job"; fail "no worker of rank 1 in \"long\""; }
[ -e "$out/pool_suite/exact.json" ] || { kill -9 "$job"; fail "\"exact\" has no result"; }
[ "$victim" = "$first" ] || { kill -9 "$job"; fail "\"long\" runs in worker $victim, not in $first, which ran \"exact\""; }
echo "pool: \"exact\" and \"long\" ran in the same workers (rank 1: pid $first)"
kill -9 "$victim"
took=$(wait_end "$job" 120) || { kill -9 "$job"; fail "still running 120 s after the kill"; }
wait "$job"; code=$?
[ "$code" -eq 1 ] || fail "exit $code, want 1 (a run failed)"
grep -q "long: rank 1 was killed by signal 9" "$err" || fail "no \"long: rank 1 was killed by signal 9\" in stderr"
grep -q "^- long: rank 1 was killed by signal 9" "$out/pool_suite/report.md" || fail "the report does not list \"long\" as failed"
pgrep -P "$job" >/dev/null && fail "workers left behind"
left=$(ls -A "$TMPDIR")
[ -z "$left" ] || fail "the launcher left $left in \$TMPDIR"
echo "kill: \"long\" failed as its worker was killed; the suite ended in ${took} s after it, exit $code"

names="exact small_buckets bf16_sampled static_graph"
for name in $names; do
  "$bin" --experiment="$suite" --only="$name" --output_dir="$TEST_TMPDIR/fresh_$name" >/dev/null 2>"$TEST_TMPDIR/fresh.err" \
    || { err="$TEST_TMPDIR/fresh.err"; fail "$name alone failed"; }
done
python3 - "$out/pool_suite" "$TEST_TMPDIR" $names <<'PY' || fail "a pooled run differs from a fresh process"
import json, sys
pooled, tmp, names = sys.argv[1], sys.argv[2], sys.argv[3:]
for name in names:
    a = json.load(open("%s/%s.json" % (pooled, name)))
    b = json.load(open("%s/fresh_%s/pool_suite/%s.json" % (tmp, name, name)))
    assert a["measured_steps"] == 4, (name, a["measured_steps"])
    for key in ("loss", "gradient_error", "gradient_cosine", "gradient_error_samples", "effective_error"):
        assert a.get(key) == b.get(key), "%s: %s %s pooled, %s fresh" % (name, key, a.get(key), b.get(key))
    if name == "bf16_sampled":
        assert a.get("gradient_error_samples", 0) > 0 and a["gradient_error"] > 0, a
    print("%s: loss %s, gradient error %s: the same as a fresh process's" % (name, a["loss"], a.get("gradient_error")))
PY
echo "2 passed, 0 failed"
