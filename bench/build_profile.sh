#!/usr/bin/env bash
# What a build and test of the tree costs, and where it goes: runs `bazel test TARGETS`
# (//... by default) with Bazel's JSON profile, then prints the wall time, the critical
# path, the slowest actions (compiles, links) and the slowest tests. Run it in a fresh
# clone, with BAZEL_OUTPUT_BASE set to an empty directory, for what a new contributor
# pays; in a working tree it measures what is left to rebuild.
#
#   bench/build_profile.sh DIR [TARGETS...]
#
# Writes DIR/{profile.json.gz,test.log,summary.txt}.
set -uo pipefail
DIR=${1:?usage: build_profile.sh DIR [TARGETS...]}
shift
TARGETS=("${@:-//...}")
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
startup=()
[ -n "${BAZEL_OUTPUT_BASE:-}" ] && startup+=("--output_base=$BAZEL_OUTPUT_BASE")
start=$(date +%s)
bazel "${startup[@]}" test --profile="$DIR/profile.json.gz" "${TARGETS[@]}" >"$DIR/test.log" 2>&1
status=$?
wall=$(($(date +%s) - start))
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, bazel test ${TARGETS[*]}: exit $status, ${wall} s"
  grep -E "^Executed|tests? pass" "$DIR/test.log" | tail -2
  python3 - "$DIR/profile.json.gz" <<'PY'
import collections, gzip, json, sys
events = json.load(gzip.open(sys.argv[1]))
events = events.get("traceEvents", events) if isinstance(events, dict) else events
actions, critical = [], []
for e in events:
    if e.get("ph") != "X" or "dur" not in e:
        continue
    seconds = e["dur"] / 1e6
    cat = e.get("cat", "")
    if cat == "critical path component":
        critical.append((seconds, e.get("name", "")))
    elif cat in ("action processing", "complete action execution") or e.get("name", "").startswith(("Compiling", "Linking")):
        actions.append((seconds, e.get("name", "")))
kinds = collections.defaultdict(lambda: [0, 0.0])
for seconds, name in actions:
    kind = name.split(" ")[0]
    kinds[kind][0] += 1
    kinds[kind][1] += seconds
print(f"critical path: {sum(s for s, _ in critical):.0f} s in {len(critical)} actions")
print("actions by kind (count, seconds of one core): " +
      ", ".join(f"{k} {n} {s:.0f}" for k, (n, s) in sorted(kinds.items(), key=lambda kv: -kv[1][1])[:6]))
print("slowest compiles and links:")
builds = [(s, n) for s, n in actions if not n.startswith("Testing")]
for seconds, name in sorted(builds, reverse=True)[:12]:
    print(f"  {seconds:7.1f} s  {name[:110]}")
print("slowest tests:")
for seconds, name in sorted([(s, n) for s, n in actions if n.startswith("Testing")], reverse=True)[:12]:
    print(f"  {seconds:7.1f} s  {name[len('Testing '):][:110]}")
PY
} | tee "$DIR/summary.txt"
exit $status
