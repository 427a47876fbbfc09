#!/usr/bin/env bash
# The trace: the text trace, JSON Lines, the HTML explorer and step mode show
# the numbers the real forward pass computed. Attention is checked against
# export/reference.py (NumPy float64) over exactly the tokens of each run.
# Prints "ok NAME" / "FAIL NAME: why" / "skip NAME: why" lines.
set -u
cd "$(dirname "$0")/.."
RUN=./run
MODEL=tests/data/gqa.qkv      # GQA: 4 query heads share 2 kv heads
OTHER=tests/data/mqa.qkv      # same vocabulary, other weights: the --compare model
PY=/usr/bin/python3
CHECK="$PY tests/trace_check.py"
PROMPT="the cat sat on the"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; }

if [ ! -r "$MODEL" ] || [ ! -r "$OTHER" ]; then
    echo "skip trace: $MODEL or $OTHER is missing"
    exit 0
fi
have_python=1
if ! $PY -c 'import numpy' 2>/dev/null; then
    have_python=0
    echo "skip trace checks in Python: $PY with numpy is missing"
fi

# ---- the row printer on the docs' worked example ---------------------------
if ${CC:-cc} -std=c11 -D_POSIX_C_SOURCE=200809L -fopenmp -Wall -Wextra -Wno-unused-parameter ${TEST_CFLAGS:--O2} \
        -Ibuild -o build/test_trace_format tests/test_trace_format.c trace.c tokenizer.c -lm; then
    ./build/test_trace_format
else
    fail "build tests/test_trace_format.c" "compile error"
fi

# ---- JSON Lines against the reference --------------------------------------
n_prompt=$($RUN $MODEL -m tokenize -i "$PROMPT" | head -n 1 | wc -w)
$RUN $MODEL -t 0 -n 20 -i "$PROMPT" --trace-json "$tmp/t.jsonl" >"$tmp/out" 2>"$tmp/err"
if [ $? -ne 0 ]; then fail "--trace-json run" "$(head -n 1 "$tmp/err")"
elif [ $have_python = 1 ]; then $CHECK jsonl $MODEL "$tmp/t.jsonl" "$n_prompt"; fi

# the trained toy-grammar model too, when it is there
if [ -r models/grammar.bin ] && [ $have_python = 1 ]; then
    $RUN models/grammar.bin -t 0 -n 16 -i "$PROMPT" --trace-json "$tmp/g.jsonl" >/dev/null 2>&1
    $CHECK jsonl models/grammar.bin "$tmp/g.jsonl" "$($RUN models/grammar.bin -m tokenize -i "$PROMPT" | head -n 1 | wc -w)" \
        "trace-json models/grammar.bin"
fi

# sampling: the sample object says how each token was chosen
$RUN $MODEL -t 0.9 -p 0.8 -s 7 -n 20 -i "$PROMPT" --trace-json "$tmp/s.jsonl" >/dev/null 2>&1
if [ $have_python = 1 ]; then
    $PY - "$tmp/s.jsonl" <<'EOF'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
gen = [s for s in steps if not s["forced"]]
good = gen and all(s["sample"]["method"] == "top-p" and 1 <= s["sample"]["candidates"] <= 300
                   and 0 <= s["sample"]["coin"] < 1 and 0 < s["sample"]["probability"] <= 1 for s in gen)
print("ok trace-json: top-p steps record candidates, coin and probability" if good else
      "FAIL trace-json sampling: %r" % [s["sample"] for s in gen[:2]])
EOF
fi

# ---- the text trace ---------------------------------------------------------
plain=$($RUN $MODEL -t 0 -n 20 -i "$PROMPT" 2>/dev/null)
traced=$($RUN $MODEL -t 0 -n 20 -i "$PROMPT" --trace --trace-json "$tmp/j.jsonl" --html "$tmp/j.html" 2>"$tmp/trace.txt")
if [ -n "$plain" ] && [ "$plain" = "$traced" ] && grep -q "^== pos" "$tmp/trace.txt"; then
    ok "stdout is the same text with the trace on; the trace goes to stderr"
else fail "clean stdout" "[$plain] vs [$traced]"; fi

$RUN $MODEL -t 0 -n 20 -i "$PROMPT" --trace-prompt --layer 0 --head 0 --trace-out "$tmp/p.txt" \
    --trace-json "$tmp/p.jsonl" >/dev/null 2>"$tmp/err"
blocks=$(grep -c "^== pos" "$tmp/p.txt")
headers=$(grep -c "^layer" "$tmp/p.txt")
other=$(grep "^layer" "$tmp/p.txt" | grep -vc "^layer 0 head 0 ")
steps=$(wc -l <"$tmp/p.jsonl")
if [ "$blocks" -eq "$steps" ] && [ "$headers" -eq "$steps" ] && [ "$other" -eq 0 ]; then
    ok "--trace-prompt --layer 0 --head 0: one block per position, only that head"
else fail "--layer/--head" "$blocks blocks, $headers heads ($other others) for $steps steps"; fi
# row i of the prompt shows the later prompt keys as masked: -inf, never scored
first=$(awk '/^== pos 0:/{on=1} /^== pos 1:/{exit} on' "$tmp/p.txt")
masked=$(grep "^  mask" <<<"$first" | grep -o -- "-inf" | wc -l)
if [ "$masked" -eq $((n_prompt - 1)) ] && grep -q "^  weight  *1.000\( *masked\)\{$((n_prompt - 1))\}$" <<<"$first" \
    && grep -q "^  q·k  *-\?[0-9.]*\( *·\)\{$((n_prompt - 1))\}$" <<<"$first"; then
    ok "prompt row 0: the $((n_prompt - 1)) later prompt keys are masked (-inf, weight masked, not scored)"
else fail "prompt mask" "$masked masked columns, want $((n_prompt - 1))"; fi
last=$(awk -v p="$((steps - 1))" '$0 ~ "^== pos "p":"{on=1} on' "$tmp/p.txt")
if ! grep -q "masked" <<<"$(grep '^  weight' <<<"$last")" && grep -q "later positions do not exist yet" <<<"$last"; then
    ok "decode rows: every cached key visible, the note says the future does not exist yet"
else fail "decode mask" "a decode row shows masked keys"; fi
if grep -q "<- sampled" <<<"$last" && grep -q "greedy" <<<"$last" && grep -q "^top 10 logits" <<<"$last"; then
    ok "each step lists the top 10 logits and how the token was chosen"
else fail "logits and sampling" "missing in the last block"; fi
if [ $have_python = 1 ]; then $CHECK text-vs-json "$tmp/p.txt" "$tmp/p.jsonl"; fi
$RUN $MODEL -t 0 -n 8 -i "$PROMPT" --trace --top 3 >/dev/null 2>"$tmp/top3.txt"
if grep -q "^top 3 logits" "$tmp/top3.txt" && ! grep -q "^ *4 " <<<"$(grep -A5 '^top 3' "$tmp/top3.txt" | head -n 6)"; then
    ok "--top 3 shows three logits"
else fail "--top" "$(grep -A4 '^top' "$tmp/top3.txt" | head -n 5)"; fi
if ! grep -q $'\033' "$tmp/trace.txt"; then ok "no colour when the trace is not a terminal"
else fail "colour" "escape codes in a redirected trace"; fi

# ---- hostile token text -----------------------------------------------------
if [ $have_python = 1 ]; then
    $CHECK weird-model $MODEL "$tmp/weird.qkv"
    $RUN "$tmp/weird.qkv" -t 0 -n 24 -i "the" --trace --trace-json "$tmp/w.jsonl" --html "$tmp/w.html" \
        >"$tmp/w.out" 2>"$tmp/w.txt"
    $CHECK escapes "$tmp/weird.qkv" "$tmp/w.jsonl" "$tmp/w.txt" "$tmp/w.html" "$tmp/w.out"
fi

# ---- the HTML explorer -------------------------------------------------------
$RUN $MODEL -t 0 -n 16 -i "$PROMPT" --html "$tmp/e.html" --compare $OTHER >/dev/null 2>"$tmp/err"
if [ $? -ne 0 ]; then fail "--html --compare run" "$(head -n 1 "$tmp/err")"
elif [ $have_python = 1 ]; then $CHECK html "$tmp/e.html" $MODEL $OTHER; fi

# ---- errors: one line, exit 1 ---------------------------------------------
expect_error() {
    local name=$1 pattern=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$? lines
    lines=$(wc -l <"$tmp/err")
    if [ $rc -eq 1 ] && [ "$lines" -eq 1 ] && grep -qE "^error: .*$pattern" "$tmp/err" && [ ! -s "$tmp/out" ]; then
        ok "$name"
    else fail "$name" "exit $rc, $lines lines: $(head -n 1 "$tmp/err")"; fi
}
expect_error "--step without a terminal on stdin fails clearly" "--step needs a terminal" \
    $RUN $MODEL -t 0 -n 8 --step
expect_error "--layer beyond the model" "--layer 2: the model has 2 layers" $RUN $MODEL -n 4 --trace --layer 2
expect_error "--head beyond the model" "--head 4: the model has 4 heads" $RUN $MODEL -n 4 --trace --head 4
expect_error "--trace-out to a missing directory" "cannot open" $RUN $MODEL -n 4 --trace-out "$tmp/no/such"
expect_error "--compare with a missing checkpoint" "--compare" $RUN $MODEL -n 4 --html "$tmp/x.html" --compare "$tmp/none"
if [ $have_python = 1 ] && $CHECK small-vocab-model $MODEL "$tmp/small.qkv"; then
    expect_error "--compare with another vocabulary" "vocabulary of 280 tokens, the model has 300" \
        $RUN $MODEL -n 4 --html "$tmp/x.html" --compare "$tmp/small.qkv"
fi

# ---- step mode and colour on a pseudo-terminal --------------------------------
if [ $have_python = 1 ]; then
    $CHECK step $RUN $MODEL -t 0 -n 12 -i "the" --step
    $CHECK colour $RUN $MODEL -t 0 -n 4 -i "the" --trace --layer 0 --head 0
fi
