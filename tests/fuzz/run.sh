#!/usr/bin/env bash
# Builds the libFuzzer targets (make fuzz) and runs each for SECONDS
# (default 60), starting from the committed seeds (tests/fuzz/corpus/TARGET,
# and for the checkpoint target the fixtures and hostile files in tests/data)
# plus what earlier runs found (build/fuzz-corpus/TARGET, not committed).
# Fails on any crash, leak, timeout or sanitizer report: the input is saved in
# build/fuzz-crashes/, and belongs in tests/fuzz/regressions/TARGET/ once
# fixed, where make test replays it.
#
#     tests/fuzz/run.sh [SECONDS] [TARGET...]
set -u
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
targets=${*:-checkpoint tokenizer sampler prompt gguf}
make -s fuzz || exit 1
mkdir -p build/fuzz-crashes
failed=0
for t in $targets; do
    mkdir -p "build/fuzz-corpus/$t"
    seeds=()
    for d in "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t"; do [ -d "$d" ] && seeds+=("$d"); done
    [ "$t" = checkpoint ] && seeds+=(tests/data tests/data/bad)
    max_len=8192
    [ "$t" = gguf ] && max_len=65536 # a GGUF with its tokenizer is larger
    echo "== fuzz $t for ${seconds} s"
    # -close_fd_mask=1: the tokenizer target prints decoded text to stdout
    if ./build/fuzz_"$t" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
        -close_fd_mask=1 -print_final_stats=1 -artifact_prefix="build/fuzz-crashes/$t-" \
        "build/fuzz-corpus/$t" "${seeds[@]}" >"build/fuzz-$t.log" 2>&1; then
        grep -E '^(Done|stat::(number_of_executed_units|peak_rss_mb))' "build/fuzz-$t.log"
    else
        failed=1
        echo "FAIL fuzz $t: see build/fuzz-$t.log"
        grep -E 'ERROR|SUMMARY|Test unit written' "build/fuzz-$t.log" | head -n 20
    fi
done
exit $failed
