#!/usr/bin/env bash
# Replays every fuzz target's seed corpus and regression inputs (inputs a
# fuzzer once crashed on) through the target's own code, built with the
# compiler make test uses (no clang or libFuzzer needed: tests/fuzz/replay.c
# is the driver). Under CI's sanitizer pass this is an ASan+UBSan replay.
# The tokenizer is compiled once for all the targets, and every target links
# the engine as make compiled it for ./run (build/engine.o, with make test's
# CFLAGS: under CI's sanitizer pass it is instrumented too), built with
# QKV_FUZZ_ENGINE_APART, which leaves out their own copy of it.
. "$(dirname "$0")/lib.sh"
. tests/cached_build.sh
mkdir -p build
flags=(-std=c11 -D_POSIX_C_SOURCE=200809L -fopenmp -Wall -Wno-unknown-pragmas ${TEST_CFLAGS:-} -O1)
if ! [ -f build/engine.o ] || ! cached_build build/replay_tokenizer.o $CC "${flags[@]}" -c tokenizer.c; then
    echo "FAIL fuzz replay: build/engine.o is missing (make all) or tokenizer.c does not build"
    exit 0
fi
for t in checkpoint tokenizer sampler prompt gguf; do
    inputs=(tests/fuzz/corpus/"$t"/* tests/fuzz/regressions/"$t"/*)
    [ "$t" = checkpoint ] && inputs+=(tests/data/*.qkv tests/data/*.bin tests/data/bad/*)
    files=()
    for f in "${inputs[@]}"; do [ -f "$f" ] && files+=("$f"); done
    if ! cached_build "build/replay_$t" $CC "${flags[@]}" -DQKV_FUZZ_ENGINE_APART \
        "tests/fuzz/fuzz_$t.c" build/engine.o tests/fuzz/replay.c build/replay_tokenizer.o -lm; then
        echo "FAIL fuzz replay $t: does not build"
    elif timeout 120 "./build/replay_$t" "${files[@]}" >/dev/null 2>"build/replay_$t.err"; then
        echo "ok fuzz replay $t: ${#files[@]} seed and regression inputs"
    else
        echo "FAIL fuzz replay $t: $(grep -m1 -E 'ERROR|runtime error|error' "build/replay_$t.err" || tail -n 1 "build/replay_$t.err")"
    fi
done
