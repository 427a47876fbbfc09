#!/usr/bin/env bash
# The HTML attention explorer in a real browser (CI, after `apt-get install
# chromium`; not part of make test). Writes pages with --html (and --compare),
# loads each in headless Chromium at 1400 and 800 pixels wide with #selftest
# in the address, and reads back the page's own self-check (hidden from
# users): its script opens the view the address asks for (the row scrolled
# into view), draws every layer and head, counts the heatmap cells (visible
# and hatched), checks every row sums to 1, hovers a cell, drives the
# keyboard (arrows, Enter on a token reached by Tab), checks the address
# follows the view, the page does not scroll sideways and each head's
# thumbnail names its role (-m heads), and records any script error into
# <pre id="selftest" data-test-status="ok|fail">.
# A page of a run with --window and --sinks must also draw the sliding
# window's mask beside the causal one, hatch exactly the evicted cells and
# band the sinks. Also saves a screenshot, build/explorer.png. Prints "ok" /
# "FAIL" lines.
set -u
cd "$(dirname "$0")/.."
RUN=./run
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; failed=1; }

browser=""
for b in chromium chromium-browser google-chrome; do
    if command -v "$b" >/dev/null; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
    fail "browser" "chromium not found (apt-get install -y chromium)"
    exit 1
fi
[ -x "$RUN" ] || make >/dev/null

# A fresh profile per call, and nothing that talks to the network.
chrome() {
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$(mktemp -d -p "$tmp")" "$@" 2>>"$tmp/chromium.log"
}

# check_page NAME FILE RUNS [HASH]: at 1400 and 800 pixels wide, the page's
# self-check passed with RUNS heatmaps
check_page() {
    local width
    for width in 1400 800; do check_page_at "$width" "$@"; done
}
check_page_at() {
    local width=$1 name="$2 at $1 px" page=$3 runs=$4 hash=${5:-}
    chrome --window-size="$width,900" --dump-dom "file://$(realpath "$page")#${hash}${hash:+&}selftest" >"$tmp/dom.html"
    local report status
    report=$(sed -n '/<pre id="selftest"/,/<\/pre>/p' "$tmp/dom.html")
    status=$(grep -o 'data-test-status="[a-z]*"' <<<"$report" | head -n 1)
    if [ "$status" = 'data-test-status="ok"' ] && grep -q "^heatmaps $runs$" <<<"$report" \
        && grep -q "^errors 0" <<<"$report"; then
        ok "$name: $(grep -E '^(visible|masked|evicted) cells' <<<"$report" | cut -d'(' -f1 | tr '\n' ';' | sed 's/ *;/;/g')"
    else
        fail "$name" "$(sed 's/<[^>]*>//g' <<<"$report" | tr '\n' ' ' | head -c 400)"
    fi
}

# The toy-grammar models when they are there, else the tiny test models.
if [ -r models/grammar.bin ] && [ -r models/grammar-random.bin ]; then
    MODEL=models/grammar.bin OTHER=models/grammar-random.bin PROMPT="the cat sat on the"
else
    MODEL=tests/data/gqa.qkv OTHER=tests/data/mqa.qkv PROMPT="the cat sat on the"
fi

if $RUN $MODEL -i "$PROMPT" -t 0 -n 14 --html "$tmp/explorer.html" --compare $OTHER >/dev/null 2>"$tmp/err"; then
    check_page "explorer of $MODEL with --compare $OTHER" "$tmp/explorer.html" 2 "pos=7&layer=1&head=2"
    mkdir -p build
    rm -f build/explorer.png
    chrome --screenshot="$(realpath build)/explorer.png" --window-size=1400,900 \
        "file://$(realpath "$tmp/explorer.html")#pos=7&layer=1&head=2" >/dev/null
    if [ "$(head -c 8 build/explorer.png 2>/dev/null | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ]; then
        ok "screenshot build/explorer.png"
    else fail "screenshot" "no PNG written"; fi
else fail "--html --compare" "$(head -n 1 "$tmp/err")"; fi

if $RUN $MODEL -i "$PROMPT" -t 0.9 -s 1 -n 40 --html "$tmp/long.html" >/dev/null 2>"$tmp/err"; then
    check_page "explorer of a sampled run, one model, opened on #pos=36" "$tmp/long.html" 1 "pos=36&layer=1&head=0"
else fail "--html" "$(head -n 1 "$tmp/err")"; fi

# The shortest pages: one position (an empty prompt, one token) and two
if $RUN $MODEL -i "" -t 0 -n 1 --html "$tmp/one.html" >/dev/null 2>"$tmp/err" &&
    $RUN $MODEL -i "the" -t 0 -n 2 --html "$tmp/two.html" >/dev/null 2>>"$tmp/err"; then
    check_page_at 800 "explorer of one position" "$tmp/one.html" 1
    check_page_at 800 "explorer of two positions" "$tmp/two.html" 1
else fail "--html of one and two positions" "$(head -n 1 "$tmp/err")"; fi

# The induction probe (a random block, then the same block again): the page
# of the shipped induction model, whose thumbnails name each head's role.
PROBE_MODEL=models/induction.bin
[ -r $PROBE_MODEL ] || PROBE_MODEL=$MODEL
if $RUN $PROBE_MODEL --probe induction -s 1 -t 0 -n 70 --html "$tmp/probe.html" >/dev/null 2>"$tmp/err"; then
    check_page "explorer of $PROBE_MODEL over --probe induction, opened on #pos=50" "$tmp/probe.html" 1 "pos=50&layer=1&head=0"
else fail "--probe induction --html" "$(head -n 1 "$tmp/err")"; fi

# A sliding window with sinks, beside a full-cache model: evicted cells
# hatched, the sinks banded, the window's mask drawn next to the causal one.
if $RUN $MODEL -i "$PROMPT" -t 0 -n 24 --window 8 --sinks 2 --html "$tmp/window.html" --compare $OTHER >/dev/null 2>"$tmp/err"; then
    check_page "explorer with --window 8 --sinks 2 and --compare" "$tmp/window.html" 2 "pos=20&layer=0&head=1"
else fail "--html --window" "$(head -n 1 "$tmp/err")"; fi
# The same without sinks: no sinks column, band or "0..-1" range
if $RUN $MODEL -i "$PROMPT" -t 0 -n 24 --window 8 --html "$tmp/window0.html" >/dev/null 2>"$tmp/err"; then
    check_page "explorer with --window 8 and no sinks" "$tmp/window0.html" 1 "pos=20&layer=0&head=1"
else fail "--html --window without sinks" "$(head -n 1 "$tmp/err")"; fi

# Over 128 positions each matrix is a picture (a canvas, a pixel a cell):
# its cells counted by colour, the query's row marked and scrolled into view,
# a hover over a cell gives its values; with a window, its evicted cells
# pink; two side by side (a prompt of 140 tokens and more: the stories
# model beside itself).
for sinks in 2 0; do
    if $RUN $MODEL -i "$PROMPT" -t 0 -n 200 --window 32 --sinks $sinks --html "$tmp/picture$sinks.html" >/dev/null 2>"$tmp/err"; then
        check_page "explorer of 200 positions (a picture) with --window 32 --sinks $sinks" "$tmp/picture$sinks.html" \
            "1 (pictures)" "pos=150&layer=1&head=3"
    else fail "--html of 200 positions, --sinks $sinks" "$(head -n 1 "$tmp/err")"; fi
done
long_prompt=$(for i in 1 2 3 4 5 6 7 8 9 10; do printf 'Once upon a time there was a little girl named Lily. '; done)
if $RUN models/stories.bin -i "$long_prompt" -t 0 -n 200 --html "$tmp/pictures.html" --compare models/stories.bin \
    >/dev/null 2>"$tmp/err"; then
    check_page "explorer of 140+ positions (pictures), the stories model beside itself" "$tmp/pictures.html" \
        "2 (pictures)" "pos=100&layer=5&head=5"
else fail "--html --compare of 140+ positions" "$(head -n 1 "$tmp/err")"; fi

# Token text with quotes, backslashes, ESC, NUL, bytes that are not UTF-8 and
# "</script": the page must still parse its data and draw.
if /usr/bin/python3 tests/trace_check.py weird-model tests/data/gqa.qkv "$tmp/weird.qkv" >/dev/null 2>&1; then
    $RUN "$tmp/weird.qkv" -t 0 -n 24 -i "the" --html "$tmp/weird.html" >/dev/null 2>&1
    check_page "explorer with hostile token text" "$tmp/weird.html" 1
else
    echo "skip explorer with hostile token text: /usr/bin/python3 with numpy is missing"
fi

exit $failed
