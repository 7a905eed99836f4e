#!/usr/bin/env bash
# What CI pays for a change: `.ci/run` on a fresh clone of REV (HEAD by default) with empty
# Bazel output bases, each line of its output timed, and beside the time, how fast this
# machine was while it ran: its cost of a page fault and its cores' busy, idle and stolen
# seconds. Machines of one kind differ most in the first (bench/NOTES.md, "One machine
# kind, two speeds"), and the sanitizer pass spends much of its time in page faults.
#
#   bench/ci_fresh_clone.sh DIR [REV]
#
# Writes DIR/ci-run-REV.txt (the phases, seconds since the start, and the machine) and
# DIR/ci-run-REV.log (all of .ci/run's output). The clone lives in a new temporary
# directory, so Bazel gives it (and examples/fp16_plugin's workspace in it) new output
# bases; both are removed afterwards, with the clone. Run it on an otherwise idle machine.
set -uo pipefail
DIR=${1:?usage: ci_fresh_clone.sh DIR [REV]}
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
rev=$(git -C "$repo" rev-parse --short --verify --quiet "${2:-HEAD}^{commit}") ||
  { echo "ci_fresh_clone.sh: no commit \"${2:-HEAD}\" in $repo" >&2; exit 2; }
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
txt="$DIR/ci-run-$rev.txt"
log="$DIR/ci-run-$rev.log"
clone=$(mktemp -d)/ddplab
# The clone's output bases and the clone go however the script ends (some GB each).
cleanup() {
  for workspace in "$clone/examples/fp16_plugin" "$clone"; do
    [ -d "$workspace" ] && (cd "$workspace" && bazel clean --expunge >/dev/null 2>&1)
  done
  rm -rf "$(dirname "$clone")"
}
trap cleanup EXIT
git clone -q "$repo" "$clone" && git -C "$clone" checkout -q "$rev" || exit 2

# Seconds of a first write to each 4 KB page of 512 MB of fresh anonymous memory, less
# the loop's own time (a second pass over the same pages).
fault_cost() {
  python3 - <<'PY'
import mmap, time
size = 512 << 20
m = mmap.mmap(-1, size)
t0 = time.perf_counter()
for off in range(0, size, 4096): m[off] = 1
t1 = time.perf_counter()
for off in range(0, size, 4096): m[off] = 2
t2 = time.perf_counter()
faults = (t1 - t0) - (t2 - t1)
print(f"{faults:.2f} s ({faults / (size // 4096) * 1e6:.1f} us a fault)")
PY
}
cpu() { grep '^cpu ' /proc/stat; }  # user nice system idle iowait irq softirq steal

before_faults=$(fault_cost)
read -r _ u n s i w q sq st _ < <(cpu)
start=$(date +%s)
(cd "$clone" && .ci/run) 2>&1 | while IFS= read -r line; do
  echo "$(($(date +%s) - start)) $line"
done >"$log"
status=${PIPESTATUS[0]}
wall=$(($(date +%s) - start))
read -r _ u2 n2 s2 i2 w2 q2 sq2 st2 _ < <(cpu)
after_faults=$(fault_cost)

{
  echo "# .ci/run on a fresh clone at $rev, empty output bases; $(date -u +%Y-%m-%d), ended $(date -u +%H:%M) UTC;" \
    "$(nproc) cores; seconds since its start"
  grep -E "^[0-9]+ (setup: |INFO: Elapsed|Executed [0-9]+ out|== |-- .*\(exit|[0-9]+ passed, )" "$log"
  echo "total: exit $status, $wall s"
  echo "machine over the run: busy $(((u2 + n2 + s2 + q2 + sq2 - u - n - s - q - sq) / 100)) core-s," \
    "idle $(((i2 + w2 - i - w) / 100)) core-s, stolen $(((st2 - st) / 100)) core-s"
  echo "512 MB first touched page by page: $before_faults before the run, $after_faults after"
} | tee "$txt"

exit "$status"
