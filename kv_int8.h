/* kv_int8.h — the KV cache's int8 rows: how they are laid out for whole-
 * vector integer products (keys in panels of 16 positions, values in quads
 * of positions, the scales apart), and the two products attention makes of them, scores
 * and weighted sums, as exact int32 sums of int16 products: the portable C,
 * AVX2, AVX-512 and AVX-512 VNNI kernels, and the choice among them.
 *
 * Part of kv_cache.h's implementation (included after its helpers, before
 * the rows are stored); not a header of its own. */
#ifndef QKV_KV_INT8_INCLUDED
#define QKV_KV_INT8_INCLUDED

/* An int8 row's scale, max|x| / 127, and its inverse (0 for a row of
 * zeros, or of values so small the inverse overflows: inverse_scale); a
 * row with a NaN or an infinity gets a NaN scale and inverse 0, so the
 * row's products are NaN. A row of inverse 0 is stored as zeros
 * (kv_store_row: NaN or infinity times 0 is NaN, whose float -> int is
 * undefined). */
static float q8_scale(const float *x, int n, float *inverse) {
    float amax = abs_max(x, n), scale = amax / 127.0f;
    *inverse = inverse_scale(1.0f, scale);
    if (amax <= FLT_MAX) return scale;
    *inverse = 0.0f;
    return NAN;
}

/* An element of an int8 value row: round(x / scale) */
static inline unsigned char q8_byte(float x, float inverse) { return (unsigned char)(int8_t)round_half_away(x * inverse); }

/* A key's element is stored as the unsigned byte round(x / scale) + 128
 * (1..255): the VNNI multiply-add of bytes takes one unsigned operand */
static inline unsigned char q8_key_byte(float x, float inverse) { return (unsigned char)(round_half_away(x * inverse) + 128); }

/* int8 keys, in panels: the rows of slots 16j..16j+15 of a head together,
 * four elements of each row after the other's, so that 64 bytes hold a
 * quad of elements of each of the panel's 16 keys: one VNNI multiply-add
 * of bytes (vpdpbusd) adds four of q's products to each key's score, and,
 * widened to int16, one multiply-add of int16 pairs adds two. Each element
 * is stored plus 128, as an unsigned byte (q8_key_byte). Element i of
 * key t (t from a panel's first row) is at
 *     (t - t % 16) · row_bytes + (i / 4) · 64 + (t % 16) · 4 + i % 4
 * (row_bytes: the head size rounded up to a quad). scales[t]: its scale. */
typedef struct {
    const unsigned char *panels;
    const float *scales;
    int hs;
} Q8Keys;

/* The bytes of a panel: 16 keys of the head size rounded up to a quad */
static inline size_t q8_panel_bytes(int hs) { return (size_t)KV_Q8_PANEL * (size_t)KV_Q8_ROUND(hs); }

/* Where element i of key t (from a panel's first row) is in its panel */
static inline size_t q8_key_at(int t, int i) {
    return (size_t)(i / KV_Q8_QUAD) * KV_Q8_QUAD * KV_Q8_PANEL + (size_t)(t % KV_Q8_PANEL) * KV_Q8_QUAD + i % KV_Q8_QUAD;
}

static inline int q8_key(Q8Keys k, int t, int i) {
    return (int)k.panels[(size_t)(t / KV_Q8_PANEL) * q8_panel_bytes(k.hs) + q8_key_at(t, i)] - 128;
}

/* int8 values, in quads (slots 4j..4j+3 of a head): v_4j[0], v_4j+1[0],
 * v_4j+2[0], v_4j+3[0], v_4j[1], ..., so that each 32-bit lane holds one
 * element of all four rows (the weighted sums below). Element i of value
 * t (t from a row that is a multiple of 4) is at
 *     (t - t % 4) · hs + 4i + t % 4 */
typedef struct {
    const unsigned char *quads;
    const float *scales;
    int hs;
} Q8Values;

static Q8Values q8_values_at(Q8Values v, int t) {
    return (Q8Values){ v.quads + (size_t)t * v.hs, v.scales + t, v.hs };
}

/* Where element i of value t (from a quad's first row) is */
static inline size_t q8_value_at(int hs, int t, int i) {
    return (size_t)(t - t % KV_Q8_QUAD) * hs + (size_t)KV_Q8_QUAD * i + t % KV_Q8_QUAD;
}

static inline int q8_value(Q8Values v, int t, int i) { return (int8_t)v.quads[q8_value_at(v.hs, t, i)]; }

/* The int8 keys (values) from row `row` of the cache on: the panel (quad)
 * it is in, and its place there */
static Q8Keys q8_keys_of(const KVCache *kv, size_t row, int *skip) {
    *skip = (int)(row % KV_Q8_PANEL);
    row -= (size_t)*skip;
    return (Q8Keys){ kv->keys + row * kv->row_bytes, kv->key_scales + row, kv->head_size };
}

static Q8Values q8_values_of(const KVCache *kv, size_t row, int *skip) {
    *skip = (int)(row % KV_Q8_QUAD);
    row -= (size_t)*skip;
    return (Q8Values){ kv->values + row * kv->value_bytes, kv->value_scales + row, kv->head_size };
}

/* ---- Scores of int8 keys, and weighted sums of value rows ---- */

/* An int8 key's score is scale_k · Σ q_i k_i. Its products in float (each
 * int8 converted, then an FMA) took longer than the key's 52 bytes take to
 * arrive (7 cycles a key of 48 with the rows in cache, 1 thread, Xeon), so
 * q is rounded to int16 once a call, q_i ≈ p_i · q_scale, and each key's
 * Σ p_i k_i is an exact int32. The keys are stored plus 128 (x_i = k_i +
 * 128), so the products are Σ p_i x_i − 128 Σ p_i, the second term once a
 * call: VNNI multiplies the unsigned x_i by p_i's two signed bytes, p_i =
 * 128 · high_i + low_i (two multiply-adds of 64 bytes), the others widen
 * x_i to int16 (pmaddwd); int32's wrapping arithmetic gives the exact sum
 * whenever it fits, so every instruction set gets the same integer, and
 * the same score:
 *     score = (float)Σ p_i k_i · (scale_k · q_scale)
 * |p_i| ≤ p_max, with head_size · 127 · p_max < 2^31 and high_i a signed
 * byte: 16383 for head sizes up to 1032. (A panel's rows not yet written
 * are zero bytes, k = −128 past that bound: their sums wrap, in every path
 * the portable one too, and are thrown away.) The rounding moves a score by at
 * most q_scale / 2 · scale_k · Σ |k_i| (tested), a relative 3e-5 of
 * max|q| · Σ |k_i| · scale_k. */
#define KV_Q8_QUERY_MAX 16383
#define KV_Q8_COLUMNS 256 /* q's columns rounded at a time (a multiple of 32) */

typedef struct {
    float scale, inverse; /* q_i ≈ p_i · scale, p_i = round(q_i · inverse) */
} QueryScale;

/* amax = max |q_i|, NaN when a q_i is not finite (then every score is NaN) */
static QueryScale query_scale(float amax, int hs) {
    int p_max = hs <= INT32_MAX / 127 / KV_Q8_QUERY_MAX ? KV_Q8_QUERY_MAX : INT32_MAX / 127 / hs;
    if (!(amax <= FLT_MAX)) return (QueryScale){ NAN, 0.0f };
    return (QueryScale){ amax / (float)p_max, inverse_scale((float)p_max, amax) }; /* 0 for zeros, or too small */
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

/* Σ_j c[j] · (int8)x[j], j < 4: a chunk's int16 weights of four value
 * rows times their element */
static inline int32_t quad_dot(const int16_t *c, const unsigned char *x) {
    return (int32_t)c[0] * (int8_t)x[0] + (int32_t)c[1] * (int8_t)x[1] + (int32_t)c[2] * (int8_t)x[2] +
           (int32_t)c[3] * (int8_t)x[3];
}

/* Σ_j p[j] · k_j, j < 4: a quad of q's int16 columns times a quad of a
 * key's elements as stored (x_j = k_j + 128) */
static inline int32_t key_quad_dot(const int16_t *p, const unsigned char *x) {
    return (int32_t)p[0] * ((int)x[0] - 128) + (int32_t)p[1] * ((int)x[1] - 128) +
           (int32_t)p[2] * ((int)x[2] - 128) + (int32_t)p[3] * ((int)x[3] - 128);
}

/* scores[r] = the score of key skip + r of the panels k, r < n: a panel
 * at a time, its 16 keys' sums side by side (as the vector kernels) */
static void q8_scores_portable(Q8Keys k, int skip, const float *q, int n, float *scores, Fetch fetch) {
    (void)fetch;
    QueryScale qs = query_scale(abs_max(q, k.hs), k.hs);
    int16_t p[KV_Q8_COLUMNS];
    if (k.hs <= KV_Q8_COLUMNS) query_int16(q, k.hs, qs.inverse, p);
    size_t panel_bytes = q8_panel_bytes(k.hs);
    for (int first = 0; first < skip + n; first += KV_Q8_PANEL) {
        const unsigned char *panel = k.panels + (size_t)(first / KV_Q8_PANEL) * panel_bytes;
        uint32_t dot[KV_Q8_PANEL] = { 0 }; /* wrapping, as the vector sums */
        for (int from = 0; from < k.hs; from += KV_Q8_COLUMNS) {
            int count = k.hs - from < KV_Q8_COLUMNS ? k.hs - from : KV_Q8_COLUMNS;
            const unsigned char *x = panel + (size_t)from * KV_Q8_PANEL;
            if (k.hs > KV_Q8_COLUMNS) query_int16(q + from, count, qs.inverse, p);
            for (int c = 0; c < KV_Q8_ROUND(count); c += KV_Q8_QUAD, x += KV_Q8_QUAD * KV_Q8_PANEL)
                for (int r = 0; r < KV_Q8_PANEL; r++) dot[r] += (uint32_t)key_quad_dot(p + c, x + KV_Q8_QUAD * r);
        }
        float lanes[KV_Q8_PANEL];
        for (int r = 0; r < KV_Q8_PANEL; r++) lanes[r] = (float)(int32_t)dot[r] * (k.scales[first + r] * qs.scale);
        q8_store_lanes(scores, first - skip, n, lanes, KV_Q8_PANEL);
    }
}

/* ---- Weighted sums of int8 value rows, in int16 ----
 * In float (each int8 widened, converted, then a multiply-add into the
 * sum), a row of 48 took 4.8 cycles with the rows in cache, longer than its
 * 52 bytes take to arrive from memory (1 thread, Xeon). So the weights are
 * rounded to int16 and the sums are exact int32, as the scores' are. The
 * rows are stored in quads (kv_cache_store): each 32-bit lane holds one
 * element of four rows, so one VNNI multiply-add of bytes (vpdpbusd) adds
 * four rows' products (c_t split into two bytes), and one of int16 pairs
 * (pmaddwd, the rows widened) two.
 * Their scales lie apart, in order, so the weights of a chunk are one
 * product of two short vectors. Per chunk of at most KV_Q8_CHUNK rows:
 *     w_t · scale_t ≈ c_t · step,  step = max_t |w_t · scale_t| / 32767
 *     out[i] = fma((float)Σ_t c_t v_t[i], step, out[i])  (out from 0)
 * Σ_t c_t v_t[i] is an exact integer (|c_t v_t[i]| ≤ 32767 · 127, and 256
 * of them fit in an int32), the same whatever the order or the instruction
 * set, and so is out. The rounding of c_t moves out[i] by at most
 * step / 2 · Σ_t |v_t[i]| (tested): a relative 1.5e-5 of the largest
 * weighted row's. A chunk whose weights are not finite, or all below
 * KV_Q8_TINY, is summed in float instead: a margin above where step would
 * be subnormal (amax below 3.9e-34) and 32767 / amax overflow (9.6e-35). */
#define KV_Q8_CHUNK 256
#define KV_Q8_TINY 1e-30f

/* Keys of the chunk from key `first` of n */
static int q8_chunk_keys(int n, int first) { return n - first < KV_Q8_CHUNK ? n - first : KV_Q8_CHUNK; }

/* The int16 weights of a chunk: c[t] for t < n, zeros to a multiple of 32 */
typedef struct {
    int16_t c[KV_Q8_CHUNK];
    float step; /* 0: sum this chunk in float (q8_chunk_float) */
} Q8Weights;

/* The step of weights wt[t] = w_t · scale_t whose max |wt| is amax (NaN
 * if one is not finite), or 0; then c = query_int16(wt, 32767 / amax). */
static float q8_weights_step(float amax) {
    return amax >= KV_Q8_TINY && amax <= FLT_MAX ? amax / 32767.0f : 0.0f;
}

/* out[i] += Σ_t w[t] · scale_t · v_t[i] in float, rows in order (a chunk
 * that cannot be rounded: a NaN gives NaN, as it should). Never inlined: one
 * copy, compiled for the baseline, so its bits do not depend on its caller
 * (inlined into a TARGET_VNNI function, -ffp-contract=fast fused its
 * multiply and add, and a decode row's float blocks differed from a
 * prompt's). */
__attribute__((noinline)) static void q8_chunk_float(Q8Values v, const float *w, int n, float *out) {
    for (int i = 0; i < v.hs; i++) {
        float sum = 0.0f;
        for (int t = 0; t < n; t++) sum += w[t] * v.scales[t] * (float)q8_value(v, t, i);
        out[i] += sum;
    }
}

/* out[i] = fma((float)Σ_t c[t] · v_t[i], step, out[i]) for from <= i < to,
 * t < n: a quad of rows at a time (c is 0 past n) */
static void q8_add_sums_portable(Q8Values v, const Q8Weights *q, int n, int from, int to, float *out) {
    for (int i0 = from; i0 < to; i0 += 256) {
        int count = to - i0 < 256 ? to - i0 : 256;
        int32_t sums[256] = { 0 };
        for (int t = 0; t < n; t += KV_Q8_QUAD) {
            const unsigned char *x = v.quads + (size_t)t * v.hs + (size_t)KV_Q8_QUAD * i0;
            for (int i = 0; i < count; i++) sums[i] += quad_dot(q->c + t, x + KV_Q8_QUAD * i);
        }
        for (int i = 0; i < count; i++) out[i0 + i] = fmaf((float)sums[i], q->step, out[i0 + i]);
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
static void q8_sums_portable(Q8Values v, const Q8Weights *q, int n, float *out, Fetch fetch) {
    (void)fetch;
    q8_add_sums_portable(v, q, n, 0, v.hs, out);
}

/* c[4j..4j+3] (q's int16 columns or a chunk's int16 weights) as one 64-bit
 * lane, the first in its low quarter */
static inline int64_t quad_weights(const int16_t *c, int j) {
    int64_t lane;
    memcpy(&lane, c + KV_Q8_QUAD * j, sizeof lane);
    return lane;
}

/* Four bytes as one 32-bit lane */
static inline int32_t bytes_lane(const unsigned char *x) {
    int32_t lane;
    memcpy(&lane, x, sizeof lane);
    return lane;
}

#ifdef QKV_HAVE_X86_KERNELS
/* ---- int8 rows: a panel of keys, a quad of value rows at a time ----
 * An int8 row is short (48 bytes for llama2.c's head size of 48), so work
 * done once a row is not amortized: each key's dot product reduced across
 * its vector's lanes, each value row's weight multiplied in alone. The
 * panels put 16 keys' elements side by side, so a vector of products is 16
 * keys' and no lane is reduced; the quads put four value rows' elements
 * side by side, so one multiply-add is four rows' (VNNI) or two.
 * With VNNI the bytes are multiplied as they are stored (vpdpbusd: unsigned
 * bytes times signed ones, four products a lane), q's int16 columns and
 * the int16 weights split into two unsigned bytes each; without it the
 * rows are widened to int16 (pmaddwd), and each key's (each element's) sum
 * is two lanes, added once a panel (once a chunk). Every path adds the
 * same int32s. Measured before quads (pairs, every path widening), rows in
 * cache (256 of the 15M shape's, head size 48), 1 thread, Xeon, ns a row:
 * VNNI scores 0.75, values 0.80; AVX-512 0.91 and 0.93; AVX2 1.27 and
 * 1.33. The quads' bytes: README, "The int8 kernels". */

/* Bytes ahead of an int8 panel or quad whose lines are requested: as far
 * as for the float rows (kernels.h). The rows come from memory at long
 * contexts, and a decode step reads them once: 8 rows ahead (416 bytes)
 * left the core waiting on the loads; 1 to 2 KiB ran fastest, 4 and 8 KiB
 * slower (measured, rows of 48 after 60 MB of other reads, 1 thread, Xeon). */
#ifndef KV_Q8_PREFETCH_BYTES
#define KV_Q8_PREFETCH_BYTES QKV_KV_AHEAD
#endif

/* On an AMD EPYC Zen 4 (family 25 model 17, 2 vCPUs under KVM; the rows
 * left to the hardware prefetchers there, kv_fetch_ahead) decode attention
 * over int8 rows is not far from its arithmetic: with the rows in L2 it
 * takes 1.8-2.0 ns a key and head (scores 0.53-0.61, weighted sums with
 * their weights 0.73-0.81, the rest the blocks' softmax) against 2.7-3.1 ns
 * for a position's 104 bytes (key, value, their scales) from memory. From memory it ran at 14-27 GB/s
 * against plain reads of 22-40 GB/s (the host's load), and the bench's
 * paired share (15M shape, 16,384 positions, 1 thread) was 57-92% over 23
 * runs of these kernels, 80% or more in 16. float32 rows (3.0 ns in L2 for
 * four times the bytes) paired at 94-102%. Tried there, none clearly
 * better: the keys' scales requested at each block's start (medians 84%
 * against 88% over 7 pairs of bench runs, interleaved), with the values'
 * scales and the scores' lines (prefetchw) too (89% against 82%, 11
 * pairs), the values' first 2-4 KiB requested at each block's start
 * (69-75% against 75-78% of a plain read, in process; 1 KiB level),
 * panels 4-16 KiB ahead, and runs of 8 or 16 blocks (attention.h: 62-66%
 * against 69%). What paid was to make each block's softmax among the value
 * loads (kv_decode_partials, below), and what cost was a pass with no
 * load in flight (the values' lines requested while the exps were made,
 * into L1 or L2, paired worse, not better, in a test program). */

/* The panel of keys from key first on; its bytes KV_Q8_PREFETCH_BYTES
 * ahead requested as fetch says */
INLINE const unsigned char *q8_fetch_panel(Q8Keys k, int first, size_t panel_bytes, Fetch fetch) {
    const unsigned char *panel = k.panels + (size_t)(first / KV_Q8_PANEL) * panel_bytes;
    fetch_range(panel + KV_Q8_PREFETCH_BYTES, panel_bytes, fetch);
    return panel;
}

/* 128 · Σ p[i], i < count: what the keys' offset adds to a score's sum */
static int32_t query_offset(const int16_t *p, int count) {
    int32_t sum = 0;
    for (int i = 0; i < count; i++) sum += p[i];
    return (int32_t)((uint32_t)sum * 128u);
}

/* q's columns from..from+count-1 rounded into p (round: an instruction
 * set's query_int16), and their offset added to that of the columns
 * before them (before; none when from is 0), in int32's wrapping sums */
INLINE int32_t query_columns(void (*round)(const float *, int, float, int16_t *), const float *q, int from,
                             int count, float inverse, int16_t *p, int32_t before) {
    round(q + from, count, inverse, p);
    return (int32_t)((from ? (uint32_t)before : 0u) + (uint32_t)query_offset(p, count));
}

/* q[i..i+16) (those below count; 0 past it) times inverse, rounded to int16 */
TARGET_AVX512 INLINE __m256i int16_of_floats_512(const float *q, int i, int count, __m512 inverse) {
    __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(kv_mask(i, count), q + i), inverse);
    return _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(x));
}

/* query_int16 with vectors of 16 (count rounded up to 32: masked lanes 0),
 * stored 32 lanes at a time because weight_bytes_512 and query_bytes_512
 * read them back so: a 512-bit load of two 256-bit stores just made is not
 * forwarded, and a decode row's sums stalled on it every 32 weights (a
 * tenth of their samples in `perf`; AMD EPYC Zen 4, about 6% of its int8
 * attention at 16,384 positions) */
TARGET_AVX512 INLINE void query_int16_512(const float *q, int count, float inverse, int16_t *p) {
    __m512 scale = _mm512_set1_ps(inverse);
    for (int i = 0; i < (count + 31) / 32 * 32; i += 32) {
        __m256i first = int16_of_floats_512(q, i, count, scale), second = int16_of_floats_512(q, i + 16, count, scale);
        _mm512_storeu_si512(p + i, _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1));
    }
}

/* abs_max_512 a vector at a time: the lanes' max |v| so far, and v · 0
 * added up (NaN once a v is not finite) */
TARGET_AVX512 INLINE void abs_max_lanes(__m512 v, __m512 *amax, __m512 *nonfinite) {
    *amax = _mm512_max_ps(*amax, _mm512_abs_ps(v));
    *nonfinite = _mm512_add_ps(*nonfinite, _mm512_mul_ps(v, _mm512_setzero_ps()));
}

TARGET_AVX512 INLINE float abs_max_of_lanes(__m512 amax, __m512 nonfinite) {
    return _mm512_cmp_ps_mask(nonfinite, _mm512_setzero_ps(), _CMP_NEQ_UQ) ? NAN : _mm512_reduce_max_ps(amax);
}

TARGET_AVX512 INLINE float abs_max_512(const float *x, int n) {
    __m512 amax = _mm512_setzero_ps(), nonfinite = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) abs_max_lanes(_mm512_maskz_loadu_ps(kv_mask(i, n), x + i), &amax, &nonfinite);
    return abs_max_of_lanes(amax, nonfinite);
}


/* 16 sums in order from two int32 lanes each: sums 0-7's in low, 8-15's in
 * high, sum j's in lanes 2j and 2j + 1 (int16 pairs' products over quads) */
TARGET_AVX512 INLINE __m512i add_lane_pairs_512(__m512i low, __m512i high) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(low, even, high), _mm512_permutex2var_epi32(low, odd, high));
}

/* A panel's 16 scores, key first + r's = dots[r] · (scale_k · q_scale) */
TARGET_AVX512 INLINE void q8_panel_scores_512(__m512i dots, Q8Keys k, int first, float q_scale, int skip, int n,
                                              float *scores) {
    __m512 scale = _mm512_mul_ps(_mm512_loadu_ps(k.scales + first), _mm512_set1_ps(q_scale));
    float lanes[KV_Q8_PANEL];
    _mm512_storeu_ps(lanes, _mm512_mul_ps(_mm512_cvtepi32_ps(dots), scale));
    q8_store_lanes(scores, first - skip, n, lanes, KV_Q8_PANEL);
}

/* Column quad c of a panel (x: its first column) widened to int16 (the
 * stored k + 128), times q's quad c (p): keys 0-7's products into low,
 * keys 8-15's into high */
#define Q8_QUAD_512(x, p, c, low, high)                                                                           \
    do {                                                                                                          \
        __m512i pc = _mm512_set1_epi64(quad_weights(p, c));                                                       \
        const __m256i *column = (const __m256i *)((x) + KV_Q8_QUAD * KV_Q8_PANEL * (size_t)(c));                  \
        low = _mm512_add_epi32(low, _mm512_madd_epi16(_mm512_cvtepu8_epi16(_mm256_loadu_si256(column)), pc));     \
        high = _mm512_add_epi32(high, _mm512_madd_epi16(_mm512_cvtepu8_epi16(_mm256_loadu_si256(column + 1)), pc)); \
    } while (0)

/* scores[r] = the score of key skip + r of the panels k, r < n: a panel a
 * step, q's int16 quads broadcast against the panel's 16 keys, in two sets
 * of sums (each multiply-add waits for the last into its sum); with fetch,
 * each panel's bytes KV_Q8_PREFETCH_BYTES ahead requested. */
TARGET_AVX512 static void q8_scores_avx512(Q8Keys k, int skip, const float *q, int n, float *scores, Fetch fetch) {
    QueryScale qs = query_scale(abs_max_512(q, k.hs), k.hs);
    int16_t p[KV_Q8_COLUMNS];
    int32_t offset = k.hs <= KV_Q8_COLUMNS ? query_columns(query_int16_512, q, 0, k.hs, qs.inverse, p, 0) : 0;
    size_t panel_bytes = q8_panel_bytes(k.hs);
    for (int first = 0; first < skip + n; first += KV_Q8_PANEL) {
        const unsigned char *panel = q8_fetch_panel(k, first, panel_bytes, fetch);
        __m512i low0 = _mm512_setzero_si512(), high0 = low0, low1 = low0, high1 = low0;
        for (int from = 0; from < k.hs; from += KV_Q8_COLUMNS) {
            int count = k.hs - from < KV_Q8_COLUMNS ? k.hs - from : KV_Q8_COLUMNS, c = 0;
            int quads = KV_Q8_ROUND(count) / KV_Q8_QUAD;
            const unsigned char *x = panel + (size_t)from * KV_Q8_PANEL;
            if (k.hs > KV_Q8_COLUMNS) offset = query_columns(query_int16_512, q, from, count, qs.inverse, p, offset);
            for (; c + 2 <= quads; c += 2) {
                Q8_QUAD_512(x, p, c, low0, high0);
                Q8_QUAD_512(x, p, c + 1, low1, high1);
            }
            if (c < quads) Q8_QUAD_512(x, p, c, low0, high0);
        }
        __m512i sums = add_lane_pairs_512(_mm512_add_epi32(low0, low1), _mm512_add_epi32(high0, high1));
        q8_panel_scores_512(_mm512_sub_epi32(sums, _mm512_set1_epi32(offset)), k, first, qs.scale, skip, n, scores);
    }
}

/* q's int16 columns as two signed bytes each, p = 128 · high + low
 * (|p| ≤ 16383; count rounded up to 32) */
TARGET_VNNI INLINE void query_bytes_512(const int16_t *p, int count, unsigned char *high, unsigned char *low) {
    for (int i = 0; i < (count + 31) / 32 * 32; i += 32) {
        __m512i columns = _mm512_loadu_si512(p + i);
        _mm256_storeu_si256((__m256i *)(high + i), _mm512_cvtepi16_epi8(_mm512_srai_epi16(columns, 7)));
        _mm256_storeu_si256((__m256i *)(low + i), _mm512_cvtepi16_epi8(_mm512_and_si512(columns, _mm512_set1_epi16(127))));
    }
}

/* Column quad c of a panel (x) as it is stored, times q's high and low
 * bytes (the asm keeps the load apart: folded into both multiply-adds,
 * it was made twice, and the scores ran slower) */
#define Q8_QUAD_VNNI(x, c, hsum, lsum)                                                                       \
    do {                                                                                                     \
        __m512i keys = _mm512_loadu_si512((x) + KV_Q8_QUAD * KV_Q8_PANEL * (size_t)(c));                     \
        __asm__("" : "+v"(keys));                                                                            \
        hsum = _mm512_dpbusd_epi32(hsum, keys, _mm512_set1_epi32(bytes_lane(high + KV_Q8_QUAD * (c))));       \
        lsum = _mm512_dpbusd_epi32(lsum, keys, _mm512_set1_epi32(bytes_lane(low + KV_Q8_QUAD * (c))));        \
    } while (0)

/* Head sizes up to 48 (12 quads, llama2.c's 15M shape's): q's bytes
 * broadcast once a call and kept in 24 registers, the quads unrolled (the
 * general loop below broadcasts them again for every panel: at 16,384
 * positions, 15M shape, 1 thread, AMD EPYC Zen 4, its decode scores took
 * about a fifth longer). At 64 (the 42M shape's) the 32 registers this
 * takes are all there are: the general loop was 2-3% faster there. */
#define Q8_VNNI_QUADS 12

TARGET_VNNI static void q8_scores_vnni_short(Q8Keys k, int skip, const unsigned char *high, const unsigned char *low,
                                             int32_t offset, float q_scale, int n, float *scores, Fetch fetch) {
    __m512i high_quads[Q8_VNNI_QUADS], low_quads[Q8_VNNI_QUADS];
    int quads = KV_Q8_ROUND(k.hs) / KV_Q8_QUAD;
    for (int c = 0; c < quads; c++) {
        high_quads[c] = _mm512_set1_epi32(bytes_lane(high + KV_Q8_QUAD * c));
        low_quads[c] = _mm512_set1_epi32(bytes_lane(low + KV_Q8_QUAD * c));
    }
    size_t panel_bytes = q8_panel_bytes(k.hs);
    for (int first = 0; first < skip + n; first += KV_Q8_PANEL) {
        const unsigned char *x = q8_fetch_panel(k, first, panel_bytes, fetch);
        __m512i h0 = _mm512_setzero_si512(), l0 = h0, h1 = h0, l1 = h0;
        for (int c = 0; c < Q8_VNNI_QUADS && c < quads; c += 2) {
            __m512i keys = _mm512_loadu_si512(x + KV_Q8_QUAD * KV_Q8_PANEL * (size_t)c);
            h0 = _mm512_dpbusd_epi32(h0, keys, high_quads[c]);
            l0 = _mm512_dpbusd_epi32(l0, keys, low_quads[c]);
            if (c + 1 == quads) break;
            keys = _mm512_loadu_si512(x + KV_Q8_QUAD * KV_Q8_PANEL * (size_t)(c + 1));
            h1 = _mm512_dpbusd_epi32(h1, keys, high_quads[c + 1]);
            l1 = _mm512_dpbusd_epi32(l1, keys, low_quads[c + 1]);
        }
        __m512i sums = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(h0, h1), 7), _mm512_add_epi32(l0, l1));
        q8_panel_scores_512(_mm512_sub_epi32(sums, _mm512_set1_epi32(offset)), k, first, q_scale, skip, n, scores);
    }
}

/* q8_scores_avx512 on the bytes as stored: Σ p_i x_i = 128 Σ high_i x_i +
 * Σ low_i x_i, two multiply-adds a 64 bytes where widening takes two
 * conversions and two multiply-adds a 32 */
TARGET_VNNI static void q8_scores_vnni(Q8Keys k, int skip, const float *q, int n, float *scores, Fetch fetch) {
    QueryScale qs = query_scale(abs_max_512(q, k.hs), k.hs);
    int16_t p[KV_Q8_COLUMNS];
    unsigned char high[KV_Q8_COLUMNS], low[KV_Q8_COLUMNS];
    int32_t offset = 0;
    if (k.hs <= KV_Q8_COLUMNS) {
        offset = query_columns(query_int16_512, q, 0, k.hs, qs.inverse, p, 0);
        query_bytes_512(p, k.hs, high, low);
        if (k.hs <= KV_Q8_QUAD * Q8_VNNI_QUADS) {
            q8_scores_vnni_short(k, skip, high, low, offset, qs.scale, n, scores, fetch);
            return;
        }
    }
    size_t panel_bytes = q8_panel_bytes(k.hs);
    for (int first = 0; first < skip + n; first += KV_Q8_PANEL) {
        const unsigned char *panel = q8_fetch_panel(k, first, panel_bytes, fetch);
        __m512i h0 = _mm512_setzero_si512(), l0 = h0, h1 = h0, l1 = h0;
        for (int from = 0; from < k.hs; from += KV_Q8_COLUMNS) {
            int count = k.hs - from < KV_Q8_COLUMNS ? k.hs - from : KV_Q8_COLUMNS, c = 0;
            int quads = KV_Q8_ROUND(count) / KV_Q8_QUAD;
            const unsigned char *x = panel + (size_t)from * KV_Q8_PANEL;
            if (k.hs > KV_Q8_COLUMNS) {
                offset = query_columns(query_int16_512, q, from, count, qs.inverse, p, offset);
                query_bytes_512(p, count, high, low);
            }
            for (; c + 2 <= quads; c += 2) {
                Q8_QUAD_VNNI(x, c, h0, l0);
                Q8_QUAD_VNNI(x, c + 1, h1, l1);
            }
            if (c < quads) Q8_QUAD_VNNI(x, c, h0, l0);
        }
        __m512i sums = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(h0, h1), 7), _mm512_add_epi32(l0, l1));
        q8_panel_scores_512(_mm512_sub_epi32(sums, _mm512_set1_epi32(offset)), k, first, qs.scale, skip, n, scores);
    }
}

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

/* A chunk's weights as VNNI's unsigned bytes, c = 128 · high + low (count
 * rounded up to 32); 0 if a weight is negative (then the bytes are not) */
TARGET_VNNI INLINE int weight_bytes_512(const int16_t *c, int count, unsigned char *high, unsigned char *low) {
    __mmask32 negative = 0;
    for (int i = 0; i < (count + 31) / 32 * 32; i += 32) {
        __m512i w = _mm512_loadu_si512(c + i);
        negative |= _mm512_movepi16_mask(w);
        _mm256_storeu_si256((__m256i *)(high + i), _mm512_cvtepi16_epi8(_mm512_srli_epi16(w, 7)));
        _mm256_storeu_si256((__m256i *)(low + i), _mm512_cvtepi16_epi8(_mm512_and_si512(w, _mm512_set1_epi16(127))));
    }
    return negative == 0;
}

/* out[d..d+16V) (the last vector's first rest elements) =
 * fma((float)Σ_t c_t · v_t, step, out), t < n, a quad of rows a step. With
 * fetch, the quads ahead are requested. Widened (AVX-512BW): each vector of
 * 16 elements in two halves, elements 0-7 and 8-15 (two lanes each). */
TARGET_AVX512 INLINE void q8_quads_512(int d, int V, int rest, Fetch fetch, Q8Values v, const Q8Weights *q, int n,
                                       float *out) {
    __m512i first_half[KV_SLICE_512], second_half[KV_SLICE_512];
    int bytes0 = KV_Q8_QUAD * (rest < 8 ? rest : 8), bytes1 = KV_Q8_QUAD * rest - bytes0;
    __mmask32 last0 = bytes0 >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << bytes0) - 1);
    __mmask32 last1 = bytes1 >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << bytes1) - 1);
    size_t quad_bytes = KV_Q8_QUAD * (size_t)v.hs;
    const unsigned char *x = v.quads + KV_Q8_QUAD * (size_t)d;
    for (int j = 0; j < V; j++) first_half[j] = second_half[j] = _mm512_setzero_si512();
    for (int t = 0; t < n; t += KV_Q8_QUAD, x += quad_bytes) {
        fetch_range(x + KV_Q8_PREFETCH_BYTES, quad_bytes, fetch);
        __m512i w = _mm512_set1_epi64(quad_weights(q->c, t / KV_Q8_QUAD));
        for (int j = 0; j < V; j++) {
            __mmask32 m0 = j + 1 < V ? (__mmask32)0xffffffffu : last0, m1 = j + 1 < V ? (__mmask32)0xffffffffu : last1;
            __m512i rows0 = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m0, x + 64 * j));
            __m512i rows1 = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m1, x + 64 * j + 32));
            first_half[j] = _mm512_add_epi32(first_half[j], _mm512_madd_epi16(rows0, w));
            second_half[j] = _mm512_add_epi32(second_half[j], _mm512_madd_epi16(rows1, w));
        }
    }
    __m512 step = _mm512_set1_ps(q->step);
    for (int j = 0; j < V; j++) {
        __mmask16 m = j + 1 < V ? (__mmask16)0xffff : kv_mask(0, rest);
        float *o = out + d + 16 * j;
        __m512 sum = _mm512_cvtepi32_ps(add_lane_pairs_512(first_half[j], second_half[j]));
        _mm512_mask_storeu_ps(o, m, _mm512_fmadd_ps(sum, step, _mm512_maskz_loadu_ps(m, o)));
    }
}

/* ---- A decode row's blocks: each one's softmax inside the last's sums ----
 * A block's softmax and int16 weights (its max, the exps and their sum,
 * the weights' rounding) read no memory. Made between one block's sums
 * and the next (block_partial in attention.h) they left the memory idle
 * for a quarter to a third of a decode row's arithmetic: the hardware
 * prefetchers run ahead only of loads being made. A decode row reads its values block
 * after block (kv_decode_partials), so there the next block's softmax is
 * made a step at a time inside this block's sums loop: 16 keys' exps, or
 * 32 keys' rounding, every 8 value rows (24 steps of the 32 a block of 256
 * has room for). The same operations in the same order as block_max_512,
 * block_exp_512, q8_weights_512 and weight_bytes_512: the bits a prompt's
 * rows get block by block. Measured, 15M shape at 16,384 positions, 1
 * thread, AMD EPYC Zen 4, the bench's paired share, runs interleaved:
 * 55-88% block by block (19 runs, median 83%), 53-93% this way (21,
 * median 88%); README, "The int8 kernels". Made among the keys' loads
 * instead (a block's exps, a vector after each panel scored in the next
 * block; the rounding among the values' loads) it paired at 67-77%
 * against 88-92% (4 runs each), perhaps because the short scores' loop
 * keeps q's bytes in 24 of the 32 registers. Made the same way among
 * AVX2's and 256-bit VNNI's sums (vectors of 8) it ran level with block by
 * block (Zen 4, 1 thread): those loops have no idle slots to fill. */
typedef struct {
    const float *scores, *scales; /* the block's raw scores; its value rows' scales */
    float *e;                     /* exp(x - max) */
    int n, exps, steps, done;     /* keys; exp steps, all steps, steps made */
    float max, total;             /* max of the scaled scores; Σ e */
    __m512 scale, max_lanes, sum, amax, nonfinite;
    float inverse;                /* 32767 / max |wt| */
    int negative;                 /* a weight below 0: no VNNI bytes */
    Q8Weights q;
    float wt[KV_Q8_CHUNK];        /* e_t · scale_t */
    unsigned char high[KV_Q8_CHUNK], low[KV_Q8_CHUNK];
} Q8Block;

TARGET_VNNI INLINE void q8_block_begin(Q8Block *b, const float *scores, float *e, int n, const float *scales,
                                       float scale) {
    b->scores = scores, b->scales = scales, b->e = e, b->n = n;
    b->exps = (n + 15) / 16, b->steps = b->exps + (n + 31) / 32, b->done = 0;
    b->max = block_max_512(scores, n) * scale;
    b->scale = _mm512_set1_ps(scale), b->max_lanes = _mm512_set1_ps(b->max);
    b->sum = b->amax = b->nonfinite = _mm512_setzero_ps();
    b->negative = 0;
}

/* Keys 16k..16k+15: e (block_exp_512's vector), its sum, the weights
 * wt = e · scale_t (q8_weights_512's) and their max (abs_max_512's); after
 * the last, Σ e and the step */
TARGET_VNNI INLINE void q8_block_exps(Q8Block *b, int k) {
    int i = 16 * k;
    __mmask16 lanes = tail_mask(i, b->n);
    __m512 v = block_exp16(b->scores + i, lanes, b->scale, b->max_lanes);
    b->sum = _mm512_add_ps(b->sum, v);
    _mm512_mask_storeu_ps(b->e + i, lanes, v);
    __m512 wt = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(lanes, b->scales + i));
    _mm512_storeu_ps(b->wt + i, wt);
    abs_max_lanes(wt, &b->amax, &b->nonfinite);
    if (k + 1 < b->exps) return;
    b->total = _mm512_reduce_add_ps(b->sum);
    float amax = abs_max_of_lanes(b->amax, b->nonfinite);
    b->q.step = q8_weights_step(amax);
    b->inverse = 32767.0f / amax;
}

/* Keys 32r..32r+31: the weights rounded (query_int16_512) and split into
 * bytes (weight_bytes_512), as q8_weights_512 and q8_sums_vnni do them */
TARGET_VNNI INLINE void q8_block_round(Q8Block *b, int r) {
    int i = 32 * r, count = b->n - i < 32 ? b->n - i : 32;
    query_int16_512(b->wt + i, count, b->inverse, b->q.c + i);
    b->negative |= !weight_bytes_512(b->q.c + i, count, b->high + i, b->low + i);
}

/* The block's next step, if any is left (none rounds a block summed in
 * float: step 0) */
TARGET_VNNI INLINE void q8_block_step(Q8Block *b) {
    if (b->done >= b->steps) return;
    int k = b->done++;
    if (k < b->exps) q8_block_exps(b, k);
    else if (b->q.step != 0.0f) q8_block_round(b, k - b->exps);
}

TARGET_VNNI static void q8_block_finish(Q8Block *b) {
    while (b->done < b->steps) q8_block_step(b);
}

/* q8_quads_512 on the rows as stored (VNNI): the weights' high and low
 * bytes (weight_bytes_512) times the quads, Σ c v = 128 Σ high·v + Σ low·v */
TARGET_VNNI INLINE void q8_quads_vnni(int d, int V, int rest, Fetch fetch, Q8Values v, const Q8Weights *q, int n,
                                      float *out, const unsigned char *high, const unsigned char *low, Q8Block *next) {
    __m512i hsum[KV_SLICE_512], lsum[KV_SLICE_512];
    __mmask64 last = rest >= 16 ? ~(__mmask64)0 : (((__mmask64)1 << (KV_Q8_QUAD * rest)) - 1);
    size_t quad_bytes = KV_Q8_QUAD * (size_t)v.hs;
    const unsigned char *x = v.quads + KV_Q8_QUAD * (size_t)d;
    for (int j = 0; j < V; j++) hsum[j] = lsum[j] = _mm512_setzero_si512();
    for (int t = 0; t < n; t += KV_Q8_QUAD, x += quad_bytes) {
        fetch_range(x + KV_Q8_PREFETCH_BYTES, quad_bytes, fetch);
        if (next && t % 8 == 0) q8_block_step(next);
        __m512i hw = _mm512_set1_epi32(bytes_lane(high + t)), lw = _mm512_set1_epi32(bytes_lane(low + t));
        for (int j = 0; j < V; j++) {
            __m512i rows = _mm512_maskz_loadu_epi8(j + 1 < V ? ~(__mmask64)0 : last, x + 64 * j);
            hsum[j] = _mm512_dpbusd_epi32(hsum[j], hw, rows);
            lsum[j] = _mm512_dpbusd_epi32(lsum[j], lw, rows);
        }
    }
    __m512 step = _mm512_set1_ps(q->step);
    for (int j = 0; j < V; j++) {
        __mmask16 m = j + 1 < V ? (__mmask16)0xffff : kv_mask(0, rest);
        float *o = out + d + 16 * j;
        __m512 sum = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(hsum[j], 7), lsum[j]));
        _mm512_mask_storeu_ps(o, m, _mm512_fmadd_ps(sum, step, _mm512_maskz_loadu_ps(m, o)));
    }
}

/* out += a chunk's products, in slices of KV_SLICE_512 vectors (a constant
 * V in each call, so the sums stay in registers): QUADS(d, V, rest, fetch,
 * its own arguments...) for each slice */
#define Q8_SLICES_512(QUADS, hs, fetch, ...)                                                                   \
    for (int d = 0; d < (hs); d += 16 * KV_SLICE_512) {                                                        \
        int V = ((hs) - d + 15) / 16 < KV_SLICE_512 ? ((hs) - d + 15) / 16 : KV_SLICE_512;                     \
        int rest = (hs) - d - 16 * (V - 1);                                                                    \
        Fetch f = d == 0 ? (fetch) : FETCH_NONE;                                                               \
        switch (V) {                                                                                           \
        case 1: QUADS(d, 1, rest, f, __VA_ARGS__); break;                                                      \
        case 2: QUADS(d, 2, rest, f, __VA_ARGS__); break;                                                      \
        case 3: QUADS(d, 3, rest, f, __VA_ARGS__); break;                                                      \
        default: QUADS(d, KV_SLICE_512, rest, f, __VA_ARGS__); break;                                          \
        }                                                                                                      \
    }

TARGET_AVX512 static void q8_sums_avx512(Q8Values v, const Q8Weights *q, int n, float *out, Fetch fetch) {
    Q8_SLICES_512(q8_quads_512, v.hs, fetch, v, q, n, out)
}

/* out += a chunk's products from its weights' bytes (weight_bytes_512;
 * bytes 0: a weight was negative, the widening kernel sums them), with
 * next's steps made among the loads (a decode row's, or NULL) */
TARGET_VNNI INLINE void q8_sums_of_bytes(Q8Values v, const Q8Weights *q, int n, float *out, Fetch fetch,
                                         const unsigned char *high, const unsigned char *low, int bytes,
                                         Q8Block *next) {
    if (!bytes) q8_sums_avx512(v, q, n, out, fetch);
    else Q8_SLICES_512(q8_quads_vnni, v.hs, fetch, v, q, n, out, high, low, next)
}

TARGET_VNNI static void q8_sums_vnni(Q8Values v, const Q8Weights *q, int n, float *out, Fetch fetch) {
    unsigned char high[KV_Q8_CHUNK], low[KV_Q8_CHUNK];
    int bytes = weight_bytes_512(q->c, n, high, low);
    q8_sums_of_bytes(v, q, n, out, fetch, high, low, bytes, NULL);
}

/* kv_decode_partials for int8 rows with VNNI, blocks of KV_Q8_CHUNK keys:
 * block b + 1's softmax made inside block b's sums (Q8Block) */
TARGET_VNNI static void q8_decode_partials_vnni(Q8Values v, const float *scores, float *e, int n, float scale,
                                                float *partials, size_t stride, Fetch fetch) {
    Q8Block blocks[2];
    int count = (n + KV_Q8_CHUNK - 1) / KV_Q8_CHUNK;
    q8_block_begin(&blocks[0], scores, e, q8_chunk_keys(n, 0), v.scales, scale);
    q8_block_finish(&blocks[0]);
    for (int b = 0; b < count; b++) {
        Q8Block *block = &blocks[b % 2], *next = b + 1 < count ? &blocks[(b + 1) % 2] : NULL;
        int first = b * KV_Q8_CHUNK, keys = q8_chunk_keys(n, first), after = first + KV_Q8_CHUNK;
        if (next) q8_block_begin(next, scores + after, e + after, q8_chunk_keys(n, after), v.scales + after, scale);
        float *p = partials + (size_t)b * stride, *out = p + 2;
        Q8Values rows = q8_values_at(v, first);
        p[0] = block->max, p[1] = block->total;
        for (int i = 0; i < v.hs; i++) out[i] = 0.0f;
        if (block->q.step == 0.0f) q8_chunk_float(rows, block->e, keys, out);
        else q8_sums_of_bytes(rows, &block->q, keys, out, fetch, block->high, block->low, !block->negative, next);
        if (next) q8_block_finish(next);
    }
}

#include "kv_int8_256.h" /* the 256-bit kernels: AVX2, and VNNI on 256-bit vectors */

#endif /* QKV_HAVE_X86_KERNELS */

/* The kernels by instruction set (AMX: VNNI's; a decode row is no tile) */
typedef struct {
    void (*scores)(Q8Keys k, int skip, const float *q, int n, float *scores, Fetch fetch);
    void (*weights)(Q8Values v, const float *w, int n, Q8Weights *q); /* a chunk's */
    void (*sums)(Q8Values v, const Q8Weights *q, int n, float *out, Fetch fetch);
} Q8Kernels;

static Q8Kernels q8_kernels(Isa isa) {
#ifdef QKV_HAVE_X86_KERNELS
    static const Q8Kernels by_isa[ISA_AVX512_VNNI + 1] = {
        [ISA_PORTABLE] = { q8_scores_portable, q8_weights_portable, q8_sums_portable },
        [ISA_AVX2] = { q8_scores_avx2, q8_weights_256, q8_sums_avx2 },
        [ISA_AVX_VNNI] = { q8_scores_avxvnni, q8_weights_256, q8_sums_avxvnni },
        [ISA_AVX512] = { q8_scores_avx512, q8_weights_512, q8_sums_avx512 },
        [ISA_AVX512_VNNI] = { q8_scores_vnni, q8_weights_512, q8_sums_vnni },
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

/* kv_decode_partials for int8 rows: with VNNI (the kernel above), else 0
 * (blocks of another size than a chunk: none) */
static int q8_decode_partials(const KVCache *kv, const unsigned char *values, const float *scores, float *e, int n,
                              int block, float scale, float *partials, size_t stride) {
#ifdef QKV_HAVE_X86_KERNELS
    if (kv->isa < ISA_AVX512_VNNI || block != KV_Q8_CHUNK) return 0;
    int skip;
    Q8Values v = q8_values_of(kv, (size_t)(values - kv->values) / kv->value_bytes, &skip); /* skip is 0 */
    q8_decode_partials_vnni(v, scores, e, n, scale, partials, stride, kv->fetch_ahead);
    return 1;
#else
    return 0; /* the build has -Wno-unused-parameter */
#endif
}

/* out = Σ_t w[t] · values[t] over t < n, int8 values from a quad's first row:
 * chunk by chunk, each's weights rounded to int16 and its products added */
static void q8_weighted_sum(const KVCache *kv, const unsigned char *values, const float *w, int n, float *out,
                            Fetch fetch) {
    int skip;
    Q8Values v = q8_values_of(kv, (size_t)(values - kv->values) / kv->value_bytes, &skip); /* skip is 0 */
    Q8Kernels k = q8_kernels(kv->isa);
    for (int i = 0; i < v.hs; i++) out[i] = 0.0f;
    for (int first = 0; first < n; first += KV_Q8_CHUNK) {
        Q8Values chunk = q8_values_at(v, first);
        int count = q8_chunk_keys(n, first);
        Q8Weights q;
        k.weights(chunk, w + first, count, &q);
        if (q.step == 0.0f)
            q8_chunk_float(chunk, w + first, count, out);
        else
            k.sums(chunk, &q, count, out, fetch);
    }
}

#endif /* QKV_KV_INT8_INCLUDED */
