#!/usr/bin/env bash
# A dead or stalled worker ends the job: the launcher reports which rank and how, the
# other workers stop, nothing is left behind. A killed suite keeps what it finished.
# While a one-node job runs, nothing of it listens beyond loopback: its workers meet
# through a file in a private directory, which is gone once the job ends.
set -u
source "$TEST_SRCDIR/ddplab/experiments/e2e/testing/python.sh"
bin="$TEST_SRCDIR/ddplab/experiments/vit_ddp"
long="$TEST_SRCDIR/ddplab/experiments/e2e/testdata/long_cpu.textproto"
passed=0
fail() { echo "FAIL: $*"; echo "--- stderr"; tail -20 "$err"; exit 1; }

source "$TEST_SRCDIR/ddplab/experiments/e2e/testing/workers.sh"

# Every TCP socket in LISTEN state that one of the pids holds is bound to a loopback
# address (Gloo's, while it has one, is; c10d's TCPStore server in LibTorch 1.13 is not:
# it listens on every interface). Prints what it found.
loopback_listeners_only() {
  python3 - "$@" <<'PY'
import ipaddress, os, struct, sys
inodes = set()
for pid in sys.argv[1:]:
    fds = "/proc/%s/fd" % pid
    for fd in os.listdir(fds):
        try:
            link = os.readlink(os.path.join(fds, fd))
        except OSError:
            continue  # closed meanwhile
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
assert inodes, "no sockets at all in %s: cannot check" % sys.argv[1:]
listening, wide = [], []
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    if not os.path.exists(table):
        continue
    for line in open(table).read().splitlines()[1:]:
        f = line.split()
        if f[3] != "0A" or f[9] not in inodes:  # 0A: TCP_LISTEN
            continue
        hex_addr, hex_port = f[1].split(":")
        # The kernel prints each 32-bit word of the address in host byte order.
        raw = b"".join(struct.pack("=I", int(hex_addr[i:i + 8], 16)) for i in range(0, len(hex_addr), 8))
        addr = ipaddress.ip_address(raw)
        if getattr(addr, "ipv4_mapped", None):
            addr = addr.ipv4_mapped
        where = "%s port %d" % (addr, int(hex_port, 16))
        (listening if addr.is_loopback else wide).append(where)
print("%d sockets; listening on loopback: %s; beyond loopback: %s"
      % (len(inodes), ", ".join(listening) or "none", ", ".join(wide) or "none"))
sys.exit(1 if wide else 0)
PY
}

if [ "${DDPLAB_GLOO:-}" != 1 ]; then echo "no Gloo in this build: 0 passed, 0 failed, 2 skipped"; exit 0; fi

for scenario in kill stop; do
  err="$TEST_TMPDIR/$scenario.err"
  # The launcher makes its private rendezvous directory under $TMPDIR.
  tmp="$TEST_TMPDIR/tmp_$scenario"
  mkdir -p "$tmp"
  TMPDIR="$tmp" "$bin" --experiment="$long" --output_dir="$TEST_TMPDIR/$scenario" >/dev/null 2>"$err" &
  job=$!
  victim=$(worker_of "$job" 1) || fail "$scenario: no worker of rank 1"
  other=$(worker_of "$job" 0) || fail "$scenario: no worker of rank 0"
  # Well into training: rank 0's progress line shows steps.
  for _ in $(seq 1 600); do grep -q "step [0-9]" "$err" && break; sleep 0.1; done
  grep -q "step [0-9]" "$err" || { kill -9 "$job" "$victim" "$other" 2>/dev/null; fail "$scenario: training never started"; }
  sockets=$(loopback_listeners_only "$job" $(pgrep -P "$job")) \
    || { kill -9 "$job" "$victim" "$other" 2>/dev/null; fail "$scenario: the job listens beyond loopback: $sockets"; }
  echo "$scenario: $sockets"
  store=$(tr '\0' '\n' < "/proc/$other/environ" | sed -n 's/^DDPLAB_RENDEZVOUS_FILE=//p')
  case "$store" in
    "$tmp"/*/*) ;;
    *) kill -9 "$job" "$victim" "$other" 2>/dev/null; fail "$scenario: rendezvous file \"$store\" is not in a directory under $tmp";;
  esac
  mode=$(stat -c %a "$(dirname "$store")")
  [ "$mode" = 700 ] || { kill -9 "$job" "$victim" "$other" 2>/dev/null; fail "$scenario: rendezvous directory has mode $mode, want 700"; }
  if [ "$scenario" = kill ]; then
    kill -9 "$victim"
    limit=30
    want="rank 1 was killed by signal 9"
  else
    kill -STOP "$victim"
    # The collective timeout is 5 s (the bucket's reduction fails with it); the launcher
    # then ends the stopped rank.
    limit=20
    want="failed: .*Timed out"
  fi
  took=$(wait_end "$job" "$limit") || { kill -9 "$job" "$victim" "$other" 2>/dev/null; fail "$scenario: still running after ${limit} s"; }
  wait "$job"; code=$?
  [ "$code" -ne 0 ] || fail "$scenario: exited 0"
  grep -q "$want" "$err" || fail "$scenario: no \"$want\" in stderr"
  for pid in "$victim" "$other"; do
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fail "$scenario: worker $pid left behind"; fi
  done
  left=$(ls -A "$tmp")
  [ -z "$left" ] || fail "$scenario: the launcher left $left in \$TMPDIR"
  echo "$scenario: ended in ${took} s, exit $code: $(grep -m1 "$want" "$err")"
  passed=$((passed + 1))
done
# A suite killed outright in its third experiment keeps the first two results whole, and
# a rerun with --skip_completed does not run them again.
err="$TEST_TMPDIR/crash.err"
suite="$TEST_SRCDIR/ddplab/experiments/e2e/testdata/crash_suite.textproto"
out_dir="$TEST_TMPDIR/crash"
# A launcher killed outright cannot remove its rendezvous directory: keep it out of /tmp.
export TMPDIR="$TEST_TMPDIR/tmp_crash"
mkdir -p "$TMPDIR"
"$bin" --experiment="$suite" --output_dir="$out_dir" >/dev/null 2>"$err" &
job=$!
for _ in $(seq 1 300); do [ -e "$out_dir/crash_suite/second.json" ] && break; sleep 0.1; done
[ -e "$out_dir/crash_suite/second.json" ] || { kill -9 "$job"; fail "crash: second result never written"; }
third=$(worker_of "$job" 0) || fail "crash: the third run did not start"
kill -9 "$job"
wait "$job" 2>/dev/null
sleep 1
kill -0 "$third" 2>/dev/null && { kill -9 "$third"; fail "crash: a worker outlived the killed launcher"; }
python3 -c "
import json, sys
for name in ('first', 'second'):
    r = json.load(open('$out_dir/crash_suite/%s.json' % name))
    assert r['steps_per_s'] > 0 and r['measured_steps'] == 3, name
" || fail "crash: results of completed experiments are not intact"
"$bin" --experiment="$suite" --output_dir="$out_dir" --skip_completed --only=second >"$TEST_TMPDIR/rerun.out" 2>"$err" \
  || fail "crash: rerun failed"
grep -q "skipped: completed before" "$TEST_TMPDIR/rerun.out" || fail "crash: rerun ran a completed experiment"
echo "crash: first two results intact after kill -9 in the third; rerun skipped them"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
