#!/usr/bin/env bash
# Checks of the tree's layout that no build of a target checks, run by CI after the tests:
# - each header's guard names its path (core/config/experiment.h:
#   DDPLAB_CORE_CONFIG_EXPERIMENT_H_), so that a header moved or copied keeps its own;
# - no plugin's library links a core library with sources (bazel query), and none leaves
#   one of core's functions for the loader to resolve from the binary that loads it
#   (nm): a plugin sees core's headers through the SDK and reaches core's code through
#   the services the host passes in (core/engine/BUILD.bazel, extension_points).
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
# The shipped plugins' libraries (plugins/plugins.bzl), built as vit_ddp loads them.
plugins=$(sed -n '/^PLUGINS = \[/,/^\]/p' plugins/plugins.bzl | grep -oE '"[a-z0-9_]+"' | tr -d '"')
[ -n "$plugins" ] || { echo "plugins/plugins.bzl: no PLUGINS list read"; status=1; }
bazel build --noshow_progress //plugins:all >/dev/null 2>&1 || { echo "bazel build //plugins:all failed"; status=1; }
bin=$(bazel info bazel-bin 2>/dev/null)
for name in $plugins; do
  lib="$bin/plugins/$name/lib$name.so"
  [ -f "$lib" ] || { echo "plugins/$name: lib$name.so not built"; status=1; continue; }
  resolved=$(nm -DC --undefined-only "$lib" | grep -E 'ddplab::' | sed 's/^ *U //')
  [ -z "$resolved" ] && continue
  echo "plugins/$name/lib$name.so calls core's code by symbol, resolved from the binary that loads it" \
    "(reach it through a service the host passes in):"
  echo "$resolved" | sed 's/^/  /'
  status=1
done
exit "$status"
