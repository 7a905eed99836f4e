#!/usr/bin/env bash
# How the NCCL channel count trades communication speed against the SMs it takes from
# backward: ddplab on 4 GPUs, bucket caps 25 and 100 MB (static graph, bucket views),
# over NVLink and host memory, with NCCL's default and with NCCL_MAX_NCHANNELS set.
#   bench/nccl_channels.sh DIR
set -uo pipefail
DIR=${1:?usage: nccl_channels.sh DIR}
mkdir -p "$DIR"
for transport in NVLINK HOST_MEMORY; do
  for cap in 25 100; do
    f="$DIR/cap${cap}_${transport}.textproto"
    cat > "$f" <<EOT
name: "cap${cap}_${transport}"
model { preset: VIT_L_32 }
data { batch_size: 32 num_workers: 8 pin_memory: true }
steps { warmup: 10 measured: 20 }
optimizer { sgd { learning_rate: 0.01 } }
distributed { gpus_per_node: 4 device: CUDA transport: ${transport} }
plugin { bucket_sizing { bucket_cap_mb: ${cap} } }
plugin { static_graph {} }
plugin { bucket_view {} }
EOT
    for channels in default 16 8 4; do
      if [ "$channels" = default ]; then unset NCCL_MAX_NCHANNELS; else export NCCL_MAX_NCHANNELS=$channels; fi
      line=$(bazel-bin/experiments/vit_ddp --experiment="$f" --output_dir="$DIR/r_$channels" 2>&1 \
             | grep -E "steps/s|exposed" | tr '\n' ' ')
      echo "cap ${cap} ${transport} channels ${channels}: ${line}"
    done
  done
done
unset NCCL_MAX_NCHANNELS
