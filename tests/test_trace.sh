#!/usr/bin/env bash
# The trace: the text trace, JSON Lines, the HTML explorer and step mode show
# the numbers the real forward pass computed. Attention is checked against
# export/reference.py (NumPy float64) over exactly the tokens of each run.
# Prints "ok NAME" / "FAIL NAME: why" / "skip NAME: why" lines.
. "$(dirname "$0")/lib.sh"
. tests/cached_build.sh
MODEL=tests/data/gqa.qkv      # GQA: 4 query heads share 2 kv heads
OTHER=tests/data/mqa.qkv      # same vocabulary, other weights: the --compare model
CHECK="$PY tests/trace_check.py"
PROMPT="the cat sat on the"

if [ ! -r "$MODEL" ] || [ ! -r "$OTHER" ]; then
    echo "skip trace: $MODEL or $OTHER is missing"
    exit 0
fi
have_python=1
if ! have_numpy; then
    have_python=0
    echo "skip trace checks in Python: $PY with numpy is missing"
fi

# ---- the row printer on the docs' worked example ---------------------------
if engine_build build/test_trace_format -Wextra -Wno-unused-parameter -Ibuild \
        tests/test_trace_format.c trace.c trace_text.c trace_json.c step_view.c heads.c stepper.c tokenizer.c output_file.c; then
    ./build/test_trace_format
else
    fail "build tests/test_trace_format.c" "compile error"
fi

# ---- JSON Lines against the reference --------------------------------------
n_prompt=$($RUN $MODEL -m tokenize -i "$PROMPT" | head -n 1 | wc -w)
$RUN $MODEL -t 0 -n 20 -i "$PROMPT" --trace-json "$tmp/t.jsonl" >"$tmp/out" 2>"$tmp/err"
if [ $? -ne 0 ]; then fail "--trace-json run" "$(head -n 1 "$tmp/err")"
elif [ $have_python = 1 ]; then $CHECK jsonl $MODEL "$tmp/t.jsonl" "$n_prompt"; fi

# the trained toy-grammar model too, when it is there, with a prompt longer
# than the 32 positions an observer is told of together. A traced prompt
# runs one position at a time (tracer_wants_prompt), so this run never
# observes a chunk: tests/test_engine.c checks a chunk's outputs. Its
# head_size of 24 makes the text's output line stop short, "(k of 24)",
# which the 8 numbers of $MODEL's heads never do in a file.
LONG_PROMPT="the cat sat on the mat . the dog ran to the big tree . the small bird sat on the stone . the cat ran to the garden . the dog sat"
if [ -r models/grammar.bin ] && [ $have_python = 1 ]; then
    n_long=$($RUN models/grammar.bin -m tokenize -i "$LONG_PROMPT" | head -n 1 | wc -w)
    $RUN models/grammar.bin -t 0 -n 48 -i "$LONG_PROMPT" --trace-json "$tmp/g.jsonl" >/dev/null 2>&1
    $CHECK jsonl models/grammar.bin "$tmp/g.jsonl" "$n_long" "trace-json models/grammar.bin, a $n_long-token prompt"
    $RUN models/grammar.bin -t 0 -n 12 -i "$PROMPT" --trace-prompt --layer 0 --head 0 --trace-out "$tmp/gh.txt" \
        --trace-json "$tmp/gh.jsonl" >/dev/null 2>&1
    $CHECK text-vs-json "$tmp/gh.txt" "$tmp/gh.jsonl" "text trace of models/grammar.bin"
    # the KV cache's float16 and int8 rows against NumPy's model of them
    for kv in f16 q8; do
        $RUN models/grammar.bin -t 0 -n 48 -i "$LONG_PROMPT" --kv-type $kv --trace-json "$tmp/kv.jsonl" >/dev/null 2>&1
        $CHECK kv-type models/grammar.bin "$tmp/kv.jsonl" $kv "trace-json --kv-type $kv, models/grammar.bin, layer 0"
    done
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
    # the method names the cutoffs that ran: -k alone is top-k (it was
    # reported as top-p), both are top-k+top-p
    $RUN $MODEL -t 0.9 -k 5 -p 1 -s 7 -n 12 -i "$PROMPT" --trace-json "$tmp/k.jsonl" >/dev/null 2>&1
    $RUN $MODEL -t 0.9 -k 5 -p 0.8 -s 7 -n 12 -i "$PROMPT" --trace-json "$tmp/kp.jsonl" >/dev/null 2>&1
    $PY - "$tmp/k.jsonl" "$tmp/kp.jsonl" <<'EOF'
import json, sys
k, kp = ([json.loads(l)["sample"] for l in open(p) if not json.loads(l)["forced"]] for p in sys.argv[1:3])
good = (k and kp and all(s["method"] == "top-k" and s["candidates"] == 5 and s["topk"] == 5 for s in k)
        and all(s["method"] == "top-k+top-p" and 1 <= s["candidates"] <= 5 for s in kp))
print("ok trace-json: -k alone is method top-k (5 candidates), -k with -p top-k+top-p" if good else
      "FAIL trace-json top-k method: %r %r" % (k[:1], kp[:1]))
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
# -t 0: the header, the logits' arrow and the last line all say greedy, none "sampled"
if grep -q "), greedy ==$" <<<"$last" && grep -q "<- greedy$" <<<"$last" && grep -q '^next ".*greedy (-t 0)' <<<"$last" \
    && ! grep -q "sampled" <<<"$last" && grep -q "^top 10 logits" <<<"$last"; then
    ok "each step lists the top 10 logits and how the token was chosen (greedy: said so, never \"sampled\")"
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

# ---- long token text: cut to the line ------------------------------------------
# tiny-tokenizer.bin with every piece from id 260 on 300 bytes long (and
# unlike the others), and id 259 22 a's, a newline and a b; the text trace
# in a file is 106 columns wide, each quoted piece cut to 24 characters with
# a …, an escape (\n) kept whole or left out whole
$PY - "$tmp/long-tok.bin" <<'PYEND'
import struct, sys
d = open("tests/data/tiny-tokenizer.bin", "rb").read()
out, at, i = [struct.pack("<i", 300)], 4, 0
while at < len(d):
    score, n = struct.unpack_from("<fi", d, at)
    piece = d[at + 8:at + 8 + n] if i < 259 else b"a" * 22 + b"\nb" if i == 259 else (b"x%d" % i) * 100
    out.append(struct.pack("<fi", score, len(piece[:300])) + piece[:300])
    at, i = at + 8 + n, i + 1
open(sys.argv[1], "wb").write(b"".join(out))
PYEND
$RUN tests/data/gqa.legacy.bin -z "$tmp/long-tok.bin" -i "hi" -t 3 -s 1 -n 24 --top 300 --trace-out "$tmp/long.txt" \
    >/dev/null 2>"$tmp/err"
widest=$(awk '{ gsub(/[\200-\277]/, ""); if (length($0) > w) w = length($0) } END { print w + 0 }' "$tmp/long.txt")
if [ -s "$tmp/long.txt" ] && [ "$widest" -le 106 ] && grep -q '"x260x260x260x260x260x26…"' "$tmp/long.txt" &&
    grep -q '"aaaaaaaaaaaaaaaaaaaaaa…"' "$tmp/long.txt"; then
    ok "pieces of 300 bytes cut to 24 characters, an escape whole or not at all: the text trace stays 106 columns wide"
else fail "long pieces in the text trace" "widest line $widest columns; $(head -n 1 "$tmp/err")"; fi

# ---- the HTML explorer -------------------------------------------------------
$RUN $MODEL -t 0 -n 16 -i "$PROMPT" --html "$tmp/e.html" --compare $OTHER >/dev/null 2>"$tmp/err"
if [ $? -ne 0 ]; then fail "--html --compare run" "$(head -n 1 "$tmp/err")"
elif [ $have_python = 1 ]; then $CHECK html "$tmp/e.html" $MODEL $OTHER; fi
# a run that ends by end of text: the page's data says so, and its count of
# generated tokens (all tokens, less the prompt's and the end) is the run's
if [ $have_python = 1 ] && [ -r models/stories.bin ]; then
    $RUN models/stories.bin -i "The end" -s 5 -n 0 --html "$tmp/eot.html" >/dev/null 2>"$tmp/eot.err"
    said=$(grep -o '([0-9]* generated, stopped by end of text' "$tmp/eot.err" | grep -o '[0-9]*')
    $PY - "$tmp/eot.html" "${said:-none}" <<'EOF' && ok "--html after the end of text: end_of_text true, $said generated as the run said" \
        || fail "--html end of text" "the run said '${said:-no end of text}' generated"
import json, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
data = json.loads(re.search(r'<script id="qkv-data" type="application/json">(.*?)</script>', page, re.S).group(1))
generated = len(data["tokens"]) - data["prompt_tokens"] - (1 if data["end_of_text"] else 0)
sys.exit(0 if data["end_of_text"] is True and str(generated) == sys.argv[2] else 1)
EOF
else skip "--html after the end of text" "numpy or models/stories.bin is missing"
fi

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
# a flag's value the model does not have is a usage error (exit 2, its line
# then the usage line), as --window's is
for args in "--layer 2:--layer 2: the model has 2 layers" "--head 4:--head 4: the model has 4 heads"; do
    $RUN $MODEL -n 4 --trace ${args%%:*} >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    if [ $rc -eq 2 ] && grep -qE "^error: ${args#*:}" "$tmp/err" && grep -q "^usage:" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 2 ]; then
        ok "${args%% *} beyond the model: a usage error"
    else fail "${args%% *} beyond the model" "exit $rc: $(head -n 1 "$tmp/err")"; fi
done
expect_error "--trace-out to a missing directory" "cannot write" $RUN $MODEL -n 4 --trace-out "$tmp/no/such"
expect_error "--compare with a missing checkpoint" "--compare" $RUN $MODEL -n 4 --html "$tmp/x.html" --compare "$tmp/none"
if [ $have_python = 1 ] && $CHECK small-vocab-model $MODEL "$tmp/small.qkv"; then
    expect_error "--compare with another vocabulary" "vocabulary of 280 tokens, the model has 300" \
        $RUN $MODEL -n 4 --html "$tmp/x.html" --compare "$tmp/small.qkv"
fi
# the same vocabulary size, another tokenizer: its side of the page was made
# from token ids that mean other text there
if [ $have_python = 1 ] && $CHECK swapped-pieces-model $MODEL "$tmp/swapped.qkv"; then
    expect_error "--compare with the same size of vocabulary, another tokenizer" \
        "--compare .*swapped.qkv: its tokenizer is not the model's \(token 298 is" \
        $RUN $MODEL -n 4 --html "$tmp/x.html" --compare "$tmp/swapped.qkv"
    cp $MODEL "$tmp/same.qkv"
    $RUN $MODEL -n 4 -t 0 --html "$tmp/x.html" --compare "$tmp/same.qkv" >/dev/null 2>&1 \
        && ok "--compare with the same tokenizer: accepted" || fail "--compare with the same tokenizer" "refused"
fi
# <s> and </s> spelt "\n<s>\n" (llama2.c's tokenizer.bin) against "<s>" (a
# GGUF conversion of it): the same ids, compared by id
if [ $have_python = 1 ] && $CHECK control-pieces-model $MODEL "$tmp/control.qkv"; then
    $RUN $MODEL -n 4 -t 0 --html "$tmp/x.html" --compare "$tmp/control.qkv" >/dev/null 2>"$tmp/err" \
        && ok "--compare with <s> and </s> spelt as llama2.c's: accepted" \
        || fail "--compare with llama2.c's <s> and </s>" "$(head -n 1 "$tmp/err")"
fi

# ---- narrowing the trace ----------------------------------------------------
$RUN $MODEL -t 0 -n 20 -i "$PROMPT" --trace --pos 7-8 --trace-json "$tmp/pos.jsonl" >/dev/null 2>"$tmp/pos.txt"
got=$(grep -o "^== pos [0-9]*" "$tmp/pos.txt" | tr '\n' ' '); jl=$(wc -l <"$tmp/pos.jsonl")
if [ "$got" = "== pos 7 == pos 8 " ] && [ "$jl" -eq 2 ]; then ok "--pos 7-8: only those positions, in the text and the JSON"
else fail "--pos" "text [$got], $jl JSON lines"; fi
$RUN $MODEL -t 0 -n 20 -i "$PROMPT" --trace --pos 9 >/dev/null 2>"$tmp/pos.txt"
if [ "$(grep -c "^== pos 9:" "$tmp/pos.txt")" -eq 1 ] && [ "$(grep -c "^== pos" "$tmp/pos.txt")" -eq 1 ]; then
    ok "--pos 9: one position"
else fail "--pos 9" "$(grep "^== pos" "$tmp/pos.txt" | head -n 3)"; fi
$RUN $MODEL -t 0 -n 20 -i "$PROMPT" --trace --trace-level summary >/dev/null 2>"$tmp/sum.txt"
steps=$(grep -c "^== pos" "$tmp/sum.txt"); heads=$(grep -c "^  L[0-9] H[0-9]" "$tmp/sum.txt")
if [ "$steps" -gt 0 ] && [ "$heads" -eq $((steps * 8)) ] && ! grep -q "q·k" "$tmp/sum.txt" \
    && [ "$(grep -c "^  next:" "$tmp/sum.txt")" -eq "$steps" ]; then
    ok "--trace-level summary: one line per head (8) and the next tokens, per step; no tables"
else fail "--trace-level summary" "$steps steps, $heads head lines"; fi
# at a temperature other than 1 the next tokens are listed at it (p@T, what
# the sampler drew from), the sampled one starred when it is among them
$RUN models/grammar.bin -t 1.7 -s 5 -n 14 -i "the cat" --trace --trace-level summary --top 40 >/dev/null 2>"$tmp/sumt.txt"
bad=$(awk '/^== pos/ { match($0, /-> next "[^"]*"/); want = "*" substr($0, RSTART + 8, RLENGTH - 8) }
           /^  next \(p@T, T = 1.7\):/ { lists++; list = $0; next }
           /^        / { list = list $0; next }
           /^sampled/ && list != "" { if (index(list, want) == 0) missing++; list = "" }
           END { print lists + 0, missing + 0 }' "$tmp/sumt.txt")
if [ "${bad% *}" -ge 10 ] && [ "${bad#* }" -eq 0 ]; then ok "-t 1.7: next tokens at p@T, the sampled one starred ($bad: lists, unstarred)"
else fail "next tokens at p@T" "lists and unstarred: $bad"; fi
# a temperature so small that a logit over it overflows is the limit T -> 0
# (the sampler goes greedy): p@T is 1 on the largest logit and 0 elsewhere,
# never the NaN of softmax(inf - inf)
$RUN models/grammar.bin -i "the cat" -t 1e-38 -n 4 --trace --top 3 --pos 3 --layer 0 --head 0 >"$tmp/tiny.txt" 2>&1
if ! grep -qi nan "$tmp/tiny.txt" && grep -qE '^ +1 .* 1\.0000  <- greedy$' "$tmp/tiny.txt" \
    && [ "$(grep -cE '^ +[23] .* 0\.0000$' "$tmp/tiny.txt")" = 2 ] && grep -q "T is taken as 0" "$tmp/tiny.txt"; then
    ok "-t 1e-38: p@T is 1 on the largest logit and 0 on the others (the limit T -> 0), no NaN"
else fail "-t 1e-38 trace" "$(grep -m2 -i 'nan\|<- ' "$tmp/tiny.txt" | tr '\n' ' ')"; fi
# display width: UTF-8 continuation bytes take no column
wide=$(LC_ALL=C sed 's/[\x80-\xbf]//g' "$tmp/p.txt" | LC_ALL=C awk 'length($0) > 106' | head -n 1)
if [ -z "$wide" ] && grep -q "^  key pos  .* 11$" "$tmp/p.txt"; then ok "a trace file keeps 106 columns: 12 keys a block"
else fail "trace file width" "[$wide]"; fi

# ---- step mode through a pipe: one letter per line ----------------------------
printf 'l\nj\n\nq\n' | $RUN models/grammar.bin -t 0 -n 12 -i "the cat sat" --step >/dev/null 2>"$tmp/step.txt"
tables=$(grep -o "^layer [0-9] head [0-9]" "$tmp/step.txt" | tr '\n' ',')
if [ "$tables" = "layer 0 head 0,layer 0 head 1,layer 1 head 1,layer 1 head 1," ] \
    && grep -q "^> L1 H1 " "$tmp/step.txt" && [ "$(grep -c "^  L[0-9] H[0-9]" "$tmp/step.txt")" -eq 44 ] \
    && grep -q "2 generated, stopped by quit" "$tmp/step.txt"; then
    ok "--step without --trace: every head on a line, the chosen head's table; l and j move it"
else fail "step view" "tables [$tables]; $(tail -n 1 "$tmp/step.txt")"; fi
printf 'a\nq\n' | $RUN models/grammar.bin -t 0 -n 12 -i "the cat" --step --layer 2 --head 3 --top 3 >/dev/null 2>"$tmp/step.txt"
first=$(grep -m 1 -o "^layer [0-9] head [0-9]" "$tmp/step.txt")
rows=$(sed -n '/^layer 2: every head.s weights/,/^  (pos/p' "$tmp/step.txt" | grep -cE "^  [ >] H[0-3] ")
# the grid's H3 row is the weights row of layer 2 head 3's table at the same step
table_w=$(grep -m 1 "^  weight " "$tmp/step.txt" | awk '{ for (i = 2; i <= NF; i++) printf "%s ", $i }')
grid_w=$(grep -m 1 "^  > H3 " "$tmp/step.txt" | awk '{ for (i = 3; i <= NF; i++) printf "%s ", $i }')
[ -n "$table_w" ] && [ "$table_w" = "$grid_w" ] || rows="$rows (H3 row [$grid_w] is not the table's [$table_w])"
if [ "$first" = "layer 2 head 3" ] && [ "$(grep -c "^layer [0-9] head [0-9]" "$tmp/step.txt")" -eq 1 ] \
    && [ "$rows" -eq 4 ] && grep -q "^  > H3 " "$tmp/step.txt" \
    && grep -q '^  next: "[^"]*" [0-9.]*, "[^"]*" [0-9.]*, "[^"]*" [0-9.]*$' "$tmp/step.txt"; then
    ok "--step --layer 2 --head 3 --top 3: that head's table; a: its layer's 4 heads side by side; three next tokens"
else fail "step --layer/--head/--top" "first table [$first], $(grep -c "^layer" "$tmp/step.txt") tables, $rows rows"; fi
# a line of 63 characters or more is one key, its first (the rest of the
# line was read as more keys, 64 bytes at a time: here a space, one more token)
printf 'l%70s\nq\n' "" | $RUN models/grammar.bin -t 0 -n 12 -i "the cat sat" --step >/dev/null 2>"$tmp/step.txt"
if [ "$(grep -c "^== pos" "$tmp/step.txt")" -eq 2 ] && grep -q "1 generated, stopped by quit" "$tmp/step.txt"; then
    ok "--step through a pipe: a long line is one key (l, then q: two views, one token)"
else fail "step mode long line" "$(grep -c "^== pos" "$tmp/step.txt") views; $(tail -n 1 "$tmp/step.txt")"; fi
# the text line joins the tokens' bytes before escaping: characters made of
# several byte tokens (llama2.c's <0xXX>, GPT-2's byte-level BPE) are shown
# as themselves, not as \xNN (README: \xNN only for bytes not UTF-8)
printf 'q\n' | $RUN models/stories.bin -i "The café ☕ 日本" -t 0 -n 20 --step 2>&1 >/dev/null | grep '^  text:' >"$tmp/utf8.txt"
printf 'q\n' | $RUN tests/data/gpt2-bpe.qkv -i "日本語のテキスト and café ☕ tabs" -t 0 -n 40 --step 2>&1 >/dev/null |
    grep '^  text:' >>"$tmp/utf8.txt"
if [ "$(cat "$tmp/utf8.txt")" = "$(printf '  text: The café ☕ 日本\n  text: 日本語のテキスト and café ☕ tabs')" ]; then
    ok "--step's text line: characters split across byte tokens shown whole (llama2.c BPE, GPT-2 BPE)"
else fail "step text line, multi-token characters" "$(cat "$tmp/utf8.txt")"; fi
# texts that end inside a character (a sampled lead byte): the text line's
# bytes end in a NUL for piece_escape (CI's AddressSanitizer pass saw it read
# past them); the split character's bytes shown as \xNN until it is whole
yes '' 2>/dev/null | head -n 40 | $RUN tests/data/gpt2-bpe.qkv -i "日本語" -t 1 -s 1 -n 40 --step >/dev/null 2>"$tmp/lead.txt"
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '^  text: ' "$tmp/lead.txt")" -eq "$(grep -c '^== pos' "$tmp/lead.txt")" ]; then
    ok "--step on GPT-2 byte tokens sampled at -t 1: every view's text line, exit 0"
else fail "step text line, sampled byte tokens" "exit $rc"; fi
# m: the chosen head's last queries as a matrix's rows, the causal mask's
# cells (a key after the query) marked ·, every other cell the weight the
# JSON trace holds for that query and key (rounded to 3 places); m again
# goes back to the table, l moves the head in the matrix too
printf 'm\nl\nm\nq\n' | $RUN models/grammar.bin -i "the cat sat on the mat and the dog" -t 0 -n 14 --step \
    --trace-json "$tmp/m.json" >/dev/null 2>"$tmp/m.txt"
check=$($PY - "$tmp/m.txt" "$tmp/m.json" <<'QKVEND'
import json, re, sys
views = open(sys.argv[1], encoding="utf-8").read().split("-- [Enter]")
steps = [json.loads(line) for line in open(sys.argv[2])]
def matrix(view, head):
    title = re.search(r"layer 0 head %d: the weights of the last (\d+) queries" % head, view)
    keys = [int(k) for k in re.search(r"^  key pos +([\d ]+)$", view, re.M).group(1).split()] if title else []
    rows = re.findall(r"^  [ >]q@(\d+) +(.*)$", view, re.M)
    return title and int(title.group(1)), keys, [(int(p), cells.split()) for p, cells in rows]
bad = []
for n_view, head in ((1, 0), (2, 1)):
    n, keys, rows = matrix(views[n_view], head)
    if n != 10 or keys != list(range(10)) or [p for p, _ in rows] != list(range(10)):
        bad.append("view %d: %s rows, keys %s" % (n_view, n, keys))
        continue
    for pos, cells in rows:
        w = steps[pos]["layers"][0]["heads"][head]["weights"]
        for key, cell in zip(keys, cells):
            want = "·" if key > pos else "%.3f" % w[key]
            if cell != want: bad.append("head %d q@%d key %d: %s, JSON %s" % (head, pos, key, cell, want))
if "the weights of the last" in views[3] or not re.search(r"^  weight ", views[3], re.M):
    bad.append("m did not go back to the table")
print("; ".join(bad[:4]) or "ok")
QKVEND
)
if [ "$check" = ok ]; then ok "--step m: the head's last 10 queries as rows, · above the diagonal (the causal mask), weights as the JSON trace's; l moves it; m back"
else fail "step mode matrix" "$check"; fi
# with a window: the matrix's latest keys past the sinks have no cache row
# (no key of them is marked), and every cache row printed marks a key (a
# table of keys past the sinks printed an empty one)
printf 'm\nm\nq\n' | $RUN models/grammar.bin -i "the cat sat on the mat and the dog saw a bird in the tree . the big dog ran" \
    -t 0 -n 30 --window 16 --sinks 2 --step >/dev/null 2>"$tmp/mw.txt"
if grep -q "the weights of the last 12 queries" "$tmp/mw.txt" && [ "$(grep -c '^  cache ' "$tmp/mw.txt")" -eq 2 ] &&
    ! grep -E '^  cache' "$tmp/mw.txt" | grep -qvE 'sink|window>'; then
    ok "--step m with a window: no cache row over the latest keys; each cache row printed marks its sinks"
else fail "step mode matrix with a window" "$(grep -E '^  cache|the weights of the last' "$tmp/mw.txt")"; fi
# a line that never ends (NUL bytes, no newline) is not keys: one error
# line, exit 1, the --html page still written whole (it was read for ever)
head -c 100000 /dev/zero | $RUN models/grammar.bin -t 0 -n 12 -i "the cat" --step --html "$tmp/zero.html" >/dev/null 2>"$tmp/step.txt"
rc=$?
if [ $rc -eq 1 ] && [ "$(grep -c '^error' "$tmp/step.txt")" -eq 1 ] && grep -q "^error: stdin: a line of more than 4096 bytes" "$tmp/step.txt" &&
    grep -q '</html>' "$tmp/zero.html"; then
    ok "--step with stdin a stream without newlines: one error line, exit 1, the page whole"
else fail "step mode stream without newlines" "rc $rc: $(grep '^error' "$tmp/step.txt")"; fi
timeout 30 $RUN models/grammar.bin -t 0 -n 12 -i "the cat" --step </dev/zero >/dev/null 2>&1
rc=$?
if [ $rc -eq 1 ]; then ok "--step </dev/zero stops (exit 1), not read for ever"; else fail "step mode /dev/zero" "rc $rc (124: a hang)"; fi
# an empty prompt: the first view's text line is empty (it printed whatever
# its buffer held: the text was never written when every token was BOS)
printf 'q\n' | $RUN models/grammar.bin -i "" --step -n 3 -s 1 >/dev/null 2>"$tmp/step.txt"
if [ "$(grep '^  text:' "$tmp/step.txt")" = "  text: " ]; then ok "--step with an empty prompt: an empty text line"
else fail "step text line, empty prompt" "$(grep '^  text:' "$tmp/step.txt" | od -c | head -n 2)"; fi
# GPT-2 starts an empty prompt from <|endoftext|>, which generate does not
# print: nor does the text line (it showed "<|endoftext|>")
printf 'q\n' | $RUN tests/data/gpt2-bpe.qkv -i "" --step -n 3 -s 1 >/dev/null 2>"$tmp/step.txt"
if [ "$(grep '^  text:' "$tmp/step.txt")" = "  text: " ]; then ok "--step, GPT-2, an empty prompt: its start token is not in the text line"
else fail "step text line, GPT-2's start token" "$(grep '^  text:' "$tmp/step.txt")"; fi

# the step that ends the text is shown too (it was never paused on), and each
# view carries the text so far
yes '' 2>/dev/null | head -n 300 | $RUN models/stories.bin -i "Once upon a time" -t 0 -n 0 --step >/dev/null 2>"$tmp/end.txt"
last=$(grep "^== pos" "$tmp/end.txt" | tail -n 1)
if grep -q -- '-> next "<s>" (id 1)' <<<"$last" && grep -q "stopped by end of text" "$tmp/end.txt" \
    && [ "$(grep -c "^  text: " "$tmp/end.txt")" -eq "$(grep -c "^== pos" "$tmp/end.txt")" ] \
    && grep -q "^  text: Once upon a time$" "$tmp/end.txt" \
    && [ "$(grep -c "^  (the last step" "$tmp/end.txt")" -eq 1 ] \
    && [ "$(grep -A2 "^$last" "$tmp/end.txt" | tail -n 1)" = "  (the last step: its next token ends the text)" ]; then
    ok "step mode pauses on the step that ends the text, and says it is the last; every view shows the text so far"
else fail "step mode at end of text" "last [$last]; $(grep "^  (the last step" "$tmp/end.txt"); $(tail -n 1 "$tmp/end.txt")"; fi
yes '' 2>/dev/null | head -n 30 | $RUN models/grammar.bin -i "the cat" -t 0 -n 8 --step >/dev/null 2>"$tmp/last.txt"
if [ "$(grep -c "^  (the last step" "$tmp/last.txt")" -eq 1 ] &&
    [ "$(grep -A2 "^== pos 7:" "$tmp/last.txt" | tail -n 1)" = "  (the last step: position 7 is the run's last, -n or the context)" ]; then
    ok "step mode at -n's last position says so, once"
else fail "step mode's last position" "$(grep "^  (the last step" "$tmp/last.txt")"; fi
# Three keys half a second apart: at least the last second is waiting (the
# first half overlaps the program's start), and left out of the rate
# (counted in, three tokens over it would be under 4 tok/s).
{ sleep 0.5; echo; sleep 0.5; echo; sleep 0.5; echo q; } | $RUN models/grammar.bin -t 0 -n 30 -i "the" --step >/dev/null 2>"$tmp/step.txt"
speed=$(tail -n 1 "$tmp/step.txt")
if grep -qE "^achieved tok/s: [0-9]{2,}.*3 generated.*; computing only, (0\.9|[1-9]\.[0-9]) s waiting for keys left out" <<<"$speed"; then
    ok "step mode's speed line counts computing time only"
else fail "step speed" "$speed"; fi

# ---- step mode and colour on a pseudo-terminal --------------------------------
if [ $have_python = 1 ]; then
    $CHECK step $RUN $MODEL -t 0 -n 12 -i "the" --step
    $CHECK step-screen $RUN models/grammar.bin -t 0 -n 12 -i "the cat sat on the mat and the" --step \
        --trace-out "$tmp/step-file.txt"
    # 12 heads (grammar: exactly half the rows), GQA, a short prompt (one block)
    $CHECK step-rows $RUN models/grammar.bin -t 0 -n 30 -i "the cat sat on the mat and the dog" --step
    $CHECK step-rows $RUN tests/data/gqa.qkv -t 0 -n 30 -i "the cat sat on the mat" --step
    $CHECK step-rows $RUN models/stories.bin -t 0 -n 30 -i "Once" --step
    $CHECK step-fit "$tmp/step-fit.txt" $RUN models/stories.bin -t 0 -n 40 -i "Once upon a time" --step \
        --trace-out "$tmp/step-fit.txt"
    # narrow terminals: how the token was chosen (greedy's limit T -> 0 took 82
    # columns; top-k and top-p's 73), the tables' titles, the prompt, the keys'
    # help; and a GPT-2 file's CJK text (two columns a character)
    $CHECK step-width 40 $RUN models/stories.bin -t 1e-45 -n 30 -i "Once" --step
    $CHECK step-width 60 $RUN models/grammar.bin -t 0.9 -k 40 -p 0.95 -s 1 -n 30 -i "the" --step
    for cols in 40 80; do
        $CHECK step-width $cols $RUN tests/data/gpt2-bpe.qkv -s 1 -n 60 --step \
            -i " 日本語のテキスト 日本語のテキスト 日本語のテキスト 日本語のテキスト 日本語のテキスト 日本語のテキスト"
    done
    $CHECK colour $RUN $MODEL -t 0 -n 4 -i "the" --trace --layer 0 --head 0
fi

# ---- the text trace on a narrow terminal: every line fits 40 and 60 columns,
# the top logits' table too (it was 52-70 columns wide at any width) --------
if command -v script >/dev/null; then
    wide=""
    for w in 40 60; do
        COLUMNS=$w NO_COLOR=1 script -qc "$RUN models/grammar.bin -i 'the cat sat on the' -t 0.8 -s 2 -n 12 --trace \
            --trace-prompt --layer 0 --head 0" /dev/null </dev/null >"$tmp/narrow" 2>&1
        tables=$(grep -c '^top [0-9]* logits' "$tmp/narrow")
        long=$(tr -d '\r' <"$tmp/narrow" | grep -v '^achieved' | LC_ALL=C sed 's/[\x80-\xbf]//g' |
            LC_ALL=C awk -v w=$w 'length($0) > w' | head -n 1)
        [ "$tables" -ge 10 ] && [ -z "$long" ] || wide="$wide $w: $tables tables, [$long]"
    done
    if [ -z "$wide" ]; then ok "the text trace on a terminal of 40 or 60 columns: every line fits, the top logits' table too"
    else fail "the text trace on a narrow terminal" "$wide"; fi
else skip "the text trace on a narrow terminal" "no script(1) to make a terminal"; fi

# ---- step mode in a real terminal (tmux): one key, no Enter; the terminal
# comes back as it was, after q and after Ctrl-C; the trace fits 80 columns --
if ! command -v tmux >/dev/null; then
    echo "skip step mode in tmux: tmux is missing (apt-get install tmux)"
else
    n_session=0
    tm() { tmux -L "qkv-test-$$-$n_session" "$@"; }
    # wait_for PATTERN: up to 10 s for the pane (joined lines, all history) to match
    wait_for() {
        for _ in $(seq 1 100); do
            tm capture-pane -p -J -S - -t t >"$tmp/pane" 2>/dev/null
            grep -qE -- "$1" "$tmp/pane" && return 0
            sleep 0.1
        done
        return 1
    }
    # start COMMAND [ROWS]: in a new 80x50 (80xROWS) terminal; then whether the terminal is
    # canonical again. The shell ignores SIGINT, so Ctrl-C stops only ./run.
    start() {
        tm kill-server 2>/dev/null
        n_session=$((n_session + 1))
        tm new-session -d -s t -x 80 -y "${2:-50}" \
            "trap '' INT; cd '$PWD' && $1; echo; stty -a | grep -o -- '-\?icanon'; echo DONE; sleep 30"
    }
    start "$RUN models/grammar.bin -t 0 -n 12 -i 'the cat sat' --step"
    if wait_for "\[q\] quit" && tm send-keys -t t l && wait_for "^layer 0 head 1" && tm send-keys -t t Down \
        && wait_for "^layer 1 head 1" && tm send-keys -t t q && wait_for "^DONE"; then
        if tr '\n' ' ' <"$tmp/pane" | grep -qE "stopped by +quit" && grep -qx "icanon" "$tmp/pane"; then
            ok "step mode on a terminal: l and Down act at once, q quits, the terminal is restored"
        else fail "step mode in tmux" "$(grep -E "achieved|icanon" "$tmp/pane")"; fi
    else fail "step mode in tmux" "$(tail -n 5 "$tmp/pane")"; fi
    # a key of several UTF-8 bytes is one key not of step mode: é and 日 gave
    # one "not a key" line per byte (five), then x one more
    start "$RUN models/grammar.bin -t 0 -n 12 -i 'the cat sat' --step"
    if wait_for "\[q\] quit" && tm send-keys -t t 'é' && tm send-keys -t t '日' && tm send-keys -t t x &&
        sleep 0.3 && tm send-keys -t t q && wait_for "^DONE"; then
        if [ "$(grep -c 'not a key of step mode' "$tmp/pane")" = 3 ]; then
            ok "step mode: a key of several UTF-8 bytes (é, 日) is one key, not one a byte"
        else fail "step mode, UTF-8 keys" "$(grep -c 'not a key of step mode' "$tmp/pane") 'not a key' lines for 3 keys"; fi
    else fail "step mode UTF-8 keys in tmux" "$(tail -n 3 "$tmp/pane")"; fi
    # Ctrl-L draws the view again (after ?'s list pushed it up)
    start "$RUN models/grammar.bin -t 0 -n 12 -i 'the cat' --step" 24
    if wait_for "\[q\] quit" && tm send-keys -t t '?' && wait_for "Ctrl-L" && tm send-keys -t t C-l &&
        sleep 0.5 && tm capture-pane -p -t t >"$tmp/screen" && tm send-keys -t t q && wait_for "^DONE"; then
        if [ "$(grep -c '^== pos 2:' "$tmp/pane")" -eq 2 ] && grep -v '^$' "$tmp/screen" | tail -n 2 | head -n 1 | grep -q '^next .*greedy'; then
            ok "step mode: Ctrl-L draws the view again, after the keys' list"
        else fail "step mode Ctrl-L" "$(grep -c '^== pos 2:' "$tmp/pane") views; $(grep -v '^$' "$tmp/screen" | tail -n 2)"; fi
    else fail "step mode Ctrl-L in tmux" "$(tail -n 3 "$tmp/pane")"; fi
    # stderr piped (to cat, as to tee) while the keys come from the terminal:
    # the view is the terminal's width (it was drawn 106 wide); the speed line
    # through a pipe stays one line, for scripts
    start "$RUN models/stories.bin -t 0 -n 30 -i 'Once upon a time, there was a little girl named Lily.' --step 2>&1 | cat"
    if wait_for "\[q\] quit" && tm send-keys -t t q && wait_for "^DONE"; then
        wide=$(grep -v "^achieved tok/s" "$tmp/pane" | LC_ALL=C sed 's/[\x80-\xbf]//g' | LC_ALL=C awk 'length($0) > 80' | head -n 1)
        if [ -z "$wide" ] && grep -q "^  weight " "$tmp/pane"; then
            ok "step mode with stderr piped, keys from the terminal: the view fits the terminal's 80 columns"
        else fail "step mode piped at 80 columns" "[$wide]"; fi
    else fail "step mode piped in tmux" "$(tail -n 3 "$tmp/pane")"; fi
    # a next line cut short to fit 80 x 24 still ends with the sampled token
    # (its * was cut off with the rest); every * is the token sampled
    start "yes '' | head -c 80 | $RUN models/grammar.bin -i 'the cat sat on the' -t 0.9 -s 5 -n 200 --window 16 --sinks 4 --step >/dev/null" 24
    if wait_for "^DONE"; then
        stars=$($PY -c '
import re, sys
lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().splitlines()
cut = wrong = 0
for i, line in enumerate(lines):
    if not line.startswith("  next (p@T"):
        continue
    listed = line
    for after in lines[i + 1:]:
        if after.startswith("sampled "):
            chosen = re.match(r"sampled (\".*?\")", after).group(1)
            star = re.search(r"\*(\".*?\")", listed)
            cut += "… *" in listed
            wrong += bool(star) and star.group(1) != chosen
            break
        listed += after
print(cut, wrong)' "$tmp/pane")
        if [ "${stars%% *}" -gt 0 ] && [ "${stars##* }" -eq 0 ]; then
            ok "step mode's one-line next tokens: cut short, they end with the sampled token (${stars%% *} views); each * is the sampled one"
        else fail "step mode next line, sampled token" "[$stars]: cut lines ending with it, lines whose * is another token"; fi
    else fail "step mode next line in tmux" "$(tail -n 3 "$tmp/pane")"; fi
    start "$RUN models/grammar.bin -t 0 -n 12 -i 'the cat sat' --step"
    if wait_for "\[q\] quit" && tm send-keys -t t C-c && wait_for "^DONE" && grep -qx "icanon" "$tmp/pane"; then
        ok "step mode: Ctrl-C restores the terminal"
    else fail "step mode Ctrl-C" "$(grep -v "^$" "$tmp/pane" | tail -n 3)"; fi
    start "$RUN models/grammar.bin -t 0 -n 30 -i 'the cat sat on the' --trace --layer 1 --head 2"
    if wait_for "^DONE"; then
        wide=$(LC_ALL=C sed 's/[\x80-\xbf]//g' "$tmp/pane" | LC_ALL=C awk 'length($0) > 80' | head -n 1)
        if [ -z "$wide" ] && grep -q "^  key pos  .*  7$" "$tmp/pane" && grep -q "^  key pos  .*  15$" "$tmp/pane" &&
            grep -q "^achieved tok/s" "$tmp/pane"; then
            ok "the trace on an 80-column terminal: 8 keys a block, no line over 80 (the speed line wrapped between words)"
        else fail "trace at 80 columns" "[$wide]"; fi
    else fail "trace in tmux" "$(tail -n 3 "$tmp/pane")"; fi
    start "$RUN models/grammar.bin -t 0 -n 30 -i 'the cat sat on the' --trace"
    if wait_for "^DONE" && grep -q "^  L2 H3 " "$tmp/pane" && ! grep -q "q·k" "$tmp/pane"; then
        ok "--trace on a terminal defaults to the summary (one line a head)"
    else fail "trace default on a terminal" "$(tail -n 3 "$tmp/pane")"; fi
    tm kill-server 2>/dev/null
fi

# ---- the README's trace samples come from the shipped model -------------------
if [ $have_python = 1 ] && [ -r models/grammar.bin ]; then $CHECK readme README.md
else echo "skip README trace samples: python3 or models/grammar.bin is missing"; fi
