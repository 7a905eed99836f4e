#!/usr/bin/env bash
# On a GPU machine, in one call: a change measured before and after, against PyTorch's
# DDP, on the rows that stand for the study (bench/ddp_matrix.py --before). Builds this
# tree and BEFORE_SRC (a checkout of the commit before the change, say from
# `git archive`), then runs every configuration over every transport: ddplab, the build
# before it and PyTorch, alternately. Writes DIR/{environment.txt,build.log,matrix/} and
# prints the two tables last.
#
#   bench/before_after.sh DIR BEFORE_SRC [TRANSPORTS] [CONFIGS] [REPS]
#
# TRANSPORTS: nvlink,host,sockets by default; CONFIGS: naive, 25 MB buckets alone, the best
# lossless, the best bf16, PowerSGD rank 1 and 4 (as tuned before); DEADLINE=S starts no
# run after S seconds of the matrix. BEFORE_CONFIGS=a,b runs the build before on those
# configurations only (the ones the change touches); BASELINES (single_gpu) and GPUS (2)
# pass through.
set -uo pipefail
DIR=${1:?usage: before_after.sh DIR BEFORE_SRC [TRANSPORTS] [CONFIGS] [REPS]}
BEFORE_SRC=${2:?usage: before_after.sh DIR BEFORE_SRC [TRANSPORTS] [CONFIGS] [REPS]}
TRANSPORTS=${3:-nvlink,host,sockets}
CONFIGS=${4:-naive,cap25_plain,zero_copy_tuned_optim,bf16_cap100,powersgd_rank1_tuned_bf16state,powersgd_rank4_cap200_bf16state}
REPS=${5:-1}
mkdir -p "$DIR"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "after: $(git rev-parse HEAD 2>/dev/null || echo 'this tree')"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
} 2>&1 | tee "$DIR/environment.txt"
start=$(date +%s)
status=0
bazel build //experiments:vit_ddp >"$DIR/build.log" 2>&1 || { status=1; tail -30 "$DIR/build.log"; }
(cd "$BEFORE_SRC" && bazel build //experiments:vit_ddp) >"$DIR/build_before.log" 2>&1 ||
  { status=1; tail -30 "$DIR/build_before.log"; }
echo "builds: $(($(date +%s) - start)) s, exit $status"
[ "$status" -eq 0 ] || exit 1
args=(--out "$DIR/matrix" --gpus "${GPUS:-2}" --transports "$TRANSPORTS" --configs "$CONFIGS"
      --baselines "${BASELINES-single_gpu}" --reps "$REPS"
      --before "$(cd "$BEFORE_SRC" && pwd)/bazel-bin/experiments/vit_ddp" --before_configs "${BEFORE_CONFIGS:-}")
[ -n "${DEADLINE:-}" ] && args+=(--deadline "$DEADLINE")
python3 bench/ddp_matrix.py "${args[@]}" >"$DIR/matrix.log" 2>&1 || status=1
echo "total: $(($(date +%s) - start)) s"
sed -n '/^ddp on /,$p' "$DIR/matrix.log"
exit $status
