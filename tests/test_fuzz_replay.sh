#!/usr/bin/env bash
# Replays every fuzz target's seed corpus and regression inputs (inputs a
# fuzzer once crashed on) through the target's own code, built with the
# compiler make test uses (no clang or libFuzzer needed: tests/fuzz/replay.c
# is the driver). Under CI's sanitizer pass this is an ASan+UBSan replay.
# The tokenizer is compiled once for all the targets, and the engine
# (tests/fuzz/engine.c, fuzz_prompt's in its libFuzzer build too) once for
# prompt, checkpoint and sampler: those two are built with
# QKV_FUZZ_ENGINE_APART, which leaves out their own copy of it. (fuzz_gguf
# keeps its own: gguf.h, its way in, is part of the engine's implementation.)
set -u
cd "$(dirname "$0")/.."
. tests/cached_build.sh
CC=${CC:-cc}
mkdir -p build
flags=(-std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wno-unknown-pragmas ${TEST_CFLAGS:-} -O1)
if ! cached_build build/replay_engine.o $CC "${flags[@]}" -c tests/fuzz/engine.c ||
    ! cached_build build/replay_tokenizer.o $CC "${flags[@]}" -c tokenizer.c; then
    echo "FAIL fuzz replay: tests/fuzz/engine.c or tokenizer.c does not build"
    exit 0
fi
for t in checkpoint tokenizer sampler prompt gguf; do
    inputs=(tests/fuzz/corpus/"$t"/* tests/fuzz/regressions/"$t"/*)
    [ "$t" = checkpoint ] && inputs+=(tests/data/*.qkv tests/data/*.bin tests/data/bad/*)
    extra=()
    case $t in prompt | checkpoint | sampler) extra=(build/replay_engine.o) ;; esac
    files=()
    for f in "${inputs[@]}"; do [ -f "$f" ] && files+=("$f"); done
    if ! cached_build "build/replay_$t" $CC "${flags[@]}" -DQKV_FUZZ_ENGINE_APART \
        "tests/fuzz/fuzz_$t.c" "${extra[@]}" tests/fuzz/replay.c build/replay_tokenizer.o -lm; then
        echo "FAIL fuzz replay $t: does not build"
    elif timeout 120 "./build/replay_$t" "${files[@]}" >/dev/null 2>"build/replay_$t.err"; then
        echo "ok fuzz replay $t: ${#files[@]} seed and regression inputs"
    else
        echo "FAIL fuzz replay $t: $(grep -m1 -E 'ERROR|runtime error|error' "build/replay_$t.err" || tail -n 1 "build/replay_$t.err")"
    fi
done
