#!/usr/bin/env bash
# GGUF files read as they are: hostile ones refused with one error line (exit
# 1, never a crash or hang); small valid ones of every shape and encoding
# load and generate; llama2.c checkpoints converted by
# ../shared/tools/llamacpp/gguf_from_llama2c.py give the same text and logits
# as the originals, and their F16/Q8_0/Q4_0 tensors the same logits, bit for
# bit, as qkv's own -m quantize of the original (the blocks are the same).
# Prints "ok NAME" / "FAIL NAME: why" / "skip NAME: why" lines.
. "$(dirname "$0")/lib.sh"
. tests/cached_build.sh
TOK=tests/data/tiny-tokenizer.bin
CONVERT=../shared/tools/llamacpp/gguf_from_llama2c.py
within_build

if [ ! -x "$PY" ]; then
    skip "GGUF files" "$PY is missing"
    exit 0
fi

# ---- hostile files --------------------------------------------------------
# tests/gguf_files.py writes each with a word its error must contain.
$PY tests/gguf_files.py hostile "$tmp/bad"
n=0 bad=0
while IFS=$'\t' read -r name word; do
    n=$((n + 1))
    "${within[@]}" 10 $RUN "$tmp/bad/$name.gguf" -m info >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    read_stderr "$tmp/err"
    if [ $rc -ne 1 ] || [ "$err_lines" -ne 1 ] || ! matches "$err_first" "$word" || [ -s "$tmp/out" ]; then
        fail "hostile GGUF $name" "exit $rc, $err_lines stderr lines, expected one with /$word/: $(head -c 200 "$tmp/err")"
        bad=$((bad + 1))
    fi
done <"$tmp/bad/cases.txt"
[ "$n" -gt 100 ] && [ $bad -eq 0 ] && ok "$n hostile GGUF files (truncated at every section and item, lying counts, huge strings and arrays, unknown types, wrong architecture, misaligned or out-of-bounds tensors...) each refused with its one error line, exit 1"
[ "$n" -le 100 ] && fail "hostile GGUF files" "only $n cases written"

# ---- valid small files ----------------------------------------------------
$PY tests/gguf_files.py valid "$tmp/good"
for f in "$tmp"/good/*.gguf; do
    name=$(basename "$f" .gguf)
    if ! $RUN "$f" -m info >"$tmp/info" 2>"$tmp/err"; then
        fail "GGUF $name loads" "$(head -c 200 "$tmp/err")"
    elif [ "$name" = no-tokenizer ]; then
        if $RUN "$f" -n 4 >/dev/null 2>"$tmp/err" || ! grep -q "no tokenizer inside" "$tmp/err"; then
            fail "GGUF without a tokenizer" "expected 'no tokenizer inside': $(head -c 200 "$tmp/err")"
        elif ! grep -q "^tokenizer  *none in the file" "$tmp/info"; then fail "GGUF without a tokenizer" "-m info does not say so"
        else ok "GGUF without a tokenizer loads (-m info) and asks for -z to generate"; fi
    elif ! $RUN "$f" -t 0 -n 12 -i "the cat sat" >"$tmp/text" 2>"$tmp/err"; then
        fail "GGUF $name generates" "$(head -c 200 "$tmp/err")"
    elif ! grep -q "^the cat sat" "$tmp/text"; then
        fail "GGUF $name generates" "the text does not start with the prompt: $(head -c 100 "$tmp/text")"
    elif [ "$name" = wide-keys ] && ! grep -q "rope\.freq_base 10000 " "$tmp/info"; then
        # without llama.rope.freq_base, RoPE's base is llama.cpp's default, 10000
        fail "GGUF wide-keys: no rope.freq_base is llama.cpp's 10000" "$(grep -o 'rope\.freq_base [^ ]*' "$tmp/info")"
    elif [ "$name" = rope-base-500000 ] && ! grep -q "rope\.freq_base 500000 " "$tmp/info"; then
        # every other case states 10000, the default too: this one tells a read key from the default
        fail "GGUF rope-base-500000: llama.rope.freq_base read" "$(grep -o 'rope\.freq_base [^ ]*' "$tmp/info")"
    else
        ok "GGUF $name loads and generates ($(grep '^tensor types' "$tmp/info" | sed 's/  */ /g'))"
    fi
done

# mixed-types.gguf (gguf_files.py): one layer's 7 matrices, the embedding and
# the classifier of Q8_0, but token_embd F16, attn_q and output Q4_0 and
# ffn_down F32: -m info counts them so (it said "q8_0 matrices, 1 of 6 kept
# in float16: rows not whole q8_0 blocks", none of it true)
if $RUN "$tmp/good/mixed-types.gguf" -m info 2>/dev/null |
    grep -qF "(matrices: 1 float32, 1 float16, 5 q8_0, 2 q4_0; float32 norms)"; then
    ok "GGUF mixed-types: -m info counts 1 float32, 1 float16, 5 q8_0 and 2 q4_0 matrices"
else fail "GGUF mixed-types: -m info's counts" "$($RUN "$tmp/good/mixed-types.gguf" -m info 2>&1 | grep '^weight bytes')"; fi

# traced, explored and benchmarked like any checkpoint
g=$tmp/good/tiny-q4_0-2layers.gguf
if $RUN "$g" -t 0 -n 8 -i "the cat" --trace --layer 1 --head 0 >"$tmp/trace" 2>&1 && grep -q "^layer 1 head 0" "$tmp/trace" &&
    $RUN "$g" -t 0 -n 8 --html "$tmp/x.html" --trace-json "$tmp/x.jsonl" >/dev/null 2>&1 && [ -s "$tmp/x.html" ] && [ -s "$tmp/x.jsonl" ] &&
    $RUN "$g" -m bench --ctx 8 --repeats 1 2>/dev/null | grep -q "^summary"
then ok "a GGUF traces (--trace, --trace-json, --html) and benchmarks (-m bench)"
else fail "GGUF trace and bench" "$(tail -n 3 "$tmp/trace")"; fi

# compare_logits A B TOKENS: the largest |logit difference|, position by position
if ! engine_build build/compare_logits tests/compare_logits.c; then
    fail "build tests/compare_logits.c" "compiler error"
    exit 0
fi
TOKENS=1,283,290,292,282,3,100,200,299,17,45,260,2,0,150,271,5,9,33,281
max_diff() { build/compare_logits "$1" "$2" "$TOKENS" 2>&1 | awk '/^max_abs_diff/ {print $2; next} {print "error: " $0}'; }
# expect_logits NAME A B LIMIT: logits of A and B differ by at most LIMIT
expect_logits() {
    local d
    d=$(max_diff "$2" "$3")
    if awk -v d="$d" -v lim="$4" 'BEGIN { exit !(d ~ /^[0-9.e+-]+$/ && d + 0 <= lim + 0) }'; then ok "$1 (max difference $d)"
    else fail "$1" "max logit difference '$d', limit $4"; fi
}

# heads wider than the model (2 heads of 40: 80 columns into wo, dim and
# hidden 64) and a head size other than dim / heads: -m quantize wrote past
# its row buffer (an abort, on every --dtype), and the GGUF it wrote did not
# give the head size (qkv refused to load it). Now every dtype converts,
# both files load, and float32 gives the source's logits exactly.
if $PY -c 'import numpy' 2>/dev/null; then
    $PY - "$tmp/wide.qkv" <<'EOF'
import sys
sys.path.insert(0, "export")
import qkvfile, make_test_models as mtm
tok = mtm.tiny_tokenizer()
c = qkvfile.default_config(64, 64, 1, 2, 2, len(tok.pieces), 32, head_size=40)
qkvfile.write_qkv(sys.argv[1], c, mtm.random_tensors(c, 7, widths=32), tok)
EOF
    failed=""
    for d in f32 f16 q8 q4; do
        for ext in qkv gguf; do
            $RUN "$tmp/wide.qkv" -m quantize -o "$tmp/wide-$d.$ext" --dtype $d >/dev/null 2>&1 &&
                $RUN "$tmp/wide-$d.$ext" -t 0 -n 8 -i "the cat" >/dev/null 2>&1 || failed="$failed $d.$ext"
        done
    done
    if [ -z "$failed" ]; then ok "-m quantize of heads wider than dim and hidden (head size 40, not dim/heads): every dtype, .qkv and .gguf, converts and loads"
    else fail "-m quantize, wide heads" "failed:$failed"; fi
    expect_logits "wide heads to .qkv float32: the same logits" "$tmp/wide.qkv" "$tmp/wide-f32.qkv" 0
    expect_logits "wide heads to .gguf float32 (attention.key_length 40): the same logits" "$tmp/wide.qkv" "$tmp/wide-f32.gguf" 0
else skip "wide heads through -m quantize" "numpy is missing"; fi

# version 2 and version 3 lay out the same bytes: the same file with version 2
cp "$tmp/good/tiny-f32.gguf" "$tmp/v2.gguf"
printf '\002' | dd of="$tmp/v2.gguf" bs=1 seek=4 conv=notrunc status=none
expect_logits "GGUF version 2 reads as version 3" "$tmp/good/tiny-f32.gguf" "$tmp/v2.gguf" 0

# ---- llama2.c checkpoints converted to GGUF ---------------------------------
if [ ! -r "$CONVERT" ] || ! $PY -c 'import numpy' 2>/dev/null; then
    skip "GGUF converted from llama2.c" "needs $CONVERT and numpy"
    exit 0
fi
# same_text NAME CMD_A -- CMD_B: both commands print the same text
same_text() {
    local name=$1; shift
    local a=() b=()
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    "${a[@]}" >"$tmp/a.txt" 2>"$tmp/a.err"; local ra=$?
    "${b[@]}" >"$tmp/b.txt" 2>"$tmp/b.err"; local rb=$?
    if [ $ra -ne 0 ] || [ $rb -ne 0 ]; then fail "$name" "exit $ra/$rb: $(head -c 200 "$tmp/a.err" "$tmp/b.err")"
    elif [ ! -s "$tmp/a.txt" ] || ! cmp -s "$tmp/a.txt" "$tmp/b.txt"; then fail "$name" "the texts differ"
    else ok "$name"; fi
}
PROMPT="the cat sat on the mat"
for shape in tied untied; do
    legacy=$tmp/$shape.bin
    extra=""; [ $shape = untied ] && extra=--separate-classifier
    $PY export/make_test_models.py --random-legacy "$legacy" --dim 64 --hidden 192 --layers 2 --heads 4 \
        --kv-heads 2 --vocab 300 --seq 64 --seed 7 $extra >/dev/null
    for t in f32 f16 q8_0 q4_0; do
        $PY $CONVERT "$legacy" $TOK "$tmp/$shape-$t.gguf" --type $t --name qkv >/dev/null
    done
    g=$tmp/$shape-f32.gguf
    same_text "GGUF F32 ($shape classifier, GQA): greedy text equals the llama2.c original's" \
        $RUN "$g" -t 0 -n 64 -i "$PROMPT" -- $RUN "$legacy" -z $TOK -t 0 -n 64 -i "$PROMPT"
    same_text "GGUF F32 ($shape): sampled text (-t 1 -s 5) equals the original's" \
        $RUN "$g" -t 1 -s 5 -n 64 -- $RUN "$legacy" -z $TOK -t 1 -s 5 -n 64
    expect_logits "GGUF F32 ($shape): logits equal the llama2.c original's within 1e-6" "$legacy" "$g" 1e-6
    for d in f16:f16 q8:q8_0 q4:q4_0; do
        $RUN "$legacy" -z $TOK -m quantize -o "$tmp/$shape-${d%%:*}.qkv" --dtype "${d%%:*}" 2>/dev/null
        expect_logits "GGUF ${d#*:} ($shape): logits equal qkv's own --dtype ${d%%:*} of the original, bit for bit" \
            "$tmp/$shape-${d%%:*}.qkv" "$tmp/$shape-${d#*:}.gguf" 0
    done
    # qkv writing GGUF: the converter's bytes exactly (same keys, order, quantizers, padding)
    same=0
    for d in f32:f32 f16:f16 q8:q8_0 q4:q4_0; do
        $RUN "$legacy" -z $TOK -m quantize -o "$tmp/$shape-written-${d#*:}.gguf" --dtype "${d%%:*}" 2>/dev/null &&
            cmp -s "$tmp/$shape-written-${d#*:}.gguf" "$tmp/$shape-${d#*:}.gguf" && same=$((same + 1))
    done
    if [ $same -eq 4 ]; then ok "-m quantize -o X.gguf ($shape): F32, F16, Q8_0 and Q4_0 files byte for byte the converter's"
    else fail "-m quantize -o X.gguf ($shape)" "only $same of 4 files equal the converter's"; fi
done
$RUN "$tmp/untied-q8_0.gguf" -m quantize -o "$tmp/again.gguf" --dtype q8 2>/dev/null
if cmp -s "$tmp/again.gguf" "$tmp/untied-q8_0.gguf"; then ok "a GGUF read and written again (-m quantize -o X.gguf --dtype q8): the same bytes"
else fail "GGUF read and written again" "the bytes differ"; fi
# the name's case does not matter: x.GGUF is GGUF too (it was written as qkv)
$RUN "$tmp/untied-q8_0.gguf" -m quantize -o "$tmp/AGAIN.GGUF" --dtype q8 2>/dev/null
if cmp -s "$tmp/AGAIN.GGUF" "$tmp/untied-q8_0.gguf"; then ok "-m quantize -o X.GGUF (upper case): GGUF, the same bytes"
else fail "-m quantize -o X.GGUF" "not the GGUF bytes ($(head -c 4 "$tmp/AGAIN.GGUF"))"; fi

# GGUF is written for llama2.c's tokenizer only: a Llama model with a
# character vocabulary (written here by export/qkvfile.py) is refused with
# one line naming it, and no file is made
if have_numpy; then
    $PY - "$tmp/char-llama.qkv" <<'EOF'
import sys
sys.path.insert(0, "export")
import numpy as np
import qkvfile
c = qkvfile.default_config(16, 32, 1, 2, 2, 8, 16, bos_id=-1, eos_id=-1)
c["tokenizer_kind"] = qkvfile.TOKENIZER_CHAR
c = qkvfile.complete_config(c)
rng = np.random.default_rng(1)
tensors = {n: (0.1 * rng.standard_normal(s) + (len(s) == 1)).astype(np.float32) for n, s in qkvfile.tensor_shapes(c)}
qkvfile.write_qkv(sys.argv[1], c, tensors, [(ch, 0.0) for ch in "abcdefg "])
EOF
    $RUN "$tmp/char-llama.qkv" -m quantize -o "$tmp/char-llama.gguf" >/dev/null 2>"$tmp/err"
    rc=$?
    read_stderr "$tmp/err"
    if [ $rc -eq 1 ] && [ "$err_lines" -eq 1 ] && [ ! -e "$tmp/char-llama.gguf" ] && matches "$err_first" \
        "^error: qkv writes GGUF files for the llama architecture with a llama2.c tokenizer; this model is a character-level one: write a qkv file instead$"; then
        ok "-m quantize -o X.gguf of a Llama model with characters: refused with one line, no file"
    else fail "-m quantize -o X.gguf of a Llama model with characters" "exit $rc: $(head -c 300 "$tmp/err")"; fi
else skip "-m quantize -o X.gguf of a Llama model with characters" "numpy is missing"; fi

# -m quantize from a GGUF: the embedded tokenizer and the weights make it through
$RUN "$tmp/untied-f32.gguf" -m quantize -o "$tmp/from-gguf.qkv" --dtype f32 2>/dev/null
same_text "-m quantize of a GGUF: the qkv file (no -z) writes the original's text" \
    $RUN "$tmp/from-gguf.qkv" -t 0 -n 64 -i "$PROMPT" -- $RUN "$tmp/untied.bin" -z $TOK -t 0 -n 64 -i "$PROMPT"
expect_logits "-m quantize --dtype f32 of a GGUF F32: the same logits" "$tmp/untied-f32.gguf" "$tmp/from-gguf.qkv" 0
$RUN "$tmp/tied-q8_0.gguf" -m quantize -o "$tmp/from-q8.qkv" --dtype q8 2>/dev/null
expect_logits "-m quantize --dtype q8 of a GGUF Q8_0: the same blocks, the same logits" "$tmp/tied-q8_0.gguf" "$tmp/from-q8.qkv" 0

# The shipped story model (Q8_0) through llama.cpp's converter as GGUF Q8_0:
# its float32 values quantize back to the same blocks (each block's largest
# value is 127 times its scale), so the same logits bit for bit and the same story
if $PY -c "
import sys; sys.path.insert(0, 'export')
import qkvfile
c, t, tok = qkvfile.read_model('models/stories.bin')
c['weight_type'] = 0  # written as float32 (the Q8_0 values exactly), as llama2.c files are
qkvfile.write_llama2c_legacy('$tmp/stories.bin', c, t)
qkvfile.write_tokenizer_bin('$tmp/stories-tokenizer.bin', tok)
" && $PY $CONVERT "$tmp/stories.bin" "$tmp/stories-tokenizer.bin" "$tmp/stories.gguf" --type q8_0 >/dev/null; then
    expect_logits "models/stories.bin as GGUF Q8_0: the same logits, bit for bit" models/stories.bin "$tmp/stories.gguf" 0
    same_text "models/stories.bin as GGUF Q8_0: the same story (-t 0.8 -s 42)" \
        $RUN "$tmp/stories.gguf" -t 0.8 -s 42 -n 120 -- $RUN models/stories.bin -t 0.8 -s 42 -n 120
else
    fail "models/stories.bin as GGUF" "the conversion failed"
fi

# -m info: the metadata it used
$RUN "$tmp/tied-q4_0.gguf" -m info >"$tmp/info" 2>&1
if grep -q "^checkpoint .*(GGUF)" "$tmp/info" && grep -q '^architecture  *llama, name "qkv"' "$tmp/info" &&
    grep -q "block_count 2 .*feed_forward_length 192" "$tmp/info" && grep -q "head_count_kv 2" "$tmp/info" &&
    grep -q "^tensor types  *float32 5, q4_0 15" "$tmp/info" && grep -q "^tokenizer  *llama (in the file): 300 tokens" "$tmp/info"
then ok "-m info shows the GGUF metadata used (architecture, name, llama.* values, tensor types, tokenizer)"
else fail "-m info of a GGUF" "$(head -c 600 "$tmp/info")"; fi

# Llama 2's own 32,000-token vocabulary: ▁ pieces, byte tokens, Unicode
L2TOK=../shared/data/llama2-tokenizer.bin
if [ -r $L2TOK ]; then
    $PY export/make_test_models.py --random-legacy "$tmp/l2.bin" --dim 32 --hidden 64 --layers 1 --heads 2 \
        --vocab 32000 --seq 96 --seed 3 >/dev/null
    $PY $CONVERT "$tmp/l2.bin" $L2TOK "$tmp/l2.gguf" >/dev/null
    P2="Once upon a time, Ünïcödé 日本語 and an emoji 🙂 went  to   the park."
    # the ids (first line); the piece listing differs in <s>, which llama2.c's file spells "\n<s>\n"
    a=$($RUN "$tmp/l2.gguf" -m tokenize -i "$P2" 2>&1 | head -n 1)
    b=$($RUN "$tmp/l2.bin" -z $L2TOK -m tokenize -i "$P2" 2>&1 | head -n 1)
    if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$(wc -w <<<"$a")" -gt 20 ]; then
        ok "GGUF with Llama 2's tokenizer: a Unicode prompt's $(wc -w <<<"$a") tokens equal the original's"
    else fail "GGUF with Llama 2's tokenizer: tokens" "'$a' vs '$b'"; fi
    same_text "GGUF with Llama 2's tokenizer: greedy text (Unicode prompt) equals the original's" \
        $RUN "$tmp/l2.gguf" -t 0 -n 96 -i "$P2" -- $RUN "$tmp/l2.bin" -z $L2TOK -t 0 -n 96 -i "$P2"
    # qkv's GGUF of it is the converter's: BOS and EOS as "<s>" and "</s>"
    # (it kept llama2.c's "\n<s>\n", which llama.cpp's tokenizer does not
    # take for BOS)
    if $RUN "$tmp/l2.bin" -z $L2TOK -m quantize -o "$tmp/l2-written.gguf" --dtype f32 2>/dev/null &&
        $PY $CONVERT "$tmp/l2.bin" $L2TOK "$tmp/l2-named.gguf" --name qkv >/dev/null &&
        cmp -s "$tmp/l2-written.gguf" "$tmp/l2-named.gguf"; then
        ok "-m quantize -o X.gguf with Llama 2's tokenizer: byte for byte the converter's (<s>, </s>)"
    else fail "-m quantize -o X.gguf with Llama 2's tokenizer" "not the converter's bytes"; fi
else
    skip "GGUF with Llama 2's tokenizer" "$L2TOK is absent"
fi
