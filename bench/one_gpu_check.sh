#!/usr/bin/env bash
# On a machine with one GPU: build ddplab against the machine's LibTorch (CUDA), run
# `bazel test //...` (the cases that need two GPUs skip), then what each communication
# hook's own work costs: every configuration in one process with the engine on, against
# PyTorch's DDP in one process with the same hook, and the single-GPU step, alternately
# (bench/ddp_matrix.py --gpus 1). Nothing travels, so a row's gap to the single GPU is the
# plugin's compute and the engine's, not the network's. Each ddplab run also writes a
# LibTorch profile of the steps after the measured ones, summarized by trace_summary.py.
#
#   bench/one_gpu_check.sh DIR [CONFIGS] [REPS] [BEFORE]
#
# CONFIGS: ddp_matrix.py configurations (default: PowerSGD rank 1 and 4 as tuned on 4
# GPUs); BEFORE: another build's vit_ddp, run beside ours in each repetition. Writes
# DIR/{environment.txt,build.log,test.log,matrix/,traces.txt} and prints the table last.
# SKIP_TESTS=1 leaves the tests out; DEADLINE=S starts no run after S seconds of the matrix.
set -uo pipefail
DIR=${1:?usage: one_gpu_check.sh DIR [CONFIGS] [REPS] [BEFORE]}
CONFIGS=${2:-powersgd_rank1_tuned_bf16state,powersgd_rank4_cap200_bf16state}
REPS=${3:-2}
BEFORE=${4:-}
mkdir -p "$DIR"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
} 2>&1 | tee "$DIR/environment.txt"

status=0
start=$(date +%s)
bazel build //... >"$DIR/build.log" 2>&1 || { status=1; tail -30 "$DIR/build.log"; }
echo "build: $(($(date +%s) - start)) s, exit $status"
if [ -z "${SKIP_TESTS:-}" ]; then
  bazel test //... >"$DIR/test.log" 2>&1 || status=1
  grep -E "PASSED|FAILED|SKIPPED|NO STATUS|Executed" "$DIR/test.log" | tail -40
fi
echo "build and tests: $(($(date +%s) - start)) s"

args=(--out "$DIR/matrix" --gpus 1 --configs "$CONFIGS" --baselines single_gpu,ddp_1gpu --reps "$REPS"
      --ddplab_args=--profile=torch)
[ -n "$BEFORE" ] && args+=(--before "$BEFORE")
[ -n "${DEADLINE:-}" ] && args+=(--deadline "$DEADLINE")
python3 bench/ddp_matrix.py "${args[@]}" >"$DIR/matrix.log" 2>&1 || status=1
traces=$(find "$DIR/matrix" -path '*/1/*' -path '*.torch_traces/rank0.json' | sort)
[ -n "$traces" ] && python3 bench/trace_summary.py $traces --json "$DIR/traces.json" >"$DIR/traces.txt" 2>&1
echo "total: $(($(date +%s) - start)) s"
sed -n '/^ddp on /,$p' "$DIR/matrix.log"
exit $status
