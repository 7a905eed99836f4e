#!/usr/bin/env bash
# On a GPU machine, in one call: named rows of the default suite measured by this tree and
# by an earlier one (BEFORE_SRC, say a `git archive` of the commit before a change),
# alternately, so that a difference between two calls' reports can be told from the host's.
# Each row is its own `vit_ddp --only=ROW` in both trees (an earlier tree may take one name
# only); single_gpu is always among them, for the ratios. Writes DIR/{environment.json,
# trees.txt,build*.log,logs/} and prints the table last: each tree's median steps/s over
# every run of the row, its ratio to one GPU's in the same tree, and after against before.
# The runs' result folders go to a scratch folder (RESULTS=DIR to keep them elsewhere):
# only the logs stay under DIR.
#
#   bench/rows_before_after.sh DIR BEFORE_SRC ROW[,ROW...] [ROUNDS]
set -uo pipefail
DIR=${1:?usage: rows_before_after.sh DIR BEFORE_SRC ROW[,ROW...] [ROUNDS]}
BEFORE_SRC=$(cd "${2:?usage: rows_before_after.sh DIR BEFORE_SRC ROW[,ROW...] [ROUNDS]}" && pwd)
IFS=, read -r -a ROWS <<<"single_gpu,${3:?usage: rows_before_after.sh DIR BEFORE_SRC ROW[,ROW...] [ROUNDS]}"
ROUNDS=${4:-2}
mkdir -p "$DIR/logs"
RESULTS=${RESULTS:-$(mktemp -d)}
python3 bench/environment.py "$DIR/environment.json" && cat "$DIR/environment.json"
echo "after: $(git rev-parse HEAD 2>/dev/null || echo 'this tree'); before: $BEFORE_SRC" | tee "$DIR/trees.txt"
start=$(date +%s)
bazel build //experiments:vit_ddp >"$DIR/build.log" 2>&1 &
after_build=$!
(cd "$BEFORE_SRC" && bazel build //experiments:vit_ddp) >"$DIR/build_before.log" 2>&1
before_status=$?
wait $after_build
after_status=$?
echo "builds (both at once): $(($(date +%s) - start)) s, exit after $after_status, before $before_status"
[ "$after_status" -eq 0 ] || { tail -30 "$DIR/build.log"; exit 1; }
[ "$before_status" -eq 0 ] || { tail -30 "$DIR/build_before.log"; exit 1; }
# Each tree runs from its own root: the experiment file is the tree's own.
declare -A ROOT=([after]="$PWD" [before]="$BEFORE_SRC")
for round in $(seq "$ROUNDS"); do
  # The order of the two trees swaps every round, so neither always runs on a warmer GPU.
  if ((round % 2)); then order=(before after); else order=(after before); fi
  for row in "${ROWS[@]}"; do
    for tree in "${order[@]}"; do
      log="$DIR/logs/$tree.$row.$round.txt"
      (cd "${ROOT[$tree]}" && bazel-bin/experiments/vit_ddp --output_dir="$RESULTS/$tree.$row.$round" --only="$row") >"$log" 2>&1 ||
        echo "$tree $row round $round: exit $? (see logs/$tree.$row.$round.txt)"
    done
  done
done
echo "runs: $(($(date +%s) - start)) s in all"
python3 - "$DIR/logs" "${ROWS[@]}" <<'PY'
import glob, os, re, statistics, sys
logs, rows = sys.argv[1], sys.argv[2:]
def speeds(tree, row):
    out = []
    for path in glob.glob(os.path.join(logs, f"{tree}.{row}.*.txt")):
        out += [float(m.group(1)) for m in re.finditer(rf"^{re.escape(row)}: ([\d.]+) steps/s", open(path).read(), re.M)]
    return out
runs = {(t, r): speeds(t, r) for t in ("before", "after") for r in rows}
med = {k: statistics.median(s) if s else None for k, s in runs.items()}
cnt = {k: len(s) for k, s in runs.items()}
print(f"{'row':42s} {'before':>14s} {'after':>14s} {'ratio before':>12s} {'ratio after':>11s} {'after/before':>12s}")
for r in rows:
    b, a = med["before", r], med["after", r]
    rb = b / med["before", "single_gpu"] if b and med["before", "single_gpu"] else None
    ra = a / med["after", "single_gpu"] if a and med["after", "single_gpu"] else None
    f = lambda v, n: f"{v:.3f} ({n})" if v else "-"
    g = lambda v: f"{v:.3f}" if v else "-"
    d = f"{(a / b - 1) * 100:+.1f}%" if a and b else "-"
    print(f"{r:42s} {f(b, cnt['before', r]):>14s} {f(a, cnt['after', r]):>14s} {g(rb):>12s} {g(ra):>11s} {d:>12s}")
PY
