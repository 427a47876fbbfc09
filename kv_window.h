/* kv_window.h — attention sinks and a sliding window over the KV cache
 * (--window W --sinks S), after StreamingLLM (Xiao et al. 2023, "Efficient
 * Streaming Language Models with Attention Sinks").
 *
 * The cache has W slots. The first S positions (the sinks) keep slots
 * 0..S-1 for the whole run; every later position goes round the ring of the
 * other W-S slots (kv_slot), so a query at pos sees the sinks and the W-S
 * most recent positions, and the positions between were evicted. Memory is
 * W positions however long the run.
 *
 * Positions for RoPE. StreamingLLM gives each cached key the position of
 * its place in the cache, so the model never sees a distance of W or more
 * (W <= its context). A RoPE score depends only on the difference of the
 * query's and the key's angles, so the recent keys can stay rotated at their
 * text positions, as the query is: their distances already are the cache's.
 * Only the sinks move: sink i belongs just before the oldest recent key, at
 * rotation i + shift, shift = pos + 1 - W once the window is full. So at
 * each step the S sink keys of each layer and kv head are rotated again,
 * from a float32 copy made when they were stored (rotated at i), by the
 * angles of shift: one rotation each, never accumulated. That is O(S) rows
 * a layer per token, where storing keys unrotated would rotate all W at
 * every step.
 *
 * Angles beyond the context (a window's text positions grow without bound)
 * are computed in double and reduced mod 2π: float32's pos * freq loses
 * about pos * 6e-8 radians. Below the context the float32 angles of
 * rope_angles stay, so a window that never fills gives full attention's
 * bits.
 *
 * stb-style: the implementation where QKV_KV_WINDOW_IMPLEMENTATION is defined
 * (model.h's implementation does), after kv_cache.h's.
 */
#ifndef QKV_KV_WINDOW_H
#define QKV_KV_WINDOW_H

#include <stddef.h>

#include "kv_cache.h"

/* NULL if --window window --sinks sinks can run on a model of context
 * seq_len (window 0: no window; then sinks must be 0), else why not, in
 * buf. Every model qkv loads turns keys by RoPE, which is what lets the
 * window run past the context; a model with learned absolute positions
 * (GPT-2) could not, and must be refused before this. */
const char *kv_window_check(int window, int sinks, int seq_len, char *buf, size_t cap);

/* Makes the cache keep its first sinks positions (kv's capacity is the
 * window). Returns 0, or -1 out of memory or when sinks leaves the ring no
 * slot (sinks >= capacity). */
int kv_window_init(KVCache *kv, int sinks);

/* Keys a query at pos sees: positions 0..pos, less the evicted ones. */
int kv_visible(const KVCache *kv, int pos);
/* The first recent position a query at pos sees: positions
 * sinks..window_start-1 were evicted (none while window_start == sinks). */
int kv_window_start(const KVCache *kv, int pos);
/* The position of the i-th key a query at pos sees (0 <= i <
 * kv_visible), in order of position; its slot is kv_slot of it. */
int kv_view_position(const KVCache *kv, int pos, int i);

/* After the keys of pos (k: [n_kv_heads * head_size] floats, rotated at
 * pos) are stored in layer: keeps a sink's float32 copy, and once the
 * window is full turns every sink of the layer to its place before the
 * oldest recent key. */
void kv_window_after_store(KVCache *kv, int layer, int pos, const float *k, float theta);

#endif /* QKV_KV_WINDOW_H */

/* ======================================================================== */
#ifdef QKV_KV_WINDOW_IMPLEMENTATION
#ifndef QKV_KV_WINDOW_IMPLEMENTED
#define QKV_KV_WINDOW_IMPLEMENTED

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rope.h"

const char *kv_window_check(int window, int sinks, int seq_len, char *buf, size_t cap) {
    if (window == 0 && sinks == 0) return NULL;
    if (window == 0) snprintf(buf, cap, "--sinks %d needs --window W", sinks);
    else if (window < 0) snprintf(buf, cap, "--window %d: expected W >= 1", window);
    else if (sinks < 0) snprintf(buf, cap, "--sinks %d: expected S >= 0", sinks);
    else if (window > seq_len)
        snprintf(buf, cap, "--window %d is beyond the model's context of %d: W must be at most %d", window,
                 seq_len, seq_len);
    else if (sinks >= window)
        snprintf(buf, cap, "--sinks %d with --window %d: S must be less than W (the window holds the sinks "
                           "and at least one recent position)", sinks, window);
    else return NULL;
    return buf;
}

int kv_window_init(KVCache *kv, int sinks) {
    if (sinks < 0 || sinks >= kv->capacity) return -1; /* the ring needs a slot */
    kv->sinks = sinks;
    if (sinks == 0) return 0;
    /* the copies, then two rows of scratch for kv_window_after_store */
    size_t n = ((size_t)kv->n_layers * kv->n_kv_heads * sinks + 2) * kv->head_size;
    kv->sink_keys = calloc(n, sizeof(float));
    return kv->sink_keys ? 0 : -1;
}

int kv_visible(const KVCache *kv, int pos) { return pos < kv->capacity ? pos + 1 : kv->capacity; }

int kv_window_start(const KVCache *kv, int pos) {
    int start = pos + 1 - (kv_visible(kv, pos) - kv->sinks);
    return start > kv->sinks ? start : kv->sinks;
}

int kv_view_position(const KVCache *kv, int pos, int i) {
    return i < kv->sinks ? i : kv_window_start(kv, pos) + (i - kv->sinks);
}

/* The float32 copy of sink i of one layer's kv head. */
static float *sink_key(KVCache *kv, int layer, int kv_head, int i) {
    size_t row = ((size_t)layer * kv->n_kv_heads + kv_head) * kv->sinks + i;
    return kv->sink_keys + row * kv->head_size;
}

void kv_window_after_store(KVCache *kv, int layer, int pos, const float *k, float theta) {
    if (kv->sinks == 0) return;
    int hs = kv->head_size, shift = pos + 1 - kv->capacity;
    if (pos < kv->sinks)
        for (int h = 0; h < kv->n_kv_heads; h++)
            memcpy(sink_key(kv, layer, h, pos), k + (size_t)h * hs, (size_t)hs * sizeof(float));
    if (shift <= 0) return;
    float *turned = sink_key(kv, kv->n_layers, 0, 0), *cos_s = turned + hs, *sin_s = cos_s + hs / 2;
    rope_angles_exact(cos_s, sin_s, hs, shift, theta);
    for (int h = 0; h < kv->n_kv_heads; h++)
        for (int i = 0; i < kv->sinks; i++) {
            memcpy(turned, sink_key(kv, layer, h, i), (size_t)hs * sizeof(float));
            rope_apply(turned, 1, hs, cos_s, sin_s);
            kv_store_row(kv, 1, layer, h, i, turned);
        }
}

#endif /* QKV_KV_WINDOW_IMPLEMENTED */
#endif /* QKV_KV_WINDOW_IMPLEMENTATION */
