#!/usr/bin/env bash
# The 256-bit VNNI kernels' encodings, as compiled (kernels_int8.h's
# PANEL_VNNI256 for int8 and 4-bit weights, kv_int8_256.h's KV_Q8_VNNI256
# for the KV cache's int8 rows; cpu.h's ISA_AVX_VNNI): each body built twice, its VEX form
# for CPUs with AVX-VNNI (Alder Lake, Sierra Forest, ...) and its EVEX form
# for those with AVX-512 VNNI instead. A machine without AVX-VNNI runs only
# the EVEX form (test_engine and test_attention check its bits against the portable kernels),
# so the VEX form's one difference, its encoding, is checked here in
# build/engine.o's disassembly: vpdpbusd as "{vex} vpdpbusd", and no
# instruction EVEX-encoded (its first byte 0x62, in 64-bit mode always
# EVEX's prefix), which would stop it on an AVX2-only CPU. The EVEX twin's
# vpdpbusd carry no {vex}.
# Prints "ok NAME" / "FAIL NAME: why" / "skip NAME: why" lines.
. "$(dirname "$0")/lib.sh"
name="256-bit VNNI kernels in build/engine.o (int8 and 4-bit weights, int8 KV rows' scores and sums): the VEX forms {vex} vpdpbusd and no EVEX-encoded instruction; the EVEX forms EVEX vpdpbusd"
engine_disassembly "$name" || exit 0
# every function's counts, one line each: "<name>: vex-dpbusd other-dpbusd evex-encoded"
# (an instruction line: "<f>: addr: bytes... mnemonic", $3 its first byte)
counts=$(awk '
    NF == 1 { seen[$1] = 1; next }
    $3 == "62" { evex_encoded[$1]++ }
    /\{vex\} *vpdpbusd/ { vex[$1]++; next }
    /vpdpbusd/ { evex[$1]++ }
    END { for (f in seen) printf "%s %d %d %d\n", f, vex[f], evex[f], evex_encoded[f] }' <<<"$dis")
get() { awk -v f="<$1>:" '$1 == f { print $2, $3, $4; found = 1 } END { if (!found) print "absent" }' <<<"$counts"; }
if [ "$(get matmul_q8_avx2)" = absent ]; then echo "skip $name: no x86 kernels in this build"; exit 0; fi
kernels="matmul_q8 matmul_q4 q8_scores q8_sums"
if [ "$(get matmul_q8_avxvnni_vex)$(get matmul_q4_avxvnni_vex)" = absentabsent ]; then
    echo "skip $name: a compiler without AVX-VNNI's intrinsics (GCC 11, clang 12 have them): ISA_AVX_VNNI only where AVX-512 VNNI is"
    exit 0
fi
bad=""
for k in $kernels; do
    got=$(get ${k}_avxvnni_vex)
    if [ "$got" = absent ]; then
        bad="$bad ${k}_avxvnni_vex:absent"
    else
        read -r vex evex only <<<"$got"
        [ "$vex" -gt 0 ] && [ "$evex" -eq 0 ] && [ "$only" -eq 0 ] ||
            bad="$bad ${k}_avxvnni_vex:vex=$vex,evex=$evex,evex-encoded=$only"
    fi
    read -r vex evex only <<<"$(get ${k}_vnni256_evex)"
    [ "${vex:-1}" = 0 ] && [ "${evex:-0}" -gt 0 ] || bad="$bad ${k}_vnni256_evex:vex=$vex,evex=$evex"
done
if [ -z "$bad" ]; then echo "ok $name"; else echo "FAIL $name:$bad"; fi
