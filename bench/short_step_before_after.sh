#!/usr/bin/env bash
# On a GPU machine, in one call: the short step (bf16 autocast and AdamW, ViT-L/32, batch
# 32 per GPU) before and after a change, against PyTorch's DDP (eager, fused=True). Builds
# this tree and BEFORE_SRC (a checkout of the commit before, say from `git archive`) at
# once; checks that the step as one CUDA graph trains as without it (bench/
# cuda_graph_check.py, 2 GPUs, up to CHECK_SECONDS); then runs one GPU and GPUS GPUs over
# NVLink, each row eager and as a graph (the graph rows: this tree only), the build
# before and PyTorch interleaved, REPS times, and prints the tables. TRAINING=seed runs the
# seed study's float32 SGD instead. DEADLINE=S starts no run after S seconds of the matrix.
# COMPILE_MODES=default,reduce-overhead also runs PyTorch's one GPU under torch.compile in
# those modes, each repetition. CHECK_COMBOS= (empty) skips the graph check. BEFORE_GRAPH=1
# runs the graph rows on the build before too (one that has plugins/cuda_graph).
# BEFORE_CONFIGS=a,b runs only those rows on the build before (rows of a plugin it lacks).
#
#   bench/short_step_before_after.sh DIR BEFORE_SRC [GPUS] [REPS] [CONFIGS]   (CONFIGS "": one GPU alone)
set -uo pipefail
DIR=${1:?usage: short_step_before_after.sh DIR BEFORE_SRC [GPUS] [REPS] [CONFIGS]}
BEFORE_SRC=${2:?usage: short_step_before_after.sh DIR BEFORE_SRC [GPUS] [REPS] [CONFIGS]}
GPUS=${3:-4}
REPS=${4:-3}
CONFIGS=${5-naive,naive_graph,cap25_plain,cap25_plain_graph}
mkdir -p "$DIR"
python3 bench/environment.py "$DIR/environment.json" && cat "$DIR/environment.json"
start=$(date +%s)
bazel build //experiments:vit_ddp >"$DIR/build.log" 2>&1 &
after=$!
(cd "$BEFORE_SRC" && bazel build //experiments:vit_ddp) >"$DIR/build_before.log" 2>&1 &
before=$!
status=0
wait $after || { status=1; tail -30 "$DIR/build.log"; }
wait $before || { status=1; tail -30 "$DIR/build_before.log"; }
echo "builds: $(($(date +%s) - start)) s, exit $status"
[ "$status" -eq 0 ] || exit 1
if [ -n "${CHECK_COMBOS-buckets,bf16,zero_copy}" ]; then
  timeout "${CHECK_SECONDS:-150}" python3 bench/cuda_graph_check.py --out "$DIR/graph_check" --gpus 2 \
    --combos "${CHECK_COMBOS-buckets,bf16,zero_copy}" --training amp >"$DIR/graph_check.log" 2>&1 || status=1
  cat "$DIR/graph_check.log"
fi
amp=--amp
[ "${TRAINING:-amp}" = seed ] && amp=
args=(--out "$DIR/matrix" $amp --gpus "$GPUS" --transports nvlink --configs "$CONFIGS"
      --baselines single_gpu,single_gpu_graph --reps "$REPS" --run_timeout 180
      --before "$(cd "$BEFORE_SRC" && pwd)/bazel-bin/experiments/vit_ddp")
[ -n "${DEADLINE:-}" ] && args+=(--deadline "$DEADLINE")
[ -n "${COMPILE_MODES:-}" ] && args+=(--compile_modes "$COMPILE_MODES")
[ -n "${BEFORE_GRAPH:-}" ] && args+=(--before_graph)
[ -n "${BEFORE_CONFIGS:-}" ] && args+=(--before_configs "$BEFORE_CONFIGS")
python3 bench/ddp_matrix.py "${args[@]}" >"$DIR/matrix.log" 2>&1 || status=1
echo "total: $(($(date +%s) - start)) s"
sed -n '/^ddp on /,$p' "$DIR/matrix.log"
exit $status
