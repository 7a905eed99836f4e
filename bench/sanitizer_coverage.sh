#!/usr/bin/env bash
# Which lines of ddplab each test reaches, and whether CI's sanitizer pass reaches them all.
# Builds the tests with clang's source-based coverage (--config=llvm_coverage: an output
# directory of its own), runs every test with its profiles kept apart, and prints per test
# the lines it reaches and those no other test reaches. A test tagged "covered_elsewhere"
# is left out of the sanitizer pass because the pass's tests reach every line it reaches:
# this script is that claim's check, and exits 1 where it no longer holds.
#
#   bench/sanitizer_coverage.sh DIR
#
# Writes DIR/tests.log, DIR/lcov/<test>.lcov and DIR/summary.txt. About as long as a fresh
# `bazel test //...` (the coverage build is one of its own), then a minute of llvm-cov.
set -uo pipefail
DIR=${1:?usage: sanitizer_coverage.sh DIR}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
rm -rf "$DIR/raw" "$DIR/lcov"
mkdir -p "$DIR/raw" "$DIR/lcov"
cd "$(dirname "$0")/.."
# The tools of the clang that builds: a profile's format is its compiler's.
llvm_bin=$(dirname "$(readlink -f "$(command -v clang)")")
for tool in llvm-profdata llvm-cov; do
  [ -x "$llvm_bin/$tool" ] || { echo "sanitizer_coverage: no $tool beside $llvm_bin/clang (Debian: llvm)" >&2; exit 2; }
done

bazel test --config=llvm_coverage //... --run_under="$PWD/bench/testing/profile_per_test.sh" \
  --test_env=DDPLAB_COVERAGE_DIR="$DIR/raw" --nocache_test_results >"$DIR/tests.log" 2>&1 ||
  { tail -20 "$DIR/tests.log"; echo "sanitizer_coverage: the tests did not all pass" >&2; exit 2; }

# Every program and plugin the tests may have run: the coverage build's ELF files.
bin=$(bazel info --config=llvm_coverage bazel-bin 2>/dev/null)
objects=()
while IFS= read -r f; do
  head -c 4 "$f" | grep -q ELF && objects+=("$f")
done < <(find "$bin/" -name '*.runfiles' -prune -o -name '_objs' -prune -o -type f \( -perm -u+x -o -name '*.so' \) -print)
for raw in "$DIR"/raw/*/; do
  name=$(basename "$raw")
  ls "$raw"*.profraw >/dev/null 2>&1 || continue
  # (A test whose profiles could not be read would reach nothing, and pass the check.)
  if ! "$llvm_bin/llvm-profdata" merge -sparse -o "$DIR/raw/$name.profdata" "$raw"*.profraw 2>"$DIR/raw/$name.err" ||
    ! "$llvm_bin/llvm-cov" export -format=lcov -instr-profile="$DIR/raw/$name.profdata" "${objects[0]}" \
      "${objects[@]/#/-object=}" >"$DIR/raw/$name.lcov" 2>>"$DIR/raw/$name.err"; then
    echo "sanitizer_coverage: no coverage for $name: $(grep -v warning "$DIR/raw/$name.err" | tail -1)" >&2
    exit 2
  fi
  grep -E '^(SF|DA):' "$DIR/raw/$name.lcov" | grep -v ',0$' >"$DIR/lcov/$name.lcov"
done

python3 bench/sanitizer_coverage.py "$DIR/lcov" \
  "$(bazel query 'attr(tags, "covered_elsewhere", tests(//...))' 2>/dev/null | tr '\n' ' ')" \
  "$(bazel query 'attr(tags, "uninstrumented", tests(//...))' 2>/dev/null | tr '\n' ' ')" | tee "$DIR/summary.txt"
exit "${PIPESTATUS[0]}"
