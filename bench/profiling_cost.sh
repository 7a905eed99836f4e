#!/usr/bin/env bash
# What a study's profiling costs one of its rows, on a GPU machine in one call: the row as
# the suite runs it (vit_ddp --only, its profiling as the file sets it), then the same
# configuration as an experiment of its own with profiling off, with nvtx alone and with
# bucket_timing alone, in turn, ROUNDS times. Prints each variant's steps/s per round.
#
#   bench/profiling_cost.sh DIR [ROUNDS]
#
# The row is experiments/amp_study's naive_ddp over host memory (ROW, SUITE and PLUGINS
# choose another). Needs vit_ddp built (bazel build //experiments:vit_ddp).
set -uo pipefail
DIR=${1:?usage: profiling_cost.sh DIR [ROUNDS]}
ROUNDS=${2:-3}
SUITE=${SUITE:-experiments/amp_study.textproto}
ROW=${ROW:-naive_ddp_host_memory}
PLUGINS=${PLUGINS:-'plugin { bucket_sizing { bucket_cap_mb: 2000 } }'}
BIN=bazel-bin/experiments/vit_ddp
mkdir -p "$DIR/configs" "$DIR/logs"
python3 bench/environment.py "$DIR/environment.json"

declare -A PROFILING=([off]="" [nvtx]="profiling { nvtx: true }" [bucket_timing]="profiling { bucket_timing: true }")
for v in "${!PROFILING[@]}"; do
  cat >"$DIR/configs/$v.textproto" <<EOF
# proto-message: ddplab.v1.Experiment
name: "$v"
model { preset: VIT_L_32 }
data { batch_size: 32 num_workers: 8 pin_memory: true }
steps { warmup: 10 measured: 20 }
optimizer { adamw { learning_rate: 0.001 } } precision: BF16_AUTOCAST
distributed { gpus_per_node: 2 device: CUDA transport: HOST_MEMORY }
${PROFILING[$v]}
$PLUGINS
EOF
done

speed() { grep -o "^$1: [0-9.]* steps/s" "$2" | tail -1 | awk '{print $2}'; }
declare -A SPEEDS
for round in $(seq 1 "$ROUNDS"); do
  log="$DIR/logs/suite_$round.log"
  "$BIN" --experiment="$SUITE" --only="$ROW" --output_dir="$DIR/suite_$round" >"$log" 2>&1
  SPEEDS[suite]+=" $(speed "$ROW" "$log")"
  for v in off nvtx bucket_timing; do
    log="$DIR/logs/${v}_$round.log"
    "$BIN" --experiment="$DIR/configs/$v.textproto" --output_dir="$DIR/${v}_$round" >"$log" 2>&1
    SPEEDS[$v]+=" $(speed "$v" "$log")"
  done
done
echo "steps/s per round, $ROW:"
for v in suite off nvtx bucket_timing; do printf '%-14s%s\n' "$v" "${SPEEDS[$v]}"; done
