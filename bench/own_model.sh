#!/usr/bin/env bash
# On a GPU machine, in one call: models the user brings (#65), through the default suite's
# levers, against PyTorch's DDP on the same TorchScript file. Builds vit_ddp, exports
# torchvision's ResNet-50 and a BERT-base-sized encoder with this machine's python3
# (tools/torchscript/export_models.py), then for each: bench/ddp_matrix.py --module over
# one GPU and GPUS GPUs (NVLink and host memory), and `vit_ddp --tune` on it, whose answer
# is printed beside ViT-L/32's when EARLIER_TUNE (a report.md of the seed study's tuning)
# is given. Writes DIR/<model>/{matrix/,tune/} and prints the tables last.
#
#   bench/own_model.sh DIR [EARLIER_TUNE]
#   DEVICE=cpu bench/own_model.sh DIR        # the same command on a machine without a GPU
#
# GPUS (2), REPS (3), CONFIGS (the default suite's levers with a PyTorch form; "" for the
# one-GPU rows alone, as when only tuning), TRANSPORTS
# (nvlink,host), MODELS (resnet50,encoder) and DEADLINE (seconds of each model's matrix)
# pass through; TUNE (the models tuned, default MODELS; "" for none).
#
# BATCH (samples per GPU, 32), WARMUP (10) and MEASURED (20 steps) set both the matrix's
# runs and the tuner's.
#
# DEVICE=cpu runs both sides on the CPU over Gloo (ddp_matrix.py --device cpu; GPUS counts
# processes, TRANSPORTS is Gloo): ResNet-50 on 64x64 images (its parameters, so its
# gradients, as at 224) and the encoder at --small's size; BATCH 4, WARMUP 2, MEASURED
# 5 and REPS 1 by default. ResNet-50's export needs torchvision (Debian:
# python3-torchvision). Its figures say that the command and every row run; a GPU's speed
# they do not say.
set -uo pipefail
DIR=${1:?usage: own_model.sh DIR [EARLIER_TUNE]}
EARLIER_TUNE=${2:-}
DEVICE=${DEVICE:-cuda}
case "$DEVICE" in
  cuda) CPU=""; BATCH=${BATCH:-32}; WARMUP=${WARMUP:-10}; MEASURED=${MEASURED:-20}; REPS=${REPS:-3} ;;
  cpu) CPU=1; BATCH=${BATCH:-4}; WARMUP=${WARMUP:-2}; MEASURED=${MEASURED:-5}; REPS=${REPS:-1} ;;
  *) echo "own_model.sh: DEVICE is cuda or cpu, not '$DEVICE'" >&2; exit 2 ;;
esac
GPUS=${GPUS:-2}
# The default suite's levers; on the CPU PowerSGD without the GPU's tuning (NCCL's
# channels, compute's stream priority, its state in bfloat16, which a CPU without
# bfloat16 arithmetic only converts).
LEVERS=naive,cap25_plain,static_graph_bucket_view,bf16_cap25,powersgd_rank1_tuned_bf16state
[ -n "$CPU" ] && LEVERS=${LEVERS/powersgd_rank1_tuned_bf16state/powersgd_rank1_cap25}
CONFIGS=${CONFIGS-$LEVERS}
TRANSPORTS=${TRANSPORTS:-nvlink,host}
MODELS=${MODELS:-resnet50,encoder}
TUNE=${TUNE-$MODELS}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo 'this tree')"
  if [ -n "$CPU" ]; then
    python3 -c 'import json, sys; sys.path.insert(0, "bench"); import environment; print(json.dumps(environment.environment("cpu")))'
  else
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
  fi
} 2>&1 | tee "$DIR/environment.txt"
bazel build //experiments:vit_ddp >"$DIR/build.log" 2>&1 || { tail -30 "$DIR/build.log"; exit 1; }

# model: its input, its classes, its export's flags
declare -A INPUT=([resnet50]="3,224,224" [encoder]="128:int64:30522")
declare -A CLASSES=([resnet50]=1000 [encoder]=2)
declare -A EXPORT=([resnet50]="" [encoder]="")
if [ -n "$CPU" ]; then
  INPUT=([resnet50]="3,64,64" [encoder]="128:int64:1000")
  EXPORT[encoder]="--small"
fi
status=0
for model in ${MODELS//,/ }; do
  out="$DIR/$model"
  mkdir -p "$out"
  python3 tools/torchscript/export_models.py --model "$model" ${EXPORT[$model]} --out "$out/$model.pt" >"$out/export.txt" 2>&1 ||
    { echo "$model: export failed"; cat "$out/export.txt"; status=1; continue; }
  args=(--out "$out/matrix" --gpus "$GPUS" --transports "$TRANSPORTS" --configs "$CONFIGS"
        --baselines single_gpu --reps "$REPS" --module "$out/$model.pt"
        --module_input "${INPUT[$model]}" --module_classes "${CLASSES[$model]}"
        --device "$DEVICE" --batch "$BATCH" --warmup "$WARMUP" --measured "$MEASURED")
  [ -n "${DEADLINE:-}" ] && args+=(--deadline "$DEADLINE")
  python3 bench/ddp_matrix.py "${args[@]}" >"$out/matrix.log" 2>&1 || status=1
  # The tuner on the model: one GPU against GPUS over NVLink, as the seed study tunes (on
  # the CPU, one process against GPUS over Gloo).
  [[ ",$TUNE," == *",$model,"* ]] || continue
  entry=$(sed -n 's/^.*: model { \(.*\) }$/\1/p' "$out/export.txt" | sed "s|file: \"[^\"]*\"|file: \"$out/$model.pt\"|")
  [ -n "$CPU" ] && entry=$(echo "$entry" | sed "s|shape: \[3, 224, 224\]|shape: [${INPUT[$model]}]|")
  where="device: CUDA transport: NVLINK"
  [ -n "$CPU" ] && where="device: CPU"
  cat >"$out/tune.textproto" <<EOF
# proto-message: ddplab.v1.Suite
name: "tune_$model"
defaults {
  model { $entry }
  data { batch_size: $BATCH }
  steps { warmup: $WARMUP measured: $MEASURED }
  optimizer { sgd { learning_rate: 0.01 } }
  distributed { $where }
}
experiment { name: "one" distributed { gpus_per_node: 1 } }
experiment { name: "ddp" distributed { gpus_per_node: $GPUS } plugin { static_graph {} } }
EOF
  bazel-bin/experiments/vit_ddp --experiment="$out/tune.textproto" --tune --output_dir="$out/tune" \
    >"$out/tune.log" 2>&1 || status=1
done

for model in ${MODELS//,/ }; do
  echo
  echo "== $model"
  sed -n '/^ddp on /,$p' "$DIR/$model/matrix.log"
  [ -f "$DIR/$model/tune.log" ] &&
    grep -E "^Tuned |^Nothing to tune|^(Compute|Latency|Bandwidth)-bound|^The step as one CUDA graph" "$DIR/$model/tune.log"
done
if [ -n "$EARLIER_TUNE" ]; then
  echo
  echo "== ViT-L/32 ($EARLIER_TUNE)"
  grep -E "^Tuned |^Nothing to tune|^(Compute|Latency|Bandwidth)-bound" "$EARLIER_TUNE"
fi
exit $status
