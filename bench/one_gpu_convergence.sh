#!/usr/bin/env bash
# On one GPU: the convergence check end to end on ViT-L/32 (the default suite's model and
# 200 steps): the engine alone (exact) from 3 seeds and bf16 from the first, in one
# process each (force_engine). Says how far the exact loss falls in 200 steps, the
# verdict, and what the check costs in time. Writes DIR/{suite.textproto,run.log,out/}.
#
#   bench/one_gpu_convergence.sh DIR
set -uo pipefail
DIR=${1:?usage: one_gpu_convergence.sh DIR}
mkdir -p "$DIR"
cat >"$DIR/suite.textproto" <<'PB'
# proto-message: ddplab.v1.Suite
name: "convergence_1gpu"
defaults {
  model { preset: VIT_L_32 }
  data { batch_size: 32 num_workers: 8 pin_memory: true }
  steps { warmup: 5 measured: 10 repetitions: 1 }
  optimizer { sgd { learning_rate: 0.01 } }
  distributed { gpus_per_node: 1 device: CUDA force_engine: true }
}
convergence { exact: "engine_1gpu" steps: 200 }
experiment { name: "engine_1gpu" }
experiment {
  name: "bf16_1gpu"
  plugin { bf16 { sample_error_every: 5 } }
}
PB
start=$(date +%s)
bazel-bin/experiments/vit_ddp --experiment="$DIR/suite.textproto" --output_dir="$DIR/out" >"$DIR/run.log" 2>&1
status=$?
echo "suite with the check: $(($(date +%s) - start)) s, exit $status"
grep -E "^== |steps/s|loss .* over|^Convergence|^- " "$DIR/run.log" | grep -v "^  suite" | tail -30
exit $status
