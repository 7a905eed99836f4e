#!/usr/bin/env bash
# On a GPU machine, in one call: the default command as a user types it, timed, and its
# rows against an earlier report of the same suite (#41: <= 8 minutes on 2 GPUs, the same
# rows and ratios within their spread). Builds this tree, runs `vit_ddp` (the seed study)
# into DIR/results, and prints the wall time, how many runs each row got, and each row's
# steps/s and ratio to one GPU beside EARLIER's (a report.json), flagged where they part
# by more than both spreads and 2% (the suite's drift, studies/repetitions/repetitions.h).
#
#   bench/default_command.sh DIR [EARLIER_REPORT_JSON]
#
# LIMIT=S interrupts the suite (SIGINT) after S seconds: it then writes the report of the
# runs it completed, and the wall time says it was cut.
set -uo pipefail
DIR=${1:?usage: default_command.sh DIR [EARLIER_REPORT_JSON]}
EARLIER=${2:-}
mkdir -p "$DIR"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo 'this tree')"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
} 2>&1 | tee "$DIR/environment.txt"
start=$(date +%s)
bazel build //experiments:vit_ddp >"$DIR/build.log" 2>&1 || { tail -30 "$DIR/build.log"; exit 1; }
echo "build: $(($(date +%s) - start)) s"
start=$(date +%s)
timeout -s INT "${LIMIT:-0}" bazel-bin/experiments/vit_ddp --output_dir="$DIR/results" >"$DIR/vit_ddp.stdout.txt" 2>"$DIR/vit_ddp.stderr.txt"
status=$?
wall=$(($(date +%s) - start))
echo "default command: ${wall} s ($((wall / 60)) min $((wall % 60)) s), exit $status" | tee "$DIR/wall.txt"
# What each run cost besides its steps, from the run summaries ("run 6.1 s: setup ...").
python3 - "$DIR/vit_ddp.stdout.txt" "$wall" <<'PY'
import re, statistics, sys
runs = [tuple(map(float, m.groups())) for m in
        re.finditer(r"run ([\d.]+) s: setup ([\d.]+), \d+ steps ([\d.]+), finish ([\d.]+)", open(sys.argv[1]).read())]
if runs:
    med = lambda i: statistics.median(r[i] for r in runs)
    print("%d runs; median per run: %.2f s in the worker (setup %.2f, steps %.2f, finish %.2f); "
          "the suite's wall time per run %.2f s" % (len(runs), med(0), med(1), med(2), med(3), float(sys.argv[2]) / len(runs)))
PY
python3 - "$DIR/results" "$EARLIER" <<'PY'
import glob, json, sys
def rows(path):
    out = {}
    for r in json.load(open(path))["rows"]:
        s = r.get("steps_per_s")
        s = s if isinstance(s, dict) else {"median": s, "min": s, "max": s, "count": 1}
        v = r.get("vs_single") or r.get("vs_single_gpu")
        v = v.get("median") if isinstance(v, dict) else v
        out[r["experiment"]] = (s, v)
    return out
now_path = (glob.glob(sys.argv[1] + "/*/report.json") or [None])[0]
if now_path is None:
    sys.exit("no report.json under " + sys.argv[1])
now = rows(now_path)
before = rows(sys.argv[2]) if sys.argv[2] else {}
runs = sum(s.get("count", 1) for s, _ in now.values())
print("%d rows, %d runs; repetitions per row: %s" % (len(now), runs,
      ", ".join("%d x%d" % (c, sum(1 for s, _ in now.values() if s.get("count", 1) == c))
                for c in sorted({s.get("count", 1) for s, _ in now.values()}))))
print("%-34s %5s %18s %18s %8s %8s  %s" % ("experiment", "runs", "steps/s now", "before", "vs 1 now", "before", ""))
parted = 0
for name, (s, v) in now.items():
    b = before.get(name)
    flag = ""
    if b:
        lo, hi = min(s["min"], b[0]["min"]), max(s["max"], b[0]["max"])
        spread = (s["max"] - s["min"]) + (b[0]["max"] - b[0]["min"])
        if abs(s["median"] - b[0]["median"]) > spread + 0.02 * max(s["median"], b[0]["median"]):
            flag, parted = "parted", parted + 1
    fmt = lambda x: "-" if x is None else "%.3f" % x
    print("%-34s %5d %18s %18s %8s %8s  %s" % (name, s.get("count", 1), "%.3f [%.3f-%.3f]" % (s["median"], s["min"], s["max"]),
          "-" if not b else "%.3f [%.3f-%.3f]" % (b[0]["median"], b[0]["min"], b[0]["max"]), fmt(v),
          fmt(b[1]) if b else "-", flag))
if before:
    missing = sorted(set(before) - set(now))
    print("rows parted beyond their spread and 2%%: %d; rows of before missing now: %s" % (parted, ", ".join(missing) or "none"))
PY
exit $status
