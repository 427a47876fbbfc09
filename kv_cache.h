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
 * row of each head), the scales kept apart from the values, which are laid
 * out for the integer products (kv_int8.h: keys in panels, values in
 * quads). */
#ifndef QKV_KV_CACHE_H
#define QKV_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

typedef enum { KV_F32 = 0, KV_F16 = 1, KV_Q8 = 2, KV_TYPE_COUNT } KVType;

/* int8 keys are stored in panels of KV_Q8_PANEL rows (kv_int8.h), and read
 * a whole panel at a time; a row's elements, and the value rows, in quads */
#define KV_Q8_PANEL 16
#define KV_Q8_QUAD 4
#define KV_Q8_ROUND(n) (((n) + KV_Q8_QUAD - 1) / KV_Q8_QUAD * KV_Q8_QUAD)

const char *kv_type_name(KVType type);
/* "f32", "f16", "q8"; -1 if none */
int kv_type_parse(const char *name);
/* The bytes of one element of a row: 4, 2 or 1 (an int8 row's scale apart) */
int kv_element_bytes(KVType type);

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
    size_t row_bytes;     /* one key row of one head, as stored (int8: its values, the head size rounded
                             up to a quad; the scale apart) */
    size_t value_bytes;   /* one value row's */
    int stride;           /* rows from one head's to the next: int8, the capacity rounded up to a panel */
    unsigned char *keys;  /* [n_layers, n_kv_heads, capacity] rows */
    unsigned char *values;
    float *key_scales;    /* int8: [n_layers, n_kv_heads, stride] the key rows' scales */
    float *value_scales;  /* int8: the value rows' */
    Isa isa;              /* the kernels' instruction set (float keys' scores: kernels_rows.h) */
    Fetch fetch_ahead;    /* the kernels' requests for the rows ahead: none, into L1 or L2 (kv_fetch_ahead: the CPU's choice) */
} KVCache;

/* Returns 0, or -1 when out of memory (or the size overflows). */
int kv_cache_init(KVCache *kv, KVType type, int n_layers, int n_kv_heads, int capacity, int head_size);
void kv_cache_free(KVCache *kv);
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

/* 1 when two caches of one shape hold the same bytes (tests) */
int kv_cache_same(const KVCache *a, const KVCache *b);

/* Key row t after keys, value row t after values (kv_keys' and
 * kv_values' rows, or a row of them) as floats, for tests and tools. */
void kv_key_to_float(const KVCache *kv, const unsigned char *keys, int t, float *out);
void kv_value_to_float(const KVCache *kv, const unsigned char *values, int t, float *out);

/* scores[t * scores_stride + key] = keys[key] · q[t] for key < n_keys and
 * the n query rows q (q_stride floats apart): each (key, query) the same
 * arithmetic whatever n is. */
void kv_scores(const KVCache *kv, const unsigned char *keys, const float *q, int n, int q_stride, int n_keys,
               float *scores, int scores_stride);

/* out[head_size] = Σ_t weights[t] · values[t] over t < n_visible, values
 * from a row of a head that is a multiple of 4 (int8 rows are in quads;
 * attention's blocks start at multiples of 256). fetch:
 * request the rows ahead while summing, where the cache's fetch_ahead says
 * so (a decode row reads them from memory; the other rows of a prompt's
 * group find them in cache, and the requests only cost them time). The
 * same bits either way. */
void kv_weighted_sum(const KVCache *kv, const unsigned char *values, const float *weights, int n_visible,
                     float *out, int fetch);

/* A decode row's partial softmaxes over its n keys in blocks of `block`
 * (the last may be shorter), values from the first key's row (a multiple
 * of 4): block b's, with x its keys' scores (kv_scores') times scale,
 *     partials[b · stride ...] = {max x, Σ_t e_t, Σ_t e_t · v_t}, e = exp(x − max x)
 * (e[n] receives the exps; it may be scores), the bits that elementwise.h's
 * block_softmax and kv_weighted_sum give block by block, the rows ahead
 * requested as the cache's fetch_ahead says. Returns 0, doing nothing,
 * where the cache has no kernel of its own for it (then the caller goes
 * block by block): it has for int8 rows with VNNI, blocks of 256
 * (kv_int8.h). */
int kv_decode_partials(const KVCache *kv, const unsigned char *values, const float *scores, float *e, int n,
                       int block, float scale, float *partials, size_t stride);

#endif /* QKV_KV_CACHE_H */

/* ======================================================================== */
#ifdef QKV_KV_CACHE_IMPLEMENTATION
#ifndef QKV_KV_CACHE_IMPLEMENTED
#define QKV_KV_CACHE_IMPLEMENTED

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *kv_type_name(KVType type) {
    static const char *const names[KV_TYPE_COUNT] = { "f32", "f16", "q8" };
    return type >= 0 && type < KV_TYPE_COUNT ? names[type] : "?";
}

int kv_type_parse(const char *name) {
    for (int i = 0; i < KV_TYPE_COUNT; i++)
        if (strcmp(name, kv_type_name((KVType)i)) == 0) return i;
    return -1;
}

int kv_element_bytes(KVType type) { return type == KV_F16 ? 2 : type == KV_Q8 ? 1 : (int)sizeof(float); }

/* The bytes of one row, an int8 row's scale included */
static size_t kv_row_bytes(KVType type, int head_size) {
    return (size_t)head_size * (size_t)kv_element_bytes(type) + (type == KV_Q8 ? sizeof(float) : 0);
}

int kv_cache_init(KVCache *kv, KVType type, int n_layers, int n_kv_heads, int capacity, int head_size) {
    memset(kv, 0, sizeof *kv);
    kv->type = type;
    kv->n_layers = n_layers;
    kv->n_kv_heads = n_kv_heads;
    kv->capacity = capacity;
    kv->head_size = head_size;
    int q8 = type == KV_Q8;
    if (capacity > INT32_MAX - KV_Q8_PANEL) return -1;
    kv->row_bytes = q8 ? (size_t)KV_Q8_ROUND(head_size) : kv_row_bytes(type, head_size);
    kv->value_bytes = q8 ? (size_t)head_size : kv->row_bytes;
    kv->stride = q8 ? (capacity + KV_Q8_PANEL - 1) / KV_Q8_PANEL * KV_Q8_PANEL : capacity;
    kv->isa = isa_available();
    kv->fetch_ahead = kv_fetch_ahead(kv_element_bytes(type), kv->isa);
    size_t rows, bytes;
    if (__builtin_mul_overflow((size_t)n_layers * (size_t)n_kv_heads, (size_t)kv->stride, &rows) ||
        __builtin_mul_overflow(rows, kv->row_bytes, &bytes))
        return -1;
    kv->keys = zalloc_aligned(bytes, 1);
    kv->values = zalloc_aligned(rows * kv->value_bytes, 1);
    if (q8) {
        kv->key_scales = zalloc_aligned(rows, sizeof(float));
        kv->value_scales = zalloc_aligned(rows, sizeof(float));
    }
    if (!kv->keys || !kv->values || (q8 && (!kv->key_scales || !kv->value_scales))) {
        kv_cache_free(kv);
        return -1;
    }
    return 0;
}

void kv_cache_free(KVCache *kv) {
    free_aligned(kv->keys);
    free_aligned(kv->values);
    free_aligned(kv->key_scales);
    free_aligned(kv->value_scales);
    free(kv->sink_keys);
    kv->keys = kv->values = NULL;
    kv->key_scales = kv->value_scales = NULL;
    kv->sink_keys = NULL;
}

size_t kv_bytes_per_position(KVType type, int n_layers, int n_kv_heads, int head_size) {
    return 2 * (size_t)n_layers * n_kv_heads * kv_row_bytes(type, head_size);
}

/* The slot of position pos: a sink keeps its own; the others go round the
 * ring after the sinks, evicting the oldest. */
int kv_slot(const KVCache *kv, int pos) {
    return pos < kv->sinks ? pos : kv->sinks + (pos - kv->sinks) % (kv->capacity - kv->sinks);
}

/* The row of slot slot of one key/value head of one layer, counted from
 * the first layer's first head */
static size_t kv_row_index(const KVCache *kv, int layer, int kv_head, int slot) {
    return ((size_t)layer * kv->n_kv_heads + (size_t)kv_head) * kv->stride + (size_t)slot;
}

const unsigned char *kv_keys(const KVCache *kv, int layer, int kv_head) {
    return kv->keys + kv_row_index(kv, layer, kv_head, 0) * kv->row_bytes;
}

const unsigned char *kv_values(const KVCache *kv, int layer, int kv_head) {
    return kv->values + kv_row_index(kv, layer, kv_head, 0) * kv->value_bytes;
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

/* A float32 or float16 row of floats, as stored */
static void kv_encode(KVType type, const float *x, int n, unsigned char *row) {
    if (type == KV_F32) {
        memcpy(row, x, (size_t)n * sizeof(float));
        return;
    }
    for (int i = 0; i < n; i++) {
        uint16_t h = float_to_half(x[i]);
        memcpy(row + 2 * (size_t)i, &h, 2);
    }
}

static void kv_decode(KVType type, const unsigned char *row, int n, float *out) {
    if (type == KV_F32)
        memcpy(out, row, (size_t)n * sizeof(float));
    else
        weight_row_to_float(WEIGHT_F16, row, out, n);
}

/* Element i of a float32 or float16 row */
static inline float kv_element(KVType type, const unsigned char *data, int i) {
    if (type == KV_F32) {
        float f;
        memcpy(&f, data + 4 * (size_t)i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, data + 2 * (size_t)i, 2);
    return half_to_float(h);
}

/* out[i] = Σ_t w[t] · row_t[i] for from <= i < to, t < n, float32 or
 * float16 rows row_bytes apart: each element summed over the rows in order */
static void weighted_sum_portable(KVType type, const unsigned char *rows, size_t row_bytes, const float *w, int n,
                                  int from, int to, float *out) {
    for (int i = from; i < to; i++) out[i] = 0.0f;
    for (int t = 0; t < n; t++) {
        const unsigned char *row = rows + (size_t)t * row_bytes;
        for (int i = from; i < to; i++) out[i] += w[t] * kv_element(type, row, i);
    }
}

#ifdef QKV_HAVE_X86_KERNELS
/* The x86 kernels keep a slice of out in registers while the rows stream
 * past (a decode step reads each value row once: the time is its bytes).
 * Float rows are summed in two sums, the even rows' and the odd rows', with
 * FMAs (weighted_sum_512), so their bits differ from the portable loop's
 * one sum in row order (within an instruction set, a prompt and a decode
 * step sum alike); int8 rows give every instruction set the same bits
 * (kv_int8.h). */
#define KV_SLICE_512 4 /* vectors of 16: head elements summed at once */
#define KV_SLICE_256 4 /* vectors of 8, int8 rows in two sets of sums */
#define KV_FLOAT_SLICE_256 6 /* float rows, two sums each: 12 of the 16 registers */
/* the bytes of rows rows from row, QKV_KV_AHEAD bytes ahead (kernels.h,
 * as for the keys), where the cache's fetch_ahead says so: the value rows
 * of a long context come from memory, and on Intel the hardware prefetcher
 * alone leaves the core waiting at the start of each block (kv_fetch_ahead:
 * on a Zen 4 the prefetchers alone read float16 and int8 rows faster, and
 * float32 rows with AVX-512 go into L2; other AMD families into L1) */
INLINE void kv_prefetch_rows(const unsigned char *row, size_t row_bytes, int rows, Fetch fetch) {
    fetch_range(row + QKV_KV_AHEAD, rows * row_bytes, fetch);
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
#endif

/* The int8 rows' layout and kernels (a decode row's softmax among them) */
#include "elementwise.h"
#include "kv_int8.h"

/* One key (key = 1) or value row of floats into its slot of a layer's kv
 * head. */
static void kv_store_row(KVCache *kv, int key, int layer, int kv_head, int slot, const float *x) {
    size_t row = kv_row_index(kv, layer, kv_head, slot);
    int hs = kv->head_size, t;
    if (kv->type != KV_Q8) {
        kv_encode(kv->type, x, hs, key ? kv->keys + row * kv->row_bytes : kv->values + row * kv->value_bytes);
        return;
    }
    float inverse, scale = q8_scale(x, hs, &inverse);
    int zeros = inverse == 0.0f; /* all zeros, too small, or not finite: stored as zeros (q8_scale) */
    if (key) {
        kv->key_scales[row] = scale;
        unsigned char *panel = (unsigned char *)q8_keys_of(kv, row, &t).panels;
        for (int i = 0; i < hs; i++) panel[q8_key_at(t, i)] = q8_key_byte(zeros ? 0.0f : x[i], inverse);
    } else {
        kv->value_scales[row] = scale;
        unsigned char *quad = (unsigned char *)q8_values_of(kv, row, &t).quads;
        for (int i = 0; i < hs; i++) quad[q8_value_at(hs, t, i)] = q8_byte(zeros ? 0.0f : x[i], inverse);
    }
}

void kv_cache_store(KVCache *kv, int layer, int pos, const float *k, const float *v) {
    int slot = kv_slot(kv, pos);
    for (int h = 0; h < kv->n_kv_heads; h++) {
        kv_store_row(kv, 1, layer, h, slot, k + (size_t)h * kv->head_size);
        kv_store_row(kv, 0, layer, h, slot, v + (size_t)h * kv->head_size);
    }
}

int kv_cache_same(const KVCache *a, const KVCache *b) {
    size_t rows = (size_t)a->n_layers * a->n_kv_heads * a->stride;
    if (a->type != b->type || a->head_size != b->head_size || rows != (size_t)b->n_layers * b->n_kv_heads * b->stride)
        return 0;
    int same = memcmp(a->keys, b->keys, rows * a->row_bytes) == 0 && memcmp(a->values, b->values, rows * a->value_bytes) == 0;
    if (a->type == KV_Q8)
        same = same && memcmp(a->key_scales, b->key_scales, rows * sizeof(float)) == 0 &&
               memcmp(a->value_scales, b->value_scales, rows * sizeof(float)) == 0;
    return same;
}

/* Key (key = 1) or value row t after rows, as floats */
static void kv_row_floats(const KVCache *kv, int key, const unsigned char *rows, int t, float *out) {
    const unsigned char *base = key ? kv->keys : kv->values;
    size_t bytes = key ? kv->row_bytes : kv->value_bytes, row = (size_t)(rows - base) / bytes + (size_t)t;
    int hs = kv->head_size, skip;
    if (kv->type != KV_Q8) {
        kv_decode(kv->type, base + row * bytes, hs, out);
    } else if (key) {
        Q8Keys k = q8_keys_of(kv, row, &skip);
        for (int i = 0; i < hs; i++) out[i] = (float)q8_key(k, skip, i) * k.scales[skip];
    } else {
        Q8Values v = q8_values_of(kv, row, &skip);
        for (int i = 0; i < hs; i++) out[i] = (float)q8_value(v, skip, i) * v.scales[skip];
    }
}

void kv_key_to_float(const KVCache *kv, const unsigned char *keys, int t, float *out) { kv_row_floats(kv, 1, keys, t, out); }

void kv_value_to_float(const KVCache *kv, const unsigned char *values, int t, float *out) {
    kv_row_floats(kv, 0, values, t, out);
}

#ifdef QKV_HAVE_X86_KERNELS

/* float32 and float16 rows: the even rows and the odd rows in two sums,
 * added at the end. With one, each row's multiply-add waited for the last
 * (4 cycles); two halve the wait: a 200-token prompt's attention, 15M
 * shape, float32 cache, 1 thread, Xeon, 3.1 -> 2.5 ms. */
TARGET_AVX512 INLINE void weighted_sum_512(KVType type, const unsigned char *rows, size_t row_bytes, const float *w,
                                           int n, int hs, float *out, Fetch fetch) {
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
            if (d == 0) kv_prefetch_rows(row, row_bytes, 2, fetch);
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
                                         int n, int hs, float *out, Fetch fetch) {
    int whole = hs / 8 * 8;
    for (int d = 0; d < whole; d += 8 * KV_FLOAT_SLICE_256) {
        int vectors = (whole - d) / 8 < KV_FLOAT_SLICE_256 ? (whole - d) / 8 : KV_FLOAT_SLICE_256;
        __m256 even[KV_FLOAT_SLICE_256], odd[KV_FLOAT_SLICE_256];
        for (int v = 0; v < KV_FLOAT_SLICE_256; v++) even[v] = odd[v] = _mm256_setzero_ps();
        int t = 0;
        for (; t + 2 <= n; t += 2) {
            const unsigned char *row = rows + (size_t)t * row_bytes, *next = row + row_bytes;
            if (d == 0) kv_prefetch_rows(row, row_bytes, 2, fetch);
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
                                              float *out, Fetch f) { BODY(KV_F32, r, b, w, n, hs, out, f); }    \
    TARGET static void weighted_sum_f16_##ISA(const unsigned char *r, size_t b, const float *w, int n, int hs,  \
                                              float *out, Fetch f) { BODY(KV_F16, r, b, w, n, hs, out, f); }
KV_WEIGHTED_SUMS(avx512, TARGET_AVX512, weighted_sum_512)
KV_WEIGHTED_SUMS(avx2, TARGET_AVX2, weighted_sum_256)
#endif

void kv_scores(const KVCache *kv, const unsigned char *keys, const float *q, int n, int q_stride, int n_keys,
               float *scores, int scores_stride) {
    if (kv->type == KV_Q8) {
        for (int t = 0; t < n; t++)
            q8_scores(kv, keys, q + (size_t)t * q_stride, n_keys, scores + (size_t)t * scores_stride);
        return;
    }
    MatmulKernel k = rows_kernel_for(kv->type == KV_F16 ? WEIGHT_F16 : WEIGHT_F32, kv->isa, kv->fetch_ahead);
    Activations queries = { q, n, q_stride, kv->head_size, NULL, NULL, 0, NULL, NULL };
    k(scores, scores_stride, &queries, keys, kv->head_size, 0, n_keys);
}

void kv_weighted_sum(const KVCache *kv, const unsigned char *values, const float *weights, int n_visible,
                     float *out, int fetch) {
    Fetch ahead = fetch ? kv->fetch_ahead : FETCH_NONE;
    if (kv->type == KV_Q8) {
        q8_weighted_sum(kv, values, weights, n_visible, out, ahead);
        return;
    }
#ifdef QKV_HAVE_X86_KERNELS
    typedef void (*WeightedSum)(const unsigned char *, size_t, const float *, int, int, float *, Fetch);
    static const WeightedSum sums[2][KV_F16 + 1] = {
        { weighted_sum_f32_avx2, weighted_sum_f16_avx2 },
        { weighted_sum_f32_avx512, weighted_sum_f16_avx512 },
    };
    if (kv->isa >= ISA_AVX2) {
        sums[kv->isa >= ISA_AVX512][kv->type](values, kv->row_bytes, weights, n_visible, kv->head_size, out, ahead);
        return;
    }
#endif
    weighted_sum_portable(kv->type, values, kv->row_bytes, weights, n_visible, 0, kv->head_size, out);
}

int kv_decode_partials(const KVCache *kv, const unsigned char *values, const float *scores, float *e, int n,
                       int block, float scale, float *partials, size_t stride) {
    return kv->type == KV_Q8 &&
           q8_decode_partials(kv, values, scores, e, n, block, scale, partials, stride);
}

#endif /* QKV_KV_CACHE_IMPLEMENTED */
#endif /* QKV_KV_CACHE_IMPLEMENTATION */
