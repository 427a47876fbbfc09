/* elementwise.h — exp and SiLU, one element at a time or a vector of 8 or
 * 16: the softmax's exp (attention.h) and the MLP's SwiGLU (model.h).
 *
 * Part of the engine's implementation (attention.h's and model.h's include
 * it after kernels.h, whose instruction-set macros it uses); not a header
 * of its own.
 *
 * Each function's vector forms compute every element with the same
 * arithmetic as each other (a row's last, partial vector is masked, never
 * left to a scalar loop), so an element's result depends on its value and
 * the instruction set only: not on the row's length or where a thread's
 * share of the elements begins. A prompt's SwiGLU (many rows, split across
 * threads) gives the bits of one token's. */
#ifndef QKV_ELEMENTWISE_H
#define QKV_ELEMENTWISE_H

#include <math.h>

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
/* SwiGLU's product: gate <- silu(gate) * up = gate / (1 + e^-gate) * up     */

/* e^-g by the exp above: for g > 64 it is 0 and silu(g) = g (as with libm's
 * expf, since 1 + e^-64 rounds to 1); for g < -88.4 it is e^88.4 (AVX2:
 * infinity from -88.03), so silu(g) = g / 1e38, not the -0 libm gives: a
 * difference below 1e-36. A NaN stays NaN. Within 4 ulp of float64
 * elsewhere (the exp's 2, a divide and a multiply; test_attention measures
 * 2.4 at worst). */
static void silu_mul_portable(float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + exp_scalar(-gate[i])) * up[i];
}

#ifdef QKV_HAVE_X86_KERNELS
TARGET_AVX512 static void silu_mul_512(float *gate, const float *up, int n) {
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 lanes = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 g = _mm512_maskz_loadu_ps(lanes, gate + i), u = _mm512_maskz_loadu_ps(lanes, up + i);
        __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp_512(_mm512_sub_ps(zero, g))));
        _mm512_mask_storeu_ps(gate + i, lanes, _mm512_mul_ps(silu, u));
    }
}

TARGET_AVX2 static void silu_mul_256(float *gate, const float *up, int n) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        int left = n - i < 8 ? n - i : 8;
        /* lane l is on when l < left */
        __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 g = _mm256_maskload_ps(gate + i, lanes), u = _mm256_maskload_ps(up + i, lanes);
        __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp_256(_mm256_sub_ps(zero, g))));
        _mm256_maskstore_ps(gate + i, lanes, _mm256_mul_ps(silu, u));
    }
}
#endif

static void silu_mul(Isa isa, float *gate, const float *up, int n) {
#ifdef QKV_HAVE_X86_KERNELS
    if (isa >= ISA_AVX512) silu_mul_512(gate, up, n);
    else if (isa >= ISA_AVX2) silu_mul_256(gate, up, n);
    else
#endif
        silu_mul_portable(gate, up, n);
}

#endif /* QKV_ELEMENTWISE_H */
