/* roofline.c — two probes: how fast one pass of reads over a buffer goes,
 * and how many float32 multiply-adds per second the cores do when nothing
 * waits on memory. A decode step is bound by the first (it streams every
 * weight once), a prompt by the second (each weight is used for many
 * positions). The probes use the widest vectors the CPU has, like the
 * kernels (kernels.h picks the same instruction set). */
#include "roofline.h"
#include "kernels.h"
#include "kernels_isa.h" /* fetch_line: the kernels' own requests for lines */
#include "team.h"
#include "progress.h" /* now_seconds */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

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

/* passes over n float16 weights (in L1), each converted and multiply-added
 * into one of 8 chains: a float16 decode tile's work without the reads */
#define F16_PROBE(NAME, TARGET, VEC, HALF, LOADH, CVT, SET1, FMADD, STORE, LANES)          \
    __attribute__((target(TARGET))) static float NAME(const uint16_t *h, size_t n, long passes) { \
        VEC acc[8], x = SET1(1e-3f);                                                     \
        for (int c = 0; c < 8; c++) acc[c] = SET1(0.0f);                                 \
        for (long p = 0; p < passes; p++)                                                \
            for (size_t i = 0; i < n; i += 8 * LANES)                                    \
                for (int c = 0; c < 8; c++)                                              \
                    acc[c] = FMADD(CVT(LOADH((const HALF *)(h + i + (size_t)c * LANES))), x, acc[c]); \
        float out[LANES], s = 0;                                                         \
        for (int c = 0; c < 8; c++) {                                                    \
            STORE(out, acc[c]);                                                          \
            for (int l = 0; l < LANES; l++) s += out[l];                                 \
        }                                                                                \
        return s;                                                                        \
    }

F16_PROBE(f16_avx2, "avx2,fma,f16c", __m256, __m128i, _mm_loadu_si128, _mm256_cvtph_ps, _mm256_set1_ps,
          _mm256_fmadd_ps, _mm256_storeu_ps, 8)
F16_PROBE(f16_avx512, "avx512f", __m512, __m256i, _mm256_loadu_si256, _mm512_cvtph_ps, _mm512_set1_ps,
          _mm512_fmadd_ps, _mm512_storeu_ps, 16)
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

/* Σ of the bytes [p, p + n): the in-order read's pass over a span. In
 * integers, whole lines a vector at a time (the bytes of int8 rows read as
 * floats would hold denormals, which the FPU slows down on). */
static uint64_t bytes_sum_portable(const unsigned char *p, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s += p[i];
    return s;
}

#ifdef PROBE_X86
/* With fetch (a phase's: roofline.h), lines QKV_KV_AHEAD bytes ahead are
 * requested into L1 or L2, as the weights' kernel requests its own
 * (KernelEntry.fetch), and the KV cache's as its fetch_ahead says
 * (kv_fetch_ahead: into L1 on every maker but AMD; on AMD family 25 into
 * L2 for float32 rows with AVX-512, else none; on other AMD families into
 * L1) */

/* The bytes before p's next 64-byte boundary (at most n) */
static size_t to_line(const unsigned char *p, size_t n) {
    size_t head = (64 - (uintptr_t)p % 64) % 64;
    return head < n ? head : n;
}

__attribute__((target("avx512f,avx512bw"))) static uint64_t bytes_sum_avx512(const unsigned char *p, size_t n,
                                                                              Fetch fetch) {
    size_t head = to_line(p, n), i = 0;
    uint64_t s = bytes_sum_portable(p, head);
    p += head, n -= head;
    __m512i zero = _mm512_setzero_si512(), s0 = zero, s1 = zero;
    for (; i + 128 <= n; i += 128) {
        fetch_line(p + i + QKV_KV_AHEAD, fetch);
        fetch_line(p + i + QKV_KV_AHEAD + 64, fetch);
        s0 = _mm512_add_epi64(s0, _mm512_sad_epu8(_mm512_load_si512(p + i), zero));
        s1 = _mm512_add_epi64(s1, _mm512_sad_epu8(_mm512_load_si512(p + i + 64), zero));
    }
    for (; i + 64 <= n; i += 64) s0 = _mm512_add_epi64(s0, _mm512_sad_epu8(_mm512_load_si512(p + i), zero));
    return s + (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(s0, s1)) + bytes_sum_portable(p + i, n - i);
}

__attribute__((target("avx2"))) static uint64_t bytes_sum_avx2(const unsigned char *p, size_t n, Fetch fetch) {
    size_t head = to_line(p, n), i = 0;
    uint64_t s = bytes_sum_portable(p, head), lanes[4];
    p += head, n -= head;
    __m256i zero = _mm256_setzero_si256(), s0 = zero, s1 = zero;
    for (; i + 64 <= n; i += 64) {
        fetch_line(p + i + QKV_KV_AHEAD, fetch);
        s0 = _mm256_add_epi64(s0, _mm256_sad_epu8(_mm256_load_si256((const __m256i *)(p + i)), zero));
        s1 = _mm256_add_epi64(s1, _mm256_sad_epu8(_mm256_load_si256((const __m256i *)(p + i + 32)), zero));
    }
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi64(s0, s1));
    return s + lanes[0] + lanes[1] + lanes[2] + lanes[3] + bytes_sum_portable(p + i, n - i);
}
#endif

static uint64_t bytes_sum(Isa isa, const unsigned char *p, size_t n, Fetch fetch) {
#ifdef PROBE_X86
    if (isa >= ISA_AVX512) return bytes_sum_avx512(p, n, fetch);
    if (isa >= ISA_AVX2) return bytes_sum_avx2(p, n, fetch);
#else
    (void)fetch;
#endif
    return bytes_sum_portable(p, n);
}

/* ---- the measurements ---- */

/* One pass over a[0..n), each thread summing its own part of the buffer
 * (the decode kernels split the rows of a matrix the same way) */
static float sum_pass(Isa isa, const float *a, size_t n, int threads) {
    float total = 0;
    int t;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
    for (t = 0; t < threads; t++) {
        size_t part = n / (size_t)threads / 64 * 64;
        size_t begin = (size_t)t * part, len = t == threads - 1 ? n - begin : part;
        total += probe_sum(isa, a + begin, len);
    }
    return total;
}

/* Best of several timed passes over a[0..n): at least 5, then on until
 * 0.3 s of wall time have passed, untimed passes included (up to 2,000).
 * At most 50 had spanned 60 ms for the 15M shape's 58 MiB, and on a shared
 * machine one slow stretch of that length had left the probe at 35 GB/s
 * where it read 55 a minute before (AMD EPYC), and put a decode step at
 * 127% of it. With other (n_other floats), each timed pass
 * follows an untimed pass over it, which evicts a from the caches as far
 * as its size does. */
static double measure_bandwidth(Isa isa, const float *a, size_t n, const float *other, size_t n_other,
                                int threads) {
    double best = 1e30, spent = 0;
    volatile float sink = 0;
    for (int pass = 0; pass < 2000 && (pass < 5 || spent < 0.3); pass++) {
        double begin = now_seconds();
        if (other) sink += sum_pass(isa, other, n_other, threads);
        double start = now_seconds();
        sink += sum_pass(isa, a, n, threads);
        double end = now_seconds();
        spent += end - begin;
        if (end - start < best) best = end - start;
    }
    (void)sink; /* its volatile stores keep the sums (clang counts it unused) */
    return (double)n * sizeof(float) / best * 1e-9;
}

/* The fastest of three passes of run(isa, ctx) on threads threads at once,
 * in seconds (each thread's result summed, so none is optimised away) */
static double fastest_on_threads(Isa isa, int threads, float (*run)(Isa isa, void *ctx), void *ctx) {
    volatile float sink = 0;
    double best = 1e30;
    for (int pass = 0; pass < 3; pass++) {
        double start = now_seconds();
        float total = 0;
        int t;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
        for (t = 0; t < threads; t++) total += run(isa, ctx);
        sink += total;
        double seconds = now_seconds() - start;
        if (seconds < best) best = seconds;
    }
    (void)sink;
    return best;
}

static float run_fma(Isa isa, void *iterations) {
    int lanes;
    return probe_fma(isa, *(const long *)iterations, &lanes);
}

static double measure_fma(Isa isa, int threads) {
    long iterations = 2000000;
    int lanes;
    probe_fma(isa, 0, &lanes);
    return 2.0 * FMA_CHAINS * lanes * (double)iterations * threads / fastest_on_threads(isa, threads, run_fma, &iterations) *
           1e-9;
}

/* GB/s of float16 converted and multiply-added on threads threads, each over
 * its own 16 KiB in L1: the float16 kernels' arithmetic alone, the ceiling
 * a float16 decode meets when its weights arrive faster than it converts
 * them (0 where this path has no vector conversion) */
#define F16_PROBE_HALVES 8192
#ifdef PROBE_X86
static float run_f16(Isa isa, void *passes) {
    uint16_t h[F16_PROBE_HALVES];
    for (int i = 0; i < F16_PROBE_HALVES; i++) h[i] = (uint16_t)(0x3C00 + (i & 1023)); /* 1 to 2 */
    long n = *(const long *)passes;
    return isa >= ISA_AVX512 ? f16_avx512(h, F16_PROBE_HALVES, n) : f16_avx2(h, F16_PROBE_HALVES, n);
}
#endif

static double measure_f16(Isa isa, int threads) {
#ifdef PROBE_X86
    long passes = 4000;
    if (isa >= ISA_AVX2)
        return 2.0 * F16_PROBE_HALVES * (double)passes * threads / fastest_on_threads(isa, threads, run_f16, &passes) *
               1e-9;
#endif
    (void)isa, (void)threads;
    return 0;
}

unsigned long long roofline_read_share(Isa isa, const ReadPhase *phase, size_t begin, size_t end) {
    uint64_t sum = 0;
    size_t at = 0;
    for (int i = 0; i < phase->n_spans && at < end; at += phase->spans[i].bytes, i++) {
        size_t bytes = phase->spans[i].bytes, from = begin > at ? begin - at : 0, to = end - at < bytes ? end - at : bytes;
        const unsigned char *data = (const unsigned char *)phase->spans[i].data;
        if (from < to) sum += bytes_sum(isa, data + from, to - from, phase->fetch);
    }
    return sum;
}

/* A phase read on a team: thread id of n sums its share of the phase's
 * bytes (the step's split of its work, team_share, over bytes), each
 * thread's sum in a slot of its own */
typedef struct {
    Isa isa;
    const ReadPhase *phase;
    size_t bytes;
    unsigned long long sums[TEAM_MAX];
} PhaseRead;

static void read_phase_task(void *ctx, int id, int n) {
    PhaseRead *r = ctx;
    long first, last;
    team_share((long)r->bytes, id, n, &first, &last);
    r->sums[id] += roofline_read_share(r->isa, r->phase, (size_t)first, (size_t)last);
}

double roofline_read_phases(Team *team, const ReadPhase *phases, int n_phases, int part, double seconds[2],
                            unsigned long long *sum) {
    PhaseRead r = { isa_available(), NULL, 0, { 0 } };
    double start = now_seconds(), mark = start;
    for (int k = 0; k < n_phases; k++) {
        if (part >= 0 && phases[k].part != part) continue;
        r.phase = &phases[k];
        r.bytes = 0;
        for (int i = 0; i < phases[k].n_spans; i++) r.bytes += phases[k].spans[i].bytes;
        team_run(team, read_phase_task, &r, team != NULL);
        double t = now_seconds();
        if (seconds) seconds[phases[k].part] += t - mark;
        mark = t;
    }
    for (int id = 0; id < TEAM_MAX; id++) *sum += r.sums[id];
    return mark - start;
}

void roofline_read_in_order(InOrderRead *r, Team *team, const ReadPhase *phases, int n_phases) {
    memset(r, 0, sizeof *r);
    for (int k = 0; k < n_phases; k++)
        for (int i = 0; i < phases[k].n_spans; i++) r->bytes[phases[k].part] += phases[k].spans[i].bytes;
    double best = 1e30, spent = 0;
    for (; r->passes < 20 && (r->passes < 3 || spent < 0.3); r->passes++) {
        double seconds[2] = { 0, 0 };
        unsigned long long sum = 0;
        double t = roofline_read_phases(team, phases, n_phases, -1, seconds, &sum);
        spent += t;
        r->byte_sum = sum;
        if (t < best) {
            best = t;
            r->seconds[0] = seconds[0], r->seconds[1] = seconds[1];
        }
    }
}

/* n floats of large pages (the weights' and the KV cache's pages), not all
 * alike (the sums' adds have work to do), or NULL */
static float *probe_buffer(size_t n) {
    float *buffer = zalloc_aligned(n, sizeof(float));
    if (buffer)
        for (size_t i = 0; i < n; i++) buffer[i] = (float)(i & 7);
    return buffer;
}

static size_t probe_floats(size_t bytes, int threads) {
    return (bytes / sizeof(float) + 64 * (size_t)threads) / 64 * 64;
}

void roofline_measure_after(Roofline *r, size_t bytes, size_t other_bytes, int threads) {
    Isa isa = isa_available();
    size_t n = probe_floats(bytes, threads), n_other = other_bytes ? probe_floats(other_bytes, threads) : 0;
    memset(r, 0, sizeof *r);
    r->threads = threads;
    r->isa = isa >= ISA_AVX512 ? "avx512" : isa >= ISA_AVX2 ? "avx2" : "portable";
    float *buffer = probe_buffer(n), *other = n_other ? probe_buffer(n_other) : NULL;
    if (buffer && (other || !n_other)) {
        r->probe_bytes = n * sizeof(float);
        r->read_gbps = measure_bandwidth(isa, buffer, n, other, n_other, threads);
    }
    free_aligned(buffer);
    free_aligned(other);
    r->fma_gflops = measure_fma(isa, threads);
    r->f16_gbps = measure_f16(isa, threads);
}

void roofline_measure(Roofline *r, size_t bytes, int threads) {
    roofline_measure_after(r, bytes, 0, threads);
}
