#!/usr/bin/env bash
# report.html in a real browser: Debian's chromium, headless, opens a sample page
# (testdata/write_report_html) without a console message, its DOM holds the three charts
# with their dots, bars and points, and its screenshot is a PNG of a drawn page. A page with
# what real suites write at full length (long names, a third transport, long code lines)
# clips nothing at 1280 or 1400 px, and a control page with a clipped line is caught first.
#
# chromium prints the page's console (errors, uncaught exceptions, blocked loads) as
# lines with "CONSOLE" under --enable-logging=stderr; a control page that calls
# console.error must show up there first, so that a quiet log means a quiet page.
#
#   bazel test //core:report_html_browser_test
set -euo pipefail

CHROMIUM=/usr/bin/chromium
if [ ! -x "$CHROMIUM" ]; then
  echo "chromium missing: run tools/setup.sh" >&2
  exit 1
fi

tmp="$TEST_TMPDIR"
export HOME="$tmp"  # chromium writes its caches and crash reports under $HOME

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# browse PAGE LOG ARGS...: chromium headless on PAGE, its log in LOG, its stdout out.
browse() {
  local page="$1" log="$2"
  shift 2
  timeout 120 "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 "$@" "file://$page" \
    2>"$log" || fail "chromium exited with $? on $page: $(tail -n 5 "$log")"
}

count() { grep -o "$1" "$2" | wc -l; }

# The control: a console error is seen.
printf '<!DOCTYPE html><title>control</title><p>control</p><script>console.error("report-html-control")</script>\n' \
  >"$tmp/control.html"
browse "$tmp/control.html" "$tmp/control.log" --dump-dom >/dev/null
grep CONSOLE "$tmp/control.log" | grep -q report-html-control ||
  fail "a console error went unseen: chromium's log no longer shows the console"

# The page: loads quietly, and the browser's DOM has what the file has.
page="$tmp/report.html"
"$TEST_SRCDIR/ddplab/core/report/testdata/write_report_html" "$page"
browse "$page" "$tmp/page.log" --dump-dom >"$tmp/dom.html"
if grep CONSOLE "$tmp/page.log"; then fail "console messages above"; fi
grep -q '</html>' "$tmp/dom.html" || fail "no DOM dumped"
for chart in levers step scaling; do
  grep -q "<svg [^>]*class=\"chart $chart\"" "$tmp/dom.html" || fail "no $chart chart in the DOM"
done
dots=$(count '<g class="dot"' "$tmp/dom.html")
bars=$(count '<g class="bar' "$tmp/dom.html")
points=$(count '<g class="point"' "$tmp/dom.html")
[ "$dots" -gt 0 ] && [ "$bars" -gt 0 ] && [ "$points" -gt 0 ] ||
  fail "empty charts: $dots dots, $bars bars, $points points"
[ "$dots" -eq "$(count '<g class="dot"' "$page")" ] || fail "the DOM lost dots of the page"
[ "$bars" -eq "$(count '<g class="bar' "$page")" ] || fail "the DOM lost bars of the page"
if grep -q '<script' "$tmp/dom.html"; then fail "a script element in the DOM"; fi
grep -q 'within noise' "$tmp/dom.html" || fail "no recommendation badge"

# Nothing clipped: clip_check PAGE WIDTH prints what testdata/clip_check.html finds in PAGE
# at WIDTH px ("none" or a list), run on a copy without the page's script ban (the HTML
# parser takes what follows </html> into the body).
clip_check() {
  local page="$1" width="$2" checked="$tmp/checked.html"
  { sed 's#<meta http-equiv="Content-Security-Policy"[^>]*>##' "$page"
    cat "$TEST_SRCDIR/ddplab/core/report/testdata/clip_check.html"; } >"$checked"
  browse "$checked" "$tmp/clip.log" --window-size="$width",3000 --dump-dom |
    grep -o 'data-clipped="[^"]*"' | sed 's/^data-clipped="//; s/"$//' || true
}
printf '<!DOCTYPE html><main><pre style="overflow-x:auto;white-space:pre;width:100px">%0300d</pre></main>\n' 0 \
  >"$tmp/clipped.html"
clipped="$(clip_check "$tmp/clipped.html" 1280)"
[ -n "$clipped" ] && [ "$clipped" != none ] || fail "the clip checker missed a clipped line: '$clipped'"
"$TEST_SRCDIR/ddplab/core/report/testdata/write_report_html" "$tmp/long.html" long
for width in 1280 1400; do
  clipped="$(clip_check "$tmp/long.html" "$width")"
  [ "$clipped" = none ] || fail "at $width px, clipped: ${clipped:-no answer from the checker}"
done

# The screenshot: a PNG of the window's size, with more in it than a blank page.
browse "$page" "$tmp/shot.log" --screenshot="$tmp/report.png" --window-size=1400,2000 >/dev/null
if grep CONSOLE "$tmp/shot.log"; then fail "console messages above"; fi
[ -s "$tmp/report.png" ] || fail "no screenshot"
[ "$(head -c 8 "$tmp/report.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  fail "the screenshot is not a PNG"
size="$(od -An -tu1 -j16 -N8 "$tmp/report.png" | tr -s ' ' | sed 's/^ //')"
[ "$size" = "0 0 5 120 0 0 7 208" ] || fail "the screenshot is not 1400x2000: IHDR $size"
bytes=$(wc -c <"$tmp/report.png")
[ "$bytes" -gt 50000 ] || fail "a screenshot of $bytes bytes: a blank page compresses to less"
if [ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ]; then
  cp "$tmp/report.png" "$tmp/report.html" "$TEST_UNDECLARED_OUTPUTS_DIR/"
fi
echo "report.html in chromium: nothing clipped at 1280 and 1400 px, $dots dots, $bars bars, $points points, a ${bytes}-byte screenshot; 1 passed"
