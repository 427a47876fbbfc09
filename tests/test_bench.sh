#!/usr/bin/env bash
# The benchmark (-m bench): it runs in seconds on a tiny model, its CSV has one
# row per position with the documented columns and positive numbers, the
# no-cache columns are filled exactly at the log-spaced positions, and its SVG
# chart is well-formed XML. Timings themselves are never asserted: they
# depend on the machine. Prints "ok NAME" / "FAIL NAME: why" / "skip NAME: why".
. "$(dirname "$0")/lib.sh"
MODEL=tests/data/gqa.qkv

COLUMNS="position,total_ms,attention_ms,other_ms,attention_flops,other_flops,no_cache_ms,no_cache_attention_ms,ratio"

# bench NAME ARGS...: runs the bench into $tmp/NAME.{out,err,csv,svg}; fails
# the check NAME if it does not exit 0 within the time limit.
bench() {
    local name=$1; shift
    if timeout 60 $RUN "$@" -m bench --repeats 2 --csv "$tmp/$name.csv" --svg "$tmp/$name.svg" \
        >"$tmp/$name.out" 2>"$tmp/$name.err"; then
        ok "bench $name: runs"
        return 0
    fi
    fail "bench $name: runs" "exit $? ($(tail -n 1 "$tmp/$name.err"))"
    return 1
}

# check_csv NAME ROWS NO_CACHE_POSITIONS: the header, rows 1..ROWS in order,
# every filled field a positive number, and the no-cache columns filled at
# exactly the positions listed (space-separated; empty: none).
check_csv() {
    local name=$1 rows=$2 expected=$3 csv="$tmp/$1.csv" why
    if [ "$(head -n 1 "$csv")" != "$COLUMNS" ]; then
        fail "bench $name: csv header" "got '$(head -n 1 "$csv")'"
    else ok "bench $name: csv header"; fi
    why=$(awk -F, -v rows="$rows" '
        function bad(why) { print "line " NR ": " why; failed = 1; exit }
        NR == 1 { next }
        NF != 9 { bad(NF " fields") }
        $1 != NR - 1 { bad("position " $1 ", expected " NR - 1) }
        { for (i = 1; i <= 6; i++) if (!($i + 0 > 0)) bad("field " i " is " $i) }
        $7 != "" { for (i = 7; i <= 9; i++) if (!($i + 0 > 0)) bad("field " i " is " $i) }
        END { if (!failed && NR - 1 != rows) print NR - 1 " rows, expected " rows }' "$csv")
    if [ -n "$why" ]; then fail "bench $name: csv rows" "$why"; else ok "bench $name: csv rows"; fi
    local got
    got=$(awk -F, 'NR > 1 && $7 != "" { printf "%s%s", sep, $1; sep = " " }' "$csv")
    if [ "$got" != "$expected" ]; then
        fail "bench $name: no-cache positions" "got '$got', expected '$expected'"
    else ok "bench $name: no-cache positions"; fi
}

# check_svg NAME: well-formed XML with an <svg> root, and the chart's words.
check_svg() {
    local name=$1 svg="$tmp/$1.svg" why=""
    if command -v xmllint >/dev/null; then
        xmllint --noout "$svg" 2>"$tmp/xml.err" || why="xmllint: $(head -n 1 "$tmp/xml.err")"
    elif [ -x "$PY" ]; then
        $PY -c 'import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); assert d.documentElement.tagName == "svg"' \
            "$svg" 2>"$tmp/xml.err" || why="python: $(tail -n 1 "$tmp/xml.err")"
    else
        skip "bench $name: svg is XML" "neither xmllint nor $PY"
        return
    fi
    if [ -n "$why" ]; then fail "bench $name: svg is XML" "$why"; return; fi
    for word in "<svg" "ms per token" "position n" "with KV cache: total" "attention" "least-squares line"; do
        if ! grep -q "$word" "$svg"; then fail "bench $name: svg is XML" "no '$word'"; return; fi
    done
    ok "bench $name: svg is XML"
    # ImageMagick's renderer drew empty plots under an SVG clipPath: none is used
    if grep -q "clip-path\|<clipPath" "$svg"; then fail "bench $name: svg without clipPath" "found one"
    else ok "bench $name: svg without clipPath"; fi
}

# check_report NAME PATTERN...: stdout has every pattern
check_report() {
    local name=$1; shift
    for pattern in "$@"; do
        if ! grep -qE "$pattern" "$tmp/$name.out"; then
            fail "bench $name: report" "no /$pattern/ in stdout"
            return
        fi
    done
    ok "bench $name: report"
}

# A llama2.c legacy checkpoint with random weights: the bench must need no
# tokenizer, and work on every format qkv loads.
make_legacy() {
    $PY - "$1" <<'EOF'
import struct, sys
import numpy as np
dim, hidden, layers, heads, kv_heads, vocab, seq = 16, 32, 2, 4, 2, 40, 24
hs = dim // heads
rng = np.random.default_rng(1)
def w(*shape): return (rng.standard_normal(shape) * 0.1).astype(np.float32)
ones = lambda *shape: np.ones(shape, np.float32)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("7i", dim, hidden, layers, heads, kv_heads, vocab, seq))
    for t in (w(vocab, dim), ones(layers, dim), w(layers, dim, dim), w(layers, kv_heads * hs, dim),
              w(layers, kv_heads * hs, dim), w(layers, dim, dim), ones(layers, dim),
              w(layers, hidden, dim), w(layers, dim, hidden), w(layers, hidden, dim), ones(dim),
              np.zeros((2, seq * hs // 2), np.float32)):
        f.write(t.tobytes())
EOF
}

# ---- too few positions for a slope, a window that never fills --------------
$RUN models/grammar.bin -m bench --ctx 2 --repeats 1 --svg "$tmp/ctx2.svg" >"$tmp/ctx2.out" 2>&1
if grep -q "too few positions for a slope (at least 8" "$tmp/ctx2.out" && ! grep -q "measured: per-token" "$tmp/ctx2.out" \
    && grep -q "too few positions" "$tmp/ctx2.svg" && ! grep -q "least-squares" "$tmp/ctx2.svg"; then
    ok "bench --ctx 2: no slope through two points, said so (and no line in the SVG)"
else fail "bench --ctx 2" "$(grep -A1 '^slope' "$tmp/ctx2.out" | tail -n 1)"; fi
# on a terminal the first phase (two child processes' prefills, a minute at
# 8k tokens) draws the bar too, each child its half
if command -v script >/dev/null; then
    script -qc "stty cols 100; $RUN models/grammar.bin -m bench --ctx 8 --repeats 1 >/dev/null" /dev/null >"$tmp/tty" 2>&1
    if grep -q "bench \[\.*\]   0%  tiled: token 0 of 8" "$tmp/tty" && grep -q "50%  observed: token 0 of 8" "$tmp/tty"; then
        ok "bench on a terminal: the prefill-memory phase draws its bar (tiled, then observed)"
    else fail "bench on a terminal: the prefill-memory phase's bar" "$(tr '\r' '\n' <"$tmp/tty" | head -n 4 | tr '\n' '|')"; fi
else skip "bench on a terminal" "no script(1)"; fi
# one position: every count of one said in the singular ("for 1 positions",
# "prefill of 1 tokens" and "x 1 keys" before)
$RUN models/grammar.bin -m bench --ctx 1 --repeats 1 >"$tmp/ctx1.out" 2>&1
plurals=$(grep -oE '(^|[^0-9.,])1 (positions|tokens|keys|steps|runs|threads|heads|layers)\b' "$tmp/ctx1.out")
if [ -z "$plurals" ] && grep -q "for 1 position$" "$tmp/ctx1.out" && grep -q "^prefill memory, 1 token:" "$tmp/ctx1.out"; then
    ok "bench --ctx 1: counts of one in the singular"
else fail "bench --ctx 1: plurals" "$(echo "$plurals" | tr '\n' '|')"; fi
# a window of one key and a slope per 1 token (--ctx 9: "holds 1 positions",
# "reads 1 keys", "past the window's 1 keys", "per 1 tokens" before), in the
# report and the SVG; the full cache's median over the 9 positions it has
$RUN models/grammar.bin -m bench --ctx 9 --window 1 --repeats 1 --svg "$tmp/w1.svg" >"$tmp/w1.out" 2>&1
plurals=$(cat "$tmp/w1.out" "$tmp/w1.svg" | grep -oE '(^|[^0-9.,])1 (positions|tokens|keys|steps|runs|threads|heads|layers)\b')
if [ -z "$plurals" ] && grep -q "(the KV cache holds 1 position)$" "$tmp/w1.out" \
    && grep -q "attention reads at most 1 key: past the window" "$tmp/w1.out" \
    && grep -q "(median of the last 9)$" "$tmp/w1.out"; then
    ok "bench --window 1 --ctx 9: counts of one in the singular, in the report and the SVG"
else fail "bench --window 1 --ctx 9: plurals" "$(echo "$plurals" | tr '\n' '|') $(grep -o 'median of the last [0-9]*' "$tmp/w1.out")"; fi
$RUN models/grammar.bin -m bench --window 8 --ctx 4 --repeats 1 >"$tmp/w4.out" 2>&1
if grep -q "^  median ms per token: positions 1..4 [0-9.]*$" "$tmp/w4.out" && ! grep -q "resident memory (MiB) at positions:$" "$tmp/w4.out"; then
    ok "bench --window 8 --ctx 4: the window's line names the 4 positions timed, no empty memory line"
else fail "bench --window 8 --ctx 4" "$(grep -A3 '^sliding window' "$tmp/w4.out" | tr '\n' '|')"; fi
# a window of 7 or more: the fit starts past it once --ctx does, so 8
# positions need --ctx W + 8 (it said "--ctx 8 or more" to a --ctx 9)
$RUN models/grammar.bin -m bench --window 7 --ctx 9 --repeats 1 >"$tmp/w7.out" 2>&1
if grep -q "^  too few positions for a slope (at least 8: --ctx 15 or more)$" "$tmp/w7.out"; then
    ok "bench --window 7 --ctx 9: too few positions, --ctx 15 (W + 8) advised"
else fail "bench --window 7 --ctx 9" "$(grep -A1 '^slope' "$tmp/w7.out" | tr '\n' '|')"; fi
# past a window every token reads W keys: the FLOPs predict no growth (the
# prediction was the full cache's, and measured / predicted came out -0.03);
# the chart draws no crossover the window never reaches (it drew the full
# cache's), and its axis says the keys a token reads
$RUN models/grammar.bin -m bench --window 16 --sinks 4 --ctx 64 --repeats 1 --svg "$tmp/w16.svg" >"$tmp/w16.out" 2>&1
if grep -q "(predicted never to cross: the window reads at most 16 keys)" "$tmp/w16.svg" \
    && ! grep -q "predicted from bytes" "$tmp/w16.svg" && grep -q "it attends to min(n, 16) keys" "$tmp/w16.svg" \
    && grep -q "linear axes: .* (one run)" "$tmp/w16.svg" \
    && grep -Eq "^    f32 KV cache: +[0-9]+ bytes a position -> never \([0-9]+, past the window's 16 keys\) \(the one measured\)$" "$tmp/w16.out"; then
    ok "bench --window 16 --svg: no predicted crossover drawn or printed, min(n, 16) keys on the axis, one run (not spread 0%)"
else fail "bench --window 16 --svg" "$(grep -o 'KV cache: attention[^<]*' "$tmp/w16.svg")"; fi
if grep -q "^  FLOPs prediction: 0 ms per 10 tokens past the window (attention reads 16 keys at each)$" "$tmp/w16.out" \
    && ! grep -q "measured / predicted" "$tmp/w16.out"; then
    ok "bench --window 16: the FLOPs predict a flat slope past the window, and no ratio to it"
else fail "bench --window 16's prediction" "$(grep -A3 '^slope' "$tmp/w16.out" | tr '\n' '|')"; fi
# one run has no spread: it said "spread 0%: trust the slope accordingly"
if grep -q "; one run: no spread measured, --repeats 3 or more to judge the slope)$" "$tmp/w16.out" \
    && ! grep -q "trust the slope" "$tmp/w16.out" && grep -q "^run-to-run spread: one run, none measured" "$tmp/w16.out" \
    && grep -q "at position 64: .* ms (one run) =" "$tmp/w16.out"; then
    ok "bench --repeats 1: the slope's and the table's lines say one run has no spread; attention at the last: one run"
else fail "bench --repeats 1's spread" "$(grep '  measured:' "$tmp/w16.out")"; fi

# ---- the qkv test model (seq_len 32) ---------------------------------------
if [ ! -f "$MODEL" ]; then
    skip "bench qkv model" "$MODEL not found"
else
    if bench full "$MODEL" --no-cache; then
        check_csv full 32 "1 2 4 8 16 32"
        check_svg full
        check_report full "threads [0-9]+" "weights +[0-9]+ bytes" "KV cache +f32, [0-9]+ bytes per token" \
            "no-cache +ratio" "measured: per-token latency grows -?[0-9.]+ ms per 10 tokens" \
            "run-to-run spread [0-9]+%" "FLOPs prediction: [0-9.]+ ms per 10 tokens" "prefill +decode" \
            "machine: read bandwidth [0-9.]+ GB/s, float32 FMA peak [0-9.]+ GFLOP/s" \
            "decode, positions 1..32: weights stream at [0-9.]+ GB/s = [0-9]+% of the read bandwidth" \
            "decode's fastest of its 64 steps \(the probe's figure is its fastest pass\): [0-9.]+ GB/s = [0-9]+%" \
            "prefill of 32 tokens: [0-9.]+ GFLOP/s = [0-9]+% of the FMA peak" \
            "decode paired with plain reads of its [0-9.]+ MiB of weights \(64 steps at position 32, each followed by a read in one pass, as the probe reads, and one in the step's order with its meetings\): it streams them at [0-9]+% of the first and [0-9]+% of the second \(medians of the pairs' ratios; decode [0-9.]+ GB/s, the reads [0-9.]+ and [0-9.]+\)" \
            "attention paired with plain reads of its [0-9.]+ MiB of keys and values \(64 steps at position 32, " \
            "summary: [^ ]+ float32 [0-9]+ threads?: decode [0-9.]+ tok/s, [0-9.]+ GB/s \([0-9]+%; fastest step [0-9]+%; paired [0-9]+%\)" \
            "peak resident memory +[0-9]+ bytes"
        # The fastest of the 32 x 2 steps streams at least as fast as the
        # median step; its share is its GB/s over the probe's (rounded as
        # printed), and the summary line gives the same share.
        why=$(awk '/read bandwidth [0-9.]+ GB\/s, float32/ { for (i = 1; i < NF; i++) if ($i == "bandwidth") probe = $(i + 1) }
            /weights stream at/ { for (i = 1; i < NF; i++) if ($i == "at") median = $(i + 1) }
            /fastest of its [0-9]+ steps/ { for (i = 1; i < NF; i++) if ($i == "GB/s") { fast = $(i - 1); pct = $(i + 2) } }
            /^summary:/ { for (i = 1; i < NF; i++) if ($i == "fastest") summary = $(i + 2) }
            END { sub("%", "", pct); sub("%.*", "", summary)
                  if (fast == "" || fast + 0 < median + 0) print "fastest " fast " GB/s below the median step'"'"'s " median
                  else if (probe + 0 <= 0 || (100 * fast / probe - pct) ^ 2 > 1) print fast " GB/s of " probe " is not " pct "%"
                  else if (summary != pct) print "the summary says fastest step " summary "%, the report " pct "%" }' \
            "$tmp/full.out")
        if [ -z "$why" ]; then ok "bench full: the fastest decode step, against the median step, the probe and the summary"
        else fail "bench full: the fastest decode step" "$why"; fi
        # The predicted crossovers, by hand: tests/data/gqa.qkv streams its
        # 29,728 float32 parameters, 118,912 bytes a token (test_cli.sh's
        # -m info check works them out); a position of context adds a key
        # and a value row per layer (2) and kv head (2) of 8 elements: 4
        # bytes each in f32 (256), 2 in f16 (128), 1 plus a 4-byte scale a
        # row in q8 (2 x 2 x 2 x 12 = 96). They cross at 118912 / bytes,
        # printed to the nearest position.
        why=$(awk 'BEGIN { want["f32"] = 256; want["f16"] = 128; want["q8"] = 96 }
            /KV cache: +[0-9]+ bytes a position -> position [0-9]+/ {
                type = $1; bytes = $4; at = $NF == "measured)" ? $(NF - 3) : $NF; n++
                if (!(type in want) || bytes != want[type]) print type ": " bytes " bytes a position, expected " want[type]
                else if ((at - 118912 / bytes) ^ 2 > 0.26) print type ": position " at ", expected 118912 / " bytes " = " 118912 / bytes }
            END { if (n != 3) print n + 0 " predicted crossovers, expected 3" }' "$tmp/full.out")
        if [ -z "$why" ]; then ok "bench full: the predicted crossovers are the weight bytes over each KV type's bytes a position (464, 929, 1239)"
        else fail "bench full: predicted crossovers" "$(echo $why)"; fi
    fi
    # float16 weights: the conversions' probe, a ceiling beside the read's
    # (its share of the lesser of the two, recomputed from the printed
    # figures); a float32 model has no such line, nor the portable path
    # (no vector conversion to probe)
    $RUN "$MODEL" -m quantize -o "$tmp/f16.qkv" --dtype f16 2>/dev/null
    $RUN "$tmp/f16.qkv" -m bench --ctx 4 --repeats 1 >"$tmp/f16.out" 2>&1
    lines=1
    $RUN "$MODEL" -m info | grep -q "^kernels  *portable" && lines=0
    why=$(awk -v lines=$lines '/read bandwidth [0-9.]+ GB\/s, float32/ { for (i = 1; i < NF; i++) if ($i == "bandwidth") read = $(i + 1) }
        /weights stream at/ { for (i = 1; i < NF; i++) if ($i == "at") decode = $(i + 1) }
        /^  float16.s conversions alone/ { n++; for (i = 1; i < NF; i++) if ($i == "GB/s;") conv = $(i - 1)
            for (i = 1; i < NF; i++) if ($i == "at" && $(i + 2) == "of") pct = $(i + 1) }
        END { sub("%", "", pct); low = conv + 0 < read + 0 ? conv : read
              if (n + 0 != lines) print n + 0 " conversion lines, expected " lines
              else if (lines && conv + 0 <= 0) print conv " GB/s of conversions"
              # the figures are printed to 0.1 GB/s: the share lies between what their roundings allow
              else if (lines && (pct + 0.5 < 100 * (decode - 0.05) / (low + 0.05) || pct - 0.5 > 100 * (decode + 0.05) / (low - 0.05)))
                  print decode " GB/s of the lesser of " conv " and " read " is not " pct "%" }' \
        "$tmp/f16.out")
    if [ -z "$why" ] && ! grep -q "conversions alone" "$tmp/full.out"; then
        ok "bench of float16 weights: the conversions' probe ($lines line), decode's share of the lesser ceiling; none for float32"
    else fail "bench float16 conversions" "${why:-a float32 model printed the line}"; fi
    # without --no-cache: no recomputation columns; --ctx limits the positions
    if bench ctx8 "$MODEL" --ctx 8; then
        check_csv ctx8 8 ""
        check_svg ctx8
        # the FLOPs columns against gqa.qkv's closed forms (test_cli.sh's info
        # check spells them out): attention 2 layers x 4 heads x 8 x 2 x 2 =
        # 256 a key, so 256 x position; the rest 2 x 29568 weights = 59136
        why=$(awk -F, 'NR > 1 && ($5 != 256 * $1 || $6 != 59136) { print "position " $1 ": " $5 ", " $6; exit }' "$tmp/ctx8.csv")
        if [ -z "$why" ]; then ok "bench ctx8: attention_flops = 256 x position, other_flops = 59136 (closed forms)"
        else fail "bench ctx8: the FLOPs columns" "$why"; fi
    fi
    if bench ctx100 "$MODEL" --ctx 100 --no-cache; then
        if grep -q "clamped to 32" "$tmp/ctx100.err"; then ok "bench --ctx beyond seq_len: clamped"
        else fail "bench --ctx beyond seq_len: clamped" "no warning"; fi
        check_csv ctx100 32 "1 2 4 8 16 32"
    fi
fi

# ---- a llama2.c legacy checkpoint (seq_len 24: the last position is not a power of two)
if [ -x "$PY" ] && $PY -c 'import numpy' 2>/dev/null && make_legacy "$tmp/legacy.bin"; then
    if bench legacy "$tmp/legacy.bin" --no-cache; then
        check_csv legacy 24 "1 2 4 8 16 24"
        check_svg legacy
    fi
else
    skip "bench llama2.c legacy checkpoint" "no numpy to make one"
fi

# ---- a longer context: log-spaced positions past 2048, the crossover, the prefill's memory
# (--ctx 2897: the last position follows a log-spaced one, 2896, with nothing to prefill between)
if [ -x "$PY" ] && $PY -c 'import numpy' 2>/dev/null &&
    $PY export/make_test_models.py --random-legacy "$tmp/long.bin" --dim 32 --hidden 64 --layers 1 --heads 4 \
        --kv-heads 2 --vocab 64 --seq 3000 >/dev/null; then
    if bench long "$tmp/long.bin" --ctx 2897; then
        got=$(awk -F, 'NR > 1 && $1 > 2046 { printf "%s%s", sep, $1; sep = " " }' "$tmp/long.csv")
        rows=$(awk 'END { print NR - 1 }' "$tmp/long.csv")
        if [ "$got" = "2047 2048 2233 2435 2656 2896 2897" ] && [ "$rows" = 2053 ]; then
            ok "bench long: every position to 2048, then 8 log-spaced a doubling, and the last (right after one: no prefill between)"
        else fail "bench long: positions" "$rows rows, ending '$got'"; fi
        check_report long "crossover: the context where attention takes as long as the rest of the step" \
            "measured, f32 KV cache: (position [0-9]+|not reached by position 2897)" \
            "q8 +KV cache: +[0-9]+ bytes a position -> position [0-9]+" \
            "prefill memory, 2897 tokens" "tiled \(no observer\): +[0-9.]+ MiB" \
            "attention at position 2897: [0-9.]+ MiB of keys and values.*; [0-9]+% of a read over the KV bytes alone, after the weights' \([0-9.]+ GB/s\)" \
            "attention paired with plain reads of its [0-9.]+ MiB of keys and values \(64 steps at position 2897, .*\): it streams them at [0-9]+% of the first and [0-9]+% of the second" \
            "the step's own bytes read in its order at position 2897, no arithmetic \(best of [0-9]+ passes\): weights [0-9.]+ GB/s, keys and values [0-9.]+ GB/s; attention reads at [0-9]+% of the latter"
        # the paired reads' keys and values are the bytes the attention line counts
        kv=$(awk '/^  attention at position/ { for (i = 1; i < NF; i++) if ($i == "MiB") { a = $(i - 1); exit } }
            END { print a }' "$tmp/long.out")
        pair=$(awk '/^  attention paired/ { for (i = 1; i < NF; i++) if ($i == "its") { print $(i + 1); exit } }' "$tmp/long.out")
        if [ -n "$kv" ] && [ "$kv" = "$pair" ]; then ok "bench long: the paired reads cover attention's $kv MiB (two query heads a kv head: each byte once)"
        else fail "bench long: the paired reads cover attention's bytes" "attention line '$kv' MiB, paired '$pair'"; fi
        if grep -q "crossover, measured\|predicted from bytes" "$tmp/long.svg"; then ok "bench long: the chart marks the crossover"
        else fail "bench long: the chart marks the crossover" "no marker"; fi
        # the progress line is for a terminal only: a file gets plain lines
        if grep -q $'\r\|\033' "$tmp/long.err"; then fail "bench long: no progress line in a file" "found \\r or ESC"
        else ok "bench long: no progress line in a file"; fi
    fi
else
    skip "bench long context" "no numpy to make a checkpoint"
fi

# ---- --csv /dev/stdout with stdout sent to a file: the report, then the CSV
# (its rows came in the middle of a report line, ahead of stdout's buffer)
if [ -f "$MODEL" ]; then
    $RUN "$MODEL" -m bench --ctx 8 --repeats 1 --csv /dev/stdout >"$tmp/both.txt" 2>/dev/null
    at=$(grep -n "^$COLUMNS\$" "$tmp/both.txt" | cut -d: -f1)
    if [ -n "$at" ] && [ "$at" -gt 1 ] && sed -n "$((at - 1))p" "$tmp/both.txt" | grep -q '^peak resident memory' &&
        [ "$(tail -n +"$at" "$tmp/both.txt" | wc -l)" = 9 ]; then
        ok "bench --csv /dev/stdout > FILE: the report whole, then the CSV's header and 8 rows"
    else fail "bench --csv /dev/stdout > FILE" "the CSV's header at line '${at:-none}' of $(wc -l <"$tmp/both.txt")"; fi
fi

# ---- a bad output path fails at once, before measuring ----------------------
if [ -f "$MODEL" ]; then
    $RUN "$MODEL" -m bench --csv "$tmp/no/such/dir/x.csv" >"$tmp/bad.out" 2>"$tmp/bad.err"
    rc=$?
    if [ "$rc" -ne 1 ]; then fail "bench unwritable csv" "exit $rc, expected 1"
    elif ! grep -q "cannot write" "$tmp/bad.err"; then fail "bench unwritable csv" "$(head -n 1 "$tmp/bad.err")"
    elif [ -s "$tmp/bad.out" ]; then fail "bench unwritable csv" "measured and printed before failing"
    else ok "bench unwritable csv"; fi
fi
