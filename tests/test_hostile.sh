#!/usr/bin/env bash
# Hostile files, generated at test time by tests/make_hostile.c from the
# fixtures (see its header for the battery). Every run must end in time with
# one "error: ..." line on stderr, nothing on stdout and exit 1; where a field
# value may happen to be valid ("01"), a normal run is also accepted. Then the
# issue-10 regressions that need a command line: top-p and temperature
# extremes, -m ppl on devices, a huge claimed context, a damaged tokenizer in
# every mode, the --compare page, the messages. Prints ok / FAIL / skip lines.
. "$(dirname "$0")/lib.sh"
. tests/cached_build.sh
within_build

# run_case EXPECT PATTERN ARGS...: sets why to nothing if the run behaved,
# else to why not (hundreds of runs: stderr read by builtins, read_stderr).
run_case() {
    local expect=$1 pattern=$2; shift 2
    "${within[@]}" 20 "$RUN" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$? err_lines err_first matched
    read_stderr "$tmp/err"
    local lines=$err_lines first=$err_first
    matches "$first" "$pattern" && matched=1 || matched=0
    why=
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 142 ]; then why="hung (killed after 20 s)"
    elif [ "$rc" -eq 0 ] && [[ "$expect" == *0* ]]; then
        [ -s "$tmp/out" ] || why="exit 0 but nothing on stdout"
    elif [ "$rc" -ne 1 ]; then why="exit $rc ($first)"
    elif [[ "$expect" != *1* ]]; then why="exit 1, expected a normal run ($first)"
    elif [ "$lines" -ne 1 ]; then why="$lines stderr lines, expected one ($first)"
    elif [[ "$first" != error:* ]]; then why="'$first' is not an error line"
    elif [ "$matched" -eq 0 ]; then why="message '$first' lacks /$pattern/"
    elif [ -s "$tmp/out" ]; then why="printed on stdout"
    fi
}

# ---- the generated battery ---------------------------------------------------
mkdir -p build "$tmp/files"
if ! engine_build build/make_hostile -Wno-unknown-pragmas tests/make_hostile.c; then
    fail "build tests/make_hostile.c" "compiler error"
elif ! ./build/make_hostile "$tmp/files" >"$tmp/cases.tsv"; then
    fail "tests/make_hostile" "could not write the battery"
else
    declare -A count bad
    order=()
    while IFS=$'\t' read -r -a f; do
        group=${f[0]} name=${f[1]}
        [ -n "${count[$group]+x}" ] || { order+=("$group"); count[$group]=0; bad[$group]=0; }
        count[$group]=$((count[$group] + 1))
        run_case "${f[2]}" "${f[3]}" "${f[@]:4}"
        if [ -n "$why" ]; then
            fail "hostile $name" "$why"
            bad[$group]=$((bad[$group] + 1))
        fi
    done <"$tmp/cases.tsv"
    for group in "${order[@]}"; do
        [ "${bad[$group]}" -eq 0 ] && ok "hostile: $group (${count[$group]} runs)"
    done
fi

# ---- token ids one past the vocabulary ----------------------------------------
# A qkv header's bos_id (offset 56) or eos_id (60) equal to its vocab_size
# (offset 32) names no row of the embedding (ids are 0..vocab_size-1): the
# battery's 0, -1, 1, INT_MAX and INT_MIN never hit the edge, where a run
# fed BOS would read one row past the table
vocab=$(od -An -t d4 -j 32 -N 4 tests/data/gqa.qkv | tr -d ' ')
edge_bad=
for field in 56:bos 60:eos; do
    cp tests/data/gqa.qkv "$tmp/edge.qkv"
    printf "$(printf '\\%03o' $((vocab & 255)) $(((vocab >> 8) & 255)) $(((vocab >> 16) & 255)) $(((vocab >> 24) & 255)))" |
        dd of="$tmp/edge.qkv" bs=1 seek="${field%%:*}" conv=notrunc status=none
    run_case 1 "bos/eos id outside the vocabulary" "$tmp/edge.qkv" -n 4 -i "the"
    [ -n "$why" ] && edge_bad="$edge_bad ${field#*:}_id $vocab: $why;"
done
if [ -z "$edge_bad" ]; then ok "hostile: qkv bos_id or eos_id equal to vocab_size ($vocab) refused"
else fail "hostile: qkv bos_id or eos_id equal to vocab_size" "$edge_bad"; fi

# ---- a refused run leaves the outputs already there as they were -------------
# (-m bench and -m heads opened theirs at the start: a model refused for its
# NaN logits left them empty; options.c checks the paths at the start instead)
if [ -f "$tmp/files/nan-norm-bench.qkv" ]; then
    for mode in "bench --ctx 4 --repeats 1 --csv $tmp/keep.csv --svg $tmp/keep.svg" \
        "heads --probes 1 --csv $tmp/keep.csv --json $tmp/keep.json --svg $tmp/keep.svg"; do
        for f in keep.csv keep.json keep.svg; do echo kept >"$tmp/$f"; done
        # shellcheck disable=SC2086
        $RUN "$tmp/files/nan-norm-bench.qkv" -m $mode >/dev/null 2>"$tmp/nan.err"
        rc=$?
        kept=$(cat "$tmp/keep.csv" "$tmp/keep.json" "$tmp/keep.svg" | grep -c '^kept$')
        if [ $rc = 1 ] && [ "$kept" = 3 ]; then ok "-m ${mode%% *} refused (NaN logits): the files already at its outputs kept"
        else fail "-m ${mode%% *} refused: outputs kept" "exit $rc, $kept of 3 files kept"; fi
    done
    # heads says where, as the other modes do (it said "on a head probe")
    if grep -q "^error: the model produced NaN logits at position 0 of a head probe$" "$tmp/nan.err"; then
        ok "-m heads on NaN logits: the position named, one line"
    else fail "-m heads on NaN logits" "$(head -n 2 "$tmp/nan.err")"; fi
    # an int8 KV cache stores a row of NaNs as zeros (x * 0 was NaN, its
    # conversion to int undefined: UBSan's report under CI's sanitizers)
    $RUN "$tmp/files/nan-norm-bench.qkv" -n 3 -i "the" --kv-type q8 >/dev/null 2>"$tmp/nan.err"; rc=$?
    if [ $rc = 1 ] && [ "$(cat "$tmp/nan.err")" = "error: the model produced NaN logits at position 1" ]; then
        ok "NaN keys and values into an int8 KV cache: the NaN logits line alone, exit 1"
    else fail "NaN rows into an int8 KV cache" "exit $rc: $(head -n 3 "$tmp/nan.err" | tr '\n' '|')"; fi
    # generate's streamed traces open at the first step (they were cut at the start)
    for f in keep.txt keep.json; do echo kept >"$tmp/$f"; done
    $RUN "$tmp/files/nan-norm-bench.qkv" -n 5 -i "the cat" --trace-out "$tmp/keep.txt" --trace-json "$tmp/keep.json" >/dev/null 2>&1
    rc=$?
    kept=$(cat "$tmp/keep.txt" "$tmp/keep.json" | grep -c '^kept$')
    if [ $rc = 1 ] && [ "$kept" = 2 ]; then ok "generate refused (NaN logits): the files already at --trace-out and --trace-json kept"
    else fail "generate refused: trace outputs kept" "exit $rc, $kept of 2 files kept"; fi
else fail "refused runs keep their outputs" "make_hostile wrote no nan-norm-bench.qkv"
fi

# expect NAME EXPECT PATTERN ARGS...: one run_case as its own check
expect() {
    local name=$1; shift
    run_case "$@"
    if [ -n "$why" ]; then fail "$name" "$why"; else ok "$name"; fi
}

# ---- sampling at the extremes (candidates[-1] before) -------------------------
for flags in "-t 2e-38" "-t 1e30 -p 1e-6" "-t 1e30 -k 1" "-t 1e-30 -p 1e-6"; do
    # shellcheck disable=SC2086
    expect "sampling with $flags gives text, exit 0" 0 . models/grammar.bin -i "the cat" -n 8 -s 1 $flags
done

# ---- -m ppl reads only a regular file, of bounded size -----------------------
expect "ppl -f /dev/zero is refused at once" 1 "/dev/zero is not a regular file" models/grammar.bin -m ppl -f /dev/zero
expect "ppl -f /dev/urandom is refused at once" 1 "not a regular file" models/grammar.bin -m ppl -f /dev/urandom
expect "ppl -f a directory says it is not a file" 1 "/tmp is not a regular file" models/grammar.bin -m ppl -f /tmp
truncate -s 17M "$tmp/big.txt"
expect "ppl of a 17 MiB file states the 16 MiB limit" 1 "more than the 16 MiB" models/grammar.bin -m ppl -f "$tmp/big.txt"
: >"$tmp/empty.txt"
expect "ppl of an empty file" 1 "is empty" models/grammar.bin -m ppl -f "$tmp/empty.txt"
printf '<|endoftext|>\n' >"$tmp/separator.txt"
expect "ppl of a file of only a separator line says so" 1 "holds no document, only <\\|endoftext\\|> lines" \
    models/stories.bin -m ppl -f "$tmp/separator.txt"
# a separator line before the first story or after the last is predicted by
# no token: its bytes are not scored (they were counted, and bits/byte fell)
printf 'Once upon a time' >"$tmp/one.txt"
printf 'Once upon a time\n<|endoftext|>\n' >"$tmp/one-after.txt"
printf '<|endoftext|>\nOnce upon a time' >"$tmp/one-before.txt"
for f in one one-after one-before; do
    $RUN models/stories.bin -m ppl -f "$tmp/$f.txt" 2>/dev/null | sed 's/  [0-9.]* tok\/s$//' >"$tmp/$f.ppl"
done
if grep -q "^tokens [0-9]*  bytes 16  documents 1$" "$tmp/one.ppl" && cmp -s "$tmp/one.ppl" "$tmp/one-after.ppl" &&
    cmp -s "$tmp/one.ppl" "$tmp/one-before.ppl"; then
    ok "ppl: a separator line before the first story or after the last adds no bytes (16 scored, bits/byte unchanged)"
else fail "ppl with separators at the ends" "$(tr '\n' ' ' <"$tmp/one.ppl") | $(tr '\n' ' ' <"$tmp/one-after.ppl") | $(tr '\n' ' ' <"$tmp/one-before.ppl")"; fi

# ---- messages ------------------------------------------------------------------
expect "-z a directory says why" 1 "tokenizer /tmp is not a regular file" tests/data/gqa.legacy.bin -z /tmp -n 4
expect "-z /dev/zero is refused" 1 "not a regular file" -m tokenize -z /dev/zero -i a
# a vocabulary of empty pieces: two joined made one again, so a text it could
# not spell (every character <unk>, whose piece was "") became one token
{ printf '\001\000\000\000'; for i in 1 2 3; do printf '\000\000\000\000\000\000\000\000'; done; } >"$tmp/empty-pieces.bin"
expect "-z a tokenizer of empty pieces is refused" 1 "tokenizer: piece 0 is empty" -m tokenize -z "$tmp/empty-pieces.bin" -i "the cat"

# ---- a damaged tokenizer section is refused in every mode --------------------
for f in tests/data/bad/tokenizer-*.qkv; do
    for mode in "info" "bench --ctx 2 --repeats 1" "tokenize" "generate"; do
        # shellcheck disable=SC2086
        expect "$(basename "$f") refused by -m ${mode%% *}" 1 "tokenizer" "$f" -m $mode
    done
done

# ---- a header claiming a context of 2^20 positions ---------------------------
# The KV cache is sized by what the run needs: under a 1 GiB address-space
# limit the runs work, where a cache for the claimed context (2.3 GiB) could
# not be reserved. AddressSanitizer reserves terabytes of address space, so
# the limit is only set without it.
cp models/grammar.bin "$tmp/long.bin"
printf '\x00\x00\x10\x00' | dd of="$tmp/long.bin" bs=1 seek=36 conv=notrunc status=none
limit="ulimit -v 1048576;"
if ldd "$RUN" 2>/dev/null | grep -q libasan || grep -qa __asan_init "$RUN"; then # gcc's shared runtime, clang's static one
    limit=""
    echo "skip claimed context under a memory limit: AddressSanitizer build (the runs go on without the limit)"
fi
for mode in "-n 16 -t 0 -i the" "-m bench --ctx 16 --repeats 1" "-m ppl -f tests/data/grammar-sample.txt" "-n 8 -t 0 --trace-json $tmp/t.json"; do
    if bash -c "$limit OMP_NUM_THREADS=1 timeout 60 $RUN $tmp/long.bin $mode" >"$tmp/out" 2>"$tmp/err" && [ -s "$tmp/out" ]; then
        ok "seq_len 1048576 claimed, the run needs little: ${mode%% -f*}"
    else fail "seq_len 1048576 claimed: $mode" "$(head -n 1 "$tmp/err")"; fi
done

# ---- a failed --compare leaves no page behind ---------------------------------
expect "--html with a failing --compare" 1 "compare" tests/data/gqa.qkv -t 0 -n 4 --html "$tmp/page.html" --compare "$tmp/nope.bin"
if ls "$tmp"/page.html* >/dev/null 2>&1; then fail "failed --compare leaves no file" "$(ls "$tmp"/page.html*)"
else ok "failed --compare leaves no file"; fi
head -c 20000 models/grammar.bin >"$tmp/cut.bin"
expect "--html with a truncated --compare" 1 "compare" tests/data/gqa.qkv -t 0 -n 4 --html "$tmp/page.html" --compare "$tmp/cut.bin"
$RUN tests/data/gqa.qkv -t 0 -n 4 --html "$tmp/page.html" >/dev/null 2>&1
if [ -s "$tmp/page.html" ] && ! ls "$tmp"/page.html.part >/dev/null 2>&1; then ok "--html still writes the page, and no .part file"
else fail "--html page" "$(ls "$tmp")"; fi
