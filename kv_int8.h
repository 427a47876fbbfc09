/* kv_int8.h — the KV cache's int8 rows: how they are laid out for whole-
 * vector integer products (keys in panels of 16 positions, values in pairs,
 * the scales apart), and the two products attention makes of them, scores
 * and weighted sums, as exact int32 sums of int16 products: the portable C,
 * AVX2, AVX-512 and AVX-512 VNNI kernels, and the choice among them.
 *
 * Part of kv_cache.h's implementation (included after its helpers, before
 * the rows are stored); not a header of its own. */
#ifndef QKV_KV_INT8_INCLUDED
#define QKV_KV_INT8_INCLUDED

/* roundf's halves away from zero, exactly, for |v| < 2^31 */
static inline int kv_round(float v) {
    int t = (int)v;
    float fraction = v - (float)t;
    return t + (fraction >= 0.5f) - (fraction <= -0.5f);
}

/* An int8 row's scale, max|x| / 127, and its inverse (0 for a row of
 * zeros); a row with a NaN or an infinity gets a NaN scale and inverse 0,
 * so no float -> int is undefined and the row's products are NaN */
static float q8_scale(const float *x, int n, float *inverse) {
    float amax = abs_max(x, n), scale = amax / 127.0f;
    *inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    if (amax <= 3.4e38f) return scale;
    *inverse = 0.0f;
    return NAN;
}

/* An element of an int8 row: round(x / scale) */
static inline unsigned char q8_byte(float x, float inverse) { return (unsigned char)(int8_t)kv_round(x * inverse); }

/* int8 keys, in panels: the rows of slots 16j..16j+15 of a head together,
 * two elements of each row after the other's, so that widened to int16 a
 * vector holds two elements of each of the panel's 16 keys, and one
 * multiply-add of int16 pairs adds a pair of q's products to each key's
 * score. Element i of key t (t from a panel's first row) is at
 *     (t - t % 16) · row_bytes + (i / 2) · 32 + (t % 16) · 2 + i % 2
 * (row_bytes: the head size rounded up to a pair). scales[t]: its scale. */
typedef struct {
    const unsigned char *panels;
    const float *scales;
    int hs;
} Q8Keys;

/* The bytes of a panel: 16 keys of the head size rounded up to a pair */
static inline size_t q8_panel_bytes(int hs) { return (size_t)KV_Q8_PANEL * (size_t)(hs + hs % 2); }

static inline int q8_key(Q8Keys k, int t, int i) {
    size_t panel = (size_t)(t / KV_Q8_PANEL) * q8_panel_bytes(k.hs);
    return (int8_t)k.panels[panel + (size_t)(i / 2) * 2 * KV_Q8_PANEL + (size_t)(t % KV_Q8_PANEL) * 2 + i % 2];
}

/* int8 values, in pairs (slots 2j and 2j+1 of a head): v_2j[0], v_2j+1[0],
 * v_2j[1], v_2j+1[1], ..., so that widened to int16 each 32-bit lane holds
 * one element of both rows (the weighted sums below). Element i of value t
 * (t from an even row) is at (t - t % 2) · hs + 2i + t % 2. */
typedef struct {
    const unsigned char *pairs;
    const float *scales;
    int hs;
} Q8Values;

static Q8Values q8_values_at(Q8Values v, int t) {
    return (Q8Values){ v.pairs + (size_t)t * v.hs, v.scales + t, v.hs };
}

static inline int q8_value(Q8Values v, int t, int i) {
    return (int8_t)v.pairs[(size_t)(t - t % 2) * v.hs + 2 * (size_t)i + t % 2];
}

/* The int8 keys (values) from row `row` of the cache on: the panel (pair)
 * it is in, and its place there */
static Q8Keys q8_keys_of(const KVCache *kv, size_t row, int *skip) {
    *skip = (int)(row % KV_Q8_PANEL);
    row -= (size_t)*skip;
    return (Q8Keys){ kv->keys + row * kv->row_bytes, kv->key_scales + row, kv->head_size };
}

static Q8Values q8_values_of(const KVCache *kv, size_t row, int *skip) {
    *skip = (int)(row % 2);
    row -= (size_t)*skip;
    return (Q8Values){ kv->values + row * kv->value_bytes, kv->value_scales + row, kv->head_size };
}

/* ---- Scores of int8 keys, and weighted sums of value rows ---- */

/* An int8 key's score is scale_k · Σ q_i k_i. Its products in float (each
 * int8 converted, then an FMA) took longer than the key's 52 bytes take to
 * arrive (7 cycles a key of 48 with the rows in cache, 1 thread, Xeon), so
 * q is rounded to int16 once a call, q_i ≈ p_i · q_scale, and each key's
 * Σ p_i k_i is an exact int32 (pmaddwd, 32 or 16 products a step). Every
 * instruction set gets the same integer, so the same score:
 *     score = (float)Σ p_i k_i · (scale_k · q_scale)
 * |p_i| ≤ p_max, with head_size · 127 · p_max < 2^31: 32767 for head sizes
 * up to 516. The rounding moves a score by at most q_scale / 2 · scale_k ·
 * Σ |k_i| (tested), a relative 1.5e-5 of max|q| · Σ |k_i| · scale_k. */
#define KV_Q8_COLUMNS 256 /* q's columns rounded at a time (a multiple of 32) */

typedef struct {
    float scale, inverse; /* q_i ≈ p_i · scale, p_i = round(q_i · inverse) */
} QueryScale;

/* amax = max |q_i|, NaN when a q_i is not finite (then every score is NaN) */
static QueryScale query_scale(float amax, int hs) {
    int p_max = hs <= INT32_MAX / 127 / 32767 ? 32767 : INT32_MAX / 127 / hs;
    if (!(amax <= 3.4e38f)) return (QueryScale){ NAN, 0.0f };
    if (amax == 0.0f) return (QueryScale){ 0.0f, 0.0f };
    return (QueryScale){ amax / (float)p_max, (float)p_max / amax };
}

/* p[i] = round(q[i] · inverse) (to nearest, ties to even: the vector
 * conversions' rounding) for i < count, then zeros to a multiple of 32 */
static void query_int16(const float *q, int count, float inverse, int16_t *p) {
    int i = 0;
    for (; i < count; i++) p[i] = (int16_t)lrintf(q[i] * inverse);
    for (; i % 32; i++) p[i] = 0;
}

/* scores[at + j] = lanes[j] for j < count where 0 <= at + j < n (a call's
 * first and last panels of keys may be partial) */
static void q8_store_lanes(float *scores, int at, int n, const float *lanes, int count) {
    if (at >= 0 && at + count <= n) {
        memcpy(scores + at, lanes, sizeof(float) * (size_t)count);
        return;
    }
    for (int j = 0; j < count; j++)
        if (at + j >= 0 && at + j < n) scores[at + j] = lanes[j];
}

/* query_int16 of count columns into p, and each pair of them repeated
 * across a panel's 16 keys: wide[c][2r + j] = p[2c + j] */
static void q8_query_panel(const float *q, int count, float inverse, int16_t *p,
                           int16_t wide[KV_Q8_COLUMNS / 2][2 * KV_Q8_PANEL]) {
    query_int16(q, count, inverse, p);
    for (int c = 0; c < (count + 1) / 2; c++)
        for (int r = 0; r < KV_Q8_PANEL; r++) {
            wide[c][2 * r] = p[2 * c];
            wide[c][2 * r + 1] = p[2 * c + 1];
        }
}

/* scores[r] = the score of key skip + r of the panels k, r < n: a panel
 * at a time, its 16 keys' sums side by side (as the vector kernels)
 * (the int16 products, which the compiler vectorizes, with q's columns
 * repeated across the keys) */
static void q8_scores_portable(Q8Keys k, int skip, const float *q, int n, float *scores, int fetch) {
    (void)fetch;
    QueryScale qs = query_scale(abs_max(q, k.hs), k.hs);
    int16_t p[KV_Q8_COLUMNS], wide[KV_Q8_COLUMNS / 2][2 * KV_Q8_PANEL];
    if (k.hs <= KV_Q8_COLUMNS) q8_query_panel(q, k.hs, qs.inverse, p, wide);
    size_t panel_bytes = q8_panel_bytes(k.hs);
    for (int first = 0; first < skip + n; first += KV_Q8_PANEL) {
        const unsigned char *panel = k.panels + (size_t)(first / KV_Q8_PANEL) * panel_bytes;
        int32_t dot[2 * KV_Q8_PANEL] = { 0 }; /* key r's: dot[2r] + dot[2r + 1] */
        for (int from = 0; from < k.hs; from += KV_Q8_COLUMNS) {
            int count = k.hs - from < KV_Q8_COLUMNS ? k.hs - from : KV_Q8_COLUMNS;
            const unsigned char *x = panel + (size_t)from * KV_Q8_PANEL;
            if (k.hs > KV_Q8_COLUMNS) q8_query_panel(q + from, count, qs.inverse, p, wide);
            for (int c = 0; c < (count + 1) / 2; c++, x += 2 * KV_Q8_PANEL)
                for (int j = 0; j < 2 * KV_Q8_PANEL; j++) dot[j] += (int32_t)wide[c][j] * (int16_t)(int8_t)x[j];
        }
        float lanes[KV_Q8_PANEL];
        for (int r = 0; r < KV_Q8_PANEL; r++) lanes[r] = (float)(dot[2 * r] + dot[2 * r + 1]) * (k.scales[first + r] * qs.scale);
        q8_store_lanes(scores, first - skip, n, lanes, KV_Q8_PANEL);
    }
}

/* ---- Weighted sums of int8 value rows, in int16 ----
 * In float (each int8 widened, converted, then a multiply-add into the
 * sum), a row of 48 took 4.8 cycles with the rows in cache, longer than its
 * 52 bytes take to arrive from memory (1 thread, Xeon). So the weights are
 * rounded to int16 and the sums are exact int32, as the scores' are. The
 * rows are stored in pairs (kv_cache_store): widened to int16, each 32-bit
 * lane holds one element of both rows, and one multiply-add of int16 pairs
 * (vpdpwssd, pmaddwd) adds both rows' products with the pair's weights.
 * Their scales lie apart, in order, so the weights of a chunk are one
 * product of two short vectors. Per chunk of at most KV_Q8_CHUNK rows:
 *     w_t · scale_t ≈ c_t · step,  step = max_t |w_t · scale_t| / 32767
 *     out[i] = fma((float)Σ_t c_t v_t[i], step, out[i])  (out from 0)
 * Σ_t c_t v_t[i] is an exact integer (|c_t v_t[i]| ≤ 32767 · 127, and 256
 * of them fit in an int32), the same whatever the order or the instruction
 * set, and so is out. The rounding of c_t moves out[i] by at most
 * step / 2 · Σ_t |v_t[i]| (tested): a relative 1.5e-5 of the largest
 * weighted row's. A chunk whose weights are not finite, or all below
 * KV_Q8_TINY (step would not be a float), is summed in float instead. */
#define KV_Q8_CHUNK 256
#define KV_Q8_TINY 1e-30f

/* The int16 weights of a chunk: c[t] for t < n, zeros to a multiple of 32 */
typedef struct {
    int16_t c[KV_Q8_CHUNK];
    float step; /* 0: sum this chunk in float (q8_chunk_float) */
} Q8Weights;

/* The step of weights wt[t] = w_t · scale_t whose max |wt| is amax (NaN
 * if one is not finite), or 0; then c = query_int16(wt, 32767 / amax). */
static float q8_weights_step(float amax) {
    return amax >= KV_Q8_TINY && amax <= 3.4e38f ? amax / 32767.0f : 0.0f;
}

/* out[i] += Σ_t w[t] · scale_t · v_t[i] in float, rows in order (a chunk
 * that cannot be rounded: a NaN gives NaN, as it should) */
static void q8_chunk_float(Q8Values v, const float *w, int n, float *out) {
    for (int i = 0; i < v.hs; i++) {
        float sum = 0.0f;
        for (int t = 0; t < n; t++) sum += w[t] * v.scales[t] * (float)q8_value(v, t, i);
        out[i] += sum;
    }
}

/* out[i] = fma((float)Σ_t c[t] · v_t[i], step, out[i]) for from <= i < to,
 * t < n: a pair of rows at a time, into the sums of up to 256 elements */
static void q8_add_sums_portable(Q8Values v, const Q8Weights *q, int n, int from, int to, float *out) {
    for (int i0 = from; i0 < to; i0 += 256) {
        int count = to - i0 < 256 ? to - i0 : 256;
        int32_t sums[2 * 256] = { 0 }; /* element i's: sums[2i] + sums[2i + 1] */
        int16_t pair[2 * 256];
        for (int t = 0; t < n; t += 2) {
            const unsigned char *x = v.pairs + (size_t)t * v.hs + 2 * (size_t)i0;
            int16_t c0 = q->c[t], c1 = t + 1 < n ? q->c[t + 1] : 0;
            for (int i = 0; i < count; i++) { /* int16 products, vectorized */
                pair[2 * i] = c0;
                pair[2 * i + 1] = c1;
            }
            for (int j = 0; j < 2 * count; j++) sums[j] += (int32_t)pair[j] * (int16_t)(int8_t)x[j];
        }
        for (int i = 0; i < count; i++) out[i0 + i] = fmaf((float)(sums[2 * i] + sums[2 * i + 1]), q->step, out[i0 + i]);
    }
}

/* A chunk's int16 weights (Q8Weights) from w and the rows' scales */
static void q8_weights_portable(Q8Values v, const float *w, int n, Q8Weights *q) {
    float wt[KV_Q8_CHUNK];
    for (int t = 0; t < n; t++) wt[t] = w[t] * v.scales[t];
    float amax = abs_max(wt, n);
    q->step = q8_weights_step(amax);
    if (q->step != 0.0f) query_int16(wt, n, 32767.0f / amax, q->c);
}

/* out += a chunk's products, every element (the rows ahead not requested) */
static void q8_sums_portable(Q8Values v, const Q8Weights *q, int n, float *out, int fetch) {
    (void)fetch;
    q8_add_sums_portable(v, q, n, 0, v.hs, out);
}

/* c[2p] and c[2p + 1] as one 32-bit lane (the first in its low half) */
static inline int32_t pair_weights(const int16_t *c, int p) {
    int32_t lane;
    memcpy(&lane, c + 2 * p, sizeof lane);
    return lane;
}

#ifdef QKV_HAVE_X86_KERNELS
/* ---- int8 rows: a panel of keys, a pair of values at a time ----
 * An int8 row is short (48 bytes for llama2.c's head size of 48), so work
 * done once a row is not amortized: each key's dot product reduced across
 * its vector's lanes, each value row's weight multiplied in alone. The
 * panels put 16 keys' elements side by side, so a vector of products is 16
 * keys' and no lane is reduced; the pairs put two value rows' elements
 * side by side, so one multiply-add is two rows'. Measured, rows in cache
 * (256 of the 15M shape's, head size 48), 1 thread, Xeon, ns a row, before
 * (rows with their scales: 16 keys' sums then a transposing tree, values
 * in float) and now: VNNI scores 1.64 -> 0.75, values 1.57 -> 0.80;
 * AVX-512 0.91 and 0.93 (from 1.88, 1.57); AVX2 1.27 and 1.33 (2.04). */

/* Bytes ahead of an int8 panel or pair whose lines are requested: as far
 * as for the float rows (kernels.h). The rows come from memory at long
 * contexts, and a decode step reads them once: 8 rows ahead (416 bytes)
 * left the core waiting on the loads; 1 to 2 KiB ran fastest, 4 and 8 KiB
 * slower (measured, rows of 48 after 60 MB of other reads, 1 thread, Xeon). */
#ifndef KV_Q8_PREFETCH_BYTES
#define KV_Q8_PREFETCH_BYTES QKV_KV_AHEAD
#endif

/* query_int16 with vectors of 16 (count rounded up to 32: masked lanes 0) */
TARGET_AVX512 INLINE void query_int16_512(const float *q, int count, float inverse, int16_t *p) {
    __m512 scale = _mm512_set1_ps(inverse);
    for (int i = 0; i < (count + 31) / 32 * 32; i += 16) {
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(kv_mask(i, count), q + i), scale);
        _mm256_storeu_si256((__m256i *)(p + i), _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(x)));
    }
}

TARGET_AVX512 INLINE float abs_max_512(const float *x, int n) {
    __m512 amax = _mm512_setzero_ps(), nonfinite = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(kv_mask(i, n), x + i);
        amax = _mm512_max_ps(amax, _mm512_abs_ps(v));
        nonfinite = _mm512_add_ps(nonfinite, _mm512_mul_ps(v, _mm512_setzero_ps()));
    }
    return _mm512_cmp_ps_mask(nonfinite, _mm512_setzero_ps(), _CMP_NEQ_UQ) ? NAN : _mm512_reduce_max_ps(amax);
}


#define Q8_STEP_BW(acc, k, p) _mm512_add_epi32(acc, _mm512_madd_epi16(k, p))
/* Column pair c of a panel's 16 keys (from x, its first column) as int16 */
#define Q8_PANEL_PAIR(x, c) _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)((x) + 32 * (size_t)(c))))

/* scores[r] = the score of key skip + r of the panels k, r < n: a panel a
 * step, pairs of q's int16 columns broadcast against the panel's 16 keys,
 * in four sums (each multiply-add waits for the last into its sum); with
 * fetch, each panel's bytes KV_Q8_PREFETCH_BYTES ahead requested.
 * STEP(acc, k, p) adds the pairwise products of int16 lanes: AVX-512BW's
 * multiply-add and add, or VNNI's one vpdpwssd (the same exact integer
 * sums in fewer steps). */
#define Q8_SCORES_512(NAME, TARGET, STEP)                                                                      \
    TARGET static void NAME(Q8Keys k, int skip, const float *q, int n, float *scores, int fetch) {             \
        QueryScale qs = query_scale(abs_max_512(q, k.hs), k.hs);                                               \
        int16_t p[KV_Q8_COLUMNS];                                                                              \
        if (k.hs <= KV_Q8_COLUMNS) query_int16_512(q, k.hs, qs.inverse, p);                                    \
        __m512 q_scale = _mm512_set1_ps(qs.scale);                                                             \
        size_t panel_bytes = q8_panel_bytes(k.hs);                                                             \
        for (int first = 0; first < skip + n; first += KV_Q8_PANEL) {                                          \
            const unsigned char *panel = k.panels + (size_t)(first / KV_Q8_PANEL) * panel_bytes;               \
            __m512i acc0 = _mm512_setzero_si512(), acc1 = acc0, acc2 = acc0, acc3 = acc0;                      \
            if (fetch) kv_prefetch(panel + KV_Q8_PREFETCH_BYTES, panel_bytes);                                 \
            for (int from = 0; from < k.hs; from += KV_Q8_COLUMNS) {                                           \
                int count = k.hs - from < KV_Q8_COLUMNS ? k.hs - from : KV_Q8_COLUMNS, c = 0;                  \
                const unsigned char *x = panel + (size_t)from * KV_Q8_PANEL;                                   \
                if (k.hs > KV_Q8_COLUMNS) query_int16_512(q + from, count, qs.inverse, p);                     \
                for (; c + 4 <= (count + 1) / 2; c += 4) {                                                     \
                    acc0 = STEP(acc0, Q8_PANEL_PAIR(x, c), _mm512_set1_epi32(pair_weights(p, c)));             \
                    acc1 = STEP(acc1, Q8_PANEL_PAIR(x, c + 1), _mm512_set1_epi32(pair_weights(p, c + 1)));     \
                    acc2 = STEP(acc2, Q8_PANEL_PAIR(x, c + 2), _mm512_set1_epi32(pair_weights(p, c + 2)));     \
                    acc3 = STEP(acc3, Q8_PANEL_PAIR(x, c + 3), _mm512_set1_epi32(pair_weights(p, c + 3)));     \
                }                                                                                              \
                for (; c < (count + 1) / 2; c++)                                                               \
                    acc0 = STEP(acc0, Q8_PANEL_PAIR(x, c), _mm512_set1_epi32(pair_weights(p, c)));             \
            }                                                                                                  \
            __m512i dots = _mm512_add_epi32(_mm512_add_epi32(acc0, acc1), _mm512_add_epi32(acc2, acc3));       \
            __m512 scale = _mm512_mul_ps(_mm512_loadu_ps(k.scales + first), q_scale);                          \
            float lanes[KV_Q8_PANEL];                                                                          \
            _mm512_storeu_ps(lanes, _mm512_mul_ps(_mm512_cvtepi32_ps(dots), scale));                           \
            q8_store_lanes(scores, first - skip, n, lanes, KV_Q8_PANEL);                                       \
        }                                                                                                      \
    }
Q8_SCORES_512(q8_scores_avx512, TARGET_AVX512, Q8_STEP_BW)
Q8_SCORES_512(q8_scores_vnni, TARGET_VNNI, _mm512_dpwssd_epi32)

/* A chunk's int16 weights (Q8Weights) from w and the rows' scales */
TARGET_AVX512 static void q8_weights_512(Q8Values v, const float *w, int n, Q8Weights *q) {
    float wt[KV_Q8_CHUNK];
    for (int t = 0; t < n; t += 16) {
        __mmask16 m = kv_mask(t, n);
        _mm512_storeu_ps(wt + t, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + t), _mm512_maskz_loadu_ps(m, v.scales + t)));
    }
    float amax = abs_max_512(wt, n);
    q->step = q8_weights_step(amax);
    if (q->step != 0.0f) query_int16_512(wt, n, 32767.0f / amax, q->c);
}

/* out[d..d+16V) (the last vector's first rest elements) =
 * fma((float)Σ_t c_t · v_t, step, out), t < n: the even pairs' and the odd
 * pairs' products in two sets of V sums (each multiply-add waits for the
 * last into its sum). With fetch, the pairs ahead are requested. STEP(acc,
 * v, c): the int16 pairs' multiply-add, as for the scores. */
#define Q8_PAIRS_512(NAME, TARGET, STEP)                                                                         \
    TARGET INLINE void NAME(Q8Values v, const Q8Weights *q, int n, int d, int V, int rest, int fetch,           \
                            float *out) {                                                                        \
        __m512i even[KV_SLICE_512], odd[KV_SLICE_512];                                                           \
        __mmask32 last = rest >= 16 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (2 * rest)) - 1);              \
        size_t pair_bytes = 2 * (size_t)v.hs;                                                                    \
        const unsigned char *x = v.pairs + 2 * d;                                                                \
        const int16_t *c = q->c; /* c_2p and c_2p+1: one lane */                                                \
        int n_pairs = (n + 1) / 2, p = 0;                                                                        \
        for (int j = 0; j < V; j++) even[j] = odd[j] = _mm512_setzero_si512();                                   \
        for (; p + 2 <= n_pairs; p += 2, x += 2 * pair_bytes) {                                                  \
            if (fetch) kv_prefetch(x + KV_Q8_PREFETCH_BYTES, 2 * pair_bytes);                                    \
            __m512i w0 = _mm512_set1_epi32(pair_weights(c, p)), w1 = _mm512_set1_epi32(pair_weights(c, p + 1));    \
            for (int j = 0; j < V; j++) {                                                                        \
                __mmask32 m = j + 1 < V ? (__mmask32)0xffffffffu : last;                                         \
                even[j] = STEP(even[j], _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, x + 32 * j)), w0);       \
                odd[j] = STEP(odd[j], _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, x + pair_bytes + 32 * j)), \
                              w1);                                                                               \
            }                                                                                                    \
        }                                                                                                        \
        if (p < n_pairs) {                                                                                       \
            __m512i w0 = _mm512_set1_epi32(pair_weights(c, p));                                                   \
            for (int j = 0; j < V; j++) {                                                                        \
                __mmask32 m = j + 1 < V ? (__mmask32)0xffffffffu : last;                                         \
                even[j] = STEP(even[j], _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, x + 32 * j)), w0);       \
            }                                                                                                    \
        }                                                                                                        \
        __m512 step = _mm512_set1_ps(q->step);                                                                   \
        for (int j = 0; j < V; j++) {                                                                            \
            __mmask16 m = j + 1 < V ? (__mmask16)0xffff : kv_mask(0, rest);                                      \
            float *o = out + d + 16 * j;                                                                         \
            __m512 sum = _mm512_cvtepi32_ps(_mm512_add_epi32(even[j], odd[j]));                                  \
            _mm512_mask_storeu_ps(o, m, _mm512_fmadd_ps(sum, step, _mm512_maskz_loadu_ps(m, o)));                \
        }                                                                                                        \
    }
Q8_PAIRS_512(q8_pairs_512, TARGET_AVX512, Q8_STEP_BW)
Q8_PAIRS_512(q8_pairs_vnni, TARGET_VNNI, _mm512_dpwssd_epi32)

/* out += a chunk's products, in slices of KV_SLICE_512 vectors (a constant
 * V in each call, so the sums stay in registers) */
#define Q8_SUMS_512(NAME, TARGET, PAIRS)                                                                         \
    TARGET static void NAME(Q8Values v, const Q8Weights *q, int n, float *out, int fetch) {                     \
        for (int d = 0; d < v.hs; d += 16 * KV_SLICE_512) {                                                      \
            int V = (v.hs - d + 15) / 16 < KV_SLICE_512 ? (v.hs - d + 15) / 16 : KV_SLICE_512;                   \
            int rest = v.hs - d - 16 * (V - 1), f = d == 0 && fetch;                                             \
            switch (V) {                                                                                         \
            case 1: PAIRS(v, q, n, d, 1, rest, f, out); break;                                                   \
            case 2: PAIRS(v, q, n, d, 2, rest, f, out); break;                                                   \
            case 3: PAIRS(v, q, n, d, 3, rest, f, out); break;                                                   \
            default: PAIRS(v, q, n, d, KV_SLICE_512, rest, f, out); break;                                       \
            }                                                                                                    \
        }                                                                                                        \
    }
Q8_SUMS_512(q8_sums_avx512, TARGET_AVX512, q8_pairs_512)
Q8_SUMS_512(q8_sums_vnni, TARGET_VNNI, q8_pairs_vnni)

/* query_int16 and abs_max with vectors of 8 */
TARGET_AVX2 INLINE void query_int16_256(const float *q, int count, float inverse, int16_t *p) {
    __m256 scale = _mm256_set1_ps(inverse);
    for (int i = 0; i < (count + 31) / 32 * 32; i += 16) {
        __m256 x0 = _mm256_mul_ps(_mm256_maskload_ps(q + i, lanes_below(count - i)), scale);
        __m256 x1 = _mm256_mul_ps(_mm256_maskload_ps(q + i + 8, lanes_below(count - i - 8)), scale);
        __m256i packed = _mm256_packs_epi32(_mm256_cvtps_epi32(x0), _mm256_cvtps_epi32(x1)); /* 128-bit lanes */
        _mm256_storeu_si256((__m256i *)(p + i), _mm256_permute4x64_epi64(packed, 0xD8));
    }
}

TARGET_AVX2 INLINE float abs_max_256(const float *x, int n) {
    __m256 amax = _mm256_setzero_ps(), nonfinite = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < n; i += 8) {
        __m256 v = _mm256_maskload_ps(x + i, lanes_below(n - i));
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v));
        nonfinite = _mm256_add_ps(nonfinite, _mm256_mul_ps(v, _mm256_setzero_ps()));
    }
    if (_mm256_movemask_ps(_mm256_cmp_ps(nonfinite, _mm256_setzero_ps(), _CMP_NEQ_UQ))) return NAN;
    float lanes[8], m = 0.0f;
    _mm256_storeu_ps(lanes, amax);
    for (int l = 0; l < 8; l++) m = fmaxf(m, lanes[l]);
    return m;
}


/* Column pair c of a panel (from x) times q's pair c (p): the first 8
 * keys' products into low, the last 8 keys' into high */
#define Q8_HALF_STEPS(x, p, c, low, high)                                                                     \
    do {                                                                                                      \
        __m256i pc = _mm256_set1_epi32(pair_weights(p, c));                                                   \
        const __m128i *column = (const __m128i *)((x) + 32 * (size_t)(c));                                    \
        low = _mm256_add_epi32(low, _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(column)), pc));    \
        high = _mm256_add_epi32(high, _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(column + 1)), pc)); \
    } while (0)

/* q8_scores_avx512 with vectors of 8: each panel in two halves of 8 keys
 * (pmaddwd, then an add), two sums each */
TARGET_AVX2 static void q8_scores_avx2(Q8Keys k, int skip, const float *q, int n, float *scores, int fetch) {
    QueryScale qs = query_scale(abs_max_256(q, k.hs), k.hs);
    int16_t p[KV_Q8_COLUMNS];
    if (k.hs <= KV_Q8_COLUMNS) query_int16_256(q, k.hs, qs.inverse, p);
    __m256 q_scale = _mm256_set1_ps(qs.scale);
    size_t panel_bytes = q8_panel_bytes(k.hs);
    for (int first = 0; first < skip + n; first += KV_Q8_PANEL) {
        const unsigned char *panel = k.panels + (size_t)(first / KV_Q8_PANEL) * panel_bytes;
        __m256i low0 = _mm256_setzero_si256(), low1 = low0, high0 = low0, high1 = low0;
        if (fetch) kv_prefetch(panel + KV_Q8_PREFETCH_BYTES, panel_bytes);
        for (int from = 0; from < k.hs; from += KV_Q8_COLUMNS) {
            int count = k.hs - from < KV_Q8_COLUMNS ? k.hs - from : KV_Q8_COLUMNS;
            const unsigned char *x = panel + (size_t)from * KV_Q8_PANEL;
            if (k.hs > KV_Q8_COLUMNS) query_int16_256(q + from, count, qs.inverse, p);
            int c = 0;
            for (; c + 2 <= (count + 1) / 2; c += 2) {
                Q8_HALF_STEPS(x, p, c, low0, high0);
                Q8_HALF_STEPS(x, p, c + 1, low1, high1);
            }
            if (c < (count + 1) / 2) Q8_HALF_STEPS(x, p, c, low0, high0);
        }
        __m256 scale0 = _mm256_mul_ps(_mm256_loadu_ps(k.scales + first), q_scale);
        __m256 scale1 = _mm256_mul_ps(_mm256_loadu_ps(k.scales + first + 8), q_scale);
        float lanes[KV_Q8_PANEL];
        _mm256_storeu_ps(lanes, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(low0, low1)), scale0));
        _mm256_storeu_ps(lanes + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(high0, high1)), scale1));
        q8_store_lanes(scores, first - skip, n, lanes, KV_Q8_PANEL);
    }
}

/* q8_weights_512 with vectors of 8 */
TARGET_AVX2 static void q8_weights_256(Q8Values v, const float *w, int n, Q8Weights *q) {
    float wt[KV_Q8_CHUNK];
    for (int t = 0; t < n; t += 8) {
        __m256i m = lanes_below(n - t);
        _mm256_storeu_ps(wt + t, _mm256_mul_ps(_mm256_maskload_ps(w + t, m), _mm256_maskload_ps(v.scales + t, m)));
    }
    float amax = abs_max_256(wt, n);
    q->step = q8_weights_step(amax);
    if (q->step != 0.0f) query_int16_256(wt, n, 32767.0f / amax, q->c);
}

/* q8_pairs_512 with V whole vectors of 8 (pmaddwd, then an add) */
TARGET_AVX2 INLINE void q8_pairs_256(Q8Values v, const Q8Weights *q, int n, int d, int V, int fetch, float *out) {
    __m256i even[KV_SLICE_256], odd[KV_SLICE_256];
    size_t pair_bytes = 2 * (size_t)v.hs;
    const unsigned char *x = v.pairs + 2 * d;
    const int16_t *c = q->c;
    int n_pairs = (n + 1) / 2, p = 0;
    for (int j = 0; j < V; j++) even[j] = odd[j] = _mm256_setzero_si256();
    for (; p + 2 <= n_pairs; p += 2, x += 2 * pair_bytes) {
        if (fetch) kv_prefetch(x + KV_Q8_PREFETCH_BYTES, 2 * pair_bytes);
        __m256i w0 = _mm256_set1_epi32(pair_weights(c, p)), w1 = _mm256_set1_epi32(pair_weights(c, p + 1));
        for (int j = 0; j < V; j++) {
            __m256i x0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 16 * j)));
            __m256i x1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + pair_bytes + 16 * j)));
            even[j] = _mm256_add_epi32(even[j], _mm256_madd_epi16(x0, w0));
            odd[j] = _mm256_add_epi32(odd[j], _mm256_madd_epi16(x1, w1));
        }
    }
    if (p < n_pairs) {
        __m256i w0 = _mm256_set1_epi32(pair_weights(c, p));
        for (int j = 0; j < V; j++)
            even[j] = _mm256_add_epi32(
                even[j], _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 16 * j))), w0));
    }
    __m256 step = _mm256_set1_ps(q->step);
    for (int j = 0; j < V; j++) {
        float *o = out + d + 8 * j;
        __m256 sum = _mm256_cvtepi32_ps(_mm256_add_epi32(even[j], odd[j]));
        _mm256_storeu_ps(o, _mm256_fmadd_ps(sum, step, _mm256_loadu_ps(o)));
    }
}

/* out += a chunk's products: whole vectors of 8 in slices of
 * KV_SLICE_256; the last hs % 8 elements by the portable loop (the same
 * integers) */
TARGET_AVX2 static void q8_sums_avx2(Q8Values v, const Q8Weights *q, int n, float *out, int fetch) {
    int whole = v.hs / 8 * 8;
    for (int d = 0; d < whole; d += 8 * KV_SLICE_256) {
        int V = (whole - d) / 8 < KV_SLICE_256 ? (whole - d) / 8 : KV_SLICE_256;
        int f = d == 0 && fetch;
        switch (V) {
        case 1: q8_pairs_256(v, q, n, d, 1, f, out); break;
        case 2: q8_pairs_256(v, q, n, d, 2, f, out); break;
        case 3: q8_pairs_256(v, q, n, d, 3, f, out); break;
        default: q8_pairs_256(v, q, n, d, KV_SLICE_256, f, out); break;
        }
    }
    if (whole < v.hs) q8_add_sums_portable(v, q, n, whole, v.hs, out);
}

#endif /* QKV_HAVE_X86_KERNELS */

/* The kernels by instruction set (AMX: VNNI's; a decode row is no tile) */
typedef struct {
    void (*scores)(Q8Keys k, int skip, const float *q, int n, float *scores, int fetch);
    void (*weights)(Q8Values v, const float *w, int n, Q8Weights *q); /* a chunk's */
    void (*sums)(Q8Values v, const Q8Weights *q, int n, float *out, int fetch);
} Q8Kernels;

static Q8Kernels q8_kernels(Isa isa) {
#ifdef QKV_HAVE_X86_KERNELS
    static const Q8Kernels by_isa[ISA_AVX512_VNNI + 1] = {
        { q8_scores_portable, q8_weights_portable, q8_sums_portable },
        { q8_scores_avx2, q8_weights_256, q8_sums_avx2 },
        { q8_scores_avx512, q8_weights_512, q8_sums_avx512 },
        { q8_scores_vnni, q8_weights_512, q8_sums_vnni },
    };
    return by_isa[isa < ISA_AVX512_VNNI ? isa : ISA_AVX512_VNNI];
#else
    (void)isa;
    return (Q8Kernels){ q8_scores_portable, q8_weights_portable, q8_sums_portable };
#endif
}

/* scores[k] = keys[k] · q for k < n, int8 keys (from any row), the integer
 * scores */
static void q8_scores(const KVCache *kv, const unsigned char *keys, const float *q, int n, float *scores) {
    int skip;
    Q8Keys k = q8_keys_of(kv, (size_t)(keys - kv->keys) / kv->row_bytes, &skip);
    q8_kernels(kv->isa).scores(k, skip, q, n, scores, kv->fetch_ahead);
}

/* out = Σ_t w[t] · values[t] over t < n, int8 values from an even row:
 * chunk by chunk, each's weights rounded to int16 and its products added */
static void q8_weighted_sum(const KVCache *kv, const unsigned char *values, const float *w, int n, float *out,
                            int fetch) {
    int odd;
    Q8Values v = q8_values_of(kv, (size_t)(values - kv->values) / kv->value_bytes, &odd); /* odd is 0 */
    Q8Kernels k = q8_kernels(kv->isa);
    for (int i = 0; i < v.hs; i++) out[i] = 0.0f;
    for (int first = 0; first < n; first += KV_Q8_CHUNK) {
        Q8Values chunk = q8_values_at(v, first);
        int count = n - first < KV_Q8_CHUNK ? n - first : KV_Q8_CHUNK;
        Q8Weights q;
        k.weights(chunk, w + first, count, &q);
        if (q.step == 0.0f)
            q8_chunk_float(chunk, w + first, count, out);
        else
            k.sums(chunk, &q, count, out, fetch);
    }
}

#endif /* QKV_KV_INT8_INCLUDED */
