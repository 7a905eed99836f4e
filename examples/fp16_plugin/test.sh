#!/usr/bin/env bash
# The example plugin as a plugin author builds it, outside ddplab (CI runs this):
#  1. builds vit_ddp and notes its digest;
#  2. builds libfp16.so in this workspace, against ddplab's plugin SDK alone, and checks
#     that it leaves none of ddplab's functions for the loader to resolve (nm);
#  3. runs fp16_suite.textproto with --plugin_dir: both runs must give results;
#  4. loads bad_scale.textproto: fp16's own check must be reported at the value's
#     file:line:column;
#  5. checks that vit_ddp's digest has not changed (no rebuild for a plugin);
#  6. checks that docs/writing_a_plugin.md shows this workspace's files as they are.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

cd "$root"
bazel build //experiments:vit_ddp
vit_ddp="$root/bazel-bin/experiments/vit_ddp"
before=$(sha256sum "$vit_ddp" | cut -d' ' -f1)

(cd "$here" && bazel build //:fp16)
plugins=$(mktemp -d)
cp "$here/bazel-bin/libfp16.so" "$here/bazel-bin/libfp16.so.digest" "$plugins/"
if resolved=$(nm -DC --undefined-only "$here/bazel-bin/libfp16.so" | grep 'ddplab::'); then
  fail "libfp16.so calls ddplab's code by symbol, resolved from vit_ddp: $resolved"
fi

out=$(mktemp -d)
"$vit_ddp" --plugin_dir="$plugins" --experiment="$here/fp16_suite.textproto" --output_dir="$out" \
  > "$out/vit_ddp.txt" 2>&1 || { cat "$out/vit_ddp.txt"; fail "vit_ddp did not run the example suite"; }
for run in exact fp16; do
  ls "$out"/fp16_example/"$run"*.json > /dev/null 2>&1 || { cat "$out/vit_ddp.txt"; fail "no result of run $run"; }
done
grep -q "fp16" "$out/fp16_example/report.md" || fail "the report names no fp16 run"

if error=$("$vit_ddp" --plugin_dir="$plugins" --experiment="$here/bad_scale.textproto" --output_dir="$out" 2>&1); then
  fail "bad_scale.textproto ran"
fi
expected="$here/bad_scale.textproto:11:17: plugin[0].fp16.scale: plugin \"fp16\" rejected its configuration: must be a power of two from 1 to 65536 (so that scaling is exact and shrinks no gradient), got 3.000000"
grep -qF "$expected" <<< "$error" || fail "bad_scale.textproto: expected
  $expected
got
  $error"

# A power of two below 1 would flush every gradient to float16's zero (2^-30).
sed 's/scale: 3/scale: 9.313225746154785e-10/' "$here/bad_scale.textproto" > "$out/tiny_scale.textproto"
if error=$("$vit_ddp" --plugin_dir="$plugins" --experiment="$out/tiny_scale.textproto" --output_dir="$out" 2>&1); then
  fail "a scale of 2^-30 ran"
fi
grep -qF "plugin[0].fp16.scale: plugin \"fp16\" rejected its configuration: must be a power of two from 1 to 65536" \
  <<< "$error" || fail "a scale of 2^-30: $error"

after=$(sha256sum "$vit_ddp" | cut -d' ' -f1)
[ "$before" = "$after" ] || fail "vit_ddp changed ($before, then $after)"

# Each code block of the walkthrough that follows a line "<!-- file: PATH -->" is PATH.
python3 - "$root" <<'PY'
import pathlib, re, sys
root = pathlib.Path(sys.argv[1])
doc = (root / "docs/writing_a_plugin.md").read_text()
blocks = re.findall(r"<!-- file: (\S+) -->\n```[a-z+]*\n(.*?)```\n", doc, re.S)
if len(blocks) < 4:
    sys.exit(f"docs/writing_a_plugin.md: {len(blocks)} file blocks, expected the example's 4 or more")
for path, text in blocks:
    if (root / path).read_text() != text:
        sys.exit(f"docs/writing_a_plugin.md: the block of {path} differs from the file")
print(f"docs/writing_a_plugin.md: {len(blocks)} blocks match their files")
PY
echo "PASS: vit_ddp ($before) ran the example plugin built outside it, unchanged"
