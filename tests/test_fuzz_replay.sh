#!/usr/bin/env bash
# Replays every fuzz target's seed corpus and regression inputs (inputs a
# fuzzer once crashed on) through the target's own code, built with the
# compiler make test uses (no clang or libFuzzer needed: tests/fuzz/replay.c
# is the driver). Under CI's sanitizer pass this is an ASan+UBSan replay.
set -u
cd "$(dirname "$0")/.."
. tests/cached_build.sh
CC=${CC:-cc}
mkdir -p build
for t in checkpoint tokenizer sampler prompt gguf; do
    inputs=(tests/fuzz/corpus/"$t"/* tests/fuzz/regressions/"$t"/*)
    [ "$t" = checkpoint ] && inputs+=(tests/data/*.qkv tests/data/*.bin tests/data/bad/*)
    extra=()
    [ "$t" = prompt ] && extra=(tests/fuzz/engine.c) # the engine, a unit of its own for this target
    files=()
    for f in "${inputs[@]}"; do [ -f "$f" ] && files+=("$f"); done
    if ! cached_build "build/replay_$t" $CC -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wno-unknown-pragmas ${TEST_CFLAGS:-} -O1 \
        "tests/fuzz/fuzz_$t.c" "${extra[@]}" tests/fuzz/replay.c tokenizer.c -lm; then
        echo "FAIL fuzz replay $t: does not build"
    elif timeout 120 "./build/replay_$t" "${files[@]}" >/dev/null 2>"build/replay_$t.err"; then
        echo "ok fuzz replay $t: ${#files[@]} seed and regression inputs"
    else
        echo "FAIL fuzz replay $t: $(grep -m1 -E 'ERROR|runtime error|error' "build/replay_$t.err" || tail -n 1 "build/replay_$t.err")"
    fi
done
