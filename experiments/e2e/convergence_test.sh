#!/usr/bin/env bash
# The convergence check on CPUs, in two parts (the first argument), each a test target:
#   paired: (Note [The convergence check]) a lever that degrades the averaged gradient, 4%
#     or more above the exact run's final loss on the same seeds, is judged worse; an
#     exact lever within; and only the second may be recommended.
#   decide: by default, the check trains only where its verdict decides (Note [Checks
#     that decide]): the fastest lossy lever where it beats every exact one; where that one
#     trains worse, the next one down the list that still beats every exact one (Note
#     [Down the list]), which is within and is then the recommendation; the rest are left
#     out and said to be.
set -u
part=${1:?usage: convergence_test.sh paired|decide}
bin="$TEST_SRCDIR/ddplab/experiments/vit_ddp"
suite="$TEST_SRCDIR/ddplab/experiments/e2e/testdata/convergence_suite.textproto"
decide_suite="$TEST_SRCDIR/ddplab/experiments/e2e/testdata/checks_decide_suite.textproto"
# The runfiles' directory, which holds shrink/libshrink.so alone (the build's own directory
# may hold other libraries with shrink.proto).
plugins="$TEST_SRCDIR/ddplab/core/testdata/plugins"
results="$TEST_TMPDIR/results"
out="$TEST_TMPDIR/out.txt"
err="$TEST_TMPDIR/err.txt"
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }

if [ "${DDPLAB_GLOO:-}" != 1 ]; then
  echo "no Gloo in this LibTorch: the check needs 2 processes"
  exit 0
fi

paired() {
  "$bin" --experiment="$suite" --plugin_dir="$plugins" --output_dir="$results" >"$out" 2>"$err" ||
    fail "the suite exited $?"
  # Every configuration trains from each of the 3 seeds, as the exact reference does.
  for name in naive_ddp damped exact_lever; do
    for k in 1 2 3; do
      [ -s "$results/convergence/$name-convergence-$k.json" ] || fail "no $name-convergence-$k"
    done
  done
  grep -qE "^- damped: worse by [0-9.]+% \(.*; the check allows 2%\)" "$out" || fail "damped is not judged worse"
  grep -qE "^- exact_lever: within 2% of the exact runs \(.*\+0\.0% on average" "$out" ||
    fail "the exact lever is not judged within"
  python3 - "$results/convergence/report.json" <<'PY' || fail "the verdicts in report.json"
import json, sys
rows = {r["experiment"]: r for r in json.load(open(sys.argv[1]))["rows"]}
damped, exact = rows["damped"]["convergence"], rows["exact_lever"]["convergence"]
# The lever trains at least 4% worse on every seed: what the check must catch.
assert all(d >= 0.04 for d in damped["paired_difference"]), damped
assert not damped.get("within") and damped["worse_by"] >= 0.04, damped
assert exact.get("within") and all(abs(d) < 0.005 for d in exact["paired_difference"]), exact
PY
  echo "paired: damped judged worse on every seed, exact_lever within"
}

decide() {
  local configurations="$TEST_TMPDIR/configurations.txt"
  DDPLAB_TEST_CONFIGURATIONS="$configurations" \
    "$bin" --experiment="$decide_suite" --plugin_dir="$plugins" --output_dir="$results" >"$out" 2>"$err" &
  local launcher=$!
  wait "$launcher" || fail "the checks_decide suite exited $?"
  # Note [Configured once]: the launcher configures each experiment once to check the file
  # and each run once more, whatever the convergence check asks of it; each worker once.
  local name delay
  for pair in slow_exact:550 fast_worse:0 next_within:250 after_within:400 slower_lossy:750; do
    name=${pair%%:*} delay=${pair##*:}
    local runs configured
    runs=$(grep -cE "^== $name( \(|-convergence-[0-9]+ \()" "$out")
    configured=$(grep -c "^$launcher $delay\$" "$configurations")
    [ "$configured" -eq $((runs + 1)) ] ||
      fail "the launcher configured $name $configured times for $runs run(s): want $((runs + 1))"
  done
  checked() { [ -s "$results/checks_decide/$1-convergence-1.json" ]; }
  for name in slow_exact fast_worse next_within; do checked "$name" || fail "$name was not checked"; done
  for name in after_within slower_lossy; do checked "$name" && fail "$name was checked"; done
  grep -qE "^- fast_worse: worse by " "$out" || fail "fast_worse is not judged worse"
  grep -qE "^== the convergence check goes down the list: fast_worse trains worse, and next_within is the next " "$out" ||
    fail "no word of the walk down the list"
  grep -qE "^- next_within: within 2% of the exact runs" "$out" || fail "next_within is not judged within"
  grep -qE "^== the convergence check leaves out after_within, slower_lossy: " "$out" ||
    fail "no word of what was left out"
  grep -qE "it is not the recommendation\. The fastest exact one is slow_exact, .* The fastest lossy one the convergence check judged within is next_within, .*; it is the recommendation\." "$out" ||
    fail "the recommendation is not next_within, the fastest judged within"
  python3 - "$results/checks_decide/report.json" <<'PY' || fail "report.json's recommendation"
import json, sys
recs = json.load(open(sys.argv[1]))["recommendations"]
assert [r["recommended"] for r in recs] == ["next_within"], recs
PY
  # The progress total said "up to", the walk's reach included (3 lossy levers beat
  # slow_exact: 5 runs and 4 configurations' 3 seeds), and ran 5 and the check's 9.
  grep -qE "^  suite:   13 of up to 17 runs done" "$out" || fail "the progress total is not up to the walk's reach"
  echo "decide: fast_worse checked (worse), then next_within (within: the recommendation), the two others left out"
}

case "$part" in
  paired | decide) "$part" ;;
  *) echo "convergence_test.sh: no part \"$part\"" >&2; exit 2 ;;
esac
