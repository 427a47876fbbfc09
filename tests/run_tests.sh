#!/usr/bin/env bash
# Runs every test program and counts their "ok" / "FAIL" / "skip" lines.
# Each test_*.sh and tests/test_engine print one line per check.
set -u
cd "$(dirname "$0")/.."
CC=${CC:-cc}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# One thread unless the caller says otherwise: the tests launch the engine
# hundreds of times, and on a busy machine idle OpenMP workers only wait for
# a core. test_cli.sh checks that two threads give the same text as one.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

mkdir -p build
# c_test NAME [SOURCES]: builds tests/NAME.c (it includes the engine) with
# tokenizer.c and SOURCES, and runs it.
c_test() {
    local name=$1; shift
    if ! $CC -std=c11 -D_POSIX_C_SOURCE=200809L -fopenmp -Wall ${TEST_CFLAGS:--O2} -o "build/$name" "tests/$name.c" tokenizer.c "$@" -lm; then
        echo "FAIL build tests/$name.c" | tee -a "$log"
    else
        "./build/$name" 2>&1 | tee -a "$log"
    fi
}
c_test test_engine
c_test test_attention bench.c bench_svg.c roofline.c # attention over blocks of keys (attention.h): every KV type and instruction set
for t in tests/test_*.sh; do
    bash "$t" 2>&1 | tee -a "$log"
done

passed=$(grep -c '^ok ' "$log")
failed=$(grep -c '^FAIL ' "$log")
skipped=$(grep -c '^skip ' "$log")
echo
grep '^FAIL ' "$log" | sed 's/^/  /'
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
