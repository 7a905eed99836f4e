#!/usr/bin/env bash
# What a study's profiling costs one of its rows, on a GPU machine in one call: the row as
# the suite file has it (vit_ddp --only), then the same file with its profiling block off,
# with nvtx alone and with bucket_timing alone, in turn, ROUNDS times. Only the profiling
# differs between the four. Prints each variant's steps/s (every repetition) per round.
#
#   bench/profiling_cost.sh DIR [ROUNDS]
#
# The row is experiments/amp_study's naive_ddp over host memory (SUITE and ROW choose
# another; the file must have one `profiling { ... }` block). Needs vit_ddp built
# (bazel build //experiments:vit_ddp).
set -uo pipefail
DIR=${1:?usage: profiling_cost.sh DIR [ROUNDS]}
ROUNDS=${2:-3}
SUITE=${SUITE:-experiments/amp_study.textproto}
ROW=${ROW:-naive_ddp_host_memory}
BIN=bazel-bin/experiments/vit_ddp
VARIANTS=(suite off nvtx bucket_timing)
mkdir -p "$DIR/configs" "$DIR/logs"
python3 bench/environment.py "$DIR/environment.json"

[ "$(grep -cE 'profiling \{[^}]*\}' "$SUITE")" = 1 ] || { echo "$SUITE: not one profiling { ... } block" >&2; exit 2; }
declare -A PROFILING=([off]="" [nvtx]="profiling { nvtx: true }" [bucket_timing]="profiling { bucket_timing: true }")
cp "$SUITE" "$DIR/configs/suite.textproto"
for v in off nvtx bucket_timing; do
  sed -E "s/profiling \{[^}]*\}/${PROFILING[$v]}/" "$SUITE" >"$DIR/configs/$v.textproto"
done

declare -A SPEEDS
for round in $(seq 1 "$ROUNDS"); do
  for v in "${VARIANTS[@]}"; do
    log="$DIR/logs/${v}_$round.log"
    "$BIN" --experiment="$DIR/configs/$v.textproto" --only="$ROW" --output_dir="$DIR/${v}_$round" >"$log" 2>&1
    SPEEDS[$v]+=" $(grep -o "^$ROW: [0-9.]* steps/s" "$log" | awk '{print $2}' | paste -sd, -)"
  done
done
echo "steps/s per round (its repetitions), $ROW:"
for v in "${VARIANTS[@]}"; do printf '%-14s%s\n' "$v" "${SPEEDS[$v]}"; done
