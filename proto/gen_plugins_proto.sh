#!/bin/sh
# Writes ddplab/v1/plugins.proto: ddplab.v1.Plugin with one field per plugin, numbered
# by the ddplab.v1.plugin_field option of the plugin's own Config message.
# Arguments: the retired field numbers (one word, space-separated), then each plugin's
# .proto (plugins/<name>/<name>.proto).
set -e
retired=$1
shift
cat <<'HEAD'
// Generated from plugins/plugins.bzl by proto/gen_plugins_proto.sh: do not edit.
//
// A plugin entry of an experiment. The field set names the plugin and holds its
// configuration, the message of plugins/<name>/<name>.proto:
//
//   plugin { bucket_sizing { bucket_cap_mb: 25 } }
//
// loads plugins/bucket_sizing/libbucket_sizing.so and hands it the configuration.

syntax = "proto3";

package ddplab.v1;

HEAD
for proto in "$@"; do
  name=$(basename "$proto" .proto)
  echo "import \"plugins/$name/$name.proto\";"
done
cat <<'MID'

message Plugin {
  // Load the shared library from this path instead of finding it by name beside the
  // binary. Relative paths are taken from the working directory.
  string path = 1;

MID
if [ -n "$retired" ]; then
  echo "  reserved $(echo "$retired" | sed 's/ /, /g');"
  echo
fi
echo "  // Exactly one is required: it names the plugin and configures it."
echo "  oneof config {"
for proto in "$@"; do
  name=$(basename "$proto" .proto)
  number=$(sed -n 's/.*(ddplab\.v1\.plugin_field) *= *\([0-9][0-9]*\);.*/\1/p' "$proto")
  if [ -z "$number" ]; then
    echo "$proto: its Config message has no option (ddplab.v1.plugin_field) = <field number>;" >&2
    exit 1
  fi
  echo "    ddplab.plugins.$name.v1.Config $name = $number;"
done
echo "  }"
echo "}"
