/* attention.h — one layer's attention over the KV cache, a block of keys at
 * a time, with an online softmax.
 *
 * stb-style: the interface everywhere, the implementation where
 * QKV_ATTENTION_IMPLEMENTATION is defined (model.h's implementation does).
 *
 * For a query row q at position p, in one head of size d:
 *   x_t = q · k_t / √d  for t <= p,    out = Σ_t softmax(x)_t · v_t
 * The keys are cut into blocks of QKV_KEY_BLOCK at multiples of it: the same
 * cut for every query, chunk and number of threads. Block b gives a partial
 * softmax: its own max m_b, e_t = exp(x_t − m_b), l_b = Σ e_t, o_b = Σ e_t v_t.
 * The partials fold, in block order, into a running (m, l, o) — the online
 * softmax of FlashAttention:
 *   M = max(m, m_b),   l ← l·e^(m−M) + l_b·e^(m_b−M),   o ← o·e^(m−M) + o_b·e^(m_b−M)
 * and out = o / l: softmax(x) · V, with no row of scores longer than a block.
 * With a window (kv_window.h) the keys are the cache's slots
 * 0..kv_visible(p)-1, read and cut in slot order: the sinks, then the ring.
 *
 * A prompt's rows (forward_tokens, forward_logits) fold each block as soon
 * as it is made: threads take (head, group of rows), and the n × n scores
 * are never stored. A decode step has one row: all threads compute its
 * blocks at once (a thread's blocks of one head in runs: their keys, then
 * their values) and keep each block's partial, which are then folded in the
 * same order (flash-decoding), so two threads help even a one-head model.
 * The same arithmetic in the same order either way: a prompt gives the bits
 * of token-by-token decoding.
 *
 * An observer (trace, tests) needs every score and weight. Then the raw
 * scores go into its rows instead of a block's scratch, and after the fold
 * its weights are set to exp(x_t − M) / l: the true softmax, with the final
 * max and sum the engine used.
 */
#ifndef QKV_ATTENTION_H
#define QKV_ATTENTION_H

#include <stddef.h>

#include "kv_cache.h"
#include "kv_window.h"

/* Keys per block: a block's keys and values of one head stay in L2 while
 * a group of queries reads them. */
#define QKV_KEY_BLOCK 256
/* Prompt rows that share each block of keys (one small matrix product). */
#define QKV_QUERY_GROUP 8
/* Blocks of one head a decode row reads together: their keys, then their
 * values (decode_run). */
#define QKV_DECODE_RUN 64

typedef struct {
    int n_heads;             /* query heads; head h reads kv head h / (n_heads / n_kv_heads) */
    int n, pos;              /* n query rows at positions pos..pos+n-1: row t sees slots
                                0..kv_visible(pos+t)-1 (positions 0..pos+t without a window) */
    const float *q;          /* [n, q_stride]: row t's head h at t * q_stride + h * head_size */
    int q_stride;
    float *out;              /* [n, out_stride]: the same layout */
    int out_stride;
    float *scores, *weights; /* an observer's rows, or NULL for none: row t's head h at
                                t * observed_stride + h * capacity, slots 0..kv_visible(pos+t)-1 */
    int observed_stride;
    float *partials;         /* attention_partials_floats: a decode row's block partials */
    float *states;           /* attention_states_floats: prompt rows' running softmax */
    Team *team;              /* the threads that share the work (team.h; NULL: OpenMP's) */
} AttentionRows;

/* Floats of the scratch AttentionRows needs, for a KV cache of capacity
 * positions and up to n_rows rows at a time. */
size_t attention_partials_floats(int n_heads, int capacity, int head_size);
size_t attention_states_floats(int n_rows, int n_heads, int head_size);

/* a->out = the attention of a's query rows against layer's cached keys and
 * values, which already hold those of the rows themselves. */
void attention_layer(const KVCache *kv, int layer, const AttentionRows *a);

#endif /* QKV_ATTENTION_H */

/* ======================================================================== */
#ifdef QKV_ATTENTION_IMPLEMENTATION
#ifndef QKV_ATTENTION_IMPLEMENTED
#define QKV_ATTENTION_IMPLEMENTED

#include <math.h>
#include <string.h>

#include "elementwise.h" /* a block's softmax: block_softmax */

/* A partial (or running) softmax: max, sum, then out[head_size]. */
#define PARTIAL_FLOATS(head_size) ((size_t)(head_size) + 2)

static int key_blocks(int n_keys) { return (n_keys + QKV_KEY_BLOCK - 1) / QKV_KEY_BLOCK; }

size_t attention_partials_floats(int n_heads, int capacity, int head_size) {
    return (size_t)n_heads * key_blocks(capacity) * PARTIAL_FLOATS(head_size);
}

size_t attention_states_floats(int n_rows, int n_heads, int head_size) {
    return (size_t)n_rows * n_heads * 2 * PARTIAL_FLOATS(head_size);
}

/* ------------------------------------------------------------------------ */
/* Partials and their fold                                                   */

/* The partial softmax p = {max, sum, out[head_size]} of one query over n
 * keys of a block: scores[n] are its raw q·k, values the block's first
 * value row; e[n] receives exp(x − max) (e may be scores). */
static void block_partial(const KVCache *kv, const BlockSoftmax *sm, const float *scores, float *e, int n,
                          const unsigned char *values, float scale, float *p, int fetch) {
    p[0] = sm->max(scores, n) * scale; /* scale > 0: the max of the scaled scores */
    p[1] = sm->exp(scores, e, n, scale, p[0]);
    kv_weighted_sum(kv, values, e, n, p + 2, fetch);
}

/* state <- state ⊕ p: the online softmax's step (the first block is copied) */
static void fold(float *state, const float *p, int head_size, int first) {
    if (first) {
        memcpy(state, p, PARTIAL_FLOATS(head_size) * sizeof(float));
        return;
    }
    float max = p[0] > state[0] ? p[0] : state[0];
    float old = expf(state[0] - max), new = expf(p[0] - max);
    state[0] = max;
    state[1] = state[1] * old + p[1] * new;
    for (int i = 0; i < head_size; i++) state[2 + i] = state[2 + i] * old + p[2 + i] * new;
}

/* out = o / l; an observer's weights row = the true softmax exp(x − M) / l */
static void finish(const BlockSoftmax *sm, const float *state, float *out, int head_size, const float *scores,
                   float *weights, int n_keys, float scale) {
    float inverse = 1.0f / state[1];
    for (int i = 0; i < head_size; i++) out[i] = state[2 + i] * inverse;
    if (!weights) return;
    sm->exp(scores, weights, n_keys, scale, state[0]);
    for (int t = 0; t < n_keys; t++) weights[t] *= inverse;
}

/* ------------------------------------------------------------------------ */
/* The two ways through a layer                                              */

typedef struct {
    const KVCache *kv;
    const AttentionRows *a;
    BlockSoftmax softmax;
    int layer, heads_per_kv, head_size;
    float scale;
} LayerPass;

static const unsigned char *head_keys(const LayerPass *l, int h, int key) {
    return kv_keys(l->kv, l->layer, h / l->heads_per_kv) + (size_t)key * l->kv->row_bytes;
}

static const unsigned char *head_values(const LayerPass *l, int h, int key) {
    return kv_values(l->kv, l->layer, h / l->heads_per_kv) + (size_t)key * l->kv->value_bytes;
}

/* An observer's row of row t, head h (scores or weights), or NULL */
static float *observed_row(const LayerPass *l, float *rows, int t, int h) {
    return rows ? rows + (size_t)t * l->a->observed_stride + (size_t)h * l->kv->capacity : NULL;
}

/* A decode row's attention is split across threads from this many
 * multiply-adds of scores (a quarter of a matrix product's threshold: its
 * keys and values come from L3 or memory, not from cache). The 15M shape,
 * int8 weights, 256 tokens, 2 threads, Xeon: attention 57-61 us a token
 * from QKV_PARALLEL_MIN_WORK, 50-53 from this (threads from 29 keys on,
 * 6 heads x 48 x 29 >= 8,192, not 114). */
#define QKV_DECODE_PARALLEL_WORK (QKV_PARALLEL_MIN_WORK / 4)

/* A decode row's tasks come in runs: a thread's share of (head, block)
 * tasks is consecutive, and the blocks of one head in it are read a run of
 * up to QKV_DECODE_RUN at a time, the run's keys, then its values. Each
 * block still gives its own partial, the same bits (kv_scores' arithmetic
 * per key does not depend on how many it is given). Block by block, the
 * reads switch between keys and values every block (12 KiB of int8 rows
 * of the 15M shape), and each switch drains the requests in flight:
 * measured, 15M shape at 16,384 positions, 1 thread, AMD EPYC, fastest
 * of 30 steps in 3 rounds, attention 3.7-4.2 -> 2.8-3.2 ms (int8),
 * 4.8-5.4 -> 4.2-4.7 (float16) and 11.0-14.7 -> 8.7-9.4 (float32) with
 * runs of 64 blocks; runs of 4 and 16 fell between (README). */

/* The partials of blocks block..block+run-1 of one head: the run's
 * scores, then block by block, unless the cache makes the partials itself
 * (kv_decode_partials: int8 rows with VNNI make each block's softmax among
 * the last block's value loads, with the same bits) */
static void decode_run(const LayerPass *l, int head, int block, int run, int n_keys) {
    const AttentionRows *a = l->a;
    int hs = l->head_size, first = block * QKV_KEY_BLOCK, blocks = key_blocks(n_keys);
    int n = n_keys - first < run * QKV_KEY_BLOCK ? n_keys - first : run * QKV_KEY_BLOCK;
    float tile[QKV_DECODE_RUN * QKV_KEY_BLOCK], *scores = tile, *e = tile;
    if (a->scores) {
        scores = observed_row(l, a->scores, 0, head) + first;
        e = observed_row(l, a->weights, 0, head) + first;
    }
    kv_scores(l->kv, head_keys(l, head, first), a->q + (size_t)head * hs, 1, hs, n, scores, n);
    float *partials = a->partials + ((size_t)head * blocks + block) * PARTIAL_FLOATS(hs);
    if (kv_decode_partials(l->kv, head_values(l, head, first), scores, e, n, QKV_KEY_BLOCK, l->scale, partials,
                           PARTIAL_FLOATS(hs)))
        return;
    for (int b = 0; b < run; b++) {
        int at = b * QKV_KEY_BLOCK, count = n - at < QKV_KEY_BLOCK ? n - at : QKV_KEY_BLOCK;
        block_partial(l->kv, &l->softmax, scores + at, e + at, count, head_values(l, head, first + at), l->scale,
                      partials + (size_t)b * PARTIAL_FLOATS(hs), 1);
    }
}

/* A decode row's (head, block) tasks first_task..last_task-1: each leaves
 * its partial. */
static void decode_tasks(void *ctx, long first_task, long last_task) {
    const LayerPass *l = ctx;
    int n_keys = kv_visible(l->kv, l->a->pos), blocks = key_blocks(n_keys);
    for (long task = first_task; task < last_task;) {
        int head = (int)(task / blocks), block = (int)(task % blocks);
        long run = last_task - task < blocks - block ? last_task - task : blocks - block;
        if (run > QKV_DECODE_RUN) run = QKV_DECODE_RUN;
        decode_run(l, head, block, (int)run, n_keys);
        task += run;
    }
}

/* One decode row: (head, block) tasks on every thread; then each head's
 * partials are folded in block order. */
static void decode_row(const LayerPass *l) {
    const AttentionRows *a = l->a;
    int hs = l->head_size, n_keys = kv_visible(l->kv, a->pos), blocks = key_blocks(n_keys), h;
    size_t stride = PARTIAL_FLOATS(hs);
    team_run_items(a->team, (long)a->n_heads * blocks, decode_tasks, (void *)l,
                   (long)a->n_heads * n_keys * hs >= QKV_DECODE_PARALLEL_WORK);
    /* the fold is a few multiply-adds per block: one thread, and no second
     * meeting of the threads (on a busy machine each one can cost a time slice) */
    for (h = 0; h < a->n_heads; h++) {
        float *state = a->partials + (size_t)h * blocks * stride;
        for (int b = 1; b < blocks; b++) fold(state, state + (size_t)b * stride, hs, 0);
        finish(&l->softmax, state, a->out + (size_t)h * hs, hs, observed_row(l, a->scores, 0, h),
               observed_row(l, a->weights, 0, h), n_keys, l->scale);
    }
}

/* Rows t0..t1-1 of one head: each block of keys once for the group (the
 * scores of its rows are one product), each row folding it at once. */
static void prompt_group(const LayerPass *l, int h, int t0, int t1, float *tile) {
    const AttentionRows *a = l->a;
    /* keys the group's last row sees; a chunk of n > 1 rows never passes the
     * cache's capacity (forward_tokens), so row t sees slots 0..pos+t */
    int hs = l->head_size, last_keys = kv_visible(l->kv, a->pos + t1 - 1);
    size_t stride = 2 * PARTIAL_FLOATS(hs);
    for (int first = 0; first < last_keys; first += QKV_KEY_BLOCK) {
        int row0 = first - a->pos > t0 ? first - a->pos : t0; /* the group's rows that see key first */
        int n = last_keys - first < QKV_KEY_BLOCK ? last_keys - first : QKV_KEY_BLOCK;
        float *scores = a->scores ? observed_row(l, a->scores, row0, h) + first : tile;
        int scores_stride = a->scores ? a->observed_stride : QKV_KEY_BLOCK;
        kv_scores(l->kv, head_keys(l, h, first), a->q + (size_t)row0 * a->q_stride + (size_t)h * hs, t1 - row0,
                  a->q_stride, n, scores, scores_stride);
        for (int t = row0; t < t1; t++) {
            int seen = kv_visible(l->kv, a->pos + t) - first, visible = seen < n ? seen : n;
            float *row_scores = scores + (size_t)(t - row0) * scores_stride;
            float *e = a->weights ? observed_row(l, a->weights, t, h) + first : row_scores;
            float *state = a->states + ((size_t)t * a->n_heads + h) * stride;
            /* the group's first row brings the block's values into cache */
            block_partial(l->kv, &l->softmax, row_scores, e, visible, head_values(l, h, first), l->scale,
                          state + PARTIAL_FLOATS(hs), t == row0);
            fold(state, state + PARTIAL_FLOATS(hs), hs, first == 0);
        }
    }
    for (int t = t0; t < t1; t++)
        finish(&l->softmax, a->states + ((size_t)t * a->n_heads + h) * stride,
               a->out + (size_t)t * a->out_stride + (size_t)h * hs, hs, observed_row(l, a->scores, t, h),
               observed_row(l, a->weights, t, h), kv_visible(l->kv, a->pos + t), l->scale);
}

/* A prompt's (head, group of rows) tasks first_task..last_task-1. */
static void prompt_tasks(void *ctx, long first_task, long last_task) {
    const LayerPass *l = ctx;
    const AttentionRows *a = l->a;
    int groups = (a->n + QKV_QUERY_GROUP - 1) / QKV_QUERY_GROUP;
    for (long task = first_task; task < last_task; task++) {
        float tile[QKV_QUERY_GROUP * QKV_KEY_BLOCK];
        int g = (int)(task % groups), t0 = g * QKV_QUERY_GROUP;
        prompt_group(l, (int)(task / groups), t0, a->n - t0 < QKV_QUERY_GROUP ? a->n : t0 + QKV_QUERY_GROUP, tile);
    }
}

/* A prompt's rows: (head, group of rows) tasks. */
static void prompt_rows(const LayerPass *l) {
    const AttentionRows *a = l->a;
    int groups = (a->n + QKV_QUERY_GROUP - 1) / QKV_QUERY_GROUP;
    long work = (long)a->n_heads * (a->pos + a->n) * l->head_size * a->n;
    team_run_items(a->team, (long)a->n_heads * groups, prompt_tasks, (void *)l, work >= QKV_PARALLEL_MIN_WORK);
}

void attention_layer(const KVCache *kv, int layer, const AttentionRows *a) {
    LayerPass l = { kv, a, block_softmax(kv->isa), layer, a->n_heads / kv->n_kv_heads, kv->head_size,
                    1.0f / sqrtf((float)kv->head_size) };
    if (a->n == 1) decode_row(&l);
    else prompt_rows(&l);
}

#endif /* QKV_ATTENTION_IMPLEMENTED */
#endif /* QKV_ATTENTION_IMPLEMENTATION */
