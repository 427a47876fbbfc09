#!/usr/bin/env bash
# -m heads: role scores against closed forms (hand-built heads) and against
# NumPy (export/reference.py) from the same probes; the output formats; the
# shipped induction model's induction head and the random model's lack of
# any role; --probe induction in the explorer page; bad flags.
# Prints "ok NAME" / "FAIL NAME: why" / "skip NAME: why" lines.
. "$(dirname "$0")/lib.sh"

# ---- scores against independent oracles -------------------------------------
if ! have_numpy; then
    echo "skip heads oracles: /usr/bin/python3 with numpy is missing"
else
    if $RUN tests/data/heads.qkv -m heads --json "$tmp/hand.json" >/dev/null 2>"$tmp/err"; then
        $PY tests/heads_check.py closed-form "$tmp/hand.json"
    else fail "-m heads on tests/data/heads.qkv" "$(head -n 1 "$tmp/err")"; fi
    for model in tests/data/gqa.qkv tests/data/heads.qkv; do
        if $RUN $model -m heads --probes 3 -s 7 --json "$tmp/o.json" >/dev/null 2>"$tmp/err"; then
            $PY tests/heads_check.py oracle $model "$tmp/o.json"
        else fail "-m heads on $model" "$(head -n 1 "$tmp/err")"; fi
    done
    if $RUN tests/data/gqa.qkv -m heads --csv "$tmp/f.csv" --json "$tmp/f.json" --svg "$tmp/f.svg" >"$tmp/f.txt" 2>"$tmp/err"; then
        $PY tests/heads_check.py formats "$tmp/f.txt" "$tmp/f.csv" "$tmp/f.json" "$tmp/f.svg"
    else fail "-m heads --csv --json --svg" "$(head -n 1 "$tmp/err")"; fi
fi

# A model's path is data too: XML's ]]> and &, a C0 byte, a byte that is not
# UTF-8 and U+FFFE in the file name still give well-formed JSON and SVG (heads', bench's)
if [ -x "$PY" ]; then
    bad=0
    for name in 'a]]>&"<b' "$(printf 'a\001b')" "$(printf 'a\377b')" "$(printf 'a\357\277\276b')"; do
        ln -s "$PWD/tests/data/heads.qkv" "$tmp/$name.qkv"
        $RUN "$tmp/$name.qkv" -m heads --probes 1 --json "$tmp/p.json" --svg "$tmp/p.svg" >/dev/null 2>&1
        $RUN "$tmp/$name.qkv" -m bench --threads 1 --ctx 8 --repeats 1 --svg "$tmp/b.svg" >/dev/null 2>&1
        $PY -c 'import json, sys, xml.dom.minidom as m
json.load(open(sys.argv[1], encoding="utf-8")); m.parse(sys.argv[2]); m.parse(sys.argv[3])' \
            "$tmp/p.json" "$tmp/p.svg" "$tmp/b.svg" 2>"$tmp/err" || { bad=1; echo "  $(tail -n 1 "$tmp/err")"; }
        rm -f "$tmp/p.json" "$tmp/p.svg" "$tmp/b.svg"
    done
    if [ $bad = 0 ]; then ok "a model path with ]]>, &, a control byte or a non-UTF-8 byte: well-formed JSON and SVG"
    else fail "hostile model paths" "a JSON or SVG file does not parse"; fi
else skip "hostile model paths" "no $PY to parse the JSON and SVG"
fi

# Counts of one are singular (the table said "1 layers x 4 heads; 1 probes", bench's chart "median of 1 runs")
first=$("$RUN" tests/data/heads.qkv -m heads --probes 1 2>/dev/null | head -n 1)
"$RUN" tests/data/heads.qkv -m bench --threads 1 --ctx 8 --repeats 1 --svg "$tmp/one.svg" >"$tmp/one.txt" 2>/dev/null
if [[ $first == "heads: tests/data/heads.qkv, 1 layer x 4 heads; 1 probe of each kind, "* ]] &&
    grep -q "dim [0-9]*, 1 layer, 4 heads (4 kv), vocab [0-9]*; 1 thread; median of 1 run<" "$tmp/one.svg" &&
    grep -q "^  threads 1, median of 1 run, positions 1..8$" "$tmp/one.txt"; then
    ok "a count of one is singular: 1 layer, 1 probe, 1 thread, 1 run (heads' table, bench's text and chart)"
else fail "a count of one is singular" "$first | $(grep -o 'dim [0-9]*, [^<]*' "$tmp/one.svg") | $(grep '^  threads' "$tmp/one.txt")"; fi

# A llama2.c checkpoint of the same weights (and no tokenizer) gives the same scores.
$RUN tests/data/heads.qkv -m heads --csv "$tmp/qkv.csv" >/dev/null 2>&1
if $RUN tests/data/heads.legacy.bin -m heads --csv "$tmp/legacy.csv" >/dev/null 2>"$tmp/err" \
    && cmp -s "$tmp/qkv.csv" "$tmp/legacy.csv"; then
    ok "-m heads on a llama2.c checkpoint: the same scores as the qkv file of the same weights"
else fail "-m heads on a llama2.c checkpoint" "$(head -n 1 "$tmp/err")"; fi

# Seeded: the same seed the same report, another seed other probes; threads do not matter.
$RUN tests/data/gqa.qkv -m heads -s 5 >"$tmp/a" 2>/dev/null
$RUN tests/data/gqa.qkv -m heads -s 5 --threads 2 >"$tmp/b" 2>/dev/null
$RUN tests/data/gqa.qkv -m heads -s 6 >"$tmp/c" 2>/dev/null
if cmp -s "$tmp/a" "$tmp/b" && ! cmp -s "$tmp/a" "$tmp/c"; then
    ok "-m heads is reproducible: -s 5 twice (1 and 2 threads) the same, -s 6 different"
else fail "-m heads reproducible" "$(diff "$tmp/a" "$tmp/b" | head -n 3)"; fi

# ---- the shipped models ------------------------------------------------------
# role of layer L head H in a CSV: "role,score"
role_of() { awk -F, -v l="$2" -v h="$3" '$1 == l && $2 == h { print $(NF-1) "," $NF }' "$1"; }
if [ -r models/induction.bin ]; then
    $RUN models/induction.bin -m heads --csv "$tmp/ind.csv" --json "$tmp/ind.json" >/dev/null 2>&1
    best=$(awk -F, 'NR > 1 && $6 > best { best = $6; at = "layer " $1 " head " $2 } END { print best, at }' "$tmp/ind.csv")
    score=${best%% *}
    if awk -v s="${score:-0}" 'BEGIN { exit !(s >= 0.5) }' && grep -q ',induction,' "$tmp/ind.csv"; then
        ok "models/induction.bin has an induction head: $best (>= 0.5, its dominant role)"
    else fail "models/induction.bin's induction head" "best induction score ${best:-none}"; fi
    losses=$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["loss_first_copy"], d["loss_second_copy"])' "$tmp/ind.json")
    if awk -v a="${losses% *}" -v b="${losses#* }" 'BEGIN { exit !(b < a / 4) }'; then
        ok "models/induction.bin learns in context: loss ${losses% *} on the first copy, ${losses#* } on the second (< a quarter)"
    else fail "models/induction.bin in-context loss" "$losses"; fi
else
    fail "models/induction.bin" "missing"
fi
if $RUN models/grammar-random.bin -m heads --csv "$tmp/rand.csv" >/dev/null 2>&1 \
    && [ "$(awk -F, 'NR > 1 && $9 != "none"' "$tmp/rand.csv" | wc -l)" -eq 0 ] \
    && [ "$(awk -F, 'NR > 1' "$tmp/rand.csv" | wc -l)" -eq 12 ]; then
    ok "models/grammar-random.bin: none of its 12 heads has a role (random weights attend evenly)"
else fail "grammar-random roles" "$(awk -F, 'NR > 1 && $9 != "none"' "$tmp/rand.csv" | head -n 2)"; fi

# The README's -m heads figures are what the commands beside them print.
$PY tests/heads_check.py readme README.md

# ---- --probe induction: the explorer page over a repeat probe ----------------
model=models/induction.bin
[ -r $model ] || model=tests/data/gqa.qkv
if $RUN $model --probe induction -s 3 -t 0 -n 70 --html "$tmp/p.html" >/dev/null 2>"$tmp/err"; then
    $RUN $model -m heads -s 3 --probes 1 --json "$tmp/p.json" >/dev/null 2>&1
    if $PY - "$tmp/p.html" "$tmp/p.json" <<'EOF'
import json, re, sys
page = open(sys.argv[1]).read()
data = json.loads(re.search(r'<script id="qkv-data" type="application/json">(.*?)</script>', page, re.S).group(1))
probe = json.load(open(sys.argv[2]))["repeat_probes"][0]
ids = [t["id"] for t in data["tokens"]][:len(probe)]
roles = data["runs"][0]["roles"]
sys.exit(0 if ids == probe and data["prompt_tokens"] == len(probe) and len(roles) == data["runs"][0]["n_layers"] else 1)
EOF
    then ok "--probe induction --html: the page runs -m heads' first repeat probe for the seed, with each head's role"
    else fail "--probe induction --html" "the page's tokens are not the probe, or no roles"; fi
else fail "--probe induction --html" "$(head -n 1 "$tmp/err")"; fi

# ---- --csv /dev/stdout with stdout sent to a file: the table and the CSV both
# there (fopen cut the file and wrote the CSV from its start, over the table:
# 16 lines of 25)
"$RUN" tests/data/gqa.qkv -m heads --probes 2 --csv /dev/stdout >"$tmp/both.txt" 2>/dev/null
"$RUN" tests/data/gqa.qkv -m heads --probes 2 --csv "$tmp/alone.csv" >"$tmp/table.txt" 2>/dev/null
if [ -s "$tmp/alone.csv" ] && [ -s "$tmp/table.txt" ] &&
    [ "$(cat "$tmp/table.txt" "$tmp/alone.csv")" = "$(cat "$tmp/both.txt")" ]; then
    ok "-m heads --csv /dev/stdout > FILE: the table, then the CSV, whole"
else fail "-m heads --csv /dev/stdout > FILE" "$(wc -l <"$tmp/both.txt") lines, expected the table's and the CSV's"; fi

# ---- bad input: one error line, exit 2 (usage) or 1 (data) -------------------
expect() { # expect STATUS NAME ARGS...: that exit status and one "error:" line
    local want=$1 name=$2
    shift 2
    "$RUN" "$@" >/dev/null 2>"$tmp/err"
    local rc=$?
    if [ $rc -eq "$want" ] && [ "$(grep -c '^error: ' "$tmp/err")" -eq 1 ]; then ok "$name: exit $rc, $(grep '^error: ' "$tmp/err")"
    else fail "$name" "exit $rc: $(head -n 2 "$tmp/err" | tr '\n' ' ')"; fi
}
expect 2 "-m heads --probes 0" tests/data/gqa.qkv -m heads --probes 0
expect 2 "-m heads with a generate flag" tests/data/gqa.qkv -m heads -t 0.5
expect 2 "--json outside -m heads" tests/data/gqa.qkv --json x.json
expect 2 "--probe with an unknown kind" tests/data/gqa.qkv --probe previous --html x.html
expect 2 "--probe with -i" tests/data/gqa.qkv --probe induction -i "the cat"
expect 1 "-m heads --json to a missing directory" tests/data/gqa.qkv -m heads --json /nonexistent/dir/h.json

# A model without BOS (nanoGPT's characters: bos_id -1): the probes start from
# its id 0 ("\n"), never from -1, which is no token (under AddressSanitizer in
# CI a read before the embedding table would stop the run)
if [ -r models/shakespeare.bin ]; then
    if $RUN models/shakespeare.bin -m heads --probes 2 --json "$tmp/shk.json" >/dev/null 2>"$tmp/err" &&
        python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
starts = {p[0] for p in d['text_probes'] + d['repeat_probes']}
sys.exit(0 if starts == {0} else 1)" "$tmp/shk.json" 2>/dev/null
    then ok "-m heads on a character model without BOS: every probe starts from id 0 (\"\\n\")"
    else fail "-m heads without BOS" "$(head -c 200 "$tmp/err")"; fi
    # and the table says so (it said "BOS")
    if $RUN models/shakespeare.bin -m heads --probes 1 2>/dev/null | grep -q '^  text probes: "\\n", then'; then
        ok "-m heads on a character model: the table names its start token, \"\\n\", not BOS"
    else fail "-m heads' start token" "$($RUN models/shakespeare.bin -m heads --probes 1 2>&1 | sed -n 2p)"; fi
else echo "skip -m heads without BOS: models/shakespeare.bin is missing"; fi
