#!/usr/bin/env bash
# On a GPU machine: kill -9 one worker of a 4-GPU ViT-L/32 run mid-training and show that
# the job ends: the launcher exits non-zero naming the rank and the signal, the other
# workers stop, no process is left and the GPUs are free again. Run from the repository
# root after building vit_ddp.
#   bench/kill_worker.sh DIR [GPUS] [RANK]
set -u
DIR=${1:?usage: kill_worker.sh DIR [GPUS] [RANK]}
GPUS=${2:-4}
RANK_TO_KILL=${3:-2}
mkdir -p "$DIR"
cat > "$DIR/kill_worker.textproto" <<EOT
name: "kill_worker"
model { preset: VIT_L_32 }
data { batch_size: 32 num_workers: 8 pin_memory: true }
steps { warmup: 10 measured: 100000 }
optimizer { sgd { learning_rate: 0.01 } }
distributed { gpus_per_node: $GPUS device: CUDA timeout_seconds: 60 }
plugin { static_graph {} }
plugin { bucket_view {} }
EOT
err="$DIR/kill_worker.stderr"
bazel-bin/experiments/vit_ddp --experiment="$DIR/kill_worker.textproto" --output_dir="$DIR/out" \
  > "$DIR/kill_worker.stdout" 2> "$err" &
job=$!
victim=""
for _ in $(seq 1 300); do
  for pid in $(pgrep -P "$job"); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "RANK=$RANK_TO_KILL"; then victim=$pid; fi
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
workers=$(pgrep -P "$job" | tr '\n' ' ')
for _ in $(seq 1 1200); do grep -q "step [0-9][0-9]" "$err" && break; sleep 0.1; done
echo "workers: $workers; killing rank $RANK_TO_KILL (pid $victim) at: $(tr '\r' '\n' < "$err" | grep step | tail -1)"
start=$(date +%s.%N)
kill -9 "$victim"
ended=no
for _ in $(seq 1 600); do
  if ! kill -0 "$job" 2>/dev/null; then ended=yes; break; fi
  sleep 0.1
done
took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
wait "$job"; code=$?
left=""
for pid in $workers; do kill -0 "$pid" 2>/dev/null && left="$left $pid"; done
echo "launcher ended: $ended after ${took} s, exit code $code"
echo "launcher said: $(grep -m1 "killed by signal\|failed" "$err")"
echo "workers left: ${left:-none}"
echo "GPU processes after: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
[ "$ended" = yes ] && [ "$code" -ne 0 ] && [ -z "$left" ] && grep -q "rank $RANK_TO_KILL was killed by signal 9" "$err"
