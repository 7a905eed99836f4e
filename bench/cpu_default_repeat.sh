#!/usr/bin/env bash
# The default command as a new user runs it on a CPU machine, N times: does it answer the
# same each time (#64)? Each run of `bazel run //experiments:vit_ddp` (the CPU suite) writes
# into a fresh output directory; then the recommendation lines of each run side by side,
# whether every run names the same configuration per transport (or says there is no
# winner), and every PyTorch snippet the reports print run on this machine's python3 torch
# over Gloo (bench/cpu_snippets.py), or the report's reason why PyTorch has none on CPUs.
#
#   bench/cpu_default_repeat.sh DIR [N]
#
# Writes DIR/run<i>/ (the results and vit_ddp's output) and DIR/summary.txt; exits 1 where
# the runs disagree or a snippet fails.
set -uo pipefail
DIR=${1:?usage: cpu_default_repeat.sh DIR [N]}
N=${2:-5}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
status=0
bazel build //experiments:vit_ddp >"$DIR/build.log" 2>&1 || { tail -20 "$DIR/build.log"; exit 1; }
for i in $(seq 1 "$N"); do
  start=$(date +%s)
  bazel-bin/experiments/vit_ddp --output_dir="$DIR/run$i" >"$DIR/run$i.stdout.txt" 2>"$DIR/run$i.stderr.txt" ||
    { echo "run $i: exit $?"; status=1; }
  echo "run $i: $(($(date +%s) - start)) s"
done
"$(dirname "$0")/../tools/python/python3.sh" "$(dirname "$0")/cpu_snippets.py" "$DIR" "$N" | tee "$DIR/summary.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit "$status"
