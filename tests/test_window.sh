#!/usr/bin/env bash
# Attention sinks and a sliding KV cache (--window W --sinks S): a window that
# never fills gives full attention's bits; bad pairs are usage errors; the
# attention and the ppl of a window agree with export/reference.py's NumPy
# float64 StreamingLLM cache (keys kept unrotated, rotated by their place in
# the cache at every step: an independent formulation); the sinks stay in
# every step's trace; memory stays flat over ten contexts. Prints "ok NAME" /
# "FAIL NAME: why" lines.
. "$(dirname "$0")/lib.sh"
MODEL=tests/data/gqa.qkv # context 32

# ---- a window that never fills is full attention, bit for bit -------------
for kv in f32 f16 q8; do
    $RUN models/grammar.bin -t 0 -n 60 -i "the cat" --kv-type $kv --trace-json "$tmp/full.json" >"$tmp/full.txt" 2>/dev/null
    $RUN models/grammar.bin -t 0 -n 60 -i "the cat" --kv-type $kv --window 64 --sinks 4 --trace-json "$tmp/win.json" \
        >"$tmp/win.txt" 2>/dev/null
    # the window's objects carry "window" and "sink_share"; the rest must be the same bytes
    sed -e 's/,"window":{[^}]*}//' -e 's/,"sink_share":[-0-9.e]*//g' "$tmp/win.json" >"$tmp/win.stripped"
    if [ -s "$tmp/full.txt" ] && cmp -s "$tmp/full.txt" "$tmp/win.txt" && cmp -s "$tmp/full.json" "$tmp/win.stripped"; then
        ok "--window 64 --sinks 4 over 60 positions, --kv-type $kv: the text and every score and weight of full attention"
    else fail "window >= tokens, $kv" "the text or the trace differs from full attention"; fi
done
head -c 150 tests/data/grammar-sample.txt >"$tmp/short.txt" # 30 tokens < the window
full=$($RUN models/grammar.bin -m ppl -f "$tmp/short.txt" | tail -1)
win=$($RUN models/grammar.bin -m ppl -f "$tmp/short.txt" --window 40 --sinks 2 | tail -1)
if [ -n "$full" ] && [ "$full" = "$win" ]; then ok "ppl with a window longer than the text: full attention's bits ($win)"
else fail "ppl window >= tokens" "'$win', full '$full'"; fi

# ---- bad pairs: one error line and usage, exit 2 ---------------------------
expect_usage() {
    local name=$1 pattern=$2; shift 2
    "$RUN" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$? first
    first=$(head -n 1 "$tmp/err")
    if [ "$rc" -eq 2 ] && grep -qE -- "$pattern" <<<"$first" && [ ! -s "$tmp/out" ]; then ok "usage: $name ($first)"
    else fail "usage: $name" "exit $rc, '$first'"; fi
}
expect_usage "S = W" "S must be less than W" $MODEL --window 8 --sinks 8
expect_usage "S > W" "S must be less than W" $MODEL -m ppl -f tests/data/grammar-sample.txt --window 4 --sinks 6
expect_usage "W beyond the context" "beyond the model's context of 32" $MODEL --window 33
expect_usage "W = 0" "--window 0: expected an integer in \[1," $MODEL --window 0
expect_usage "W < 0" "--window -4: expected" $MODEL -m bench --window -4
expect_usage "S < 0" "--sinks -1: expected an integer in \[0," $MODEL --window 8 --sinks -1
expect_usage "--sinks without --window" "--sinks needs --window" $MODEL --sinks 2
expect_usage "--recompute without --window" "--recompute needs --window" $MODEL -m ppl -f tests/data/grammar-sample.txt --recompute
expect_usage "--recompute in generate" "--recompute is not used by -m generate" $MODEL --window 8 --recompute
expect_usage "--window in info" "--window is not used by -m info" $MODEL -m info --window 8
expect_usage "--no-cache with --window" "not with --window" $MODEL -m bench --window 8 --no-cache
# learned positions (GPT-2) end at the context: a window has nothing to give past it
if [ -r models/shakespeare.bin ]; then
    expect_usage "--window with a GPT-2 model" "needs rotary positions" models/shakespeare.bin --window 64 -n 200
    expect_usage "--window in ppl with a GPT-2 model" "needs rotary positions" models/shakespeare.bin -m ppl \
        -f tests/data/grammar-sample.txt --window 64
else echo "skip --window with a GPT-2 model: models/shakespeare.bin is missing"; fi

# ---- past the context, and the trace's sinks --------------------------------
$RUN $MODEL -t 0.9 -s 3 -n 320 --window 16 --sinks 2 -i "the" --trace-json "$tmp/long.json" \
    --trace-out "$tmp/long.txt" >/dev/null 2>"$tmp/err"
if grep -q "319 generated" "$tmp/err"; then ok "-n 320 with --window 16: ten contexts of 32 generated"
else fail "generate past the context" "$(tail -n 1 "$tmp/err")"; fi
if grep -q "  cache       sink    sink window>" "$tmp/long.txt" && grep -q "positions 2..303$" "$tmp/long.txt"; then
    ok "text trace: the sinks, the window's start and the evicted positions marked"
else fail "text trace marks" "no 'cache sink sink window>' row or 'positions 2..303' note"; fi
$RUN models/grammar.bin -i "the cat sat" -t 0 -n 12 --window 6 --trace --layer 0 --head 1 --pos 11 >"$tmp/w0.txt" 2>&1
if grep -q "pos 11 sees the window 6..11; positions 0..5" "$tmp/w0.txt" && ! grep -q '\.\.-1' "$tmp/w0.txt"; then
    ok "text trace without sinks: 'sees the window 6..11; positions 0..5' were evicted, no sinks range"
else fail "text trace without sinks" "$(grep -m1 'sliding window' "$tmp/w0.txt")"; fi
# at every step the sinks 0..S-1 are there, the window is the last W-S
# positions, the weights sum to 1 and sink_share is the sinks' weights
if $PY - "$tmp/long.json" 16 2 <<'EOF'; then ok "JSON trace: positions 0..1 kept at each of 320 steps, the window the 14 latest, sink_share its sum"
import json, sys
path, W, S = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps = [json.loads(l) for l in open(path)]
assert len(steps) == 320, len(steps)
for st in steps:
    p, w = st["pos"], st["window"]
    seen = min(p + 1, W)
    start = p + 1 - (W - S) if p + 1 > W else min(S, p + 1)
    keys = list(range(min(S, p + 1))) + list(range(start, p + 1))
    assert w["start"] == start and len(keys) == seen, (p, w)
    assert (w["evicted"] is None) == (start <= S), (p, w)
    for L in st["layers"]:
        for H in L["heads"]:
            assert len(H["weights"]) == seen and abs(sum(H["weights"]) - 1) < 1e-5, (p, len(H["weights"]))
            assert abs(H["sink_share"] - sum(H["weights"][:min(S, p + 1)])) < 1e-6, p
EOF
else fail "JSON trace sinks" "see above"; fi

# ---- against NumPy: attention of a window, and the ppl variants -------------
if have_numpy; then
    for sinks in 0 3; do
        $RUN $MODEL -t 0.9 -s 5 -n 80 --window 12 --sinks $sinks -i "the" --trace-json "$tmp/w.json" >/dev/null 2>&1
        if $PY - "$tmp/w.json" 12 $sinks <<'EOF'; then ok "--window 12 --sinks $sinks, 80 positions: every weight within 1e-5 of NumPy's StreamingLLM cache"
import json, sys
sys.path.insert(0, "export")
import numpy as np, qkvfile, reference
path, W, S = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps = [json.loads(l) for l in open(path)]
config, tensors, _ = qkvfile.read_model("tests/data/gqa.qkv")
ref = reference.forward(config, tensors, [s["token"] for s in steps], window=W, sinks=S)
worst = 0
for p, st in enumerate(steps):
    for L in st["layers"]:
        for H in L["heads"]:
            want = ref.weights[p][L["layer"]][H["head"]]
            worst = max(worst, np.max(np.abs(np.array(H["weights"]) - want)))
assert worst < 1e-5, worst
EOF
        else fail "window attention against NumPy, sinks $sinks" "see above"; fi
    done
    text="the cat sat on the mat and the dog ran to the park where the bird sang a song about the sun and the moon and all the stars that shine at night over the quiet town. then the wind came down the hill and the trees bent low while the children ran home to their mothers who waited by the warm fire."
    printf '%s' "$text" >"$tmp/text.txt"
    ids=$($RUN $MODEL -m tokenize --prompt-file "$tmp/text.txt" | head -n 1 | tr ' ' ',')
    for flags in "--window 16" "--window 16 --sinks 4" "--window 16 --sinks 4 --recompute"; do
        got=$($RUN $MODEL -m ppl -f "$tmp/text.txt" $flags | awk '/nats\/token/ {print $2}')
        want=$($PY export/reference.py $MODEL --tokens "$ids" --ppl $flags | awk '{print $2}')
        if [ -n "$got" ] && [ -n "$want" ] && awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }'; then
            ok "ppl $flags over $(tr ',' '\n' <<<"$ids" | wc -l) tokens (context 32): $got nats/token, NumPy $want"
        else fail "ppl $flags" "engine '$got', NumPy '$want'"; fi
    done
else
    echo "skip window against NumPy: $PY with numpy is missing"
fi

# ---- constant memory: resident bytes, not time ------------------------------
# Not under a sanitizer: AddressSanitizer quarantines freed blocks (some
# runtime frees blocks every token, on main too: about 32 KiB a token), so
# resident memory grows with any long run there.
if [[ "${TEST_CFLAGS:-}" == *sanitize* ]]; then
    echo "skip constant memory under a sanitizer (TEST_CFLAGS has -fsanitize)"
    exit 0
fi
$RUN models/grammar.bin -m bench --window 64 --sinks 4 --repeats 1 >"$tmp/bench.txt" 2>/dev/null
rss=$(sed -n 's/^  resident memory (MiB) at positions [0-9 ]*: //p' "$tmp/bench.txt")
# from the second context on (the first slide faults in its code pages
# once): within 0.1 MiB, where a full cache would add 1.4 MiB
spread=$(cut -d' ' -f2- <<<"$rss" | tr ' ' '\n' | sort -n | sed -n '1p;$p' | tr '\n' ' ' | awk '{print $2 - $1}')
if [ "$(wc -w <<<"$rss")" -eq 10 ] && awk -v d="$spread" 'BEGIN { exit !(d <= 0.1) }'; then
    ok "bench --window 64 over ten contexts: resident memory within $spread MiB at positions 128..640 ($rss; a full cache would add 1.4 MiB)"
else fail "bench constant memory" "resident '$rss'"; fi
if grep -q "beyond the window (least squares over 65..640)" "$tmp/bench.txt" && grep -q "full cache, no window: positions 1..64" "$tmp/bench.txt"; then
    ok "bench --window: latency beyond the window, the full cache beside it"
else fail "bench --window report" "$(grep -A4 'sliding window' "$tmp/bench.txt" | head -c 300)"; fi
# peak resident memory of a whole run: 6,400 positions where a full cache
# would add 6,400 x 2,304 bytes = 14 MiB (run-to-run jitter is a few
# hundred KiB: the loader's and libc's own)
if [ -x /usr/bin/time ]; then
    a=$(/usr/bin/time -f %M $RUN models/grammar.bin -t 1 -s 1 -n 640 --window 64 --sinks 4 2>&1 >/dev/null | tail -n 1)
    b=$(/usr/bin/time -f %M $RUN models/grammar.bin -t 1 -s 1 -n 6400 --window 64 --sinks 4 2>&1 >/dev/null | tail -n 1)
    if [ -n "$a" ] && [ -n "$b" ] && [ $((b - a)) -le 1024 ]; then
        ok "generate -n 6400 with --window 64 peaks at $b KiB resident, -n 640 at $a KiB (a full cache: +14 MiB)"
    else fail "generate constant memory" "-n 640 $a KiB, -n 6400 $b KiB"; fi
else
    echo "skip peak memory of generate: no /usr/bin/time"
fi
