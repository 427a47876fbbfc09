#!/usr/bin/env bash
# The KV cache's requests for rows ahead, as compiled (kv_fetch_ahead,
# kernels.h): the instruction each kernel of build/engine.o issues, read
# from its disassembly. The bits never depend on the requests, so a wrong
# hint (an L2 request made as an L1 one) is visible only here: the float
# keys' row kernels issue prefetcht0 only (into L1), their _l2 forms
# prefetcht1 (into L2), their _hw forms none; the value sums and the int8
# kernels take the choice at run time, so they hold both. (An _l2 form
# may also hold prefetcht0 where the compiler keeps fetch_line's untaken
# branch: the sanitizers' -O1 build does; so its check is the prefetcht1.)
# Prints "ok NAME" / "FAIL NAME: why" / "skip NAME: why" lines.
. "$(dirname "$0")/lib.sh"
name="KV cache kernels' prefetch hints in build/engine.o: rows kernels prefetcht0 only, _l2 prefetcht1, _hw none; value sums and int8 kernels both"
engine_disassembly "$name" || exit 0
# every function's counts of each hint, one line each ("<name>: t0 t1"), in
# one pass over the disassembly (an awk over it per function took 4 s)
counts=$(awk '
    NF == 1 { seen[$1] = 1; next }
    /prefetcht0/ { t0[$1]++ }
    /prefetcht1/ { t1[$1]++ }
    END { for (f in seen) printf "%s %d %d\n", f, t0[f], t1[f] }' <<<"$dis")
# hints FUNCTION: "t0 t1", the counts of each hint in its body, or "absent"
hints() {
    awk -v f="<$1>:" '$1 == f { print $2, $3; found = 1 } END { if (!found) print "absent" }' <<<"$counts"
}
if [ "$(hints rows_f32_avx2)" = absent ]; then echo "skip $name: no x86 kernels in this build"; exit 0; fi
# the hint is a constant folded into each kernel by the optimizer; without
# it (-O0, the last -O of build/flags, the Makefile's record of the
# flags) every kernel keeps both branches of fetch_line
level=$(grep -oE -- '-O[0-9a-z]*' build/flags 2>/dev/null | tail -n 1)
if [ -f build/flags ] && { [ -z "$level" ] || [ "$level" = -O0 ]; }; then
    echo "skip $name: an unoptimized build (${level:-no -O}) keeps every branch of fetch_line in each kernel"; exit 0
fi
bad=""
# expect FUNCTION WANT: WANT is t0 (prefetcht0 only), t1 (prefetcht1, any prefetcht0), none, or both
expect() {
    local got t0 t1
    got=$(hints "$1")
    if [ "$got" = absent ]; then bad="$bad $1:absent"; return; fi
    read -r t0 t1 <<<"$got"
    case $2 in
    t0) [ "$t0" -gt 0 ] && [ "$t1" -eq 0 ] ;;
    t1) [ "$t1" -gt 0 ] ;;
    none) [ "$t0" -eq 0 ] && [ "$t1" -eq 0 ] ;;
    both) [ "$t0" -gt 0 ] && [ "$t1" -gt 0 ] ;;
    esac || bad="$bad $1:t0=$t0,t1=$t1(want $2)"
}
for isa in avx2 avx512; do
    for type in f32 f16; do
        expect rows_${type}_$isa t0
        expect rows_${type}_${isa}_l2 t1
        expect rows_${type}_${isa}_hw none
        expect weighted_sum_${type}_$isa both
    done
done
for k in q8_sums_avx2 q8_sums_avx512 q8_sums_vnni q8_scores_avx2 q8_scores_avx512 q8_scores_vnni q8_decode_partials_vnni \
    q8_scores_vnni256_evex q8_sums_vnni256_evex; do expect $k both; done
# a compiler with AVX-VNNI's intrinsics (its weights' kernels there: then the KV rows' must be too)
if [ "$(hints matmul_q8_avxvnni_vex)" != absent ]; then expect q8_scores_avxvnni_vex both; expect q8_sums_avxvnni_vex both; fi
if [ -z "$bad" ]; then echo "ok $name"; else echo "FAIL $name:$bad"; fi
