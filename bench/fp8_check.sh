#!/usr/bin/env bash
# On a GPU machine, in one call: fp8 (plugins/fp8) against bf16 and bf16_fp32_sum, with
# PyTorch's DDP and its bf16 hook in the same call. Builds vit_ddp, runs fp8's tests there
# (the kernels against ATen's form, bit for bit and timed; training on two GPUs), then
# bench/ddp_matrix.py over TRANSPORTS on 2 GPUs and, with CONVERGENCE=1, fp8's convergence
# verdict (bench/fp8_convergence.textproto). Writes DIR/{environment.txt,build.log,
# tests/,matrix/,convergence/} and prints the tables last.
#
#   bench/fp8_check.sh DIR [TRANSPORTS] [REPS] [CONFIGS]
#
# TRANSPORTS: host,sockets by default; CONFIGS: bf16, bf16_fp32_sum and fp8 (with error
# feedback, and with ATen's operations instead of its kernels), 25 MB buckets; DEADLINE=S
# starts no matrix run after S seconds of it; TESTS=targets instead of //plugins/fp8:all.
set -uo pipefail
DIR=${1:?usage: fp8_check.sh DIR [TRANSPORTS] [REPS] [CONFIGS]}
TRANSPORTS=${2:-host,sockets}
REPS=${3:-3}
CONFIGS=${4:-bf16_cap25,bf16_fp32_sum_cap25,fp8_cap25,fp8_ef_cap25,fp8_aten_cap25}
mkdir -p "$DIR/tests"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo 'this tree')"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
} 2>&1 | tee "$DIR/environment.txt"
start=$(date +%s)
bazel build //experiments:vit_ddp >"$DIR/build.log" 2>&1 || { tail -30 "$DIR/build.log"; exit 1; }
echo "build: $(($(date +%s) - start)) s"
bazel test --keep_going --test_output=errors ${TESTS:-//plugins/fp8:all} >"$DIR/tests.log" 2>&1
tests=$?
for t in bazel-testlogs/plugins/fp8/*/test.log; do cp "$t" "$DIR/tests/$(basename "$(dirname "$t")").log"; done
grep -h "ms per call\|PASSED\|FAILED\|NO STATUS" "$DIR/tests.log" "$DIR"/tests/*.log | sort -u
echo "tests: exit $tests, $(($(date +%s) - start)) s"
args=(--out "$DIR/matrix" --gpus 2 --transports "$TRANSPORTS" --configs "$CONFIGS" --baselines single_gpu --reps "$REPS")
[ -n "${DEADLINE:-}" ] && args+=(--deadline "$DEADLINE")
python3 bench/ddp_matrix.py "${args[@]}" >"$DIR/matrix.log" 2>&1
matrix=$?
if [ "${CONVERGENCE:-0}" = 1 ]; then
  bazel-bin/experiments/vit_ddp --experiment=bench/fp8_convergence.textproto --output_dir="$DIR/convergence" \
    >"$DIR/convergence.log" 2>&1
  sed -n '/^Convergence check/,/^$/p' "$DIR/convergence.log"
fi
echo "total: $(($(date +%s) - start)) s"
python3 - "$DIR/matrix" <<'PY'
import glob, json, os, sys
# wire bytes and gradient error of fp8's runs, from their results
for path in sorted(glob.glob(os.path.join(sys.argv[1], "ddplab", "*", "*", "*", "*.json"))):
    r = json.load(open(path))
    stats = r.get("hookStats") or r.get("hook_stats") or {}
    if "compression_ratio" in stats:
        print(f"{os.path.relpath(path, sys.argv[1])}: compression {stats['compression_ratio']:.3f} "
              f"(wire {1 / stats['compression_ratio']:.3f} of float32), wire bytes/step "
              f"{stats.get('wire_bytes_per_step', 0) / 2**20:.1f} MiB, grad error {r.get('gradientError', r.get('gradient_error', '-'))}")
PY
sed -n '/^ddp on /,$p' "$DIR/matrix.log"
[ "$tests" -eq 0 ] && [ "$matrix" -eq 0 ]
