/* kernels_isa.h — what the kernel files share: the instruction sets'
 * function attributes, their small inline helpers (lane masks), and the
 * accessors of a product's input and output.
 *
 * Included by kernels.h's implementation (with the kernels it includes,
 * the KV cache's and the elementwise passes), by kernels_float.c, the
 * float kernels' own translation unit, and by the bench's roofline.c (its
 * in-order read requests lines as the kernels do). Internal: not part of the
 * engine's interface. */
#ifndef QKV_KERNELS_ISA_H
#define QKV_KERNELS_ISA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* Row t of the float input, of its int8 copy, of its blocks' scales and
 * of their sums. */
static inline const float *act_row(const Activations *a, int t) { return a->x + (size_t)t * a->stride; }
static inline const int8_t *act_q(const Activations *a, int t) { return a->q + (size_t)t * a->stride; }
static inline const float *act_scale(const Activations *a, int t) {
    return a->q_scale + (size_t)t * (a->stride / QKV_QBLOCK);
}
static inline const int32_t *act_sum(const Activations *a, int t) {
    return a->q_sum + (size_t)t * (a->stride / QKV_QBLOCK);
}
static inline float *out_at(float *out, int stride, int t, int i) { return out + (size_t)t * stride + i; }

/* half_to_float (kernels.h), inline: the portable float16 kernels convert
 * every weight with it (an out-of-line call each was 4x slower) */
static inline float half_bits_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    uint32_t bits;
    if (exponent == 0x1f) {          /* infinity or NaN */
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {      /* normal: rebias 15 -> 127 */
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else {                         /* zero or subnormal: mantissa * 2^-24 */
        float f = (float)mantissa * 0x1p-24f;
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* x . w over n floats. Sixteen independent partial sums let a compiler
 * keep them in vector registers (the norms' sums of squares). */
static inline float dot_f32(const float *w, const float *x, int n) {
    float acc[16] = { 0 };
    int j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) acc[l] += w[j + l] * x[j + l];
    float sum = 0.0f;
    for (int l = 0; l < 16; l++) sum += acc[l];
    for (; j < n; j++) sum += w[j] * x[j];
    return sum;
}

/* ------------------------------------------------------------------------ */
/* x86-64 kernels: AVX2 and AVX-512, chosen at run time                      */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(QKV_PORTABLE)
#define QKV_HAVE_X86_KERNELS 1
#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))
#define TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TARGET_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define TARGET_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
/* 256-bit VNNI (cpu.h's ISA_AVX_VNNI): AVX-VNNI's VEX form where compilers
 * know it (GCC 11, LLVM's clang 12; Apple's clang numbers its own releases,
 * so it is left out), and AVX-512 VNNI's EVEX form of the same
 * instruction, for the CPUs with that instead. */
#if (defined(__clang__) && __clang_major__ >= 12 && !defined(__apple_build_version__)) || \
    (!defined(__clang__) && __GNUC__ >= 11)
#define QKV_HAVE_AVX_VNNI 1
#define TARGET_AVX_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#endif
#define TARGET_VNNI256_EVEX __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))
/* Of a kernel's two forms, the one this CPU runs: the VEX form where it has
 * AVX-VNNI, else the EVEX one (cpu.h: isa_available gives ISA_AVX_VNNI
 * only where one of them is) */
#ifdef QKV_HAVE_AVX_VNNI
#define VNNI256_FORM(VEX, EVEX) (cpu_has_avx_vnni() ? VEX : EVEX)
#else
#define VNNI256_FORM(VEX, EVEX) EVEX
#endif
/* AMX: compilers that know its intrinsics (GCC 11, clang 12), on Linux,
 * where a process asks the kernel before it uses the tiles (probe_cpu). */
#if defined(__linux__) && ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))
#define QKV_HAVE_AMX 1
#define TARGET_AMX \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8")))
#include <sys/syscall.h>
long syscall(long number, ...); /* unistd.h declares it only for _DEFAULT_SOURCE */
#endif

/* A request for the line at p, into L1 or L2 as fetch says (kernels.h's
 * Fetch; FETCH_NONE: none) */
INLINE void fetch_line(const void *p, Fetch fetch) {
    if (fetch == FETCH_L2) _mm_prefetch((const char *)p, _MM_HINT_T1);
    else if (fetch == FETCH_L1) _mm_prefetch((const char *)p, _MM_HINT_T0);
}

/* Requests for the lines of bytes from p on, as fetch says */
INLINE void fetch_range(const void *p, size_t bytes, Fetch fetch) {
    if (fetch == FETCH_NONE) return;
    for (size_t at = 0; at < bytes; at += 64) fetch_line((const char *)p + at, fetch);
}

/* -1 in the lanes below count: AVX2's masked loads and gathers */
TARGET_AVX2 INLINE __m256i lanes_below(int count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* ---- AVX-512 (16 floats a vector) ---- */

TARGET_AVX512 INLINE __mmask16 tail_mask(int j, int n) {
    return n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
}

/* The lanes of a panel's rows row0..row0+15 that lie within [begin, end). */
TARGET_AVX512 INLINE __mmask16 panel_rows_mask(int row0, int begin, int end) {
    int first = begin > row0 ? begin - row0 : 0, last = end - row0 < QKV_PANEL ? end - row0 : QKV_PANEL;
    return last <= first ? 0 : (__mmask16)(((1u << last) - 1) & ~((1u << first) - 1));
}

#endif /* QKV_HAVE_X86_KERNELS */

#endif /* QKV_KERNELS_ISA_H */
