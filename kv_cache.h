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
    const KernelEntry *f32_kernel, *f16_kernel; /* the scores of float32 and float16 keys */
    Isa isa;
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

/* out[head_size] = Σ_t weights[t] · values[t] over t < n_visible */
void kv_weighted_sum(const KVCache *kv, const unsigned char *values, const float *weights, int n_visible,
                     float *out);

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
    kv->f32_kernel = kernel_for(WEIGHT_F32, kv->isa);
    kv->f16_kernel = kernel_for(WEIGHT_F16, kv->isa);
    size_t rows, bytes;
    if (__builtin_mul_overflow((size_t)n_layers * (size_t)n_kv_heads, (size_t)capacity, &rows) ||
        __builtin_mul_overflow(rows, kv->row_bytes, &bytes))
        return -1;
    kv->keys = calloc(bytes, 1);
    kv->values = calloc(bytes, 1);
    if (!kv->keys || !kv->values) {
        kv_cache_free(kv);
        return -1;
    }
    return 0;
}

void kv_cache_free(KVCache *kv) {
    free(kv->keys);
    free(kv->values);
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
        float amax = 0.0f;
        for (int i = 0; i < n; i++) amax = amax > fabsf(x[i]) ? amax : fabsf(x[i]);
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

/* q · row as floats, then times the row's scale: the same for every query */
static float q8_row_dot(const unsigned char *row, const float *q, int n) {
    float acc[8] = { 0 }, scale;
    memcpy(&scale, row, sizeof scale);
    const int8_t *x = (const int8_t *)(row + sizeof scale);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += (float)x[i + l] * q[i + l];
    float sum = 0.0f;
    for (int l = 0; l < 8; l++) sum += acc[l];
    for (; i < n; i++) sum += (float)x[i] * q[i];
    return sum * scale;
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
 * the sum of each element in row order, as the portable loop. */
#define KV_SLICE_512 4 /* vectors of 16: head elements summed at once */
#define KV_SLICE_256 8 /* vectors of 8 */
/* Rows ahead whose bytes are requested while a row is summed: the value
 * rows of a long context come from memory, and the hardware prefetcher
 * alone leaves the core waiting at the start of each block. */
#define KV_PREFETCH 8

INLINE void kv_prefetch_row(const unsigned char *row, size_t row_bytes) {
    for (size_t at = 0; at < row_bytes; at += 64)
        _mm_prefetch((const char *)row + KV_PREFETCH * row_bytes + at, _MM_HINT_T0);
}

TARGET_AVX512 INLINE __mmask16 kv_mask(int i, int n) {
    return n - i >= 16 ? (__mmask16)0xffff : n <= i ? (__mmask16)0 : (__mmask16)((1u << (n - i)) - 1);
}

/* 16 elements from i as floats (masked lanes are 0) */
TARGET_AVX512 INLINE __m512 kv_load16(KVType type, const unsigned char *data, int i, __mmask16 m) {
    if (type == KV_F32) return _mm512_maskz_loadu_ps(m, (const float *)data + i);
    if (type == KV_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, data + 2 * (size_t)i));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, data + i)));
}

TARGET_AVX2 INLINE __m256 kv_load8(KVType type, const unsigned char *data, int i) {
    if (type == KV_F32) return _mm256_loadu_ps((const float *)data + i);
    if (type == KV_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(data + 2 * (size_t)i)));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(data + i))));
}

/* scores[k] = keys[k] · q (times the key's scale) for k < n, int8 keys:
 * four keys a step, their lanes summed by one reduction (kernels.h's tree,
 * the same for each of the four, so a key's score does not depend on its
 * group), the rows of the next groups prefetched. Whole vectors are loaded
 * without a mask (measured, cache-resident rows of 48: 3.1 -> 2.2 ns a key). */
TARGET_AVX512 static void q8_scores_avx512(const unsigned char *keys, size_t row_bytes, const float *q, int hs,
                                           int n, float *scores) {
    for (int k = 0; k < n; k += 4) {
        const unsigned char *rows[4];
        __m512 acc[4];
        for (int r = 0; r < 4; r++) {
            rows[r] = keys + (size_t)(k + r < n ? k + r : k) * row_bytes;
            acc[r] = _mm512_setzero_ps();
        }
        for (size_t at = 0; at < 4 * row_bytes; at += 64)
            _mm_prefetch((const char *)rows[0] + 4 * KV_PREFETCH * row_bytes + at, _MM_HINT_T0);
        int i = 0;
        for (; i + 16 <= hs; i += 16) { /* whole vectors unmasked: each load folds into its conversion */
            __m512 qv = _mm512_loadu_ps(q + i);
            for (int r = 0; r < 4; r++) {
                __m128i x = _mm_loadu_si128((const __m128i *)(rows[r] + sizeof(float) + i));
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(x)), qv, acc[r]);
            }
        }
        if (i < hs) {
            __mmask16 m = kv_mask(i, hs);
            __m512 qv = _mm512_maskz_loadu_ps(m, q + i);
            for (int r = 0; r < 4; r++) acc[r] = _mm512_fmadd_ps(kv_load16(KV_Q8, rows[r] + sizeof(float), i, m), qv, acc[r]);
        }
        float sums[4];
        _mm_storeu_ps(sums, reduce4_512(acc[0], acc[1], acc[2], acc[3]));
        for (int r = 0; r < 4 && k + r < n; r++) {
            float scale;
            memcpy(&scale, rows[r], sizeof scale);
            scores[k + r] = sums[r] * scale;
        }
    }
}

/* q8_row_dot with its eight partial sums in one vector */
TARGET_AVX2 static float q8_row_dot_avx2(const unsigned char *row, const float *q, int n) {
    float scale, lanes[8];
    memcpy(&scale, row, sizeof scale);
    const int8_t *x = (const int8_t *)(row + sizeof scale);
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(kv_load8(KV_Q8, row + sizeof scale, i), _mm256_loadu_ps(q + i)));
    _mm256_storeu_ps(lanes, acc);
    float sum = 0.0f;
    for (int l = 0; l < 8; l++) sum += lanes[l];
    for (; i < n; i++) sum += (float)x[i] * q[i];
    return sum * scale;
}

TARGET_AVX512 INLINE void weighted_sum_512(KVType type, const unsigned char *rows, size_t row_bytes, const float *w,
                                           int n, int hs, float *out) {
    size_t skip = type == KV_Q8 ? sizeof(float) : 0;
    for (int d = 0; d < hs; d += 16 * KV_SLICE_512) {
        __mmask16 m[KV_SLICE_512];
        __m512 acc[KV_SLICE_512];
        for (int v = 0; v < KV_SLICE_512; v++) {
            m[v] = kv_mask(d + 16 * v, hs);
            acc[v] = _mm512_setzero_ps();
        }
        for (int t = 0; t < n; t++) {
            const unsigned char *row = rows + (size_t)t * row_bytes;
            if (d == 0) kv_prefetch_row(row, row_bytes);
            __m512 wt = _mm512_set1_ps(kv_row_weight(type, row, w[t]));
            for (int v = 0; v < KV_SLICE_512; v++)
                if (m[v]) acc[v] = _mm512_fmadd_ps(wt, kv_load16(type, row + skip, d + 16 * v, m[v]), acc[v]);
        }
        for (int v = 0; v < KV_SLICE_512; v++) _mm512_mask_storeu_ps(out + d + 16 * v, m[v], acc[v]);
    }
}

/* Whole vectors of 8 in registers; the last hs % 8 elements by the
 * portable loop. */
TARGET_AVX2 INLINE void weighted_sum_256(KVType type, const unsigned char *rows, size_t row_bytes, const float *w,
                                         int n, int hs, float *out) {
    size_t skip = type == KV_Q8 ? sizeof(float) : 0;
    int whole = hs / 8 * 8;
    for (int d = 0; d < whole; d += 8 * KV_SLICE_256) {
        int vectors = (whole - d) / 8 < KV_SLICE_256 ? (whole - d) / 8 : KV_SLICE_256;
        __m256 acc[KV_SLICE_256];
        for (int v = 0; v < KV_SLICE_256; v++) acc[v] = _mm256_setzero_ps();
        for (int t = 0; t < n; t++) {
            const unsigned char *row = rows + (size_t)t * row_bytes;
            if (d == 0) kv_prefetch_row(row, row_bytes);
            __m256 wt = _mm256_set1_ps(kv_row_weight(type, row, w[t]));
            for (int v = 0; v < KV_SLICE_256; v++)
                if (v < vectors) acc[v] = _mm256_fmadd_ps(wt, kv_load8(type, row + skip, d + 8 * v), acc[v]);
        }
        for (int v = 0; v < vectors; v++) _mm256_storeu_ps(out + d + 8 * v, acc[v]);
    }
    if (whole < hs) weighted_sum_portable(type, rows, row_bytes, w, n, whole, hs, out);
}

/* One function per type and instruction set: the type is a constant in
 * each, so the loads inline without a branch. */
#define KV_WEIGHTED_SUMS(ISA, TARGET, BODY)                                                                   \
    TARGET static void weighted_sum_f32_##ISA(const unsigned char *r, size_t b, const float *w, int n, int hs,  \
                                              float *out) { BODY(KV_F32, r, b, w, n, hs, out); }                \
    TARGET static void weighted_sum_f16_##ISA(const unsigned char *r, size_t b, const float *w, int n, int hs,  \
                                              float *out) { BODY(KV_F16, r, b, w, n, hs, out); }                \
    TARGET static void weighted_sum_q8_##ISA(const unsigned char *r, size_t b, const float *w, int n, int hs,   \
                                             float *out) { BODY(KV_Q8, r, b, w, n, hs, out); }
KV_WEIGHTED_SUMS(avx512, TARGET_AVX512, weighted_sum_512)
KV_WEIGHTED_SUMS(avx2, TARGET_AVX2, weighted_sum_256)
#endif

static float q8_dot(const KVCache *kv, const unsigned char *row, const float *q) {
#ifdef QKV_HAVE_X86_KERNELS
    if (kv->isa >= ISA_AVX2) return q8_row_dot_avx2(row, q, kv->head_size);
#endif
    return q8_row_dot(row, q, kv->head_size);
}

void kv_scores(const KVCache *kv, const unsigned char *keys, const float *q, int n, int q_stride, int n_keys,
               float *scores, int scores_stride) {
    if (kv->type == KV_Q8) {
#ifdef QKV_HAVE_X86_KERNELS
        if (kv->isa >= ISA_AVX512) {
            for (int t = 0; t < n; t++)
                q8_scores_avx512(keys, kv->row_bytes, q + (size_t)t * q_stride, kv->head_size, n_keys,
                                 scores + (size_t)t * scores_stride);
            return;
        }
#endif
        for (int t = 0; t < n; t++)
            for (int key = 0; key < n_keys; key++)
                scores[(size_t)t * scores_stride + key] = q8_dot(kv, keys + (size_t)key * kv->row_bytes, q + (size_t)t * q_stride);
        return;
    }
    const KernelEntry *k = kv->type == KV_F16 ? kv->f16_kernel : kv->f32_kernel;
    Activations queries = { q, n, q_stride, kv->head_size, NULL, NULL, 0, NULL };
    k->run(scores, scores_stride, &queries, keys, kv->head_size, 0, n_keys);
}

void kv_weighted_sum(const KVCache *kv, const unsigned char *values, const float *weights, int n_visible,
                     float *out) {
#ifdef QKV_HAVE_X86_KERNELS
    typedef void (*WeightedSum)(const unsigned char *, size_t, const float *, int, int, float *);
    static const WeightedSum sums[2][KV_TYPE_COUNT] = {
        { weighted_sum_f32_avx2, weighted_sum_f16_avx2, weighted_sum_q8_avx2 },
        { weighted_sum_f32_avx512, weighted_sum_f16_avx512, weighted_sum_q8_avx512 },
    };
    if (kv->isa >= ISA_AVX2) {
        sums[kv->isa >= ISA_AVX512][kv->type](values, kv->row_bytes, weights, n_visible, kv->head_size, out);
        return;
    }
#endif
    weighted_sum_portable(kv->type, values, kv->row_bytes, weights, n_visible, 0, kv->head_size, out);
}

#endif /* QKV_KV_CACHE_IMPLEMENTED */
#endif /* QKV_KV_CACHE_IMPLEMENTATION */
