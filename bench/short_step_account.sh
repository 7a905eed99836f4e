#!/usr/bin/env bash
# On a GPU machine, in one call: where the short step's time goes (bf16 autocast and
# AdamW, ViT-L/32, batch 32 per GPU). Builds vit_ddp, runs amp_study's training on one
# GPU and on GPUS GPUs over NVLink with one bucket after backward (naive), 25 MiB buckets
# alone, and the tuned overlap (NCCL on 4 channels, compute first), each with LibTorch's
# profiler over 3 steps after the measured ones, then bench/trace_summary.py on every
# rank-0 trace: per phase, the compute stream's idle time (launch gaps, waits on other
# streams), its kernels' summed time, and each other stream's time beside compute.
# Writes DIR/{environment.json,build.log,matrix/,account.txt,account.json}; prints the
# account last.
#
#   bench/short_step_account.sh DIR [GPUS] [CONFIGS]
set -uo pipefail
DIR=${1:?usage: short_step_account.sh DIR [GPUS] [CONFIGS]}
GPUS=${2:-4}
CONFIGS=${3:-naive,cap25_plain,overlap_tuned}
mkdir -p "$DIR"
python3 bench/environment.py "$DIR/environment.json" && cat "$DIR/environment.json"
bazel build //experiments:vit_ddp >"$DIR/build.log" 2>&1 || { tail -30 "$DIR/build.log"; exit 1; }
python3 bench/ddp_matrix.py --out "$DIR/matrix" --amp --gpus "$GPUS" --transports nvlink \
  --configs "$CONFIGS" --baselines single_gpu --reps 1 --skip_pytorch \
  --ddplab_args "--profile=torch --profile_steps=3" >"$DIR/matrix.log" 2>&1
status=$?
mapfile -t traces < <(find "$DIR/matrix/ddplab" -path '*torch_traces/rank0.json' | sort)
python3 bench/trace_summary.py "${traces[@]}" --json "$DIR/account.json" >"$DIR/account.txt" 2>&1 || status=1
sed -n '/^ddp on /,$p' "$DIR/matrix.log"
cat "$DIR/account.txt"
exit $status
