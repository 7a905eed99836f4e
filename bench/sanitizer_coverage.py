"""Lines of ddplab each test reaches, from bench/sanitizer_coverage.sh's lcov files.

  python3 bench/sanitizer_coverage.py LCOV_DIR "COVERED_ELSEWHERE..." "UNINSTRUMENTED..."

Prints, per test, the lines it reaches and those only it reaches; then whether the tests of
CI's sanitizer pass (all but the two lists) reach every line the tests tagged
covered_elsewhere reach. Exits 1 where they do not, naming the lines.
"""
import collections
import os
import sys


def file_name(test):
    """//experiments:cli_test -> __experiments_cli_test, as bench/testing/profile_per_test.sh names it."""
    return test.replace("/", "_").replace(":", "_")


def ddplab_lines(path):
    """The (file, line) pairs of ddplab's own sources an lcov file counts as reached."""
    reached, source = set(), None
    for line in open(path):
        if line.startswith("SF:"):
            source = line[3:].strip().replace("/proc/self/cwd/", "")
            if source.startswith(("/", "external/", "bazel-out/")):
                source = None
        elif line.startswith("DA:") and source:
            number, count = line[3:].split(",")[:2]
            if int(count) > 0:
                reached.add((source, int(number)))
    return reached


def main(lcov_dir, covered_elsewhere, uninstrumented):
    tests = {name[:-len(".lcov")]: ddplab_lines(os.path.join(lcov_dir, name))
             for name in sorted(os.listdir(lcov_dir)) if name.endswith(".lcov")}
    left_out = {file_name(t) for t in covered_elsewhere.split()}
    outside = left_out | {file_name(t) for t in uninstrumented.split()}
    tests_reaching = collections.Counter(line for reached in tests.values() for line in reached)
    print("%d tests reach %d lines of ddplab" % (len(tests), len(tests_reaching)))
    print("%7s %7s  %s" % ("lines", "only it", "test"))
    for name, reached in sorted(tests.items(), key=lambda kv: -len(kv[1])):
        only = sum(1 for line in reached if tests_reaching[line] == 1)
        tag = " (covered_elsewhere)" if name in left_out else " (uninstrumented)" if name in outside else ""
        print("%7d %7d  %s%s" % (len(reached), only, name, tag))
    in_pass = set().union(*(r for n, r in tests.items() if n not in outside))
    missing = set().union(*(tests[n] for n in left_out if n in tests)) - in_pass
    absent = sorted(n for n in left_out if n not in tests)
    if absent:
        print("no profile for %s" % ", ".join(absent))
        return 1
    if missing:
        by_file = collections.Counter(f for f, _ in missing)
        print("FAIL: %d lines reached by tests tagged covered_elsewhere, by none of the sanitizer pass:" % len(missing))
        for source, count in by_file.most_common():
            lines = sorted(n for f, n in missing if f == source)
            print("  %s: %d (%s)" % (source, count, ", ".join(map(str, lines[:12])) + (" ..." if len(lines) > 12 else "")))
        return 1
    print("the sanitizer pass reaches every line the %d tests tagged covered_elsewhere reach" % len(left_out))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
