#!/usr/bin/env bash
# An interrupted suite resumed with --skip_completed keeps its work: stopped by SIGINT once
# its results hold 3 of its 6 runs (2 experiments, 3 repetitions each, interleaved; a run
# the signal cuts short is not one of them), resumed, it runs
# only the missing repetitions, and the report holds all six, the first three with the
# dates they were measured at. (--all_repetitions: every run gets its three, close to the
# others or not.) Then a result whose plugin changed since is run again.
set -u
source "$TEST_SRCDIR/ddplab/experiments/e2e/testing/python.sh"
bin="$TEST_SRCDIR/ddplab/experiments/vit_ddp"
suite="$TEST_SRCDIR/ddplab/experiments/e2e/testdata/resume_suite.textproto"
results="$TEST_TMPDIR/results"
out="$TEST_TMPDIR/out.txt"
err="$TEST_TMPDIR/err.txt"
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }

if [ "${DDPLAB_GLOO:-}" != 1 ]; then
  echo "no Gloo in this LibTorch: the suite needs 2 processes"
  exit 0
fi

# Every repetition kept in the results: "<experiment> <date>" a line.
repetitions() {
  python3 - "$results/resume" <<'PY'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    name = os.path.basename(path)[:-len(".json")]
    if name == "report" or "." in name:  # the report, traces
        continue
    r = json.load(open(path))
    for rep in r.get("repetitions") or [{"date": r["date"]}]:
        print(r["experiment"], rep["date"])
PY
}

"$bin" --experiment="$suite" --output_dir="$results" --all_repetitions >"$out" 2>"$err" &
suite_pid=$!
for _ in $(seq 1 600); do
  [ "$(repetitions 2>/dev/null | wc -l)" -ge 3 ] && break
  sleep 0.2
done
kill -INT $suite_pid
wait $suite_pid
code=$?
[ "$code" -eq 130 ] || fail "the interrupted suite exited $code, not 130"
repetitions >"$TEST_TMPDIR/before.txt"
kept=$(wc -l <"$TEST_TMPDIR/before.txt")
[ "$kept" -ge 3 ] && [ "$kept" -lt 6 ] || fail "$kept repetitions done when interrupted, not 3 to 5"

"$bin" --experiment="$suite" --output_dir="$results" --skip_completed --all_repetitions >"$out" 2>"$err" || fail "the resumed suite exited $?"
ran=$(grep -c "result: " "$out")
[ "$ran" -eq $((6 - kept)) ] || fail "resumed: $ran runs, not the $((6 - kept)) missing"
grep -q "rerun:" "$out" && fail "resumed: a completed repetition was run again"
grep -qE "^  kept: [12] of 3 repetitions from " "$out" || fail "resumed: no word of the repetitions kept"
repetitions >"$TEST_TMPDIR/after.txt"
[ "$(wc -l <"$TEST_TMPDIR/after.txt")" -eq 6 ] || fail "after resuming: $(wc -l <"$TEST_TMPDIR/after.txt") repetitions, not 6"
while read -r line; do
  grep -qxF "$line" "$TEST_TMPDIR/after.txt" || fail "the repetition '$line' measured before the interrupt is gone"
done <"$TEST_TMPDIR/before.txt"
python3 - "$results/resume/report.json" <<'PY' || fail "the report does not hold every repetition"
import json, sys
rows = {r["experiment"]: r for r in json.load(open(sys.argv[1]))["rows"]}
for name in ("naive_ddp", "small_buckets"):
    assert rows[name]["steps_per_s"]["count"] == 3, (name, rows[name]["steps_per_s"])
PY

# A result made with another build of a plugin (its library's digest changed) is kept
# neither by --only's report nor by --skip_completed (#64: results know their plugins).
python3 - "$results/resume/naive_ddp.json" <<'PY' || fail "no plugin build recorded"
import json, sys
r = json.load(open(sys.argv[1]))
builds = r.get("plugin_builds") or r["pluginBuilds"]
assert builds[0]["name"] == "bucket_sizing" and builds[0]["digest"].startswith("fnv1a64:"), builds
builds[0]["digest"] = "fnv1a64:0000000000000000"
json.dump(r, open(sys.argv[1], "w"))
PY
"$bin" --experiment="$suite" --output_dir="$results" --only=small_buckets >"$out" 2>"$err" || fail "--only exited $?"
grep -q "^not in the report, made with other plugins than now (run it again): naive_ddp: plugin bucket_sizing's library is another build now" "$out" ||
  fail "--only kept a result made with another build of a plugin, or did not say so"
"$bin" --experiment="$suite" --output_dir="$results" --skip_completed --all_repetitions >"$out" 2>"$err" || fail "the second resume exited $?"
grep -q "rerun: the result at .*naive_ddp.json was made with other plugins (plugin bucket_sizing's library" "$out" ||
  fail "--skip_completed kept a result made with another build of a plugin"
[ "$(grep -c "result: " "$out")" -eq 3 ] || fail "the second resume ran $(grep -c "result: " "$out") runs, not naive_ddp's 3"

# Kept repetitions where further ones go only where they decide: "up to" so many run, not
# a promise (#64).
python3 - "$results/resume/small_buckets.json" <<'PY' || fail "cannot keep one repetition"
import json, sys
r = json.load(open(sys.argv[1]))
r["repetitions"] = r["repetitions"][:1]
json.dump(r, open(sys.argv[1], "w"))
PY
"$bin" --experiment="$suite" --output_dir="$results" --skip_completed >"$out" 2>"$err" || fail "the third resume exited $?"
grep -q "^  kept: 1 of 3 repetitions from .*small_buckets.json; up to 2 more run where they can change the recommendation (--all_repetitions: all)" "$out" ||
  fail "the third resume promised repetitions that may not run"
echo "interrupted after $kept of 6 runs, resumed with $ran more; the report holds all 6; a result of another plugin build is run again; 1 passed"
