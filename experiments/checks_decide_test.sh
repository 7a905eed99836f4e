#!/usr/bin/env bash
# The convergence check trains where its verdict decides (Note [Checks that decide]): the
# fastest lossy lever where it beats every exact one; the rest are left out and said to be,
# and a lossy lever judged worse is not the recommendation.
set -u
bin="$TEST_SRCDIR/ddplab/experiments/vit_ddp"
suite="$TEST_SRCDIR/ddplab/experiments/testdata/checks_decide_suite.textproto"
plugins="$TEST_SRCDIR/ddplab/core/testdata/plugins"
results="$TEST_TMPDIR/results"
out="$TEST_TMPDIR/out.txt"
err="$TEST_TMPDIR/err.txt"
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }

"$bin" --experiment="$suite" --print_experiments --plugin_dir="$plugins" >"$out" 2>"$err" || fail "the plan"
if ! grep -q "Gloo yes" "$out"; then
  echo "no Gloo in this LibTorch: the check needs 2 processes"
  exit 0
fi
"$bin" --experiment="$suite" --plugin_dir="$plugins" --output_dir="$results" >"$out" 2>"$err" ||
  fail "the suite exited $?"
checked() { [ -s "$results/checks_decide/$1-convergence-1.json" ]; }
for name in slow_exact fast_worse; do checked "$name" || fail "$name was not checked"; done
for name in next_within after_within slower_lossy; do checked "$name" && fail "$name was checked"; done
grep -qE "^- fast_worse: worse by " "$out" || fail "fast_worse is not judged worse"
grep -qE "^== the convergence check leaves out next_within, after_within, slower_lossy: " "$out" ||
  fail "no word of what was left out"
grep -qE "it is not the recommendation\. The fastest exact one is slow_exact" "$out" ||
  fail "the lossy lever judged worse is still the recommendation"
# The progress total said "up to" and ended at the runs that ran: 5 and the check's 6.
grep -qE "^  suite:   10 of up to 11 runs done" "$out" || fail "the progress total did not drop the checks left out"
echo "checked fast_worse (worse, not the recommendation); left out the three others; 1 passed"
