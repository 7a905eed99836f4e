#!/usr/bin/env bash
# What users run into (the CPU suite, tiny models), where it takes vit_ddp's own process:
# what main makes of a bad flag, one-process runs staying one process, torchrun-style jobs,
# results never lost or stale, one job per output directory, signals. Each case prints one
# line. (Help, torchrun's spellings and the checks before anything runs are asked in one
# process: command_test.cc.)
set -u
source "$TEST_SRCDIR/ddplab/experiments/e2e/testing/python.sh"
bin="$TEST_SRCDIR/ddplab/experiments/vit_ddp"
smoke="$TEST_SRCDIR/ddplab/experiments/cpu_smoke.textproto"
long="$TEST_SRCDIR/ddplab/experiments/e2e/testdata/long_cpu.textproto"
crash="$TEST_SRCDIR/ddplab/experiments/e2e/testdata/crash_suite.textproto"
shim="$TEST_SRCDIR/ddplab/experiments/e2e/testing/libenospc_preload.so"
out="$TEST_TMPDIR/out.txt"
err="$TEST_TMPDIR/err.txt"
passed=0
skipped=0
fail() { echo "FAIL: $*"; echo "--- stdout"; tail -20 "$out"; echo "--- stderr"; tail -20 "$err"; exit 1; }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
# A field of a result file.
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
export TMPDIR="$TEST_TMPDIR/tmp"
mkdir -p "$TMPDIR"

# --- flags (help, version, torchrun's spellings and the refusals that need no run are asked
# in one process: command_test.cc; here, what main makes of them)
"$bin" --no-such-flag >"$out" 2>"$err"
[ $? -eq 2 ] && grep -qF "unknown flag --no-such-flag; see --help" "$err" || fail "an unknown flag"
pass "an unknown flag exits 2, saying so"

# (--print_experiments, which runs nothing, is asked in one process: command_test.cc.)
gloo=0
[ "${DDPLAB_GLOO:-}" = 1 ] && gloo=1
if [ "$gloo" -eq 0 ]; then
  echo "no Gloo in this build: the cases with several CPU processes are skipped"
fi

# --- one-process runs stay one process; torchrun's spellings
r="$TEST_TMPDIR/one"
"$bin" --experiment="$smoke" --only=single_process --nproc-per-node=2 --output_dir="$r" >"$out" 2>"$err" \
  || fail "--nproc-per-node=2 --only=single_process exited $?"
[ "$(field "$r/cpu_smoke/single_process.json" world_size)" = 1 ] || fail "single_process ran with several processes"
grep -q "^--nproc_per_node=2 applies to experiments of several processes; single_process stays one process" "$out" ||
  fail "no word that --nproc_per_node left single_process one process"
pass "--nproc-per-node=2 is accepted; a one-process experiment records world_size 1, and is said to"

# Ctrl-C in a run of one process (no workers to stop): it stops at its next step, says so,
# and the suite ends with 130 and its count of runs.
sed -e 's/gpus_per_node: 2 device: CPU timeout_seconds: 5/gpus_per_node: 1 device: CPU/' -e '/plugin {/d' "$long" \
  >"$TEST_TMPDIR/long_one.textproto"
# $err still holds the last command's progress ("step ..."): emptied first, so that the wait
# below reads this run's and never signals it before it has set its handlers (a background
# job of a script starts with SIGINT ignored).
: >"$err"
"$bin" --experiment="$TEST_TMPDIR/long_one.textproto" --output_dir="$TEST_TMPDIR/one_stop" >"$out" 2>"$err" &
one=$!
for _ in $(seq 1 300); do grep -q "step [0-9]" "$err" && break; sleep 0.1; done
kill -INT $one
# A run that does not stop within a minute is a failure that says where its threads wait,
# not a test that hangs until its timeout.
for _ in $(seq 1 600); do kill -0 $one 2>/dev/null || break; sleep 0.1; done
if kill -0 $one 2>/dev/null; then
  for task in /proc/$one/task/*; do echo "thread $(basename "$task"): $(cat "$task/comm" 2>/dev/null) waits in $(cat "$task/wchan" 2>/dev/null)"; done
  kill -KILL $one
  fail "Ctrl-C in a one-process run: still running a minute after SIGINT"
fi
wait $one
code=$?
[ "$code" -eq 130 ] || fail "Ctrl-C in a one-process run exited $code, not 130"
grep -qE "vit_ddp: long_cpu: stopped by signal 2 \(Interrupt\) at step [0-9]+ of 1000001" "$err" ||
  fail "Ctrl-C in a one-process run: no message"
grep -q "0 of 1 run(s) completed; stopped by signal 2" "$out" || fail "Ctrl-C in a one-process run: no count"
pass "Ctrl-C in a run of one process stops it at its next step, saying so (exit 130)"

# torchrun's variables left from another job: the wait for the other ranks is said at once.
# (Stopped once it has said so: it would wait 300 s.)
: >"$err"  # as above: the wait reads this run's words only
RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 \
  "$bin" --experiment="$smoke" --only=naive_ddp --output_dir="$TEST_TMPDIR/stale" >"$out" 2>"$err" &
waiting=$!
for _ in $(seq 1 50); do grep -q "meeting the other ranks" "$err" && break; sleep 0.1; done
kill -TERM $waiting
wait $waiting 2>/dev/null
grep -q "rank 1 of 2 (torchrun's variables are set): meeting the other ranks at 127.0.0.1:29999, for up to 300 s. Not started by torchrun? Unset RANK" "$err" ||
  fail "stale torchrun variables: no word before the wait"
pass "with torchrun's variables set, the wait for the other ranks is said before it starts"

# --profile=torch: each run's ranks' traces in a folder of their own, each with the
# distributedInfo HTA groups them by.
if [ "$gloo" -gt 0 ]; then
  p="$TEST_TMPDIR/torch_profile"
  "$bin" --experiment="$smoke" --only=naive_ddp --profile=torch --profile_steps=1 --output_dir="$p" >"$out" 2>"$err" ||
    fail "--profile=torch exited $?"
  [ "$(ls "$p/cpu_smoke/naive_ddp.torch_traces")" = "$(printf 'rank0.json\nrank1.json')" ] ||
    fail "the run's torch traces: $(ls "$p/cpu_smoke/naive_ddp.torch_traces" 2>&1)"
  for r in 0 1; do
    python3 -c "import json,sys; i=json.load(open(sys.argv[1]))['distributedInfo']; assert i == {'backend': 'gloo', 'rank': int(sys.argv[2]), 'world_size': 2}, i" \
      "$p/cpu_smoke/naive_ddp.torch_traces/rank$r.json" "$r" || fail "rank $r's torch trace has no distributedInfo"
  done
  pass "--profile=torch writes each run's ranks' traces in a folder of their own, with distributedInfo"
fi

if [ "$gloo" -gt 0 ]; then
  # --- a Slurm allocation shell is not a job step
  r="$TEST_TMPDIR/slurm"
  SLURM_NTASKS=1 SLURM_PROCID=0 SLURM_JOB_ID=7 "$bin" --experiment="$smoke" --only=naive_ddp --output_dir="$r" \
    >"$out" 2>"$err" || fail "under a Slurm allocation shell's variables: exit $?"
  [ "$(field "$r/cpu_smoke/naive_ddp.json" world_size)" = 2 ] || fail "the allocation shell's variables made a worker"
  pass "a Slurm allocation shell's variables do not turn a launch into a worker"

  # --- a torchrun-style job: every rank runs the suite, rank 0 writes one report
  r="$TEST_TMPDIR/torchrun"
  port=$((20000 + RANDOM % 20000))
  for rank in 0 1; do
    RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 300 "$bin" --experiment="$smoke" --output_dir="$r" >"$TEST_TMPDIR/rank$rank.out" 2>"$TEST_TMPDIR/rank$rank.err" &
  done
  wait %1 || { cp "$TEST_TMPDIR/rank0.err" "$err"; fail "torchrun-style rank 0 exited $?"; }
  wait %2 || { cp "$TEST_TMPDIR/rank1.err" "$err"; fail "torchrun-style rank 1 exited $?"; }
  [ "$(grep -c "^report: " "$TEST_TMPDIR/rank0.out")" -eq 1 ] || fail "rank 0 wrote no report"
  grep -q "^report: " "$TEST_TMPDIR/rank1.out" && fail "rank 1 wrote a report too"
  [ "$(field "$r/cpu_smoke/single_process.json" world_size)" = 1 ] || fail "torchrun: single_process had WORLD_SIZE processes"
  [ "$(field "$r/cpu_smoke/naive_ddp.json" world_size)" = 2 ] || fail "torchrun: naive_ddp had not 2 processes"
  [ -s "$r/cpu_smoke/naive_ddp.trace.json" ] || fail "torchrun: no merged trace"
  pass "a torchrun-style job writes one report; its one-process run has world_size 1"

  # --- --only keeps the other rows of the suite's report
  "$bin" --experiment="$smoke" --only=bf16 --output_dir="$r" >"$out" 2>"$err" || fail "--only=bf16 exited $?"
  rows=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['rows']))" "$r/cpu_smoke/report.json")
  [ "$rows" = 5 ] || fail "--only=bf16 left $rows rows in the report, want 5"
  grep -q "1 of 1 run(s) completed" "$out" || fail "--only's count"
  pass "--only merges its run into the suite's report (5 rows)"

  # --- --skip_completed reruns an edited experiment, skips an unchanged one
  edited="$TEST_TMPDIR/edited.textproto"
  sed 's/batch_size: 8/batch_size: 4/' "$smoke" >"$edited"
  "$bin" --experiment="$edited" --only=naive_ddp --skip_completed --output_dir="$r" >"$out" 2>"$err" \
    || fail "--skip_completed over an edited experiment exited $?"
  grep -q "rerun: the result at .* is of another experiment (.*batch_size" "$out" || fail "no rerun of the edited experiment"
  [ "$(field "$r/cpu_smoke/naive_ddp.json" batch_size)" = 4 ] || fail "the edited experiment's result is stale"
  "$bin" --experiment="$edited" --only=naive_ddp --skip_completed --output_dir="$r" >"$out" 2>"$err" || fail "rerun"
  grep -q "skipped: completed before" "$out" || fail "an unchanged experiment was not skipped"
  # A result of an older ddplab (bucket_cap_mb in 10^6 bytes, no schema) is rerun.
  python3 -c "import json,sys; p=sys.argv[1]; r=json.load(open(p)); r.pop('schema'); json.dump(r, open(p, 'w'))" \
    "$r/cpu_smoke/naive_ddp.json" || fail "cannot edit the result's schema"
  "$bin" --experiment="$edited" --only=naive_ddp --skip_completed --output_dir="$r" >"$out" 2>"$err" || fail "rerun"
  grep -q "rerun: .*an older ddplab wrote it, whose bucket_cap_mb counted 10^6 bytes" "$out" \
    || fail "a result of an older schema was reused"
  # A plugin's setting changed: said by its field, not as the configuration's bytes (#64).
  sed -i 's/bucket_cap_mb: 2000/bucket_cap_mb: 1000/' "$edited"
  "$bin" --experiment="$edited" --only=naive_ddp --skip_completed --output_dir="$r" >"$out" 2>"$err" || fail "rerun"
  grep -q "rerun: .*(modified: plugin\[0\].bucket_sizing.bucket_cap_mb: 2000 -> 1000)" "$out" \
    || fail "a plugin's changed setting was not said by its field"
  pass "--skip_completed reruns an edited experiment or an older schema's result, skips an unchanged one"

  # --- a full disk: non-zero exit, the earlier report intact, nothing half written
  before=$(md5sum "$r/cpu_smoke/report.md" "$r/cpu_smoke/bf16.json")
  LD_PRELOAD="$shim" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" ENOSPC_DIR="$r" ENOSPC_AFTER=0 \
    "$bin" --experiment="$smoke" --only=bf16 --output_dir="$r" >"$out" 2>"$err"
  code=$?
  [ "$code" -ne 0 ] || fail "a full disk exited 0"
  grep -q "No space left on device" "$err" || fail "a full disk: no message saying so"
  # The run failed (its trace could not be written) and the report was not written: one of
  # each, not two failed runs of one (#64).
  grep -q "^0 of 1 run(s) completed, 1 failed; 1 result or report file(s) not written" "$out" ||
    fail "a full disk: the count of runs and files: $(tail -1 "$out")"
  [ "$(md5sum "$r/cpu_smoke/report.md" "$r/cpu_smoke/bf16.json")" = "$before" ] || fail "a full disk changed the earlier report"
  ls "$r/cpu_smoke" | grep -qE "\.(tmp|new)$" && fail "a full disk left $(ls "$r/cpu_smoke" | grep -E '\.(tmp|new)$')"
  # ... and filling part way through a suite: each result whole or absent, the failures named.
  # (Three of its experiments: the convergence check's runs would only fail to write too.)
  f="$TEST_TMPDIR/filling"
  mkdir -p "$f"
  LD_PRELOAD="$shim" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" ENOSPC_DIR="$f" ENOSPC_AFTER=3000 \
    "$bin" --experiment="$smoke" --only=single_process,naive_ddp,bf16 --output_dir="$f" >"$out" 2>"$err"
  [ $? -ne 0 ] || fail "a disk filling mid-suite exited 0"
  for j in "$f"/cpu_smoke/*.json; do
    python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$j" || fail "$j is not whole"
  done
  grep -q "not written" "$err" || fail "a disk filling mid-suite: the failed writes are not named"
  pass "a full disk: exit $code, the earlier report intact; filling mid-suite: every file whole or absent"

  # --- two jobs on one output directory; SIGTERM leaves no temporary directory
  r="$TEST_TMPDIR/shared"
  "$bin" --experiment="$long" --output_dir="$r" >"$TEST_TMPDIR/first.out" 2>"$TEST_TMPDIR/first.err" &
  first=$!
  for _ in $(seq 1 300); do grep -q "step [0-9]" "$TEST_TMPDIR/first.err" && break; sleep 0.1; done
  "$bin" --experiment="$long" --output_dir="$r" >"$out" 2>"$err"
  code=$?
  [ "$code" -eq 2 ] && grep -q "is in use by another vit_ddp (pid $first" "$err" || { kill -9 $first; fail "a second job"; }
  ls -A "$TMPDIR" | grep -q ddplab-rendezvous || { kill -9 $first; fail "no rendezvous directory while running"; }
  kill -TERM $first
  wait $first
  code=$?
  [ "$code" -eq 143 ] || fail "SIGTERM: exit $code, want 143"
  [ -z "$(ls -A "$TMPDIR")" ] || fail "SIGTERM left $(ls -A "$TMPDIR") in \$TMPDIR"
  pgrep -f "output_dir=$r" >/dev/null && fail "SIGTERM left workers"
  pass "a second job on one output directory is refused; SIGTERM stops the first (143), nothing left"

  # --- the suite file edited mid-run changes nothing already resolved: edited while
  # the second run trains, the third still runs as the file was read
  suite="$TEST_TMPDIR/editme.textproto"
  sed 's/measured: 1000000/measured: 20/; s/measured: 3 /measured: 300 /' "$crash" >"$suite"
  r="$TEST_TMPDIR/editme"
  : >"$err"  # as above: the wait reads this run's words only
  "$bin" --experiment="$suite" --output_dir="$r" >"$out" 2>"$err" &
  job=$!
  for _ in $(seq 1 300); do grep -q "\[2/3\] second: step [0-9]" "$err" && break; sleep 0.1; done
  sed -i 's/batch_size: 4/batch_size: 2/' "$suite"
  wait $job || fail "the edited suite exited $?"
  [ "$(field "$r/crash_suite/third.json" batch_size)" = 4 ] || fail "a later run read the edited file"
  pass "the suite file edited mid-run changes nothing already resolved"
else
  skipped=8
fi
echo "$passed passed, 0 failed, $skipped skipped"
