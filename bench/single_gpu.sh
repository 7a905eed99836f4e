#!/usr/bin/env bash
# On a GPU machine, in one call: build ddplab, then run its single-GPU ViT-L/32 experiment
# and PyTorch's own (bench/pytorch_vit.py) alternately, REPS times each; check
# ddplab's ViT against torchvision's (bench/vit_parity.py); write everything to DIR and
# the summary to DIR/single-gpu.json (bench/results' format); print a table last.
#
#   bench/single_gpu.sh DIR [REPS]
set -euo pipefail
DIR=${1:?usage: single_gpu.sh DIR [REPS]}
REPS=${2:-3}
MEASURED=50
mkdir -p "$DIR/configs" "$DIR/pytorch/single_gpu" "$DIR/ddplab/single_gpu"

bazel build //experiments:vit_ddp //bench:vit_parity 2>&1 | tail -3
python3 bench/environment.py "$DIR/environment.json"
echo '{"config": "single_gpu", "gpus": 1, "transport": "none", "batch_size": 32, "model": "vit_l_32", "measured_steps": '$MEASURED'}' \
  > "$DIR/configs/single_gpu.json"

for rep in $(seq 1 "$REPS"); do
  bazel-bin/experiments/vit_ddp --experiment=experiments/single_gpu.textproto \
    --output_dir="$DIR/ddplab/single_gpu/$rep" > "$DIR/ddplab_single_gpu_$rep.log" 2>&1
  grep "steps/s" "$DIR/ddplab_single_gpu_$rep.log"
  python3 bench/pytorch_vit.py --measured "$MEASURED" \
    --output "$DIR/pytorch/single_gpu/$rep.json" > "$DIR/pytorch_single_gpu_$rep.log" 2>&1
  tail -1 "$DIR/pytorch_single_gpu_$rep.log"
done

PARITY=$(mktemp -d)
python3 bench/vit_parity.py --dir "$PARITY"
bazel-bin/bench/vit_parity --dir="$PARITY" --output="$DIR/parity.json" || true
rm -rf "$PARITY"

python3 bench/summarize.py --name single-gpu --dir "$DIR" --output "$DIR/single-gpu.json"
