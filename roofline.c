/* roofline.c — two probes: how fast one pass of reads over a buffer goes,
 * and how many float32 multiply-adds per second the cores do when nothing
 * waits on memory. A decode step is bound by the first (it streams every
 * weight once), a prompt by the second (each weight is used for many
 * positions). The probes use the widest vectors the CPU has, like the
 * kernels (kernels.h picks the same instruction set). */
#include "roofline.h"
#include "kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the sums (n floats, n a multiple of 64) and the FMA chains ---- */

#define FMA_CHAINS 16 /* independent accumulators: enough to hide the latency */

static float sum_portable(const float *a, size_t n) {
    float acc[16] = { 0 };
    for (size_t i = 0; i < n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] += a[i + l];
    float s = 0;
    for (int l = 0; l < 16; l++) s += acc[l];
    return s;
}

static float fma_portable(long iterations) {
    float acc[FMA_CHAINS], m = 0.999f, c = 1e-4f;
    for (int l = 0; l < FMA_CHAINS; l++) acc[l] = (float)l;
    for (long k = 0; k < iterations; k++)
        for (int l = 0; l < FMA_CHAINS; l++) acc[l] = acc[l] * m + c;
    float s = 0;
    for (int l = 0; l < FMA_CHAINS; l++) s += acc[l];
    return s;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(QKV_PORTABLE)
#include <immintrin.h>
#define PROBE_X86 1

/* Four vectors of sums over n floats (n a multiple of 4 vectors). */
#define SUM_PROBE(NAME, TARGET, VEC, ZERO, LOAD, ADD, STORE, LANES)              \
    __attribute__((target(TARGET))) static float NAME(const float *a, size_t n) { \
        VEC s0 = ZERO(), s1 = s0, s2 = s0, s3 = s0;                               \
        for (size_t i = 0; i < n; i += 4 * LANES) {                               \
            s0 = ADD(s0, LOAD(a + i));                                            \
            s1 = ADD(s1, LOAD(a + i + LANES));                                    \
            s2 = ADD(s2, LOAD(a + i + 2 * LANES));                                \
            s3 = ADD(s3, LOAD(a + i + 3 * LANES));                                \
        }                                                                         \
        float out[LANES], s = 0;                                                  \
        STORE(out, ADD(ADD(s0, s1), ADD(s2, s3)));                                \
        for (int l = 0; l < LANES; l++) s += out[l];                              \
        return s;                                                                 \
    }

SUM_PROBE(sum_avx2, "avx2,fma", __m256, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_add_ps, _mm256_storeu_ps, 8)
SUM_PROBE(sum_avx512, "avx512f", __m512, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_add_ps, _mm512_storeu_ps, 16)

/* FMA_CHAINS vectors of chains; the compiler keeps them in registers. */
#define FMA_PROBE(NAME, TARGET, VEC, SET1, FMADD, STORE, LANES)                  \
    __attribute__((target(TARGET))) static float NAME(long iterations) {         \
        VEC acc[FMA_CHAINS], m = SET1(0.999f), c = SET1(1e-4f);                  \
        for (int l = 0; l < FMA_CHAINS; l++) acc[l] = SET1((float)l);            \
        for (long k = 0; k < iterations; k++)                                    \
            for (int l = 0; l < FMA_CHAINS; l++) acc[l] = FMADD(acc[l], m, c);   \
        float out[LANES], s = 0;                                                 \
        for (int l = 0; l < FMA_CHAINS; l++) {                                   \
            STORE(out, acc[l]);                                                  \
            for (int i = 0; i < LANES; i++) s += out[i];                         \
        }                                                                        \
        return s;                                                                \
    }

FMA_PROBE(fma_avx2, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps, 8)
FMA_PROBE(fma_avx512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, 16)
#endif

/* floats summed / multiply-added per call, by instruction set */
static float probe_sum(Isa isa, const float *a, size_t n) {
#ifdef PROBE_X86
    if (isa >= ISA_AVX512) return sum_avx512(a, n);
    if (isa >= ISA_AVX2) return sum_avx2(a, n);
#endif
    return sum_portable(a, n);
}

static float probe_fma(Isa isa, long iterations, int *lanes) {
#ifdef PROBE_X86
    if (isa >= ISA_AVX512) { *lanes = 16; return fma_avx512(iterations); }
    if (isa >= ISA_AVX2) { *lanes = 8; return fma_avx2(iterations); }
#endif
    *lanes = 1;
    return fma_portable(iterations);
}

/* ---- the measurements ---- */

/* Best of several passes, each thread summing its own part of the buffer
 * (the decode kernels split the rows of a matrix the same way). */
static double measure_bandwidth(Isa isa, const float *a, size_t n, int threads) {
    double best = 1e30, spent = 0;
    volatile float sink = 0;
    for (int pass = 0; pass < 50 && (pass < 5 || spent < 0.3); pass++) {
        double start = now_seconds();
        float total = 0;
        int t;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
        for (t = 0; t < threads; t++) {
            size_t part = n / (size_t)threads / 64 * 64;
            size_t begin = (size_t)t * part, len = t == threads - 1 ? n - begin : part;
            total += probe_sum(isa, a + begin, len);
        }
        sink += total;
        double seconds = now_seconds() - start;
        spent += seconds;
        if (seconds < best) best = seconds;
    }
    return (double)n * sizeof(float) / best * 1e-9;
}

static double measure_fma(Isa isa, int threads) {
    const long iterations = 2000000;
    volatile float sink = 0;
    double best = 1e30;
    int lanes = 1;
    for (int pass = 0; pass < 3; pass++) {
        double start = now_seconds();
        float total = 0;
        int t;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
        for (t = 0; t < threads; t++) {
            int l;
            total += probe_fma(isa, iterations, &l);
            if (t == 0) lanes = l;
        }
        sink += total;
        double seconds = now_seconds() - start;
        if (seconds < best) best = seconds;
    }
    return 2.0 * FMA_CHAINS * lanes * (double)iterations * threads / best * 1e-9;
}

void roofline_measure(Roofline *r, size_t bytes, int threads) {
    Isa isa = isa_available();
    size_t n = (bytes / sizeof(float) + 64 * (size_t)threads) / 64 * 64;
    memset(r, 0, sizeof *r);
    r->threads = threads;
    r->isa = isa >= ISA_AVX512 ? "avx512" : isa >= ISA_AVX2 ? "avx2" : "portable";
    float *buffer = zalloc_aligned(n, sizeof(float)); /* the weights' and the KV cache's pages: large ones */
    if (buffer) {
        for (size_t i = 0; i < n; i++) buffer[i] = (float)(i & 7);
        r->probe_bytes = n * sizeof(float);
        r->read_gbps = measure_bandwidth(isa, buffer, n, threads);
        free_aligned(buffer);
    }
    r->fma_gflops = measure_fma(isa, threads);
}
