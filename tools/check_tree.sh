#!/usr/bin/env bash
# Checks of the tree's layout that no build sees, run by CI before the tests:
# - each header's guard names its path (core/config/experiment.h:
#   DDPLAB_CORE_CONFIG_EXPERIMENT_H_), so that a header moved or copied keeps its own;
# - no plugin's library links a core library with sources (bazel query): a plugin sees
#   core's headers through the SDK and resolves core's code from the binary that loads it
#   (core/engine/BUILD.bazel, extension_points).
# Prints each offender and exits 1 if there is any.
#
#   tools/check_tree.sh
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
while IFS= read -r header; do
  want="DDPLAB_$(printf '%s' "$header" | tr 'a-z/.-' 'A-Z___')_"
  got=$(grep -m1 -E '^#ifndef ' "$header" | awk '{print $2}')
  if [ "$got" != "$want" ]; then
    echo "$header: header guard ${got:-(none)}, want $want"
    status=1
  fi
  grep -qE "^#define $want\$" "$header" || { echo "$header: no #define $want"; status=1; }
done < <(git ls-files '*.h' | grep -v '^third_party/')
linked=$(bazel query --noshow_progress \
  'attr(srcs, "\.cc", kind("cc_library", deps(attr(linkshared, 1, kind("cc_binary", //plugins/...))))) intersect //core/...' \
  2>/dev/null) || { echo "bazel query of the plugins' dependencies failed"; status=1; }
for target in $linked; do
  echo "$target: a core library with sources, linked into a plugin's library (depend on //core/engine:extension_points)"
  status=1
done
exit "$status"
