#!/usr/bin/env bash
# --run_under for bench/sanitizer_coverage.sh: the test and every process it starts write
# their coverage profiles (clang's -fprofile-instr-generate) into a folder of the test's own.
dir="${DDPLAB_COVERAGE_DIR:?set by bench/sanitizer_coverage.sh}/$(echo "${TEST_TARGET:-unknown}" | tr '/:' '__')"
mkdir -p "$dir"
LLVM_PROFILE_FILE="$dir/%p-%m.profraw" exec "$@"
