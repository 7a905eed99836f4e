#!/usr/bin/env bash
# On a GPU machine: build ddplab against the machine's LibTorch (CUDA) and NCCL, run
# `bazel run //experiments:vit_ddp` (which prints the device report) and `bazel test //...`,
# and keep the outputs in DIR.
#
#   bench/gpu_build_check.sh [DIR]        # DIR defaults to ./gpu_build_check
set -uo pipefail
DIR=${1:-gpu_build_check}
mkdir -p "$DIR"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())), "cxx11abi", torch._C._GLIBCXX_USE_CXX11_ABI)'
  bazel --version
  g++ --version | head -1
} 2>&1 | tee "$DIR/environment.txt"
nvidia-smi topo -m > "$DIR/nvidia-smi-topo.txt" 2>&1

status=0
bazel build --keep_going //... 2>&1 | tail -40 | tee "$DIR/build.log" || status=1
bazel run //experiments:vit_ddp 2>"$DIR/vit_ddp.stderr" | tee "$DIR/vit_ddp.txt" || status=1
bazel test //... 2>&1 | tail -30 | tee "$DIR/test.log" || status=1
exit $status
