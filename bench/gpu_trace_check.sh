#!/usr/bin/env bash
# On a GPU machine: the CUDA build's tests, then one run on one GPU with the engine on and
# bf16, and LibTorch's profile of two more steps; checks its traces (bench/trace_check.py:
# Kineto's file with distributedInfo; bucket spans need two GPUs, since one process
# issues no collective), then trains PyTorch's DDP as the run's "pytorch" code says,
# pasted into bench/pytorch_vit.py (--ddp_code). Writes DIR/{environment.txt,build.log,test.log,run/,
# code.py,pytorch_code_run.json}.
#
#   bench/gpu_trace_check.sh DIR
set -uo pipefail
DIR=${1:?usage: gpu_trace_check.sh DIR}
mkdir -p "$DIR"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
} 2>&1 | tee "$DIR/environment.txt"
status=0
bazel build //... >"$DIR/build.log" 2>&1 || { status=1; tail -30 "$DIR/build.log"; }
# The browser test needs Chromium, which GPU machines may lack.
bazel test //... -- -//core:report_html_browser_test >"$DIR/test.log" 2>&1 || status=1
grep -E "PASSED|FAILED|SKIPPED|NO STATUS|TIMEOUT|Executed" "$DIR/test.log" | tail -45
cat >"$DIR/bf16_one_gpu.textproto" <<'PB'
name: "bf16_one_gpu"
model { preset: VIT_L_32 }
data { batch_size: 32 num_workers: 8 pin_memory: true }
steps { warmup: 5 measured: 10 }
optimizer { sgd { learning_rate: 0.01 } }
distributed { gpus_per_node: 1 device: CUDA force_engine: true }
plugin { bucket_sizing { bucket_cap_mb: 25 } }
plugin { bf16 {} }
PB
bazel-bin/experiments/vit_ddp --experiment="$DIR/bf16_one_gpu.textproto" --output_dir="$DIR/run" \
  --profile=torch --profile_steps=2 >"$DIR/run.log" 2>&1 || { status=1; tail -20 "$DIR/run.log"; }
result=$(find "$DIR/run" -name bf16_one_gpu.json | head -1)
python3 bench/trace_check.py "$(dirname "$result")" bf16_one_gpu || status=1
python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["pytorch"])' "$result" >"$DIR/code.py"
cat "$DIR/code.py"
(cd bench && python3 pytorch_vit.py --ddp --ddp_code "$DIR/code.py" --warmup 3 --measured 10 \
  --output "$DIR/pytorch_code_run.json" 2>&1 | tail -3) || status=1
exit $status
