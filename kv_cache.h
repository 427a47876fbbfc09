/* kv_cache.h — the keys and values attention reads, in float32, float16 or
 * int8, and the two products attention makes of them: scores = keys · q and
 * out = Σ weights[t] · values[t].
 *
 * stb-style: the interface everywhere, the implementation where
 * QKV_KV_CACHE_IMPLEMENTATION is defined (model.h's implementation does).
 *
 * At long contexts a decode step reads more bytes of keys and values than
 * of weights (the first seed: "at tens of thousands of tokens attention
 * dominates"). Float16 halves those bytes and int8 quarters them; the
 * arithmetic stays float32. An int8 row is a float32 scale and head_size
 * values: x = q · scale, scale = max|x| / 127 (one scale per key or value
 * row of each head). */
#ifndef QKV_KV_CACHE_H
#define QKV_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

typedef enum { KV_F32 = 0, KV_F16 = 1, KV_Q8 = 2, KV_TYPE_COUNT } KVType;

const char *kv_type_name(KVType type);
/* "f32", "f16", "q8"; -1 if none */
int kv_type_parse(const char *name);

/* Keys and values of every layer for every position seen so far, stored
 * per key/value head so that one head's keys are contiguous: a query row
 * streams through them in order. Positions 0..sinks-1 keep their slots;
 * the others take turns in the ring of slots after them (kv_slot): with
 * sinks 0 and a run shorter than the capacity, slot = position. What a
 * query sees of it (--window, --sinks) is kv_window.h's. */
typedef struct {
    KVType type;
    int n_layers, n_kv_heads, capacity, head_size;
    int sinks;            /* positions that are never evicted (kv_window.h) */
    float *sink_keys;     /* [n_layers, n_kv_heads, sinks, head_size] their keys, float32, and scratch (kv_window.h) */
    size_t row_bytes;     /* one key or value row of one head, as stored */
    unsigned char *keys;  /* [n_layers, n_kv_heads, capacity] rows */
    unsigned char *values;
    Isa isa;              /* the kernels' instruction set (float keys' scores: kernels_rows.h) */
} KVCache;

/* Returns 0, or -1 when out of memory (or the size overflows). */
int kv_cache_init(KVCache *kv, KVType type, int n_layers, int n_kv_heads, int capacity, int head_size);
void kv_cache_free(KVCache *kv);
size_t kv_cache_bytes(const KVCache *kv);
/* Bytes one position adds: keys and values of every layer and kv head. */
size_t kv_bytes_per_position(KVType type, int n_layers, int n_kv_heads, int head_size);

/* The slot that holds position pos (kv_cache_store's). */
int kv_slot(const KVCache *kv, int pos);

/* Stores position pos's keys and values of every kv head of a layer:
 * k, v [n_kv_heads * head_size] floats. */
void kv_cache_store(KVCache *kv, int layer, int pos, const float *k, const float *v);

/* The rows of one layer's kv head (slot 0 on). */
const unsigned char *kv_keys(const KVCache *kv, int layer, int kv_head);
const unsigned char *kv_values(const KVCache *kv, int layer, int kv_head);

/* A stored row as floats (for tests and tools). */
void kv_row_to_float(const KVCache *kv, const unsigned char *row, float *out);

/* scores[t * scores_stride + key] = keys[key] · q[t] for key < n_keys and
 * the n query rows q (q_stride floats apart): each (key, query) the same
 * arithmetic whatever n is. */
void kv_scores(const KVCache *kv, const unsigned char *keys, const float *q, int n, int q_stride, int n_keys,
               float *scores, int scores_stride);

/* out[head_size] = Σ_t weights[t] · values[t] over t < n_visible. fetch:
 * request the rows ahead while summing (a decode row reads them from
 * memory; the other rows of a prompt's group find them in cache, and the
 * requests only cost them time). The same bits either way. */
void kv_weighted_sum(const KVCache *kv, const unsigned char *values, const float *weights, int n_visible,
                     float *out, int fetch);

#endif /* QKV_KV_CACHE_H */

/* ======================================================================== */
#ifdef QKV_KV_CACHE_IMPLEMENTATION
#ifndef QKV_KV_CACHE_IMPLEMENTED
#define QKV_KV_CACHE_IMPLEMENTED

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *kv_type_name(KVType type) {
    static const char *names[KV_TYPE_COUNT] = { "f32", "f16", "q8" };
    return type >= 0 && type < KV_TYPE_COUNT ? names[type] : "?";
}

int kv_type_parse(const char *name) {
    for (int i = 0; i < KV_TYPE_COUNT; i++)
        if (strcmp(name, kv_type_name((KVType)i)) == 0) return i;
    return -1;
}

static size_t kv_row_bytes(KVType type, int head_size) {
    switch (type) {
    case KV_F16: return (size_t)head_size * 2;
    case KV_Q8: return sizeof(float) + (size_t)head_size;
    default: return (size_t)head_size * sizeof(float);
    }
}

int kv_cache_init(KVCache *kv, KVType type, int n_layers, int n_kv_heads, int capacity, int head_size) {
    memset(kv, 0, sizeof *kv);
    kv->type = type;
    kv->n_layers = n_layers;
    kv->n_kv_heads = n_kv_heads;
    kv->capacity = capacity;
    kv->head_size = head_size;
    kv->row_bytes = kv_row_bytes(type, head_size);
    kv->isa = isa_available();
    size_t rows, bytes;
    if (__builtin_mul_overflow((size_t)n_layers * (size_t)n_kv_heads, (size_t)capacity, &rows) ||
        __builtin_mul_overflow(rows, kv->row_bytes, &bytes))
        return -1;
    kv->keys = zalloc_aligned(bytes, 1);
    kv->values = zalloc_aligned(bytes, 1);
    if (!kv->keys || !kv->values) {
        kv_cache_free(kv);
        return -1;
    }
    return 0;
}

void kv_cache_free(KVCache *kv) {
    free_aligned(kv->keys);
    free_aligned(kv->values);
    free(kv->sink_keys);
    kv->keys = kv->values = NULL;
    kv->sink_keys = NULL;
}

size_t kv_bytes_per_position(KVType type, int n_layers, int n_kv_heads, int head_size) {
    return 2 * (size_t)n_layers * n_kv_heads * kv_row_bytes(type, head_size);
}

size_t kv_cache_bytes(const KVCache *kv) {
    return 2 * (size_t)kv->n_layers * kv->n_kv_heads * kv->capacity * kv->row_bytes;
}

/* The slot of position pos: a sink keeps its own; the others go round the
 * ring after the sinks, evicting the oldest. */
int kv_slot(const KVCache *kv, int pos) {
    return pos < kv->sinks ? pos : kv->sinks + (pos - kv->sinks) % (kv->capacity - kv->sinks);
}

/* Where position pos of one key/value head of one layer lives. */
static size_t kv_offset(const KVCache *kv, int layer, int kv_head, int pos) {
    size_t head = (size_t)layer * kv->n_kv_heads + (size_t)kv_head;
    return (head * kv->capacity + (size_t)kv_slot(kv, pos)) * kv->row_bytes;
}

const unsigned char *kv_keys(const KVCache *kv, int layer, int kv_head) {
    return kv->keys + kv_offset(kv, layer, kv_head, 0);
}

const unsigned char *kv_values(const KVCache *kv, int layer, int kv_head) {
    return kv->values + kv_offset(kv, layer, kv_head, 0);
}

/* roundf's halves away from zero, exactly, for |v| < 2^31 */
static inline int kv_round(float v) {
    int t = (int)v;
    float fraction = v - (float)t;
    return t + (fraction >= 0.5f) - (fraction <= -0.5f);
}

/* max |x_i|, or NaN if an x_i is NaN or infinite (x · 0 is then NaN) */
static float abs_max(const float *x, int n) {
    float amax = 0.0f, nonfinite = 0.0f;
    for (int i = 0; i < n; i++) {
        amax = fmaxf(amax, fabsf(x[i]));
        nonfinite += x[i] * 0.0f;
    }
    return nonfinite == 0.0f ? amax : NAN;
}

/* One row of floats into the cache's type. */
static void kv_encode(KVType type, const float *x, int n, unsigned char *row) {
    if (type == KV_F32) {
        memcpy(row, x, (size_t)n * sizeof(float));
    } else if (type == KV_F16) {
        for (int i = 0; i < n; i++) {
            uint16_t h = float_to_half(x[i]);
            memcpy(row + 2 * (size_t)i, &h, 2);
        }
    } else {
        float amax = abs_max(x, n);
        float scale = amax / 127.0f, inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
        if (!(amax <= 3.4e38f)) { /* NaN or infinity: a NaN row, no undefined float -> int */
            scale = NAN;
            inverse = 0.0f;
        }
        memcpy(row, &scale, sizeof scale);
        for (int i = 0; i < n; i++) row[sizeof scale + i] = (unsigned char)(int8_t)kv_round(x[i] * inverse);
    }
}

void kv_cache_store(KVCache *kv, int layer, int pos, const float *k, const float *v) {
    for (int h = 0; h < kv->n_kv_heads; h++) {
        size_t at = kv_offset(kv, layer, h, pos);
        kv_encode(kv->type, k + (size_t)h * kv->head_size, kv->head_size, kv->keys + at);
        kv_encode(kv->type, v + (size_t)h * kv->head_size, kv->head_size, kv->values + at);
    }
}

void kv_row_to_float(const KVCache *kv, const unsigned char *row, float *out) {
    int n = kv->head_size;
    if (kv->type == KV_F32) {
        memcpy(out, row, (size_t)n * sizeof(float));
    } else if (kv->type == KV_F16) {
        weight_row_to_float(WEIGHT_F16, row, out, n);
    } else {
        float scale;
        memcpy(&scale, row, sizeof scale);
        for (int i = 0; i < n; i++) out[i] = (float)(int8_t)row[sizeof scale + i] * scale;
    }
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

/* Σ p_i k_i over one chunk of q's columns of an int8 row's values */
static int32_t int8_int16_dot(const unsigned char *row_values, const int16_t *p, int count) {
    int32_t dot = 0;
    for (int i = 0; i < count; i++) dot += (int32_t)(int8_t)row_values[i] * p[i];
    return dot;
}

static float q8_row_scale(const unsigned char *row) {
    float scale;
    memcpy(&scale, row, sizeof scale);
    return scale;
}

static void q8_scores_portable(const unsigned char *keys, size_t row_bytes, const float *q, int hs, int n,
                               float *scores) {
    QueryScale qs = query_scale(abs_max(q, hs), hs);
    int16_t p[KV_Q8_COLUMNS];
    if (hs <= KV_Q8_COLUMNS) query_int16(q, hs, qs.inverse, p);
    for (int key = 0; key < n; key++) {
        const unsigned char *row = keys + (size_t)key * row_bytes;
        int32_t dot = 0;
        for (int from = 0; from < hs; from += KV_Q8_COLUMNS) {
            int count = hs - from < KV_Q8_COLUMNS ? hs - from : KV_Q8_COLUMNS;
            if (hs > KV_Q8_COLUMNS) query_int16(q + from, count, qs.inverse, p);
            dot += int8_int16_dot(row + sizeof(float) + from, p, count);
        }
        scores[key] = (float)dot * (q8_row_scale(row) * qs.scale);
    }
}

/* Element i of a stored row (an int8 row without its scale) */
static inline float kv_element(KVType type, const unsigned char *data, int i) {
    if (type == KV_F32) {
        float f;
        memcpy(&f, data + 4 * (size_t)i, 4);
        return f;
    }
    if (type == KV_F16) {
        uint16_t h;
        memcpy(&h, data + 2 * (size_t)i, 2);
        return half_to_float(h);
    }
    return (float)(int8_t)data[i];
}

/* The weight of row t in a weighted sum: w, times the row's scale for int8 */
static inline float kv_row_weight(KVType type, const unsigned char *row, float w) {
    if (type != KV_Q8) return w;
    float scale;
    memcpy(&scale, row, sizeof scale);
    return w * scale;
}

/* out[i] = Σ_t w[t] · row_t[i] for from <= i < to, t < n, rows row_bytes
 * apart: each element summed over the rows in order */
static void weighted_sum_portable(KVType type, const unsigned char *rows, size_t row_bytes, const float *w, int n,
                                  int from, int to, float *out) {
    size_t skip = type == KV_Q8 ? sizeof(float) : 0;
    for (int i = from; i < to; i++) out[i] = 0.0f;
    for (int t = 0; t < n; t++) {
        const unsigned char *row = rows + (size_t)t * row_bytes;
        float wt = kv_row_weight(type, row, w[t]);
        for (int i = from; i < to; i++) out[i] += wt * kv_element(type, row + skip, i);
    }
}

#ifdef QKV_HAVE_X86_KERNELS
/* The x86 kernels keep a slice of out in registers while the rows stream
 * past (a decode step reads each value row once: the time is its bytes),
 * the sum of each element in row order, as the portable loop; float rows
 * in two sums, the even rows' and the odd rows' (weighted_sum_512). */
#define KV_SLICE_512 4 /* vectors of 16: head elements summed at once */
#define KV_SLICE_256 8 /* vectors of 8 */
#define KV_FLOAT_SLICE_256 6 /* float rows, two sums each: 12 of the 16 registers */
/* bytes from from on, into L1 */
INLINE void kv_prefetch(const unsigned char *from, size_t bytes) {
    for (size_t at = 0; at < bytes; at += 64) _mm_prefetch((const char *)from + at, _MM_HINT_T0);
}

/* the bytes of rows rows from row, QKV_KV_AHEAD bytes ahead (kernels_rows.h,
 * as for the keys): the value rows of a long context come from memory, and
 * the hardware prefetcher alone leaves the core waiting at the start of
 * each block */
INLINE void kv_prefetch_rows(const unsigned char *row, size_t row_bytes, int rows) {
    kv_prefetch(row + QKV_KV_AHEAD, rows * row_bytes);
}

TARGET_AVX512 INLINE __mmask16 kv_mask(int i, int n) {
    return n - i >= 16 ? (__mmask16)0xffff : n <= i ? (__mmask16)0 : (__mmask16)((1u << (n - i)) - 1);
}

/* 16 elements from i of a float32 or float16 row as floats (masked lanes
 * are 0); int8 rows have kernels of their own (below) */
TARGET_AVX512 INLINE __m512 kv_load16(KVType type, const unsigned char *data, int i, __mmask16 m) {
    if (type == KV_F32) return _mm512_maskz_loadu_ps(m, (const float *)data + i);
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, data + 2 * (size_t)i));
}

TARGET_AVX2 INLINE __m256 kv_load8(KVType type, const unsigned char *data, int i) {
    if (type == KV_F32) return _mm256_loadu_ps((const float *)data + i);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(data + 2 * (size_t)i)));
}

/* ---- int8 rows: a group of rows at a time ----
 * An int8 row is short (52 bytes for llama2.c's head size of 48), so work
 * done once a row is not amortized: the old kernels reduced each row's
 * score horizontally and multiplied each value row's scale into its weight
 * alone, and ran at 21 GB/s with the rows in cache (1 thread, Xeon). Here
 * a group of 16 rows (8 with AVX2) goes at once: one accumulator a row,
 * summed lane-wise by a transposing tree into one vector of the group's
 * scores; the group's scales gathered into one vector, applied after the
 * dot products (score = scale · Σ q_i k_i) and to the weights before the
 * values (w_t · scale_t), as the portable loops do. */

/* Bytes ahead of an int8 group whose lines are requested. The rows come
 * from memory at long contexts, and a decode step reads them once: 8 rows
 * ahead (416 bytes) left the core waiting on the loads; 1 to 2 KiB ran
 * fastest, 4 and 8 KiB slower (measured, rows of 48 after 60 MB of other
 * reads, 1 thread, Xeon). */
#ifndef KV_Q8_PREFETCH_BYTES
#define KV_Q8_PREFETCH_BYTES 2048
#endif

/* 16 int8 at x as floats; the masked form zeroes the lanes past m */
TARGET_AVX512 INLINE __m512 int8x16_512(const unsigned char *x) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)x)));
}

TARGET_AVX512 INLINE __m512 int8x16_masked_512(const unsigned char *x, __mmask16 m) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, x)));
}

/* Lane j = the sum of v[j]'s 16 lanes (integers: any order of adds gives
 * the same sums) */
TARGET_AVX512 INLINE __m512i transpose_sum16_512(const __m512i v[16]) {
#define SHUFFLE_EPI32(a, b, imm) _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), imm))
    __m512i pairs[8], quads[4], halves[2];
    for (int j = 0; j < 8; j++) /* per block: [a0+a2, b0+b2, a1+a3, b1+b3] */
        pairs[j] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * j], v[2 * j + 1]),
                                    _mm512_unpackhi_epi32(v[2 * j], v[2 * j + 1]));
    for (int j = 0; j < 4; j++) /* per block: rows 4j..4j+3 */
        quads[j] = _mm512_add_epi32(SHUFFLE_EPI32(pairs[2 * j], pairs[2 * j + 1], 0x44),
                                    SHUFFLE_EPI32(pairs[2 * j], pairs[2 * j + 1], 0xEE));
#undef SHUFFLE_EPI32
    for (int j = 0; j < 2; j++) /* blocks [8j..8j+3 (0+1), (2+3), 8j+4..8j+7 (0+1), (2+3)] */
        halves[j] = _mm512_add_epi32(_mm512_shuffle_i32x4(quads[2 * j], quads[2 * j + 1], 0x88),
                                     _mm512_shuffle_i32x4(quads[2 * j], quads[2 * j + 1], 0xDD));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(halves[0], halves[1], 0x88),
                            _mm512_shuffle_i32x4(halves[0], halves[1], 0xDD));
}

/* Byte offsets of 16 rows from the first: the gathers' index */
TARGET_AVX512 INLINE __m512i row_offsets16(size_t row_bytes) {
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32((int)row_bytes));
}

/* The scales of a group's first rows rows (the other lanes 0) */
TARGET_AVX512 INLINE __m512 q8_scales16(const unsigned char *group, __m512i offsets, int rows) {
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), kv_mask(0, rows), offsets, group, 1);
}

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

/* acc[r] += the lanes of p · row r's values, columns 0..count of x (the
 * group's first row's), for r < 16: rows past the group's rows repeat its
 * last (their lanes are not stored). 16 independent sums in registers.
 * STEP(acc, k, p) adds the pairwise products of int16 lanes: AVX-512BW's
 * multiply-add and add, or VNNI's one vpdpwssd (the same exact integer
 * sums in fewer steps). */
#define Q8_DOTS16(NAME, TARGET, STEP)                                                                          \
    TARGET INLINE void NAME(const unsigned char *x0, size_t row_bytes, int rows, const int16_t *p, int count,  \
                            __m512i acc[16]) {                                                                 \
        const unsigned char *x[16];                                                                            \
        for (int r = 0; r < 16; r++) x[r] = x0 + (size_t)(r < rows ? r : rows - 1) * row_bytes;                \
        for (int i = 0; i < count; i += 32) {                                                                  \
            __mmask32 m = count - i >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (count - i)) - 1);     \
            __m512i pv = _mm512_loadu_si512(p + i);                                                            \
            _Pragma("GCC unroll 16") for (int r = 0; r < 16; r++)                                              \
                acc[r] = STEP(acc[r], _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, x[r] + i)), pv);         \
        }                                                                                                      \
    }
#define Q8_STEP_BW(acc, k, p) _mm512_add_epi32(acc, _mm512_madd_epi16(k, p))
Q8_DOTS16(q8_dots16, TARGET_AVX512, Q8_STEP_BW)
Q8_DOTS16(q8_dots16_vnni, TARGET_VNNI, _mm512_dpwssd_epi32)

/* scores[k] = the integer score of keys[k] for k < n, 16 keys a step. The
 * value rows the step sums next are not requested here (they were, with 4
 * KiB pages: 10% faster then). With large pages the hardware prefetcher
 * brings them in time: the 15M shape's attention at 16,384 positions, 1
 * thread, Xeon, read 13.2-14.2 GB/s without the requests and 11.7-12.4
 * with them in a microbenchmark of attention alone, and 12.2-12.4 GB/s
 * either way in the bench's decode steps. */
#define Q8_SCORES_512(NAME, TARGET, DOTS)                                                                      \
    TARGET static void NAME(const unsigned char *keys, size_t row_bytes, const float *q, int hs, int n,        \
                            float *scores) {                                                                   \
        QueryScale qs = query_scale(abs_max_512(q, hs), hs);                                                   \
        int16_t p[KV_Q8_COLUMNS];                                                                              \
        if (hs <= KV_Q8_COLUMNS) query_int16_512(q, hs, qs.inverse, p);                                        \
        __m512i offsets = row_offsets16(row_bytes);                                                            \
        __m512 q_scale = _mm512_set1_ps(qs.scale);                                                             \
        for (int k = 0; k < n; k += 16) {                                                                      \
            const unsigned char *group = keys + (size_t)k * row_bytes;                                         \
            int rows = n - k < 16 ? n - k : 16;                                                                \
            __m512i acc[16];                                                                                   \
            for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_si512();                                      \
            kv_prefetch(group + KV_Q8_PREFETCH_BYTES, 16 * row_bytes);                                         \
            for (int from = 0; from < hs; from += KV_Q8_COLUMNS) {                                             \
                int count = hs - from < KV_Q8_COLUMNS ? hs - from : KV_Q8_COLUMNS;                             \
                if (hs > KV_Q8_COLUMNS) query_int16_512(q + from, count, qs.inverse, p);                       \
                DOTS(group + sizeof(float) + from, row_bytes, rows, p, count, acc);                            \
            }                                                                                                  \
            __m512 scale = _mm512_mul_ps(q8_scales16(group, offsets, rows), q_scale);                          \
            __m512 dots = _mm512_cvtepi32_ps(transpose_sum16_512(acc));                                        \
            _mm512_mask_storeu_ps(scores + k, kv_mask(0, rows), _mm512_mul_ps(dots, scale));                   \
        }                                                                                                      \
    }
Q8_SCORES_512(q8_scores_avx512, TARGET_AVX512, q8_dots16)
Q8_SCORES_512(q8_scores_vnni, TARGET_VNNI, q8_dots16_vnni)

/* out[d..d+16V) (the last vector masked by last) = Σ_t w[t] · scale_t ·
 * v_t[d..], t < n: 16 rows a step, their weights times their scales in one
 * vector, then each row's broadcast into V sums; each element summed in
 * row order, as the portable loop. With fetch (the first slice), the rows
 * ahead are requested. */
TARGET_AVX512 INLINE void q8_slice_512(const unsigned char *rows, size_t row_bytes, __m512i offsets, const float *w,
                                       int n, int d, int V, __mmask16 last, int fetch, float *out) {
    __m512 acc[KV_SLICE_512];
    for (int v = 0; v < V; v++) acc[v] = _mm512_setzero_ps();
    for (int t = 0; t < n; t += 16) {
        const unsigned char *group = rows + (size_t)t * row_bytes;
        int count = n - t < 16 ? n - t : 16;
        float wt[16];
        if (fetch) kv_prefetch(group + KV_Q8_PREFETCH_BYTES, 16 * row_bytes);
        _mm512_storeu_ps(wt, _mm512_mul_ps(_mm512_maskz_loadu_ps(kv_mask(0, count), w + t),
                                           q8_scales16(group, offsets, count)));
        for (int r = 0; r < count; r++) {
            const unsigned char *x = group + (size_t)r * row_bytes + sizeof(float) + d;
            __m512 weight = _mm512_set1_ps(wt[r]);
            for (int v = 0; v + 1 < V; v++) acc[v] = _mm512_fmadd_ps(weight, int8x16_512(x + 16 * v), acc[v]);
            acc[V - 1] = _mm512_fmadd_ps(weight, int8x16_masked_512(x + 16 * (V - 1), last), acc[V - 1]);
        }
    }
    for (int v = 0; v < V; v++) _mm512_mask_storeu_ps(out + d + 16 * v, v + 1 < V ? (__mmask16)0xffff : last, acc[v]);
}

/* out[hs] = Σ_t w[t] · scale_t · v_t, slices of KV_SLICE_512 vectors (a
 * constant V in each call, so the slice's sums stay in registers) */
TARGET_AVX512 static void weighted_sum_q8_avx512(const unsigned char *rows, size_t row_bytes, const float *w, int n,
                                                 int hs, float *out, int fetch) {
    __m512i offsets = row_offsets16(row_bytes);
    for (int d = 0; d < hs; d += 16 * KV_SLICE_512) {
        int V = (hs - d + 15) / 16 < KV_SLICE_512 ? (hs - d + 15) / 16 : KV_SLICE_512;
        __mmask16 last = kv_mask(d + 16 * (V - 1), hs);
        int f = d == 0 && fetch;
        switch (V) {
        case 1: q8_slice_512(rows, row_bytes, offsets, w, n, d, 1, last, f, out); break;
        case 2: q8_slice_512(rows, row_bytes, offsets, w, n, d, 2, last, f, out); break;
        case 3: q8_slice_512(rows, row_bytes, offsets, w, n, d, 3, last, f, out); break;
        default: q8_slice_512(rows, row_bytes, offsets, w, n, d, KV_SLICE_512, last, f, out); break;
        }
    }
}

/* 8 int8 at x as floats; the partial form reads only the first count */
TARGET_AVX2 INLINE __m256 int8x8_256(const unsigned char *x) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)x)));
}

/* transpose_sum16_512's tree for 8 vectors of 8 */
TARGET_AVX2 INLINE __m256i transpose_sum8_256(const __m256i v[8]) {
#define SHUFFLE_EPI32(a, b, imm) _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), imm))
    __m256i pairs[4], quads[2];
    for (int j = 0; j < 4; j++)
        pairs[j] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * j], v[2 * j + 1]),
                                    _mm256_unpackhi_epi32(v[2 * j], v[2 * j + 1]));
    for (int j = 0; j < 2; j++)
        quads[j] = _mm256_add_epi32(SHUFFLE_EPI32(pairs[2 * j], pairs[2 * j + 1], 0x44),
                                    SHUFFLE_EPI32(pairs[2 * j], pairs[2 * j + 1], 0xEE));
#undef SHUFFLE_EPI32
    return _mm256_add_epi32(_mm256_permute2x128_si256(quads[0], quads[1], 0x20),
                            _mm256_permute2x128_si256(quads[0], quads[1], 0x31));
}

TARGET_AVX2 INLINE __m256 q8_scales8(const unsigned char *group, size_t row_bytes, int rows) {
    __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)row_bytes));
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), (const float *)group, offsets,
                                    _mm256_castsi256_ps(lanes_below(rows)), 1);
}

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

/* 16 int8 at x as int16; the partial form reads only the first count */
TARGET_AVX2 INLINE __m256i int8x16_256(const unsigned char *x, int count) {
    if (count >= 16) return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x));
    unsigned char bytes[16] = { 0 };
    memcpy(bytes, x, (size_t)count);
    return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)bytes));
}

/* q8_dots16 with 8 rows and vectors of 16 int16: the columns outer and the
 * rows inner, whole vectors first (the rows' accumulators stay in registers;
 * each row's columns inner, with the partial vector's branch in the loop,
 * took 4.4 ns a key of 48, this 2.5: QKV_ISA=avx2, Xeon) */
TARGET_AVX2 INLINE void q8_dots8(const unsigned char *x0, size_t row_bytes, int rows, const int16_t *p, int count,
                                 __m256i acc[8]) {
    const unsigned char *x[8];
    for (int r = 0; r < 8; r++) x[r] = x0 + (size_t)(r < rows ? r : rows - 1) * row_bytes;
    int whole = count / 16 * 16;
    for (int i = 0; i < whole; i += 16) {
        __m256i pv = _mm256_loadu_si256((const __m256i *)(p + i));
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++)
            acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x[r] + i))), pv));
    }
    if (whole < count) {
        __m256i pv = _mm256_loadu_si256((const __m256i *)(p + whole));
        for (int r = 0; r < 8; r++)
            acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(int8x16_256(x[r] + whole, count - whole), pv));
    }
}

/* q8_scores_avx512, 8 keys a step */
TARGET_AVX2 static void q8_scores_avx2(const unsigned char *keys, size_t row_bytes, const float *q, int hs, int n,
                                       float *scores) {
    QueryScale qs = query_scale(abs_max_256(q, hs), hs);
    int16_t p[KV_Q8_COLUMNS];
    if (hs <= KV_Q8_COLUMNS) query_int16_256(q, hs, qs.inverse, p);
    __m256 q_scale = _mm256_set1_ps(qs.scale);
    for (int k = 0; k < n; k += 8) {
        const unsigned char *group = keys + (size_t)k * row_bytes;
        int rows = n - k < 8 ? n - k : 8;
        __m256i acc[8];
        for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_si256();
        kv_prefetch(group + KV_Q8_PREFETCH_BYTES, 8 * row_bytes);
        for (int from = 0; from < hs; from += KV_Q8_COLUMNS) {
            int count = hs - from < KV_Q8_COLUMNS ? hs - from : KV_Q8_COLUMNS;
            if (hs > KV_Q8_COLUMNS) query_int16_256(q + from, count, qs.inverse, p);
            q8_dots8(group + sizeof(float) + from, row_bytes, rows, p, count, acc);
        }
        __m256 scale = _mm256_mul_ps(q8_scales8(group, row_bytes, rows), q_scale);
        _mm256_maskstore_ps(scores + k, lanes_below(rows), _mm256_mul_ps(_mm256_cvtepi32_ps(transpose_sum8_256(acc)), scale));
    }
}

/* q8_slice_512 with 8 rows a step and V whole vectors of 8 */
TARGET_AVX2 INLINE void q8_slice_256(const unsigned char *rows, size_t row_bytes, const float *w, int n, int d, int V,
                                     int fetch, float *out) {
    __m256 acc[KV_SLICE_256];
    for (int v = 0; v < V; v++) acc[v] = _mm256_setzero_ps();
    for (int t = 0; t < n; t += 8) {
        const unsigned char *group = rows + (size_t)t * row_bytes;
        int count = n - t < 8 ? n - t : 8;
        float wt[8];
        if (fetch) kv_prefetch(group + KV_Q8_PREFETCH_BYTES, 8 * row_bytes);
        _mm256_storeu_ps(wt, _mm256_mul_ps(_mm256_maskload_ps(w + t, lanes_below(count)),
                                           q8_scales8(group, row_bytes, count)));
        for (int r = 0; r < count; r++) {
            const unsigned char *x = group + (size_t)r * row_bytes + sizeof(float) + d;
            __m256 weight = _mm256_set1_ps(wt[r]);
            for (int v = 0; v < V; v++) acc[v] = _mm256_fmadd_ps(weight, int8x8_256(x + 8 * v), acc[v]);
        }
    }
    for (int v = 0; v < V; v++) _mm256_storeu_ps(out + d + 8 * v, acc[v]);
}

/* Whole vectors of 8 in slices of KV_SLICE_256; the last hs % 8 elements
 * by the portable loop */
TARGET_AVX2 static void weighted_sum_q8_avx2(const unsigned char *rows, size_t row_bytes, const float *w, int n,
                                             int hs, float *out, int fetch) {
    int whole = hs / 8 * 8;
    for (int d = 0; d < whole; d += 8 * KV_SLICE_256) {
        int V = (whole - d) / 8 < KV_SLICE_256 ? (whole - d) / 8 : KV_SLICE_256;
        int f = d == 0 && fetch;
        switch (V) {
        case 1: q8_slice_256(rows, row_bytes, w, n, d, 1, f, out); break;
        case 2: q8_slice_256(rows, row_bytes, w, n, d, 2, f, out); break;
        case 3: q8_slice_256(rows, row_bytes, w, n, d, 3, f, out); break;
        case 4: q8_slice_256(rows, row_bytes, w, n, d, 4, f, out); break;
        case 5: q8_slice_256(rows, row_bytes, w, n, d, 5, f, out); break;
        case 6: q8_slice_256(rows, row_bytes, w, n, d, 6, f, out); break;
        case 7: q8_slice_256(rows, row_bytes, w, n, d, 7, f, out); break;
        default: q8_slice_256(rows, row_bytes, w, n, d, KV_SLICE_256, f, out); break;
        }
    }
    if (whole < hs) weighted_sum_portable(KV_Q8, rows, row_bytes, w, n, whole, hs, out);
}

/* float32 and float16 rows: the even rows and the odd rows in two sums,
 * added at the end. With one, each row's multiply-add waited for the last
 * (4 cycles); two halve the wait: a 200-token prompt's attention, 15M
 * shape, float32 cache, 1 thread, Xeon, 3.1 -> 2.5 ms. */
TARGET_AVX512 INLINE void weighted_sum_512(KVType type, const unsigned char *rows, size_t row_bytes, const float *w,
                                           int n, int hs, float *out, int fetch) {
    for (int d = 0; d < hs; d += 16 * KV_SLICE_512) {
        __mmask16 m[KV_SLICE_512];
        __m512 even[KV_SLICE_512], odd[KV_SLICE_512];
        for (int v = 0; v < KV_SLICE_512; v++) {
            m[v] = kv_mask(d + 16 * v, hs);
            even[v] = odd[v] = _mm512_setzero_ps();
        }
        int t = 0;
        for (; t + 2 <= n; t += 2) {
            const unsigned char *row = rows + (size_t)t * row_bytes, *next = row + row_bytes;
            if (fetch && d == 0) kv_prefetch_rows(row, row_bytes, 2);
            __m512 w0 = _mm512_set1_ps(w[t]), w1 = _mm512_set1_ps(w[t + 1]);
            for (int v = 0; v < KV_SLICE_512; v++)
                if (m[v]) {
                    even[v] = _mm512_fmadd_ps(w0, kv_load16(type, row, d + 16 * v, m[v]), even[v]);
                    odd[v] = _mm512_fmadd_ps(w1, kv_load16(type, next, d + 16 * v, m[v]), odd[v]);
                }
        }
        if (t < n) {
            const unsigned char *row = rows + (size_t)t * row_bytes;
            __m512 w0 = _mm512_set1_ps(w[t]);
            for (int v = 0; v < KV_SLICE_512; v++)
                if (m[v]) even[v] = _mm512_fmadd_ps(w0, kv_load16(type, row, d + 16 * v, m[v]), even[v]);
        }
        for (int v = 0; v < KV_SLICE_512; v++)
            _mm512_mask_storeu_ps(out + d + 16 * v, m[v], _mm512_add_ps(even[v], odd[v]));
    }
}

/* float32 and float16 rows: whole vectors of 8 in registers; the last
 * hs % 8 elements by the portable loop. */
TARGET_AVX2 INLINE void weighted_sum_256(KVType type, const unsigned char *rows, size_t row_bytes, const float *w,
                                         int n, int hs, float *out, int fetch) {
    int whole = hs / 8 * 8;
    for (int d = 0; d < whole; d += 8 * KV_FLOAT_SLICE_256) {
        int vectors = (whole - d) / 8 < KV_FLOAT_SLICE_256 ? (whole - d) / 8 : KV_FLOAT_SLICE_256;
        __m256 even[KV_FLOAT_SLICE_256], odd[KV_FLOAT_SLICE_256];
        for (int v = 0; v < KV_FLOAT_SLICE_256; v++) even[v] = odd[v] = _mm256_setzero_ps();
        int t = 0;
        for (; t + 2 <= n; t += 2) {
            const unsigned char *row = rows + (size_t)t * row_bytes, *next = row + row_bytes;
            if (fetch && d == 0) kv_prefetch_rows(row, row_bytes, 2);
            __m256 w0 = _mm256_set1_ps(w[t]), w1 = _mm256_set1_ps(w[t + 1]);
            for (int v = 0; v < KV_FLOAT_SLICE_256; v++)
                if (v < vectors) {
                    even[v] = _mm256_fmadd_ps(w0, kv_load8(type, row, d + 8 * v), even[v]);
                    odd[v] = _mm256_fmadd_ps(w1, kv_load8(type, next, d + 8 * v), odd[v]);
                }
        }
        if (t < n) {
            const unsigned char *row = rows + (size_t)t * row_bytes;
            __m256 w0 = _mm256_set1_ps(w[t]);
            for (int v = 0; v < KV_FLOAT_SLICE_256; v++)
                if (v < vectors) even[v] = _mm256_fmadd_ps(w0, kv_load8(type, row, d + 8 * v), even[v]);
        }
        for (int v = 0; v < vectors; v++) _mm256_storeu_ps(out + d + 8 * v, _mm256_add_ps(even[v], odd[v]));
    }
    if (whole < hs) weighted_sum_portable(type, rows, row_bytes, w, n, whole, hs, out);
}

/* One function per type and instruction set: the type is a constant in
 * each, so the loads inline without a branch. */
#define KV_WEIGHTED_SUMS(ISA, TARGET, BODY)                                                                   \
    TARGET static void weighted_sum_f32_##ISA(const unsigned char *r, size_t b, const float *w, int n, int hs,  \
                                              float *out, int f) { BODY(KV_F32, r, b, w, n, hs, out, f); }      \
    TARGET static void weighted_sum_f16_##ISA(const unsigned char *r, size_t b, const float *w, int n, int hs,  \
                                              float *out, int f) { BODY(KV_F16, r, b, w, n, hs, out, f); }
KV_WEIGHTED_SUMS(avx512, TARGET_AVX512, weighted_sum_512)
KV_WEIGHTED_SUMS(avx2, TARGET_AVX2, weighted_sum_256)
#endif

/* scores[k] = keys[k] · q for k < n, int8 keys, the integer scores */
static void q8_scores(const KVCache *kv, const unsigned char *keys, const float *q, int n, float *scores) {
#ifdef QKV_HAVE_X86_KERNELS
    if (kv->isa >= ISA_AVX512_VNNI) {
        q8_scores_vnni(keys, kv->row_bytes, q, kv->head_size, n, scores);
        return;
    }
    if (kv->isa >= ISA_AVX512) {
        q8_scores_avx512(keys, kv->row_bytes, q, kv->head_size, n, scores);
        return;
    }
    if (kv->isa >= ISA_AVX2) {
        q8_scores_avx2(keys, kv->row_bytes, q, kv->head_size, n, scores);
        return;
    }
#endif
    q8_scores_portable(keys, kv->row_bytes, q, kv->head_size, n, scores);
}

void kv_scores(const KVCache *kv, const unsigned char *keys, const float *q, int n, int q_stride, int n_keys,
               float *scores, int scores_stride) {
    if (kv->type == KV_Q8) {
        for (int t = 0; t < n; t++)
            q8_scores(kv, keys, q + (size_t)t * q_stride, n_keys, scores + (size_t)t * scores_stride);
        return;
    }
    MatmulKernel k = rows_kernel_for(kv->type == KV_F16 ? WEIGHT_F16 : WEIGHT_F32, kv->isa);
    Activations queries = { q, n, q_stride, kv->head_size, NULL, NULL, 0, NULL, NULL };
    k(scores, scores_stride, &queries, keys, kv->head_size, 0, n_keys);
}

/* out = Σ_t w[t] · values[t] over t < n, int8 values */
static void q8_weighted_sum(const KVCache *kv, const unsigned char *values, const float *w, int n, float *out,
                            int fetch) {
#ifdef QKV_HAVE_X86_KERNELS
    if (kv->isa >= ISA_AVX512) {
        weighted_sum_q8_avx512(values, kv->row_bytes, w, n, kv->head_size, out, fetch);
        return;
    }
    if (kv->isa >= ISA_AVX2) {
        weighted_sum_q8_avx2(values, kv->row_bytes, w, n, kv->head_size, out, fetch);
        return;
    }
#else
    (void)fetch;
#endif
    weighted_sum_portable(KV_Q8, values, kv->row_bytes, w, n, 0, kv->head_size, out);
}

void kv_weighted_sum(const KVCache *kv, const unsigned char *values, const float *weights, int n_visible,
                     float *out, int fetch) {
    if (kv->type == KV_Q8) {
        q8_weighted_sum(kv, values, weights, n_visible, out, fetch);
        return;
    }
#ifdef QKV_HAVE_X86_KERNELS
    typedef void (*WeightedSum)(const unsigned char *, size_t, const float *, int, int, float *, int);
    static const WeightedSum sums[2][KV_F16 + 1] = {
        { weighted_sum_f32_avx2, weighted_sum_f16_avx2 },
        { weighted_sum_f32_avx512, weighted_sum_f16_avx512 },
    };
    if (kv->isa >= ISA_AVX2) {
        sums[kv->isa >= ISA_AVX512][kv->type](values, kv->row_bytes, weights, n_visible, kv->head_size, out, fetch);
        return;
    }
#endif
    weighted_sum_portable(kv->type, values, kv->row_bytes, weights, n_visible, 0, kv->head_size, out);
}

#endif /* QKV_KV_CACHE_IMPLEMENTED */
#endif /* QKV_KV_CACHE_IMPLEMENTATION */
