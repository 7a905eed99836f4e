#!/usr/bin/env bash
# The CPU suite's time per run before and after a change: builds this tree and BEFORE_SRC
# (a checkout of the commit before, say from `git archive`) one after the other, then runs
# the default command (the CPU suite, as `bazel run //experiments:vit_ddp` on a machine
# without GPUs) with each binary in turn, N times, each into a fresh output directory.
# Prints, per build, the invocation's wall seconds and, over every run's result, the mean
# seconds of a run's setup, its steps and its finish (RunResult.setup_seconds, ...).
# Run it on an otherwise idle machine.
#
#   bench/cpu_suite_before_after.sh DIR BEFORE_SRC [N]
#
# Writes DIR/{build.log,build_before.log,wall.txt,summary.txt} and DIR/{after,before}/run<i>/.
set -uo pipefail
DIR=${1:?usage: cpu_suite_before_after.sh DIR BEFORE_SRC [N]}
BEFORE_SRC=${2:?usage: cpu_suite_before_after.sh DIR BEFORE_SRC [N]}
N=${3:-5}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
BEFORE_SRC=$(cd "$BEFORE_SRC" && pwd)
bazel build //experiments:vit_ddp >"$DIR/build.log" 2>&1 || { tail -20 "$DIR/build.log"; exit 1; }
(cd "$BEFORE_SRC" && bazel build //experiments:vit_ddp) >"$DIR/build_before.log" 2>&1 ||
  { tail -20 "$DIR/build_before.log"; exit 1; }
declare -A BIN=([after]="$PWD/bazel-bin/experiments/vit_ddp" [before]="$BEFORE_SRC/bazel-bin/experiments/vit_ddp")
: >"$DIR/wall.txt"
status=0
for i in $(seq 1 "$N"); do
  for side in after before; do
    start=$(date +%s.%N)
    "${BIN[$side]}" --output_dir="$DIR/$side/run$i" >"$DIR/$side.run$i.log" 2>&1 || { echo "$side run $i: exit $?"; status=1; }
    echo "$side $i $(echo "$(date +%s.%N) - $start" | bc)" | tee -a "$DIR/wall.txt"
  done
done
python3 - "$DIR" <<'PY' | tee "$DIR/summary.txt"
import glob, json, os, statistics, sys
d = sys.argv[1]
wall = {}
for line in open(os.path.join(d, "wall.txt")):
    side, _, seconds = line.split()
    wall.setdefault(side, []).append(float(seconds))
print("build   invocations  wall s (median)  runs  setup s  steps s  finish s  (means per run)")
for side in ("after", "before"):
    runs = []
    for f in glob.glob(os.path.join(d, side, "run*", "**", "*.json"), recursive=True):
        try:
            r = json.load(open(f))
        except (OSError, ValueError):
            continue
        if isinstance(r, dict) and "setup_seconds" in r:
            runs.append(r)
    mean = lambda key: statistics.mean(r.get(key, 0.0) for r in runs) if runs else float("nan")
    print(f"{side:7} {len(wall.get(side, [])):11} {statistics.median(wall.get(side, [float('nan')])):16.2f} "
          f"{len(runs):5} {mean('setup_seconds'):8.3f} {mean('all_steps_seconds'):8.3f} {mean('finish_seconds'):9.3f}")
PY
exit "$status"
