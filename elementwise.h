/* elementwise.h — exp and SiLU, one element at a time or a vector of 8 or
 * 16: a block of keys' softmax (its max, exp and sum: attention.h's, and
 * kv_int8.h's decode, which makes it a vector at a time) and the MLP's
 * SwiGLU (model.h); and the sampler's passes over the logits (their
 * check, greedy's maximum).
 *
 * Part of the engine's implementation (kv_cache.h's, attention.h's,
 * model.h's and sampler.h's include it after kernels.h, whose
 * instruction-set macros and mask helpers it uses); not a header of its
 * own.
 *
 * SwiGLU's vector forms compute every element with the same arithmetic
 * (a row's last, partial vector is masked, never left to a scalar loop), so
 * an element's result depends on its value and the instruction set only:
 * not on the row's length or where a thread's share of the elements
 * begins. A prompt's SwiGLU (many rows, split across threads) gives the
 * bits of one token's. The logits' passes only compare (AVX2 leaves the
 * last elements to scalar loops: n % 8 of the check, n % 16 of the
 * maximum's pass and n % 8 of its search), and every form gives the same
 * index.
 * The block's exp masks the last vector with AVX-512 and leaves it to
 * exp_scalar with AVX2 (block_exp_256). */
#ifndef QKV_ELEMENTWISE_H
#define QKV_ELEMENTWISE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* exp                                                                       */

/* exp by Cephes' expf: x = n ln2 + r with |r| <= ln2/2, a degree-6 polynomial
 * in r, times 2^n. Within 2 ulp for the x <= 0 a softmax gives. Below
 * EXP_FLUSH the result is 0: e^-64 = 1.6e-28 of the block's largest weight
 * cannot move a float32 sum (its rounding is 6e-8 of the largest term), and
 * such weights times values would be subnormal floats, which Intel cores
 * handle slowly (measured here: a weighted sum of 4,096 value rows of 48
 * with every weight 1.2e-38 took 33 times as long as with 1e-3 or 0). A NaN
 * stays NaN, so bad weights still reach the logits' check. */
#define EXP_FLUSH -64.0f
#define EXP_LO -87.3365447505f
#define EXP_HI 88.3762626647f
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693359375f
#define LN2_LO -2.12194440e-4f
#define EXP_POLY(fma, r, c)                                                                  \
    fma(fma(fma(fma(fma(c(1.9875691500e-4f), r, c(1.3981999507e-3f)), r, c(8.3334519073e-3f)), \
                r, c(4.1665795894e-2f)), r, c(1.6666665459e-1f)), r, c(5.0000001201e-1f))

static inline float scalar_fma(float a, float b, float c) { return a * b + c; }
static inline float scalar_constant(float c) { return c; }

static float exp_scalar(float x) {
    if (x != x) return x;
    if (x < EXP_FLUSH) return 0.0f;
    x = x > EXP_HI ? EXP_HI : x;
    float n = floorf(x * LOG2E + 0.5f);
    float r = x - n * LN2_HI - n * LN2_LO;
    float y = EXP_POLY(scalar_fma, r, scalar_constant);
    return ldexpf(y * r * r + r + 1.0f, (int)n);
}

#ifdef QKV_HAVE_X86_KERNELS
/* The 16- and 8-lane exp alike (P: the intrinsics' prefix): x clamped, n =
 * round(x log2e), y = e^r. maxps and minps return their second operand
 * when either is NaN: x goes second, so a NaN stays NaN. */
#define EXP_VECTOR(P, x, n, y, ROUND)                                                            \
    do {                                                                                         \
        x = P##min_ps(P##set1_ps(EXP_HI), P##max_ps(P##set1_ps(EXP_LO), x));                    \
        n = P##ROUND(P##mul_ps(x, P##set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); \
        __typeof__(x) r = P##fnmadd_ps(n, P##set1_ps(LN2_LO), P##fnmadd_ps(n, P##set1_ps(LN2_HI), x)); \
        y = EXP_POLY(P##fmadd_ps, r, P##set1_ps);                                                \
        y = P##fmadd_ps(y, P##mul_ps(r, r), P##add_ps(r, P##set1_ps(1.0f)));                     \
    } while (0)

TARGET_AVX512 INLINE __m512 exp_512(__m512 x) {
    __mmask16 flushed = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_FLUSH), _CMP_LT_OQ);
    __m512 n, y;
    EXP_VECTOR(_mm512_, x, n, y, roundscale_ps);
    return _mm512_maskz_mov_ps((__mmask16)~flushed, _mm512_scalef_ps(y, n));
}

TARGET_AVX2 INLINE __m256 exp_256(__m256 x) {
    __m256 flushed = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_FLUSH), _CMP_LT_OQ), n, y;
    EXP_VECTOR(_mm256_, x, n, y, round_ps);
    __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(flushed, _mm256_mul_ps(y, _mm256_castsi256_ps(two_n)));
}
#endif

/* ------------------------------------------------------------------------ */
/* A block's softmax: the max, then e = exp(x − max) and its sum             */

static float block_max_portable(const float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    return max;
}

/* e[i] = exp(x[i] * scale − max), returns Σ e; e may be x */
static float block_exp_portable(const float *x, float *e, int n, float scale, float max) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += e[i] = exp_scalar(x[i] * scale - max);
    return sum;
}

#ifdef QKV_HAVE_X86_KERNELS
TARGET_AVX512 static float block_max_512(const float *x, int n) {
    __m512 max = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += 16) max = _mm512_max_ps(max, _mm512_mask_loadu_ps(max, tail_mask(i, n), x + i));
    return _mm512_reduce_max_ps(max);
}

/* exp(x · s − m) in the lanes of x's 16, 0 in the others (block_exp_512's
 * vector; kv_int8.h's decode makes a block's a vector at a time) */
TARGET_AVX512 INLINE __m512 block_exp16(const float *x, __mmask16 lanes, __m512 s, __m512 m) {
    return _mm512_maskz_mov_ps(lanes, exp_512(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(lanes, x), s, m)));
}

TARGET_AVX512 static float block_exp_512(const float *x, float *e, int n, float scale, float max) {
    __m512 sum = _mm512_setzero_ps(), s = _mm512_set1_ps(scale), m = _mm512_set1_ps(max);
    for (int i = 0; i < n; i += 16) {
        __mmask16 lanes = tail_mask(i, n);
        __m512 v = block_exp16(x + i, lanes, s, m);
        sum = _mm512_add_ps(sum, v);
        _mm512_mask_storeu_ps(e + i, lanes, v);
    }
    return _mm512_reduce_add_ps(sum);
}

/* Whole vectors of 8, then the last n % 8 by the portable loop */
TARGET_AVX2 static float block_max_256(const float *x, int n) {
    __m256 max = _mm256_set1_ps(-INFINITY);
    int i = 0;
    float lanes[8], m = -INFINITY;
    for (; i + 8 <= n; i += 8) max = _mm256_max_ps(max, _mm256_loadu_ps(x + i));
    _mm256_storeu_ps(lanes, max);
    for (int l = 0; l < 8; l++) m = lanes[l] > m ? lanes[l] : m;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

TARGET_AVX2 static float block_exp_256(const float *x, float *e, int n, float scale, float max) {
    __m256 sum = _mm256_setzero_ps(), s = _mm256_set1_ps(scale), m = _mm256_set1_ps(max);
    int i = 0;
    float lanes[8], total = 0.0f;
    for (; i + 8 <= n; i += 8) {
        __m256 v = exp_256(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), s, m));
        sum = _mm256_add_ps(sum, v);
        _mm256_storeu_ps(e + i, v);
    }
    _mm256_storeu_ps(lanes, sum);
    for (int l = 0; l < 8; l++) total += lanes[l];
    return total + block_exp_portable(x + i, e + i, n - i, scale, max);
}
#endif

typedef struct {
    float (*max)(const float *x, int n);
    float (*exp)(const float *x, float *e, int n, float scale, float max);
} BlockSoftmax;

static BlockSoftmax block_softmax(Isa isa) {
#ifdef QKV_HAVE_X86_KERNELS
    if (isa >= ISA_AVX512) return (BlockSoftmax){ block_max_512, block_exp_512 };
    if (isa >= ISA_AVX2) return (BlockSoftmax){ block_max_256, block_exp_256 };
#endif
    return (BlockSoftmax){ block_max_portable, block_exp_portable };
}

/* ------------------------------------------------------------------------ */
/* SwiGLU's product: gate <- silu(gate) * up = gate / (1 + e^-gate) * up     */

/* e^-g by the exp above: for g > 64 it is 0 and silu(g) = g (as with libm's
 * expf, since 1 + e^-64 rounds to 1). Below -EXP_HI (-88.38) the exp
 * clamps -g to EXP_HI on every path, e^88.38 = 2.4e38, which made silu(g)
 * g / 2.4e38: 4e-33 at -1e6 and -1.25 at -3e38, where the answer is 0. So
 * there silu(g) is g * 0, the -0 libm's g / (1 + inf) gives. A NaN stays
 * NaN. Within 4 ulp of float64 elsewhere (the exp's 2, a divide and a
 * multiply; test_engine's test_silu_mul measures 2.4 at worst, a sweep of
 * -80..80 2.9). */
static void silu_mul_portable(float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i], silu = g / (1.0f + exp_scalar(-g));
        gate[i] = (g < -EXP_HI ? g * 0.0f : silu) * up[i];
    }
}

#ifdef QKV_HAVE_X86_KERNELS
TARGET_AVX512 static void silu_mul_512(float *gate, const float *up, int n) {
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 lanes = tail_mask(i, n);
        __m512 g = _mm512_maskz_loadu_ps(lanes, gate + i), u = _mm512_maskz_loadu_ps(lanes, up + i);
        __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp_512(_mm512_sub_ps(zero, g))));
        __mmask16 under = _mm512_cmp_ps_mask(g, _mm512_set1_ps(-EXP_HI), _CMP_LT_OQ); /* e^-g past float's range */
        silu = _mm512_mask_mul_ps(silu, under, g, zero);
        _mm512_mask_storeu_ps(gate + i, lanes, _mm512_mul_ps(silu, u));
    }
}

TARGET_AVX2 static void silu_mul_256(float *gate, const float *up, int n) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        __m256i lanes = lanes_below(n - i);
        __m256 g = _mm256_maskload_ps(gate + i, lanes), u = _mm256_maskload_ps(up + i, lanes);
        __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp_256(_mm256_sub_ps(zero, g))));
        __m256 under = _mm256_cmp_ps(g, _mm256_set1_ps(-EXP_HI), _CMP_LT_OQ); /* e^-g past float's range */
        silu = _mm256_blendv_ps(silu, _mm256_mul_ps(g, zero), under);
        _mm256_maskstore_ps(gate + i, lanes, _mm256_mul_ps(silu, u));
    }
}
#endif

void silu_mul(Isa isa, float *gate, const float *up, int n) {
#ifdef QKV_HAVE_X86_KERNELS
    if (isa >= ISA_AVX512) silu_mul_512(gate, up, n);
    else if (isa >= ISA_AVX2) silu_mul_256(gate, up, n);
    else
#endif
        silu_mul_portable(gate, up, n);
}

/* ------------------------------------------------------------------------ */
/* Over the logits: the first that is not finite, the first largest        */

/* Every token's logits are checked (NaN or infinity: bits 23..30 all set)
 * and, greedy, searched for their largest, while the other threads wait:
 * a scalar pass over a 32,000-token vocabulary took 15 us a token here,
 * 3% of a step of the 15M shape on two threads. */
static int nonfinite_first_portable(const float *x, int n) {
    /* a branch-free pass first (compilers make it vector compares), then
     * the index only when something is wrong */
    const uint32_t *bits = (const uint32_t *)(const void *)x;
    uint32_t bad = 0;
    for (int i = 0; i < n; i++) bad |= (bits[i] & 0x7f800000u) == 0x7f800000u;
    if (bad)
        for (int i = 0; i < n; i++)
            if ((bits[i] & 0x7f800000u) == 0x7f800000u) return i;
    return -1;
}

/* The first index of the largest value; x has no NaN. Two passes: the
 * maximum in sixteen running lanes (independent, so they overlap), then
 * its first place. */
static int max_first_portable(const float *x, int n) {
    float lane[16];
    for (int l = 0; l < 16; l++) lane[l] = -INFINITY;
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
    float best = -INFINITY;
    for (; i < n; i++) best = x[i] > best ? x[i] : best;
    for (int l = 0; l < 16; l++) best = lane[l] > best ? lane[l] : best;
    for (i = 0; i < n; i++)
        if (x[i] == best) return i;
    return 0;
}

#ifdef QKV_HAVE_X86_KERNELS
TARGET_AVX512 static int nonfinite_first_512(const float *x, int n) {
    const __m512i exponent = _mm512_set1_epi32(0x7f800000);
    for (int i = 0; i < n; i += 16) {
        __mmask16 lanes = tail_mask(i, n);
        __m512i bits = _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(lanes, x + i)), exponent);
        __mmask16 bad = _mm512_mask_cmpeq_epi32_mask(lanes, bits, exponent);
        if (bad) return i + __builtin_ctz(bad);
    }
    return -1;
}

/* the maximum in two running vectors, then the first lane equal to it */
TARGET_AVX512 static int max_first_512(const float *x, int n) {
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
        m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
    }
    for (; i < n; i += 16) {
        __mmask16 lanes = tail_mask(i, n);
        m0 = _mm512_mask_max_ps(m0, lanes, m0, _mm512_maskz_loadu_ps(lanes, x + i));
    }
    __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(m0, m1)));
    for (i = 0; i < n; i += 16) {
        __mmask16 lanes = tail_mask(i, n);
        __mmask16 hit = _mm512_mask_cmp_ps_mask(lanes, _mm512_maskz_loadu_ps(lanes, x + i), top, _CMP_EQ_OQ);
        if (hit) return i + __builtin_ctz(hit);
    }
    return 0;
}

TARGET_AVX2 static int nonfinite_first_256(const float *x, int n) {
    const __m256i exponent = _mm256_set1_epi32(0x7f800000);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i bits = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), exponent);
        int bad = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(bits, exponent)));
        if (bad) return i + __builtin_ctz((unsigned)bad);
    }
    int rest = nonfinite_first_portable(x + i, n - i);
    return rest < 0 ? -1 : i + rest;
}

TARGET_AVX2 static int max_first_256(const float *x, int n) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
    }
    float lanes[8], best = -INFINITY;
    _mm256_storeu_ps(lanes, _mm256_max_ps(m0, m1));
    for (int l = 0; l < 8; l++) best = lanes[l] > best ? lanes[l] : best;
    for (; i < n; i++) best = x[i] > best ? x[i] : best;
    __m256 top = _mm256_set1_ps(best);
    for (i = 0; i + 8 <= n; i += 8) {
        int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), top, _CMP_EQ_OQ));
        if (hit) return i + __builtin_ctz((unsigned)hit);
    }
    for (; i < n; i++)
        if (x[i] == best) return i;
    return 0;
}
#endif

int nonfinite_first(Isa isa, const float *x, int n) {
#ifdef QKV_HAVE_X86_KERNELS
    if (isa >= ISA_AVX512) return nonfinite_first_512(x, n);
    if (isa >= ISA_AVX2) return nonfinite_first_256(x, n);
#endif
    return nonfinite_first_portable(x, n);
}

int max_first(Isa isa, const float *x, int n) {
#ifdef QKV_HAVE_X86_KERNELS
    if (isa >= ISA_AVX512) return max_first_512(x, n);
    if (isa >= ISA_AVX2) return max_first_256(x, n);
#endif
    return max_first_portable(x, n);
}

#endif /* QKV_ELEMENTWISE_H */
