/* bench.c — per-token latency against context length.
 *
 * The claim under test: with a KV cache, the token at position n is one query
 * row against n cached keys, so its cost is the weights (the same at every
 * position) plus an attention term linear in n; recomputing the prefix instead
 * runs all n tokens again, so it grows quadratically.
 *
 * The bench times the real forward(). An observer's stage callbacks bracket
 * attention (scores, softmax, weighted sum of values) in every layer, so each
 * step splits into attention and everything else (projections, MLP, norms,
 * classifier) without re-implementing either. No tokenizer is needed: the
 * tokens are fixed pseudo-random ids.
 *
 * Positions are 1-based throughout: position n is the n-th token, forward()'s
 * pos = n - 1, and it attends to n keys (with --window W, to at most W).
 *
 * Reading order: timing one call, measuring a curve (medians over repeats),
 * the arithmetic on the curves (fit, FLOP rate), the memory of a long
 * prefill, the text report, the CSV. The SVG chart, and the running medians
 * it and the crossover use, are in bench_svg.c; the types both files share
 * in bench_internal.h.
 */
#include "bench_internal.h"
#include "progress.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The FLOP rate that predicts the slope is measured where attention is
 * negligible: over the first SMALL_CONTEXT positions. */
#define SMALL_CONTEXT 32
/* Prompt lengths of the prefill-vs-decode table (capped by the context). */
static const int PREFILL_LENGTHS[] = { 16, 64, 256 };
#define N_PREFILL_LENGTHS ((int)(sizeof PREFILL_LENGTHS / sizeof PREFILL_LENGTHS[0]))
/* Powers of two up to QKV_MAX_SEQ_LEN, plus the last position. */
#define MAX_LOG_POSITIONS 24
/* Decoding each of 16k positions takes many minutes, and the curve is
 * smooth: every position up to DENSE_POSITIONS is timed, then
 * STEPS_PER_DOUBLING log-spaced ones per doubling (DENSE_POSITIONS *
 * 2^(k/STEPS_PER_DOUBLING)) and the last, each after a prefill (untimed)
 * fills the cache up to it and WARM_STEPS untimed steps. A window's steps cost the same past W, so with
 * --window every position is timed (and its memory sampled once a context). */
#define DENSE_POSITIONS 2048
#define STEPS_PER_DOUBLING 8

/* ------------------------------------------------------------------------ */
/* Timing one call of the forward pass                                       */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The observer's context: attention time summed over layers, each layer
 * counted from its STAGE_ATTENTION_BEGIN to its STAGE_ATTENTION_END. */
typedef struct {
    double begin, attention;
} StageClock;

static void stage_clock_hook(void *ctx, ForwardStage stage, int layer) {
    StageClock *clock = ctx;
    double t = now_seconds();
    if (stage == STAGE_ATTENTION_BEGIN) clock->begin = t;
    else if (stage == STAGE_ATTENTION_END) clock->attention += t - clock->begin;
}

typedef struct {
    double total, attention; /* seconds */
} StepTime;

/* Runs tokens[first .. first+count-1] at their own positions and times it.
 * One decode step with the cache is count = 1. Recomputing a prefix is
 * first = 0: starting again at position 0 rewinds the state, because every
 * cache slot attention reads is rewritten before it is read. */
static StepTime timed_forward(const Model *m, RunState *s, const int *tokens, int first, int count) {
    StageClock clock = { 0, 0 };
    ForwardObserver observer = { .ctx = &clock, .stage = stage_clock_hook };
    double start = now_seconds();
    forward_tokens(m, s, tokens + first, count, first, &observer);
    StepTime t = { now_seconds() - start, clock.attention };
    return t;
}

/* ------------------------------------------------------------------------ */
/* Curves: median latency at a list of positions (Curve: bench_internal.h)  */

static int curve_init(Curve *c, const int *positions, int n) {
    c->n = n;
    c->positions = malloc((size_t)n * sizeof(int));
    c->total_ms = calloc((size_t)n, sizeof(double));
    c->attention_ms = calloc((size_t)n, sizeof(double));
    c->other_fastest_ms = calloc((size_t)n, sizeof(double));
    if (!c->positions || !c->total_ms || !c->attention_ms || !c->other_fastest_ms) return -1;
    memcpy(c->positions, positions, (size_t)n * sizeof(int));
    return 0;
}

static void curve_free(Curve *c) {
    free(c->positions); free(c->total_ms); free(c->attention_ms); free(c->other_fastest_ms); free(c->rss);
    memset(c, 0, sizeof *c);
}

/* Index of position in the curve, or -1 when it was not measured. */
static int curve_find(const Curve *c, int position) {
    for (int i = 0; i < c->n; i++) if (c->positions[i] == position) return i;
    return -1;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[n]; sorts v. The median, not the mean: on a shared machine
 * the noise is one-sided (another process takes the core), so the mean is
 * pulled up by the runs that were interrupted. */
double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Resident memory now (not the peak): /proc/self/statm's second field. */
static size_t resident_bytes(void) {
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%*s %ld", &pages) != 1) pages = 0;
    if (f) fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* The progress bar's words: the position reached (progress.h draws it only
 * when stderr is a terminal; a log file keeps the plain lines). */
static void show_position(Progress *p, double done, double total, int position, int last) {
    if (!p->on) return; /* no words to make */
    char what[48];
    snprintf(what, sizeof what, "position %d of %d", position, last);
    progress_update(p, done, total, what);
}

/* Untimed decode steps at each log-spaced position, after the prefill that
 * fills the cache up to it and before its timed steps. A prefill leaves
 * the caches holding what it wrote; steps in a row re-read the same
 * weights, keys and values, and their time falls over the first 15-20 of
 * them (15M shape, int8 KV cache, 16,384 positions, 1 thread, Xeon:
 * attention 4.3-5.0 ms a step just after a prefill, or after a read of
 * 512 MiB, then 2.8-2.9 ms from about the 15th step on). The dense
 * positions are timed in that state already, each step after the one
 * before, and the read probes are the best of several passes; without
 * these steps the curve jumped where the log-spaced positions begin. */
#define WARM_STEPS 24

/* Positions 1..k at the start of the curve: timed one after another, each
 * step appending the key and value the next one reads. */
static int dense_prefix(const Curve *c) {
    int k = 0;
    while (k < c->n && c->positions[k] == k + 1) k++;
    return k;
}

/* Times every position of the curve, repeats times over, and keeps medians.
 * With the cache (recompute = 0), positions 1..k are timed in order,
 * repeats times over; each later one after a prefill fills the cache up
 * to it, then WARM_STEPS untimed and repeats timed times in a row (the
 * step rewrites the same slot). With
 * recompute = 1, each position runs its whole prefix from position 1. With
 * c->rss, the first run samples resident memory every rss_every positions. */
static int measure_curve(const Model *m, RunState *s, const int *tokens, Curve *c,
                         int repeats, int recompute, const char *label) {
    size_t samples = (size_t)c->n * repeats;
    double *total = malloc(samples * sizeof(double));
    double *attention = malloc(samples * sizeof(double));
    double *spread = malloc((size_t)c->n * sizeof(double));
    if (!total || !attention || !spread) {
        free(total); free(attention); free(spread);
        return -1;
    }
    /* touched now, not page by page as the positions advance: the resident
     * memory sampled during the run is then the engine's alone */
    memset(total, 0, samples * sizeof(double));
    memset(attention, 0, samples * sizeof(double));
    int dense = recompute ? c->n : dense_prefix(c), last = c->positions[c->n - 1];
    Progress progress = progress_start("bench");
    for (int r = 0; r < repeats && dense > 0; r++) {
        fprintf(stderr, "bench: %s, run %d/%d (positions %d..%d)\n", label, r + 1, repeats,
                c->positions[0], c->positions[dense - 1]);
        for (int i = 0; i < dense; i++) {
            int position = c->positions[i];
            StepTime t = recompute ? timed_forward(m, s, tokens, 0, position)
                                   : timed_forward(m, s, tokens, position - 1, 1);
            if (c->rss && r == 0 && position % c->rss_every == 0)
                c->rss[position / c->rss_every - 1] = resident_bytes();
            total[(size_t)i * repeats + r] = t.total * 1e3;
            attention[(size_t)i * repeats + r] = t.attention * 1e3;
            show_position(&progress, (double)r * dense + i + 1, (double)repeats * dense, position,
                          c->positions[dense - 1]);
        }
        progress_end(&progress);
    }
    if (dense < c->n)
        fprintf(stderr, "bench: %s, %d log-spaced positions %d..%d, each after a prefill up to it and %d untimed steps\n",
                label, c->n - dense, c->positions[dense], last, WARM_STEPS);
    progress = progress_start("bench");
    for (int i = dense; i < c->n; i++) {
        int position = c->positions[i], filled = c->positions[i - 1];
        forward_tokens(m, s, tokens + filled, position - 1 - filled, filled, NULL);
        for (int w = 0; w < WARM_STEPS; w++) timed_forward(m, s, tokens, position - 1, 1);
        for (int r = 0; r < repeats; r++) {
            StepTime t = timed_forward(m, s, tokens, position - 1, 1);
            total[(size_t)i * repeats + r] = t.total * 1e3;
            attention[(size_t)i * repeats + r] = t.attention * 1e3;
        }
        show_position(&progress, i - dense + 1, c->n - dense, position, last);
    }
    progress_end(&progress);
    for (int i = 0; i < c->n; i++) {
        double *runs = total + (size_t)i * repeats;
        c->other_fastest_ms[i] = runs[0] - attention[(size_t)i * repeats];
        for (int r = 1; r < repeats; r++)
            if (runs[r] - attention[(size_t)i * repeats + r] < c->other_fastest_ms[i])
                c->other_fastest_ms[i] = runs[r] - attention[(size_t)i * repeats + r];
        c->total_ms[i] = median(runs, repeats); /* sorts runs: min first, max last */
        c->attention_ms[i] = median(attention + (size_t)i * repeats, repeats);
        spread[i] = (runs[repeats - 1] - runs[0]) / c->total_ms[i];
    }
    c->spread = median(spread, c->n);
    free(total);
    free(attention);
    free(spread);
    return 0;
}

/* 1, 2, 4, ... below ctx, then ctx: the positions the table shows and the
 * prefix recomputation visits (it is O(n^2), so not every position). */
static int log_positions(int ctx, int *out) {
    int n = 0;
    for (int p = 1; p < ctx; p *= 2) out[n++] = p;
    out[n++] = ctx;
    return n;
}

/* The positions decoded with the cache: 1..dense, then log-spaced up to
 * ctx (which is always the last). Returns how many. */
static int cached_positions(int ctx, int dense, int *out) {
    int n = 0;
    for (int p = 1; p <= ctx && p <= dense; p++) out[n++] = p;
    for (int k = 1; out[n - 1] < ctx; k++) {
        long p = lround(dense * pow(2.0, (double)k / STEPS_PER_DOUBLING));
        out[n++] = p < ctx ? (int)p : ctx;
    }
    return n;
}

/* The prompt lengths of the prefill table, capped by ctx, without repeats. */
static int prefill_lengths(int ctx, int *out) {
    int n = 0;
    for (int i = 0; i < N_PREFILL_LENGTHS; i++) {
        int len = PREFILL_LENGTHS[i] < ctx ? PREFILL_LENGTHS[i] : ctx;
        if (n == 0 || out[n - 1] != len) out[n++] = len;
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* The measurements and what follows from them                               */


/* Least squares line through (x[i], y[i]). */
static LineFit fit_line(const int *x, const double *y, int n) {
    double mx = 0, my = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) { mx += x[i]; my += y[i]; }
    mx /= n; my /= n;
    for (int i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
    }
    LineFit f = { my, 0 };
    if (sxx > 0) {
        f.slope = sxy / sxx;
        f.intercept = my - f.slope * mx;
    }
    return f;
}

/* Keys the step at a position reads: position, or with a window at most W. */
static int keys_read(const Bench *b, int position) {
    int window = b->options->window;
    return window && position > window ? window : position;
}

/* Theoretical FLOPs of the step at a position: attention reads its keys;
 * the rest (projections, MLP, classifier) is the same at every position. */
double attention_flops(const Bench *b, int position) {
    return flops_attention_per_token(&b->model->config, keys_read(b, position));
}

double other_flops(const Config *c) { return flops_weights_per_token(c); }

/* The machine's FLOP rate on this model where attention is negligible. */
static double small_context_flop_rate(const Bench *b) {
    const Config *c = &b->model->config;
    int n = b->ctx < SMALL_CONTEXT ? b->ctx : SMALL_CONTEXT;
    double flops = 0, seconds = 0;
    for (int i = 0; i < n; i++) {
        flops += attention_flops(b, b->cached.positions[i]) + other_flops(c);
        seconds += b->cached.total_ms[i] * 1e-3;
    }
    return seconds > 0 ? flops / seconds : 0;
}

/* Deterministic pseudo-random token ids below vocab_size (xorshift64*), so
 * the bench needs no tokenizer and runs the same tokens every time. */
static void fill_tokens(int *tokens, int n, int vocab_size) {
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < n; i++) {
        state ^= state >> 12; state ^= state << 25; state ^= state >> 27;
        tokens[i] = (int)(((state * 0x2545F4914F6CDD1Dull) >> 32) % (uint64_t)vocab_size);
    }
}

/* With --window: the full cache over the positions it can hold, to draw
 * beside the window (after the window's curve, so its memory is not in the
 * window's samples). */
static int measure_full_cache(Bench *b, const int *tokens) {
    int n = b->ctx < b->model->config.seq_len ? b->ctx : b->model->config.seq_len;
    int *positions = malloc((size_t)n * sizeof(int));
    RunState full;
    if (!positions || run_state_init_kv(&full, &b->model->config, n, (KVType)b->options->kv_type)) {
        free(positions);
        return -1;
    }
    full.team = b->team;
    int rc = curve_init(&b->full, positions, cached_positions(n, DENSE_POSITIONS, positions)) ||
             measure_curve(b->model, &full, tokens, &b->full, b->repeats, 0, "the full cache, beside the window");
    free(positions);
    run_state_free(&full);
    return rc ? -1 : 0;
}

/* Decodes 1..ctx with the cache, then recomputes prefixes. */
static int measure_all(Bench *b, RunState *s, const int *tokens) {
    const BenchOptions *o = b->options;
    int *positions = malloc((size_t)b->ctx * sizeof(int));
    int recomputed[MAX_LOG_POSITIONS];
    if (!positions) return -1;
    int n_cached = cached_positions(b->ctx, o->window ? b->ctx : DENSE_POSITIONS, positions);
    int n_recomputed = o->no_cache ? log_positions(b->ctx, recomputed) : prefill_lengths(b->ctx, recomputed);
    int rc = curve_init(&b->cached, positions, n_cached) ||
             curve_init(&b->recomputed, recomputed, n_recomputed);
    free(positions);
    if (rc) return -1;
    if (o->window) { /* memory, sampled once a context: constant when the window holds */
        b->cached.rss_every = b->model->config.seq_len;
        b->cached.rss = calloc((size_t)(b->ctx / b->cached.rss_every + 1), sizeof(size_t));
        if (!b->cached.rss) return -1;
    }

    /* one untimed step first: it faults the mapped weights into memory */
    timed_forward(b->model, s, tokens, 0, 1);
    if (measure_curve(b->model, s, tokens, &b->cached, b->repeats, 0, "decode with the KV cache") ||
        measure_curve(b->model, s, tokens, &b->recomputed, b->repeats, 1,
                      o->no_cache ? "no cache: recompute the prefix" : "prefill"))
        return -1;

    if (o->window && measure_full_cache(b, tokens)) return -1;
    /* a window's cost stops growing at W: its slope is the one beyond */
    b->fit_from = o->window && b->ctx > o->window + 1 ? o->window + 1 : 1;
    int from = 0;
    while (b->cached.positions[from] < b->fit_from) from++;
    b->fit_count = b->cached.n - from;
    b->total_fit = fit_line(b->cached.positions + from, b->cached.total_ms + from, b->fit_count);
    b->attention_fit = fit_line(b->cached.positions + from, b->cached.attention_ms + from, b->fit_count);
    b->small_flop_rate = small_context_flop_rate(b);
    return 0;
}

typedef struct {
    Bench *b;
    RunState *s;
    const int *tokens;
} MeasureRun;

/* measure_all with the run state's loops on team: the timed steps run as
 * generate's do */
static int measure_on_team(Team *team, void *ctx) {
    MeasureRun *run = ctx;
    run->b->team = run->s->team = team;
    int rc = measure_all(run->b, run->s, run->tokens);
    run->b->team = run->s->team = NULL;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The step's own bytes, in its order                                        */

/* A matrix's bytes as its kernel reads them (the panels made at load) */
static ReadSpan matrix_span(const Matrix *w) {
    if (w->panels) return (ReadSpan){ w->panels, weight_packed_bytes(w->type, w->rows, w->cols) };
    return (ReadSpan){ w->data, w->rows > 0 ? matrix_bytes(w) : 0 };
}

/* One layer's attention at n_keys keys, as decode_tasks reads it on one
 * thread: each query head's runs of blocks in order (QKV_DECODE_RUN), a
 * run's keys (int8: then their scales; whole panels of 16, as the kernels
 * read them), then its blocks' values (int8: each block's scales first). */
static int attention_spans(const KVCache *kv, int layer, int n_heads, int n_keys, ReadSpan *out) {
    int n = 0, q8 = kv->type == KV_Q8, run_keys = QKV_DECODE_RUN * QKV_KEY_BLOCK;
    for (int h = 0; h < n_heads; h++) {
        int kvh = h / (n_heads / kv->n_kv_heads);
        size_t scales = ((size_t)layer * kv->n_kv_heads + kvh) * (size_t)kv->stride;
        for (int run = 0; run < n_keys; run += run_keys) {
            int rows = n_keys - run < run_keys ? n_keys - run : run_keys;
            int key_rows = q8 ? (rows + KV_Q8_PANEL - 1) / KV_Q8_PANEL * KV_Q8_PANEL : rows;
            out[n++] = (ReadSpan){ kv_keys(kv, layer, kvh) + (size_t)run * kv->row_bytes, key_rows * kv->row_bytes };
            if (q8) out[n++] = (ReadSpan){ kv->key_scales + scales + run, key_rows * sizeof(float) };
            for (int first = run; first < run + rows; first += QKV_KEY_BLOCK) {
                int block = run + rows - first < QKV_KEY_BLOCK ? run + rows - first : QKV_KEY_BLOCK;
                if (q8) out[n++] = (ReadSpan){ kv->value_scales + scales + first, block * sizeof(float) };
                int value_rows = q8 ? KV_Q8_ROUND(block) : block; /* int8: whole quads, as the kernels read them */
                out[n++] = (ReadSpan){ kv_values(kv, layer, kvh) + (size_t)first * kv->value_bytes,
                                       value_rows * kv->value_bytes };
            }
        }
    }
    return n;
}

/* A phase of the spans from *next on (n of them), in part part, its lines
 * requested ahead as fetch says */
static ReadPhase phase_of(ReadSpan **next, int n, int part, Fetch fetch) {
    ReadPhase phase = { *next, n, part, fetch };
    *next += n;
    return phase;
}

/* How w's kernel requests a decode step's lines (a phase of several
 * matrices takes its first's: a file whose q, k and v, or w1 and w3, differ
 * in type is read as if all were the first's) */
static Fetch matrix_fetch(const Matrix *w) {
    const KernelEntry *k = w->kernel ? w->kernel : kernel_best(w->type);
    return k ? k->fetch : FETCH_NONE;
}

ReadPhase *bench_step_reads(const Model *m, const KVCache *kv, int n_keys, ReadSpan **spans, int *n_phases) {
    const Config *c = &m->config;
    int blocks = (n_keys + QKV_KEY_BLOCK - 1) / QKV_KEY_BLOCK;
    size_t per_layer = 7 + (size_t)c->n_heads * blocks * 4;
    ReadPhase *phases = malloc(((size_t)c->n_layers * 5 + 1) * sizeof(ReadPhase));
    ReadSpan *next = *spans = malloc((per_layer * c->n_layers + 1) * sizeof(ReadSpan));
    if (!phases || !next) {
        free(phases);
        free(next);
        return NULL;
    }
    int k = 0;
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *w = &m->weights.layers[l];
        next[0] = matrix_span(&w->wq), next[1] = matrix_span(&w->wk), next[2] = matrix_span(&w->wv);
        phases[k++] = phase_of(&next, 3, 0, matrix_fetch(&w->wq));
        phases[k++] = phase_of(&next, attention_spans(kv, l, c->n_heads, n_keys, next), 1, kv->fetch_ahead);
        next[0] = matrix_span(&w->wo);
        phases[k++] = phase_of(&next, 1, 0, matrix_fetch(&w->wo));
        next[0] = matrix_span(&w->w1), next[1] = matrix_span(&w->w3); /* GPT-2: no w3, 0 bytes */
        phases[k++] = phase_of(&next, 2, 0, matrix_fetch(&w->w1));
        next[0] = matrix_span(&w->w2);
        phases[k++] = phase_of(&next, 1, 0, matrix_fetch(&w->w2));
    }
    next[0] = matrix_span(&m->weights.classifier);
    phases[k++] = phase_of(&next, 1, 0, matrix_fetch(&m->weights.classifier));
    *n_phases = k;
    return phases;
}

/* The in-order read of what the step at ctx reads, on the bench's cache */
static void measure_in_order(Bench *b, const KVCache *kv) {
    ReadSpan *spans;
    int n_phases;
    ReadPhase *phases = bench_step_reads(b->model, kv, keys_read(b, b->ctx), &spans, &n_phases);
    if (phases) roofline_read_in_order(&b->in_order, phases, n_phases, b->options->threads);
    free(phases);
    free(spans);
}

/* ------------------------------------------------------------------------ */
/* The memory a long prefill needs                                           */

/* The prompt length whose memory is reported (the "8k tokens"). */
#define PREFILL_MEMORY_TOKENS 8192

static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t len = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':') kb = atol(line + len + 1);
    if (f) fclose(f);
    return kb;
}

static void ignore_attention(void *ctx, int layer, int pos, int n_visible, const RunState *s) {}

/* One read of every page of the mapped file (the child's own copy of the
 * mapping): the embedding rows and norms a prefill reads where they lie
 * are then resident before the measure starts, like the packed matrices. */
static void touch_mapping(const Model *m) {
    volatile unsigned char sink = 0;
    const unsigned char *p = m->mapping;
    for (size_t i = 0; p && i < m->file_bytes; i += 4096) sink ^= p[i];
    (void)sink;
}

/* The child's side: a run state (a cache of n positions, or of a window
 * with its sinks), then the peak resident growth over a prefill of n tokens
 * (writing 5 to /proc/self/clear_refs resets the peak to the current size).
 * The weights are resident already (packed at load, the rest of the file
 * touched here); the cache's pages are counted from the first step on, as
 * a large page (2 MiB) holds many positions. */
static long child_prefill_growth_kb(const Model *m, int n, int kv_type, int observed, int window, int sinks) {
    RunState s;
    long growth = -1;
    int *tokens = malloc(sizeof(int) * (size_t)n);
    ForwardObserver o = { .attention = ignore_attention };
    if (!tokens || run_state_init_kv(&s, &m->config, window ? window : n, (KVType)kv_type) ||
        kv_window_init(&s.kv_cache, sinks))
        return -1;
    fill_tokens(tokens, n, m->config.vocab_size);
    touch_mapping(m);
    FILE *reset = fopen("/proc/self/clear_refs", "w");
    long before = status_kb("VmRSS");
    if (reset && fputs("5", reset) >= 0 && fclose(reset) == 0 && before > 0) {
        forward_tokens(m, &s, tokens, n, 0, observed ? &o : NULL);
        growth = status_kb("VmHWM") - before;
    }
    return growth;
}

static long prefill_growth_kb(const Model *m, int n, int kv_type, int observed, int window, int sinks) {
    int fd[2];
    if (pipe(fd)) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        long growth = child_prefill_growth_kb(m, n, kv_type, observed, window, sinks);
        _exit(write(fd[1], &growth, sizeof growth) == sizeof growth ? 0 : 1);
    }
    long growth = -1;
    close(fd[1]);
    if (pid < 0 || read(fd[0], &growth, sizeof growth) != sizeof growth) growth = -1;
    close(fd[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    return growth;
}

long bench_prefill_growth_kb(const Model *m, int n, int kv_type, int observed) {
    return prefill_growth_kb(m, n, kv_type, observed, 0, 0);
}

/* ------------------------------------------------------------------------ */
/* Text report                                                               */

static double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

static size_t peak_resident_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux reports kilobytes */
}

const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void print_header(const Bench *b) {
    const Config *c = &b->model->config;
    size_t kv = kv_bytes_per_position((KVType)b->options->kv_type, c->n_layers, c->n_kv_heads, c->head_size);
    printf("qkv bench: %s (%s)\n", b->options->model_path, model_format_name(b->model->format));
    printf("  dim %d  hidden_dim %d  n_layers %d  n_heads %d  n_kv_heads %d  head_size %d  vocab %d  seq_len %d\n",
           c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_size,
           c->vocab_size, c->seq_len);
    printf("  threads %d, median of %d runs, positions 1..%d", b->options->threads, b->repeats, b->ctx);
    if (b->cached.n < b->ctx)
        printf(" (each up to %d, then %d log-spaced a doubling: %d in all)", DENSE_POSITIONS, STEPS_PER_DOUBLING,
               b->cached.n);
    printf("\n");
    printf("  weights   %zu bytes (%.1f MiB, %zu parameters)\n", b->model->weight_bytes,
           mib(b->model->weight_bytes), b->model->n_params);
    printf("  kernel    %s (QKV_ISA caps the set, QKV_VENDOR names the maker)\n", model_kernel_name(b->model));
    int held = b->options->window ? b->options->window : b->ctx; /* a window holds W positions */
    printf("  KV cache  %s, %zu bytes per token; %zu bytes (%.1f MiB) for %d positions\n",
           kv_type_name((KVType)b->options->kv_type), kv, kv * (size_t)held, mib((double)kv * held), held);
}

/* The table at the log-spaced positions: the measurement next to the
 * theoretical FLOPs of each part, and the no-cache ratio where measured. */
static void print_table(const Bench *b) {
    const Config *c = &b->model->config;
    int log_pos[MAX_LOG_POSITIONS], n = log_positions(b->ctx, log_pos);
    printf("\nper-token latency, ms (attention = scores, softmax, weighted sum; other = the rest)\n");
    printf("%9s %10s %10s %10s %6s %12s %12s", "position", "total", "attention", "other", "attn%",
           "attn MFLOP", "other MFLOP");
    if (b->options->no_cache) printf(" %12s %9s", "no-cache", "ratio");
    printf("\n");
    for (int k = 0; k < n; k++) {
        int i = curve_find(&b->cached, log_pos[k]), j = curve_find(&b->recomputed, log_pos[k]);
        double total = b->cached.total_ms[i], attention = b->cached.attention_ms[i];
        printf("%9d %10.3f %10.3f %10.3f %6.1f %12.4g %12.4g", log_pos[k], total, attention,
               total - attention, 100.0 * attention / total, attention_flops(b, log_pos[k]) * 1e-6,
               other_flops(c) * 1e-6);
        if (b->options->no_cache && j >= 0)
            printf(" %12.3f %9.2f", b->recomputed.total_ms[j], b->recomputed.total_ms[j] / total);
        printf("\n");
    }
    printf("run-to-run spread, (max - min) / median, median over positions: %.1f%% with the cache",
           100 * b->cached.spread);
    if (b->options->no_cache) printf(", %.1f%% without", 100 * b->recomputed.spread);
    printf("\n");
}

/* The slope of per-token latency against context, and what the FLOP count
 * predicts it to be if attention ran at the rate the weights run at. */
/* Tokens of context the slope is quoted per: a power of ten within the
 * measured range, so a 256-token model is not extrapolated to 1000. */
int slope_unit(int ctx) {
    int unit = 10;
    while (unit * 10 <= ctx) unit *= 10;
    return unit;
}

static void print_slopes(const Bench *b) {
    const Config *c = &b->model->config;
    int unit = slope_unit(b->ctx);
    double predicted_flops = flops_attention_per_token(c, unit);
    double predicted_ms = b->small_flop_rate > 0 ? predicted_flops / b->small_flop_rate * 1e3 : 0;
    double last_attention_s = b->cached.attention_ms[b->cached.n - 1] * 1e-3;
    printf("\nslope (least squares over the %d positions measured in %d..%d)\n", b->fit_count, b->fit_from, b->ctx);
    if (b->ctx < 2) {
        printf("  needs at least two positions\n");
        return;
    }
    printf("  measured: per-token latency grows %.4f ms per %d tokens of context"
           " (attention alone %.4f; intercept %.3f ms; run-to-run spread %.0f%%: trust the slope accordingly)\n",
           b->total_fit.slope * unit, unit, b->attention_fit.slope * unit, b->total_fit.intercept,
           100 * b->cached.spread);
    printf("  FLOPs prediction: %.4f ms per %d tokens = %.4g MFLOP of attention per %d tokens"
           " / %.3g GFLOP/s (measured over positions 1..%d)\n",
           predicted_ms, unit, predicted_flops * 1e-6, unit, b->small_flop_rate * 1e-9,
           b->ctx < SMALL_CONTEXT ? b->ctx : SMALL_CONTEXT);
    if (predicted_ms > 0)
        printf("  measured / predicted: %.2f\n", b->total_fit.slope * unit / predicted_ms);
    if (last_attention_s > 0)
        printf("  attention itself runs at %.3g GFLOP/s at position %d\n",
               attention_flops(b, b->ctx) / last_attention_s * 1e-9, b->ctx);
}

/* Prefill (forward_tokens over the prompt: chunks of positions through the
 * weights as a matrix, no classifier but for the last position) against
 * decoding the same tokens one forward() at a time. */
static void print_prefill_decode(const Bench *b) {
    int lengths[N_PREFILL_LENGTHS], n = prefill_lengths(b->ctx, lengths);
    printf("\nprefill vs decode, tokens/s (the same n tokens from position 1)\n");
    printf("%9s %14s %14s\n", "tokens", "prefill", "decode");
    for (int k = 0; k < n; k++) {
        int j = curve_find(&b->recomputed, lengths[k]);
        double decode_ms = 0;
        for (int i = 0; i < lengths[k]; i++) decode_ms += b->cached.total_ms[i];
        printf("%9d %14.1f %14.1f\n", lengths[k], lengths[k] / (b->recomputed.total_ms[j] * 1e-3),
               lengths[k] / (decode_ms * 1e-3));
    }
    printf("  (prefill is forward_tokens: up to %d positions through the weights at once, and the\n"
           "   classifier for the last token only)\n", QKV_CHUNK);
}

/* Decode streams the weights: their bytes over the time of the rest of
 * the step (all but attention) at small contexts, where attention is
 * negligible, against the probe's bandwidth: in the median step, and in
 * the fastest (the probe's figure is its fastest pass: on a shared
 * machine, whose neighbours slow some passes and steps, the fastest
 * against the fastest compares like with like). Prefill multiplies: the
 * FLOPs of the longest prompt over its time, against the FMA peak; and
 * the same split as decode's, the weights' FLOPs over the time of all but
 * attention (the matrix products, with the norms and SwiGLU between them). */
typedef struct {
    double decode_tok_s, decode_gbps, fastest_gbps; /* fastest: the fastest step's */
    int prompt;
    double prefill_tok_s, prefill_gflops, weights_gflops;
} RooflineFigures;

static RooflineFigures roofline_figures(const Bench *b) {
    const Config *c = &b->model->config;
    RooflineFigures f;
    int n = b->ctx < SMALL_CONTEXT ? b->ctx : SMALL_CONTEXT;
    double other[SMALL_CONTEXT], total[SMALL_CONTEXT], fastest = b->cached.other_fastest_ms[0];
    for (int i = 0; i < n; i++) {
        total[i] = b->cached.total_ms[i];
        other[i] = b->cached.total_ms[i] - b->cached.attention_ms[i];
        if (b->cached.other_fastest_ms[i] < fastest) fastest = b->cached.other_fastest_ms[i];
    }
    f.decode_tok_s = 1e3 / median(total, n);
    f.decode_gbps = weight_bytes_per_token(b->model) / (median(other, n) * 1e-3) * 1e-9;
    f.fastest_gbps = weight_bytes_per_token(b->model) / (fastest * 1e-3) * 1e-9;
    int lengths[N_PREFILL_LENGTHS], k = prefill_lengths(b->ctx, lengths) - 1;
    int j = curve_find(&b->recomputed, lengths[k]);
    double seconds = b->recomputed.total_ms[j] * 1e-3, classifier = 2.0 * c->vocab_size * c->dim;
    double weights = classifier + lengths[k] * (flops_weights_per_token(c) - classifier), attention = 0;
    for (int pos = 1; pos <= lengths[k]; pos++) attention += attention_flops(b, pos);
    f.prompt = lengths[k];
    f.prefill_tok_s = lengths[k] / seconds;
    f.prefill_gflops = (weights + attention) / seconds * 1e-9;
    f.weights_gflops = weights / (seconds - b->recomputed.attention_ms[j] * 1e-3) * 1e-9;
    return f;
}

static void print_roofline(const Bench *b) {
    const Roofline *r = &b->roofline;
    RooflineFigures f = roofline_figures(b);
    int small = b->ctx < SMALL_CONTEXT ? b->ctx : SMALL_CONTEXT;
    printf("\nroofline (%d thread%s; probes: one pass of %s reads over %.1f MiB, FMAs in registers)\n", r->threads,
           r->threads == 1 ? "" : "s", r->isa, mib((double)r->probe_bytes));
    printf("  machine: read bandwidth %.1f GB/s, float32 FMA peak %.1f GFLOP/s\n", r->read_gbps, r->fma_gflops);
    printf("  decode, positions 1..%d: weights stream at %.1f GB/s = %.0f%% of the read bandwidth"
           " (%zu bytes a token)\n", small, f.decode_gbps, 100 * f.decode_gbps / r->read_gbps,
           weight_bytes_per_token(b->model));
    printf("  decode's fastest step of those %d (the probe's figure is its fastest pass): %.1f GB/s = %.0f%%\n",
           small * b->repeats, f.fastest_gbps, 100 * f.fastest_gbps / r->read_gbps);
    printf("  prefill of %d tokens: %.1f GFLOP/s = %.0f%% of the FMA peak; the weights' products (all but"
           " attention) %.1f GFLOP/s = %.0f%%\n", f.prompt, f.prefill_gflops, 100 * f.prefill_gflops / r->fma_gflops,
           f.weights_gflops, 100 * f.weights_gflops / r->fma_gflops);
    const Config *c = &b->model->config;
    double kv_bytes = (double)kv_bytes_per_position((KVType)b->options->kv_type, c->n_layers, c->n_kv_heads, c->head_size) *
                      keys_read(b, b->ctx);
    double kv_gbps = kv_bytes / (b->last_attention_ms * 1e-3) * 1e-9;
    printf("  attention at position %d: %.1f MiB of keys and values in %.3f ms (running median) = %.1f GB/s ="
           " %.0f%% of the read bandwidth over the step's bytes (weights and KV, %.1f MiB: %.1f GB/s);"
           " %.0f%% of a read over the KV bytes alone, after the weights' (%.1f GB/s)\n", b->ctx, mib(kv_bytes),
           b->last_attention_ms, kv_gbps, 100 * kv_gbps / b->kv_roofline.read_gbps,
           mib((double)b->kv_roofline.probe_bytes), b->kv_roofline.read_gbps, 100 * kv_gbps / b->kv_alone_roofline.read_gbps, b->kv_alone_roofline.read_gbps);
    const InOrderRead *in = &b->in_order;
    if (in->passes && in->seconds[0] > 0 && in->seconds[1] > 0) {
        double weights_order = in->bytes[0] / in->seconds[0] * 1e-9, kv_order = in->bytes[1] / in->seconds[1] * 1e-9;
        printf("  the step's own bytes read in its order at position %d, no arithmetic (best of %d passes):"
               " weights %.1f GB/s, keys and values %.1f GB/s; attention reads at %.0f%% of the latter\n", b->ctx,
               in->passes, weights_order, kv_order, 100 * kv_gbps / kv_order);
    }
    printf("summary: %s %s %d thread%s: decode %.1f tok/s, %.1f GB/s (%.0f%%; fastest step %.0f%%); prefill %d: "
           "%.1f tok/s, %.1f GFLOP/s (%.0f%%; weights %.0f%%)\n", base_name(b->options->model_path),
           weight_type_name((WeightType)b->model->config.weight_type), r->threads, r->threads == 1 ? "" : "s",
           f.decode_tok_s, f.decode_gbps, 100 * f.decode_gbps / r->read_gbps, 100 * f.fastest_gbps / r->read_gbps,
           f.prompt, f.prefill_tok_s, f.prefill_gflops, 100 * f.prefill_gflops / r->fma_gflops,
           100 * f.weights_gflops / r->fma_gflops);
}

/* Where attention's time reaches the rest of the step. Predicted from
 * bytes: the rest streams the weights once a token, attention streams the
 * keys and values of every position of context, so at equal bandwidth they
 * cross where the context's KV bytes equal the weight bytes. */
double predicted_crossover(const Bench *b, KVType type) {
    const Config *c = &b->model->config;
    return (double)weight_bytes_per_token(b->model) / kv_bytes_per_position(type, c->n_layers, c->n_kv_heads, c->head_size);
}

static void print_crossover(const Bench *b) {
    const Config *c = &b->model->config;
    KVType measured = (KVType)b->options->kv_type;
    printf("\ncrossover: the context where attention takes as long as the rest of the step\n");
    if (b->crossover > 0)
        printf("  measured, %s KV cache: position %.0f (attention's share of each step, running median, reaches"
               " 50%%)\n", kv_type_name(measured), b->crossover);
    else
        printf("  measured, %s KV cache: not reached by position %d (attention is %.0f%% of the step there)\n",
               kv_type_name(measured), b->ctx, b->last_share);
    printf("  predicted from bytes: %zu bytes of weights a token against the KV bytes a position of context adds\n",
           weight_bytes_per_token(b->model));
    for (int t = 0; t < KV_TYPE_COUNT; t++)
        printf("    %s KV cache: %6zu bytes a position -> position %.0f%s\n", kv_type_name((KVType)t),
               kv_bytes_per_position((KVType)t, c->n_layers, c->n_kv_heads, c->head_size),
               predicted_crossover(b, (KVType)t), t == (int)measured ? " (the one measured)" : "");
    if (b->options->window)
        printf("  (with --window %d attention reads at most %d keys: past the window its share stops growing)\n",
               b->options->window, b->options->window);
}

/* The prefill's memory: tiled, and with the rows of scores an observer
 * makes the engine keep (as every prefill kept them before tiling). */
static void print_prefill_memory(const Bench *b) {
    const Config *c = &b->model->config;
    int n = b->prefill_tokens, held = keys_read(b, n); /* the cache's positions: n, or a window's W */
    double kv = (double)kv_bytes_per_position((KVType)b->options->kv_type, c->n_layers, c->n_kv_heads, c->head_size) * held;
    int rows = attention_rows_for(c->n_heads, held);
    double kept = (double)rows * c->n_heads * held * 2 * sizeof(float);
    printf("\nprefill memory, %d tokens: peak resident growth over the prefill (a child process; KV cache %.1f MiB%s)\n",
           n, mib(kv), b->options->window ? ", the window's" : "");
    if (b->prefill_kb[0] < 0 || b->prefill_kb[1] < 0) {
        printf("  not measured (no /proc/self/clear_refs)\n");
        return;
    }
    printf("  tiled (no observer):          %8.1f MiB = the KV cache %+.1f MiB\n", b->prefill_kb[0] / 1024.0,
           b->prefill_kb[0] / 1024.0 - mib(kv));
    printf("  score rows kept (an observer): %8.1f MiB = the KV cache %+.1f MiB (%d rows x %d heads x %d keys,"
           " scores and weights: %.1f MiB)\n", b->prefill_kb[1] / 1024.0, b->prefill_kb[1] / 1024.0 - mib(kv), rows,
           c->n_heads, held, mib(kept));
    printf("  (all %d x %d scores of one layer's heads would be %.1f MiB; neither keeps them)\n", n, held,
           mib((double)n * held * c->n_heads * sizeof(float)));
}

/* Median of a curve's totals over its positions from..to; scratch holds
 * c->n doubles. */
static double median_total(const Curve *c, int from, int to, double *scratch) {
    int n = 0;
    for (int i = 0; i < c->n; i++)
        if (c->positions[i] >= from && c->positions[i] <= to) scratch[n++] = c->total_ms[i];
    return n ? median(scratch, n) : 0;
}

/* --window: latency before and after the window fills, against the full
 * cache, and resident memory once a context. */
static void print_window(const Bench *b) {
    const BenchOptions *o = b->options;
    const Curve *full = &b->full;
    int W = o->window, unit = slope_unit(b->ctx);
    double *scratch = malloc((size_t)b->ctx * sizeof(double));
    if (!scratch) return;
    printf("\nsliding window: --window %d --sinks %d (the KV cache holds %d positions)\n", W, o->sinks, W);
    printf("  median ms per token: positions 1..%d %.3f", W, median_total(&b->cached, 1, W, scratch));
    if (b->ctx > W) printf("; %d..%d %.3f", W + 1, b->ctx, median_total(&b->cached, W + 1, b->ctx, scratch));
    if (b->ctx > 2 * W) printf("; last %d (%d..%d) %.3f", W, b->ctx - W + 1, b->ctx,
                                median_total(&b->cached, b->ctx - W + 1, b->ctx, scratch));
    printf("\n");
    if (b->fit_from > 1)
        printf("  beyond the window (least squares over %d..%d): %.4f ms per %d tokens (flat: each token reads %d keys)\n",
               b->fit_from, b->ctx, b->total_fit.slope * unit, unit, W);
    if (full->n) {
        int last = full->positions[full->n - 1], from = full->positions[full->n > 16 ? full->n - 16 : 0];
        printf("  full cache, no window: positions 1..%d %.3f ms median, at %d %.3f ms (median of the last %d)\n",
               last, median_total(full, 1, last, scratch), last, median_total(full, from, last, scratch), 16);
    }
    printf("  resident memory (MiB) at positions");
    for (int k = 0; (k + 1) * b->cached.rss_every <= b->ctx; k++) printf(" %d", (k + 1) * b->cached.rss_every);
    printf(":");
    for (int k = 0; (k + 1) * b->cached.rss_every <= b->ctx; k++) printf(" %.2f", mib((double)b->cached.rss[k]));
    printf("\n");
    free(scratch);
}

static void print_report(const Bench *b) {
    print_header(b);
    if (b->options->window) print_window(b);
    print_table(b);
    print_slopes(b);
    print_prefill_decode(b);
    print_roofline(b);
    print_crossover(b);
    print_prefill_memory(b);
    size_t rss = b->peak_rss;
    printf("\npeak resident memory  %zu bytes (%.1f MiB)\n", rss, mib(rss));
}

/* ------------------------------------------------------------------------ */
/* Output files                                                              */

static FILE *open_output(const char *path, char *err, size_t err_len) {
    FILE *f = fopen(path, "w");
    if (!f) snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
    return f;
}

/* Closes f; a full disk shows up here, not at fprintf. */
static int close_output(FILE *f, const char *path, char *err, size_t err_len) {
    int failed = ferror(f);
    if (fclose(f) != 0 || failed) {
        snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* One row per position decoded; the no-cache columns are filled at the
 * positions where the prefix was recomputed, and empty elsewhere. */
static void write_csv(const Bench *b, FILE *f) {
    const Config *c = &b->model->config;
    fprintf(f, "position,total_ms,attention_ms,other_ms,attention_flops,other_flops,"
               "no_cache_ms,no_cache_attention_ms,ratio\n");
    for (int i = 0; i < b->cached.n; i++) {
        int position = b->cached.positions[i];
        int j = b->options->no_cache ? curve_find(&b->recomputed, position) : -1;
        double total = b->cached.total_ms[i], attention = b->cached.attention_ms[i];
        fprintf(f, "%d,%.6f,%.6f,%.6f,%.0f,%.0f,", position, total, attention, total - attention,
                attention_flops(b, position), other_flops(c));
        if (j >= 0)
            fprintf(f, "%.6f,%.6f,%.4f\n", b->recomputed.total_ms[j], b->recomputed.attention_ms[j],
                    b->recomputed.total_ms[j] / total);
        else
            fprintf(f, ",,\n");
    }
}

/* ------------------------------------------------------------------------ */

/* Positions timed when --ctx is not given and the context is longer. */
#define BENCH_DEFAULT_MAX_CTX 4096

/* The last position timed: --ctx, else the context (a window's: ten of
 * them, as it runs on past it), at most BENCH_DEFAULT_MAX_CTX unless asked;
 * without a window never past the context. Says so when it clamps. */
static int bench_context(const Config *c, const BenchOptions *o) {
    int ctx = o->ctx > 0 ? o->ctx : o->window ? 10 * c->seq_len : c->seq_len;
    if (o->ctx <= 0 && ctx > BENCH_DEFAULT_MAX_CTX) {
        /* a header's claim is not a reason to decode a million positions */
        fprintf(stderr, "warning: the context is %d positions; timing the first %d (--ctx N for more)\n",
                c->seq_len, BENCH_DEFAULT_MAX_CTX);
        ctx = BENCH_DEFAULT_MAX_CTX;
    }
    if (ctx > c->seq_len && !o->window) {
        fprintf(stderr, "warning: --ctx %d is beyond the context; clamped to %d\n", ctx, c->seq_len);
        ctx = c->seq_len;
    }
    return ctx;
}

/* The machine's yardsticks, after the measurements (their buffers would
 * have taken the step's memory): the read over the weights' bytes, over
 * the step's at ctx (weights and KV), over the KV bytes alone after the
 * weights'; the FMA peak with each. */
static void probe_roofline(Bench *b) {
    const Config *c = &b->model->config;
    const BenchOptions *o = b->options;
    size_t weights = weight_bytes_per_token(b->model);
    size_t kv_bytes = kv_bytes_per_position((KVType)o->kv_type, c->n_layers, c->n_kv_heads, c->head_size) *
                      (size_t)keys_read(b, b->ctx);
    fprintf(stderr, "bench: probing read bandwidth (the step's own bytes in its order; over the weights' bytes, "
            "the step's at ctx, the KV cache's after the weights') and FMA peak\n");
    roofline_measure(&b->roofline, weights, o->threads);
    roofline_measure(&b->kv_roofline, weights + kv_bytes, o->threads);
    roofline_measure_after(&b->kv_alone_roofline, kv_bytes, weights, o->threads);
}

int bench_run(const Model *m, const BenchOptions *o, char *err, size_t err_len) {
    const Config *c = &m->config;
    Bench b;
    memset(&b, 0, sizeof b);
    b.model = m;
    b.options = o;
    b.repeats = o->repeats > 0 ? o->repeats : 1;
    b.ctx = bench_context(c, o);
    /* The output files are opened first, so a bad path fails at once rather
     * than after minutes of measuring. */
    FILE *csv = NULL, *svg = NULL;
    if (o->csv_path && !(csv = open_output(o->csv_path, err, err_len))) return -1;
    if (o->svg_path && !(svg = open_output(o->svg_path, err, err_len))) {
        if (csv) fclose(csv);
        return -1;
    }
    b.prefill_tokens = b.ctx < PREFILL_MEMORY_TOKENS ? b.ctx : PREFILL_MEMORY_TOKENS;
    fprintf(stderr, "bench: the memory of a %d-token prefill, tiled and observed\n", b.prefill_tokens);
    for (int observed = 0; observed < 2; observed++)
        b.prefill_kb[observed] = prefill_growth_kb(m, b.prefill_tokens, o->kv_type, observed, o->window, o->sinks);
    RunState s;
    Derived d = { 0 };
    int *tokens = malloc((size_t)b.ctx * sizeof(int));
    int rc = !tokens || run_state_init_kv(&s, c, o->window ? o->window : b.ctx, (KVType)o->kv_type) ||
                     kv_window_init(&s.kv_cache, o->sinks) ? -1 : 0;
    if (!rc) {
        fill_tokens(tokens, b.ctx, c->vocab_size);
        MeasureRun run = { &b, &s, tokens };
        rc = team_main(o->threads, measure_on_team, &run) || derive(&b, &d);
        b.peak_rss = peak_resident_bytes();
        if (!rc) measure_in_order(&b, &s.kv_cache);
        run_state_free(&s);
        probe_roofline(&b);
    }
    if (!rc) {
        find_crossover(&b, &d);
        print_report(&b);
        if (csv) write_csv(&b, csv);
        if (svg) rc = write_svg(&b, &d, svg);
    }
    free(d.block);
    if (rc) snprintf(err, err_len, "out of memory for the benchmark");
    if (csv && close_output(csv, o->csv_path, err, err_len)) rc = -1;
    if (svg && close_output(svg, o->svg_path, err, err_len)) rc = -1;
    curve_free(&b.cached);
    curve_free(&b.recomputed);
    curve_free(&b.full);
    free(tokens);
    return rc;
}
