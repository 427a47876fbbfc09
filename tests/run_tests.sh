#!/usr/bin/env bash
# Runs every test program and counts their "ok" / "FAIL" / "skip" lines.
# Each test_*.sh and tests/test_engine print one line per check.
# QKV_TEST_JOBS (2 unless set) programs run at a time; their lines are
# printed in a fixed order (the C tests, then the scripts by name). Test
# programs are compiled once for their sources (tests/cached_build.sh).
set -u
cd "$(dirname "$0")/.."
CC=${CC:-cc}
JOBS=${QKV_TEST_JOBS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. tests/cached_build.sh

# One thread unless the caller says otherwise: the tests launch the engine
# hundreds of times, and on a busy machine idle OpenMP workers only wait for
# a core. test_cli.sh checks that two threads give the same text as one.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

mkdir -p build
# run_c NAME: runs build/NAME; a crash, a hang (10 minutes) or an exit
# status other than 0 without a FAIL line of its own is a FAIL line (a
# sanitizer's abort exits 1: its checks stopped at the first, and no line
# said so)
run_c() {
    local log rc
    log=$(mktemp -p "$out")
    timeout 600 "./build/$1" >"$log" 2>&1
    rc=$?
    cat "$log"
    if [ "$rc" -eq 124 ]; then echo "FAIL build/$1: killed after 600 s"
    elif [ "$rc" -gt 128 ]; then echo "FAIL build/$1: killed by signal $((rc - 128))"
    elif [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$log"; then echo "FAIL build/$1: exit status $rc"; fi
}
# c_build NAME [SOURCES]: builds tests/NAME.c with tokenizer.c and SOURCES
# (with the engine's OpenMP flag: make test OPENMP= builds none), or says it
# failed
c_build() {
    local name=$1; shift
    cached_build "build/$name" $CC "${TEST_FLAGS[@]}" "tests/$name.c" tokenizer.c "$@" -lm ||
        { echo "FAIL build tests/$name.c"; return 1; }
}
engine_test() { c_build test_engine build/engine.o && run_c test_engine; }
# attention (attention.h) over blocks of keys: every KV type and instruction
# set; then again with two OpenMP threads (its prefill memory is measured in
# a new process, so that a fork never meets OpenMP's thread pool). Passive
# waiting: workers spinning at each barrier while the other core runs another
# test made this run take 10 to 25 s instead of 2.
attention_test() {
    c_build test_attention bench.c bench_report.c bench_svg.c roofline.c output_file.c build/engine.o || return
    run_c test_attention
    if [ -z "${TEST_OPENMP--fopenmp}" ]; then echo "skip test_attention on 2 threads: this build has no OpenMP"; return; fi
    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive run_c test_attention | sed -E 's/^(ok|FAIL|skip) /&2 threads: /'
}

# run_script FILE: a test script; a hang (10 minutes), an exit status other
# than 0 without a FAIL line of its own (a crash, or an error that ended it)
# or a Python traceback in its output (the checks after it never ran, and
# no line said so) is a FAIL line
run_script() {
    local log rc
    log=$(mktemp -p "$out")
    timeout 600 bash "$1" >"$log" 2>&1
    rc=$?
    cat "$log"
    if [ "$rc" -eq 124 ]; then echo "FAIL $1: killed after 600 s"
    elif [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$log"; then echo "FAIL $1: exit status $rc"; fi
    if grep -q '^Traceback (most recent call last)' "$log"; then echo "FAIL $1: a Python traceback in its output"; fi
}

# QKV_TEST_BUILD: a command that makes ./run and build/engine.o (make
# test's "make -j2 all"; by default the same). Every test program links
# build/engine.o or runs ./run, so they start when it ends.
build_run() {
    $QKV_TEST_BUILD || { echo "FAIL $QKV_TEST_BUILD: ./run does not build"; : >"$out/build.failed"; }
}

# The programs in the order their lines are printed ...
QKV_TEST_BUILD=${QKV_TEST_BUILD:-make --no-print-directory -j2 all}
names=(build) commands=(build_run)
names+=(engine attention)
commands+=(engine_test attention_test)
for t in tests/test_*.sh; do
    names+=("$t")
    commands+=("run_script $t")
done
# ... and the order they start in: the longest first, so the last to start
# are short and the two slots end close together.
first=(build tests/test_train.sh tests/test_gguf.sh tests/test_hostile.sh tests/test_cli.sh tests/test_trace.sh tests/test_gpt2.sh
       tests/test_window.sh tests/test_quant.sh tests/test_models.sh attention tests/test_heads.sh tests/test_bench.sh engine)
order=()
for n in "${first[@]}"; do
    for i in "${!names[@]}"; do [ "${names[$i]}" = "$n" ] && order+=("$i"); done
done
for i in "${!names[@]}"; do
    [[ " ${first[*]} " == *" ${names[$i]} "* ]] || order+=("$i")
done

# Each program writes to $out/I; $out/I.done marks it finished. printed
# counts the programs whose lines are out, in the printing order.
printed=0
print_done() {
    while [ "$printed" -lt "${#names[@]}" ] && [ -e "$out/$printed.done" ]; do
        cat "$out/$printed"
        printed=$((printed + 1))
    done
}
declare -A running=() # pid -> program
# reap: waits for one of the running programs to end
reap() {
    local pid= p
    wait -n -p pid "${!running[@]}"
    if [ -z "$pid" ]; then # none of them is a child any more (not expected): wait for all
        wait
        for p in "${!running[@]}"; do : >"$out/${running[$p]}.done"; done
        running=()
    else
        : >"$out/${running[$pid]}.done"
        unset "running[$pid]"
    fi
    print_done
}
t0=$EPOCHREALTIME
for i in "${order[@]}"; do
    if [ "$i" -ne 0 ]; then # they need ./run or build/engine.o
        while ! [ -e "$out/0.done" ]; do reap; done
        [ -e "$out/build.failed" ] && break
    fi
    while [ "${#running[@]}" -ge "$JOBS" ]; do reap; done
    {
        start=$EPOCHREALTIME
        ${commands[$i]}
        echo "$start $EPOCHREALTIME ${names[$i]}" >"$out/$i.time"
    } >"$out/$i" 2>&1 </dev/null &
    running[$!]=$i
done
while [ "${#running[@]}" -gt 0 ]; do reap; done

for i in "${!names[@]}"; do
    [ -e "$out/$i.done" ] || echo "FAIL tests/run_tests.sh: ${names[$i]} did not run"
    cat "$out/$i"
done >"$out/log" 2>&1
# QKV_TEST_TIMES=1: when each program started and ended, on stderr
if [ -n "${QKV_TEST_TIMES:-}" ]; then
    cat "$out"/*.time | awk '{ printf "%7.2f s, from %6.2f s: %s\n", $2 - $1, $1 - '"$t0"', $3 }' >&2
fi
passed=$(grep -c '^ok ' "$out/log")
failed=$(grep -c '^FAIL ' "$out/log")
skipped=$(grep -c '^skip ' "$out/log")
echo
grep '^FAIL ' "$out/log" | sed 's/^/  /'
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
