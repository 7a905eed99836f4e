#!/usr/bin/env bash
# On a GPU machine, in one call: what the GPU runs in one step of amp_study's training
# (ViT-L/32, batch 32, bf16 autocast, AdamW) on one GPU, ddplab's step as one CUDA graph
# against PyTorch's torch.compile in MODES (default reduce-overhead, which replays CUDA
# graphs too), kernel by kernel. Builds vit_ddp; runs each with its profiler over 5 steps
# after the measured ones (ddplab: --profile=torch; PyTorch: bench/pytorch_vit.py
# --profile_trace, fused AdamW); then bench/kernel_table.py on the traces. Writes
# DIR/{environment.json,build.log,matrix/,compile_<mode>.{json,trace.json},kernels.txt,
# kernels.json}; prints the steps/s and the table last.
#
#   bench/one_gpu_kernels.sh DIR [MODES]     (MODES "" for ddplab alone)
set -uo pipefail
DIR=${1:?usage: one_gpu_kernels.sh DIR [MODES]}
MODES=${2-reduce-overhead}
STEPS=5
mkdir -p "$DIR"
python3 bench/environment.py "$DIR/environment.json" && cat "$DIR/environment.json"
bazel build //experiments:vit_ddp >"$DIR/build.log" 2>&1 || { tail -30 "$DIR/build.log"; exit 1; }
status=0
python3 bench/ddp_matrix.py --out "$DIR/matrix" --amp --configs "" --baselines single_gpu_graph \
  --reps 1 --skip_pytorch --ddplab_args "--profile=torch --profile_steps=$STEPS" >"$DIR/matrix.log" 2>&1 || status=1
trace=$(find "$DIR/matrix/ddplab" -path '*torch_traces/rank0.json' | head -1)
[ -n "$trace" ] || { echo "no ddplab trace"; tail -20 "$DIR/matrix.log"; status=1; }
tables=("ddplab_graph=$STEPS:$trace")
for mode in ${MODES//,/ }; do
  python3 bench/pytorch_vit.py --precision bf16 --optimizer adamw --lr 0.001 --fused --compile \
    --compile_mode "$mode" --profile_trace "$DIR/compile_$mode.trace.json" --profile_steps $STEPS \
    --output "$DIR/compile_$mode.json" >"$DIR/compile_$mode.log" 2>&1 || { status=1; tail -20 "$DIR/compile_$mode.log"; }
  tables+=("compile_$mode=$STEPS:$DIR/compile_$mode.trace.json")
done
sed -n '/^ddp on /,$p' "$DIR/matrix.log"
for f in "$DIR"/compile_*.json; do
  [ -e "$f" ] || continue
  case $f in *.trace.json) ;; *) python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[1], 'steps/s', round(r['steps_per_s'], 2))" "$f";; esac
done
python3 bench/kernel_table.py --full_names "${tables[@]}" --json "$DIR/kernels.json" >"$DIR/kernels.txt" 2>&1 || status=1
cat "$DIR/kernels.txt"
exit $status
