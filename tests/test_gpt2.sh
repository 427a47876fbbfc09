#!/usr/bin/env bash
# The GPT-2 architecture end to end (the logits themselves are checked by
# tests/test_engine.c against NumPy and PyTorch): GPT-2's byte-level BPE
# encodes as export/gpt2_bpe.py does and decodes back to the text; a
# character model takes its characters and nothing else; every mode runs on
# GPT-2 files; quantized GPT-2 files stay close to float32; the shipped
# shakespeare model generates. With PyTorch installed, export.py rebuilds the
# fixtures from nanoGPT and Hugging Face checkpoints byte for byte.
# Prints "ok NAME" / "FAIL NAME: why" / "skip NAME: why" lines.
. "$(dirname "$0")/lib.sh"
. tests/cached_build.sh
BPE=tests/data/gpt2-bpe.qkv CHAR=tests/data/gpt2.qkv

# ---- GPT-2 BPE: the engine's ids are the reference's, and decode gives the text back ----
n=0 bad=0
while IFS= read -r text_json && IFS= read -r want; do
    case $text_json in \#*) continue ;; esac
    n=$((n + 1))
    text=$($PY -c 'import json, sys; sys.stdout.write(json.loads(sys.argv[1]) + "x")' "$text_json")
    text=${text%x} # $(...) drops trailing newlines; the x keeps them
    got=$($RUN $BPE -m tokenize -i "$text" 2>&1 | head -n 1)
    if [ "$got" != "$want" ]; then
        fail "GPT-2 BPE encodes $text_json as export/gpt2_bpe.py" "got '$got', want '$want'"
        bad=$((bad + 1))
    fi
    # generation echoes the prompt first: every token decoded to its bytes
    $RUN $BPE -i "$text" -n 0 -t 0 >"$tmp/echo" 2>/dev/null
    if [ "$(head -c "$(printf %s "$text" | wc -c)" "$tmp/echo")" != "${text%%$'\n'}" ] &&
        ! cmp -s <(head -c "$(printf %s "$text" | wc -c)" "$tmp/echo") <(printf %s "$text"); then
        fail "GPT-2 BPE decodes $text_json back to itself" "$(head -c 200 "$tmp/echo")"
        bad=$((bad + 1))
    fi
done < <(grep -v '^#' tests/golden/gpt2-bpe-tokens.txt)
[ "$n" -lt 4 ] && fail "GPT-2 BPE texts" "only $n texts in tests/golden/gpt2-bpe-tokens.txt"
[ "$n" -ge 4 ] && [ "$bad" -eq 0 ] && ok "GPT-2 BPE: $n multi-byte texts (accents, CJK, Greek, Cyrillic, emoji, tabs, runs of spaces, contractions) encode to export/gpt2_bpe.py's ids and decode back to themselves"

# ---- character model: one token per character, no BOS; unknown characters refused ----
text="ROMEO: the sun — 日本語, é ü 🙂!"
if ! $PY -c "import numpy" 2>/dev/null; then
    skip "character model: one id per character" "$PY with numpy is missing (the oracle reads the file with export/qkvfile.py)"
else
    want=$($PY -c '
import pickle, sys
sys.path.insert(0, "export")
import qkvfile
tok = qkvfile.read_model("tests/data/gpt2.qkv")[2]
ids = {p.decode(): i for i, (p, _) in enumerate(tok.pieces)}
print(" ".join(str(ids[c]) for c in sys.argv[1]))' "$text")
    got=$($RUN $CHAR -m tokenize -i "$text" | head -n 1)
    [ "$got" = "$want" ] && ok "character model: one id per character of a multi-byte prompt, nothing prepended" ||
        fail "character model tokenize" "got '$got', want '$want'"
fi
$RUN $CHAR -i "ROMEO" -n 12 -t 0 >"$tmp/out" 2>/dev/null
head -c 5 "$tmp/out" | grep -qx "ROMEO" && ok "character model: the prompt is echoed, continuation follows" ||
    fail "character model echo" "$(head -c 100 "$tmp/out")"
$RUN $CHAR -i "Zebra" -n 8 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "not in this character-level model's vocabulary" "$tmp/err" && [ ! -s "$tmp/out" ] &&
    ok "character model: a prompt character outside the vocabulary is one error line, exit 1" ||
    fail "character model unknown character" "exit $rc: $(head -c 200 "$tmp/err")"
$RUN $CHAR -n 6 -t 0 >"$tmp/out" 2>/dev/null
[ "$(head -c 1 "$tmp/out" | od -An -c | tr -d ' ')" = '\n' ] && ok "character model: an empty prompt starts from \"\\n\", as nanoGPT's sample.py" ||
    fail "character model empty prompt" "$(od -c "$tmp/out" | head -2)"

# The start token is recorded once at load (Config.start_id); generate and
# -m heads both read it. A copy of $CHAR with its pieces 0 ("\n") and 1
# swapped starts from id 1 in both; a copy whose "\n" is DEL starts nowhere,
# and both refuse with one error line.
$PY - "$CHAR" "$tmp" <<'PYEOF'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
first = struct.unpack_from("<Q", data, 72)[0] + 4 + 8  # piece 0's byte; piece 1's is 9 bytes on
data[first], data[first + 9] = data[first + 9], data[first]
open(sys.argv[2] + "/newline-1.qkv", "wb").write(data)
data[first + 9] = 0x7F
open(sys.argv[2] + "/no-newline.qkv", "wb").write(data)
PYEOF
ids=$($RUN "$tmp/newline-1.qkv" -m tokenize 2>&1 | head -n 1)
$RUN "$tmp/newline-1.qkv" -m heads --probes 1 --json "$tmp/nl.json" >/dev/null 2>&1
starts=$($PY -c 'import json, sys; d = json.load(open(sys.argv[1])); print(sorted({p[0] for p in d["text_probes"] + d["repeat_probes"]}))' "$tmp/nl.json" 2>&1)
[ "$ids" = "1" ] && [ "$starts" = "[1]" ] && ok "character model with \"\\n\" as id 1: an empty prompt and every head probe start from id 1" ||
    fail "character model start token" "tokenize '$ids', probe starts $starts"
$RUN "$tmp/no-newline.qkv" -n 4 >/dev/null 2>"$tmp/err"; rc=$?
$RUN "$tmp/no-newline.qkv" -m heads --probes 1 >/dev/null 2>"$tmp/err2"; rc2=$?
[ $rc -eq 1 ] && grep -q "lacks" "$tmp/err" && [ $rc2 -eq 1 ] && [ "$(wc -l <"$tmp/err2")" -eq 1 ] && grep -q "probe starts from" "$tmp/err2" &&
    ok "character model without \"\\n\": an empty prompt and -m heads are refused, one error line each" ||
    fail "character model without a start token" "exit $rc: $(head -c 120 "$tmp/err"); exit $rc2: $(head -c 120 "$tmp/err2")"

$RUN $CHAR -z tests/data/tiny-tokenizer.bin -n 4 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "does not apply" "$tmp/err" &&
    ok "-z (a llama2.c tokenizer.bin) with a character model is one error line, exit 1" ||
    fail "-z with a character model" "exit $rc: $(head -c 200 "$tmp/err")"

# ---- every mode on GPT-2 files ----
if $RUN $BPE -t 0 -n 10 -i "Hello" --trace --layer 1 --head 3 >"$tmp/trace" 2>&1 && grep -q "^layer 1 head 3" "$tmp/trace" &&
    $RUN $CHAR -t 0 -n 10 -i "ROMEO" --trace-prompt --html "$tmp/x.html" --trace-json "$tmp/x.jsonl" >/dev/null 2>&1 && [ -s "$tmp/x.html" ] && [ -s "$tmp/x.jsonl" ] &&
    printf 'l\nj\nq\n' | $RUN $CHAR -i "ROMEO" -n 12 --step >/dev/null 2>"$tmp/step" && grep -q "L1 H0" "$tmp/step" &&
    $RUN $BPE -m bench --ctx 16 --repeats 1 2>/dev/null | grep -q "^summary" &&
    printf 'ROMEO: the sun, é ü!\nROMEO: the sun!\n' >"$tmp/text.txt" && $RUN $CHAR -m ppl -f "$tmp/text.txt" | grep -q "^nats/token" &&
    $RUN $BPE -m info | grep -q "^architecture *GPT-2 (LayerNorm, learned positions, tanh-approximate GELU"
then ok "GPT-2 files trace (--trace, --trace-prompt, --html, --trace-json), step, benchmark, score (ppl) and describe themselves (info)"
else fail "GPT-2 modes" "$(tail -n 3 "$tmp/trace" "$tmp/step" 2>/dev/null | head -c 300)"; fi

# ---- -m ppl: a GPT-2 text is scored from <|endoftext|> (every token), a
# character model's from its first character (which is not scored, nor its byte) ----
printf 'ROMEO: the sun!' >"$tmp/ascii.txt" # 15 characters of a byte each, no newline
char=$($RUN $CHAR -m ppl -f "$tmp/ascii.txt" 2>&1)
# 14 characters scored, 14 bytes: bits/byte is nats/token / ln 2
if awk '/^tokens/ {t = $2; b = $4} /^nats/ {n = $2; bb = $6}
        END { exit !(t == 14 && b == 14 && (bb - n / log(2)) ^ 2 < 1e-10) }' <<<"$char"; then
    ok "character model -m ppl: 14 of 15 characters scored, over their 14 bytes (bits/byte = nats/token / ln 2)"
else fail "character model ppl bytes" "$(tr '\n' ' ' <<<"$char")"; fi
ids=$($RUN $BPE -m tokenize -i "ROMEO: the sun!" | head -n 1)
bpe=$($RUN $BPE -m ppl -f "$tmp/ascii.txt" 2>&1)
# a nanoGPT vocabulary padded past the tokenizer's (50257 to 50304): export.py
# writes the padding as empty pieces, which GPT-2's merges (by id) never meet
if $PY -c "import numpy" 2>/dev/null && $PY tests/trace_check.py padded-vocab-model $BPE "$tmp/padded.qkv" 57; then
    if [ "$($RUN "$tmp/padded.qkv" -m tokenize -i "Hello world" 2>&1 | head -n 1)" = "$($RUN $BPE -m tokenize -i "Hello world" | head -n 1)" ] &&
        $RUN "$tmp/padded.qkv" -i "Hello" -n 8 -t 0 >/dev/null 2>&1; then
        ok "GPT-2 BPE with a padded vocabulary (57 empty pieces): loads, encodes as the unpadded, generates"
    else fail "GPT-2 BPE padded vocabulary" "$($RUN "$tmp/padded.qkv" -m tokenize -i "Hello world" 2>&1 | head -n 1)"; fi
else skip "GPT-2 BPE padded vocabulary" "$PY with numpy is missing"; fi

if ! $PY -c "import numpy" 2>/dev/null; then
    skip "GPT-2 -m ppl against reference.py" "$PY with numpy is missing"
else
    want=$($PY - "$BPE" "$ids" <<'EOF'
import sys
sys.path.insert(0, "export")
import qkvfile, reference
config, tensors, _ = qkvfile.read_model(sys.argv[1])
tokens = [config["bos_id"]] + [int(i) for i in sys.argv[2].split()]
print(len(tokens) - 1, "%.6f" % reference.mean_nll(config, tensors, tokens))
EOF
)
    got=$(awk '/^tokens/ {t = $2} /^nats/ {n = $2} END { print t, n }' <<<"$bpe")
    if awk -v g="$got" -v w="$want" 'BEGIN { split(g, a, " "); split(w, b, " ");
            exit !(a[1] == b[1] && (a[2] - b[2]) ^ 2 < (1e-5 * b[2]) ^ 2 + 1e-12) }'; then
        ok "GPT-2 -m ppl: every token of the text scored after <|endoftext|> ($got), as reference.py ($want)"
    else fail "GPT-2 -m ppl" "engine '$got', reference.py '$want' (tokens, nats/token)"; fi
fi

# ---- quantize: float32 round trip exact, float16/Q8_0/Q4_0 close; no GGUF ----
if ! engine_build build/compare_logits tests/compare_logits.c; then
    fail "build tests/compare_logits.c" "compiler error"
else
    TOKENS=72,101,108,108,111,309,111,114,108,100,33,307,308,32,97,334,327,97,102,195,169,352,361,32
    # limits relative to the largest logit (24 here): this random model's peaky
    # attention magnifies rounding; the shipped model's quality is in the README
    for spec in f32:0 f16:0.001 q8:0.03 q4:0.5; do
        d=${spec%%:*} lim=${spec#*:}
        $RUN $BPE -m quantize -o "$tmp/q-$d.qkv" --dtype "$d" 2>/dev/null
        diff=$(build/compare_logits $BPE "$tmp/q-$d.qkv" $TOKENS 2>&1 | awk '/^max_abs_diff/ {print $2 / $4; next} {print "error: " $0}')
        if awk -v d="$diff" -v lim="$lim" 'BEGIN { exit !(d ~ /^[0-9.e+-]+$/ && d + 0 <= lim + 0) }'; then
            ok "GPT-2 -m quantize --dtype $d: logits within $lim of the largest float32 logit (max difference $diff of it)"
        else fail "GPT-2 -m quantize --dtype $d" "max logit difference '$diff' of the largest, limit $lim"; fi
    done
    # the quantized files against reference.py on their own weights, their
    # activations quantized as the engine's (the bounds above are quality;
    # this is correctness: the ppl within 1e-5 relative)
    if $PY -c "import numpy" 2>/dev/null; then
        for d in q8 q4; do
            got=$($RUN "$tmp/q-$d.qkv" -m ppl -f "$tmp/ascii.txt" 2>/dev/null | awk '/^nats/ { print $2 }')
            want=$($PY - "$tmp/q-$d.qkv" "$ids" <<'EOF'
import sys
sys.path.insert(0, "export")
import qkvfile, reference
config, tensors, _ = qkvfile.read_model(sys.argv[1])
tokens = [config["bos_id"]] + [int(i) for i in sys.argv[2].split()]
quantized = reference.quantized_matrices(qkvfile.read_tensor_types(sys.argv[1]))
print("%.6f" % reference.mean_nll(config, tensors, tokens, quantized=quantized))
EOF
)
            if awk -v g="$got" -v w="$want" 'BEGIN { exit !(g != "" && w != "" && (g - w) ^ 2 < (1e-5 * w) ^ 2 + 1e-12) }'; then
                ok "GPT-2 $d file -m ppl: $got nats/token, reference.py with quantized activations $want"
            else fail "GPT-2 $d file -m ppl against reference.py" "engine '$got', reference.py '$want'"; fi
        done
    else skip "GPT-2 quantized files against reference.py" "$PY with numpy is missing"; fi
    cmp -s <($RUN "$tmp/q-f32.qkv" -m tokenize -i "naïve café 日本語") <($RUN $BPE -m tokenize -i "naïve café 日本語") &&
        ok "GPT-2 -m quantize keeps the BPE tokenizer (merges included)" || fail "GPT-2 quantize tokenizer" "ids differ"
fi
$RUN $BPE -m quantize -o "$tmp/x.gguf" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "llama architecture" "$tmp/err" && [ ! -e "$tmp/x.gguf" ] &&
    ok "GPT-2 -m quantize -o X.gguf is refused with one line (qkv writes llama GGUF files only)" ||
    fail "GPT-2 GGUF refusal" "$(cat "$tmp/err")"

# ---- the shipped character model ----
M=models/shakespeare.bin
if [ ! -r $M ]; then
    fail "$M" "missing"
else
    $RUN $M -i "ROMEO:" -n 0 -t 0.8 -s 1 >"$tmp/s1" 2>/dev/null
    $RUN $M -i "ROMEO:" -n 0 -t 0.8 -s 1 >"$tmp/s2" 2>/dev/null
    words=$(wc -w <"$tmp/s1") chars=$(wc -c <"$tmp/s1")
    if head -c 6 "$tmp/s1" | grep -qx "ROMEO:" && [ "$chars" -ge 128 ] && [ "$words" -ge 15 ] && cmp -s "$tmp/s1" "$tmp/s2"; then
        ok "$M: ROMEO: and sampled characters to its context of 128 ($words words), the same again with the same seed"
    else fail "$M generation" "$(head -c 200 "$tmp/s1")"; fi
fi

# ---- the exporter, from nanoGPT and Hugging Face checkpoints ----
# (no separate probe for PyTorch: importing it takes a second)
if out=$($PY export/make_gpt2_fixtures.py --check 2>&1); then
    ok "export.py turns nanoGPT ckpt.pt files (_orig_mod. keys, meta.pkl beside it; with and without biases) and a Hugging Face GPT-2 state dict (Conv1D, config.json, vocab.json + merges.txt) into tests/data's GPT-2 fixtures byte for byte, and refuses broken ones with one line (a lost bias or matrix, heads that do not divide n_embd, a cut ckpt.pt, --rope-theta, a GPT-2 qkv file to convert, config.json's relu or per-layer attention scaling; a Llama state dict with a tensor the engine does not use, without output.weight, or with a classifier model_args calls tied that is not the embedding), and reads llama2.c's own ckpt.pt"
elif grep -q "^ModuleNotFoundError: No module named '\(torch\|numpy\)'$" <<<"$out"; then
    skip "export.py on nanoGPT and Hugging Face GPT-2 checkpoints" "$(grep -o "'[a-z]*'" <<<"$out" | tail -n 1) is missing"
else
    fail "export.py on GPT-2 checkpoints" "$(echo "$out" | tail -n 2)"
fi

# -m info on a GPT-2 file whose biases the exporter stored as zeros (nanoGPT's
# bias=False: tests/golden/models/gpt2-nobias-torch.txt) says so; one with
# trained biases does not
a=$($RUN tests/data/gpt2-nobias.qkv -m info 2>&1 | grep '^  biases') b=$($RUN $CHAR -m info 2>&1 | grep '^  biases')
if grep -q 'all zero: trained without biases' <<<"$a" && [ -n "$b" ] && ! grep -q 'all zero' <<<"$b"; then
    ok "-m info: a bias=False export's zero biases named as such, trained ones not"
else fail "-m info biases" "'$a' / '$b'"; fi
