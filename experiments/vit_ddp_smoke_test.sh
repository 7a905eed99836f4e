#!/usr/bin/env bash
# vit_ddp runs its default suite, and stops with the exact location of a bad file.
set -u
bin="$TEST_SRCDIR/ddplab/experiments/vit_ddp"
out="$TEST_TMPDIR/out.txt"
err="$TEST_TMPDIR/err.txt"
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }

"$bin" >"$out" 2>"$err" || fail "default suite exited $?"
grep -q "^Device report" "$out" || fail "no device report"
grep -q "^Suite \"" "$out" || fail "no suite line"
grep -q "nothing was trained or measured" "$out" || fail "does not say that nothing was trained"

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
