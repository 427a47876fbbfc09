/* bench.c — per-token latency against context length.
 *
 * The claim under test: with a KV cache, the token at position n is one query
 * row against n cached keys, so its cost is the weights (the same at every
 * position) plus an attention term linear in n; recomputing the prefix instead
 * runs all n tokens again: n times the weights (linear in n) and n query rows
 * against up to n keys each, the prefill's n × n scores (quadratic in n), so
 * its curve bends upward once attention's share of it grows.
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
 * the arithmetic on the curves (fit, FLOP rate), the step's own bytes in
 * its order, the memory of a long prefill, then bench_run. The text report
 * and the CSV are in bench_report.c; the SVG chart, and the running medians
 * it and the crossover use, in bench_svg.c; the types the three share in
 * bench_internal.h.
 */
#include "bench_internal.h"
#include "progress.h"
#include "output_file.h"
#include "sampler.h" /* logits_check */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Prompt lengths of the prefill-vs-decode table (capped by the context). */
static const int PREFILL_LENGTHS[] = { 16, 64, 256 };
_Static_assert(sizeof PREFILL_LENGTHS / sizeof PREFILL_LENGTHS[0] == N_PREFILL_LENGTHS,
               "N_PREFILL_LENGTHS (bench_internal.h) counts PREFILL_LENGTHS");

/* ------------------------------------------------------------------------ */
/* Timing one call of the forward pass                                       */

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
int curve_find(const Curve *c, int position) {
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

/* The progress bar's words: what ("position", "tiled: token") reached, of
 * last (progress.h draws it only when stderr is a terminal; a log file
 * keeps the plain lines). */
static void show_count(Progress *p, double done, double total, const char *what, int at, int last) {
    if (!p || !p->columns) return; /* no words to make */
    char words[64];
    snprintf(words, sizeof words, "%s %d of %d", what, at, last);
    progress_update(p, done, total, words);
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
/* Each position's step times in milliseconds: [n positions, repeats] */
typedef struct {
    double *total, *attention;
    int repeats;
} StepSamples;

static void sample_step(StepSamples *t, int i, int r, StepTime step) {
    t->total[(size_t)i * t->repeats + r] = step.total * 1e3;
    t->attention[(size_t)i * t->repeats + r] = step.attention * 1e3;
}

/* Positions 0..dense-1 of the curve in order, repeats times over (with
 * recompute, each from position 1); the first run samples resident memory
 * every rss_every positions. */
static void time_dense_positions(const Model *m, RunState *s, const int *tokens, Curve *c, StepSamples *t,
                                 int dense, int recompute, const char *label) {
    Progress progress = progress_start("bench");
    /* the first steps once, untimed: the first run's found cold caches
     * (positions 1-4 took 0.28-0.16 ms against 0.15 from 5 on, grammar, one
     * thread), and with --repeats 1 the slope came out negative */
    for (int i = 0; i < dense && i < WARM_STEPS; i++)
        recompute ? timed_forward(m, s, tokens, 0, c->positions[i]) : timed_forward(m, s, tokens, c->positions[i] - 1, 1);
    for (int r = 0; r < t->repeats && dense > 0; r++) {
        fprintf(stderr, "bench: %s, run %d/%d (positions %d..%d)\n", label, r + 1, t->repeats,
                c->positions[0], c->positions[dense - 1]);
        for (int i = 0; i < dense; i++) {
            int position = c->positions[i];
            StepTime step = recompute ? timed_forward(m, s, tokens, 0, position)
                                      : timed_forward(m, s, tokens, position - 1, 1);
            if (c->rss && r == 0 && position % c->rss_every == 0)
                c->rss[position / c->rss_every - 1] = resident_bytes();
            sample_step(t, i, r, step);
            show_count(&progress, (double)r * dense + i + 1, (double)t->repeats * dense, "position", position,
                       c->positions[dense - 1]);
        }
        progress_end(&progress);
    }
}

/* Positions dense.. of the curve: each after a prefill fills the cache up to
 * it, then WARM_STEPS untimed steps and repeats timed ones in a row (the
 * step rewrites the same slot). */
static void time_after_prefill(const Model *m, RunState *s, const int *tokens, Curve *c, StepSamples *t,
                               int dense, const char *label) {
    int last = c->positions[c->n - 1];
    if (dense < c->n)
        fprintf(stderr, "bench: %s, %d log-spaced position%s %d..%d, each after a prefill up to it and %d untimed steps\n",
                label, c->n - dense, plural(c->n - dense), c->positions[dense], last, WARM_STEPS);
    Progress progress = progress_start("bench");
    for (int i = dense; i < c->n; i++) {
        int position = c->positions[i], filled = c->positions[i - 1];
        if (position - 1 > filled) /* none when the position follows the last (--ctx 2049) */
            forward_tokens(m, s, tokens + filled, position - 1 - filled, filled, NULL);
        for (int w = 0; w < WARM_STEPS; w++) timed_forward(m, s, tokens, position - 1, 1);
        for (int r = 0; r < t->repeats; r++) sample_step(t, i, r, timed_forward(m, s, tokens, position - 1, 1));
        show_count(&progress, i - dense + 1, c->n - dense, "position", position, last);
    }
    progress_end(&progress);
}

/* The curve's medians, its fastest rest-of-step times and the runs' spread */
static void curve_medians(Curve *c, StepSamples *t, double *spread) {
    int repeats = t->repeats;
    for (int i = 0; i < c->n; i++) {
        double *runs = t->total + (size_t)i * repeats, *attention = t->attention + (size_t)i * repeats;
        c->other_fastest_ms[i] = runs[0] - attention[0];
        for (int r = 1; r < repeats; r++)
            if (runs[r] - attention[r] < c->other_fastest_ms[i]) c->other_fastest_ms[i] = runs[r] - attention[r];
        c->total_ms[i] = median(runs, repeats); /* sorts runs: min first, max last */
        c->attention_ms[i] = median(attention, repeats);
        spread[i] = (runs[repeats - 1] - runs[0]) / c->total_ms[i];
    }
    c->spread = median(spread, c->n);
}

static int measure_curve(const Model *m, RunState *s, const int *tokens, Curve *c,
                         int repeats, int recompute, const char *label) {
    size_t samples = (size_t)c->n * repeats;
    StepSamples t = { malloc(samples * sizeof(double)), malloc(samples * sizeof(double)), repeats };
    double *spread = malloc((size_t)c->n * sizeof(double));
    int rc = t.total && t.attention && spread ? 0 : -1;
    if (rc == 0) {
        /* touched now, not page by page as the positions advance: the
         * resident memory sampled during the run is then the engine's alone */
        memset(t.total, 0, samples * sizeof(double));
        memset(t.attention, 0, samples * sizeof(double));
        int dense = recompute ? c->n : dense_prefix(c);
        time_dense_positions(m, s, tokens, c, &t, dense, recompute, label);
        time_after_prefill(m, s, tokens, c, &t, dense, label);
        curve_medians(c, &t, spread);
    }
    free(t.total);
    free(t.attention);
    free(spread);
    return rc;
}

/* 1, 2, 4, ... below ctx, then ctx: the positions the table shows and the
 * prefix recomputation visits (it is O(n^2), so not every position). */
int log_positions(int ctx, int *out) {
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
int prefill_lengths(int ctx, int *out) {
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
int keys_attended(const Bench *b, int position) {
    int window = b->options->window;
    return window && position > window ? window : position;
}

/* Theoretical FLOPs of the step at a position: attention reads its keys;
 * the rest (projections, MLP, classifier) is the same at every position. */
double attention_flops(const Bench *b, int position) {
    return flops_attention_per_token(&b->model->config, keys_attended(b, position));
}

/* The machine's FLOP rate on this model where attention is negligible: the
 * median of the first SMALL_CONTEXT positions' (a sum let one spike of a
 * shared machine set it) */
static double small_context_flop_rate(const Bench *b) {
    const Config *c = &b->model->config;
    int n = b->ctx < SMALL_CONTEXT ? b->ctx : SMALL_CONTEXT;
    double rates[SMALL_CONTEXT];
    int timed = 0;
    for (int i = 0; i < n; i++) {
        double seconds = b->cached.total_ms[i] * 1e-3;
        if (seconds > 0) rates[timed++] = (attention_flops(b, b->cached.positions[i]) + flops_weights_per_token(c)) / seconds;
    }
    return timed ? median(rates, timed) : 0;
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

static int measure_paired(Bench *b, RunState *s, const int *tokens, int position, int part);
static void measure_in_order(Bench *b, const KVCache *kv);

/* Decodes 1..ctx with the cache, then recomputes prefixes, then pairs decode
 * steps with plain reads of their weights, then reads the last step's bytes
 * in its order (both reads on the step's threads). */
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
    int small = b->ctx < SMALL_CONTEXT ? b->ctx : SMALL_CONTEXT;
    if (measure_paired(b, s, tokens, small, 0) || measure_paired(b, s, tokens, b->ctx, 1)) return -1;
    fprintf(stderr, "bench: reading the step's own bytes in its order\n");
    measure_in_order(b, &s->kv_cache);
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
        *spans = NULL;
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
    ReadPhase *phases = bench_step_reads(b->model, kv, keys_attended(b, b->ctx), &spans, &n_phases);
    if (phases) roofline_read_in_order(&b->in_order, b->team, phases, n_phases);
    free(phases);
    free(spans);
}

/* ------------------------------------------------------------------------ */
/* Decode paired with plain reads of its weights                             */

static int compare_span_data(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const ReadSpan *)a)->data, y = (uintptr_t)((const ReadSpan *)b)->data;
    return (x > y) - (x < y);
}

ReadPhase bench_one_pass(const ReadPhase *phases, int n_phases, int part, ReadSpan *out) {
    int n = 0;
    for (int k = 0; k < n_phases; k++)
        for (int i = 0; phases[k].part == part && i < phases[k].n_spans; i++)
            if (phases[k].spans[i].bytes) out[n++] = phases[k].spans[i];
    qsort(out, (size_t)n, sizeof *out, compare_span_data);
    int kept = 0; /* spans that overlap (a kv head's rows, read by each of its query heads) become one */
    for (int i = 0; i < n; i++) {
        uintptr_t start = (uintptr_t)out[i].data, end = start + out[i].bytes;
        ReadSpan *last = kept ? &out[kept - 1] : NULL;
        uintptr_t last_end = last ? (uintptr_t)last->data + last->bytes : 0;
        if (last && start <= last_end) {
            if (end > last_end) last->bytes = end - (uintptr_t)last->data;
        } else out[kept++] = out[i];
    }
    return (ReadPhase){ out, kept, part, FETCH_NONE };
}

/* The medians of the pairs' times and ratios */
static void paired_medians(Paired *p, double *step, double *one, double *order) {
    double share[2][PAIRED_STEPS];
    for (int i = 0; i < PAIRED_STEPS; i++) share[0][i] = one[i] / step[i], share[1][i] = order[i] / step[i];
    p->one_pass_share = median(share[0], PAIRED_STEPS);
    p->in_order_share = median(share[1], PAIRED_STEPS);
    p->step_ms = median(step, PAIRED_STEPS);
    p->one_pass_ms = median(one, PAIRED_STEPS);
    p->in_order_ms = median(order, PAIRED_STEPS);
}

/* PAIRED_STEPS steps at position, each followed by a read of one part of
 * its bytes (0: the weights, timed against the step but attention; 1: the
 * keys and values, against attention) in one pass in memory order, with no
 * meetings (the probe's read, over the step's own buffers), then by one in
 * its order with its meetings (the in-order read's). */
static int measure_paired(Bench *b, RunState *s, const int *tokens, int position, int part) {
    Paired *p = &b->paired[part];
    int n_phases, n_spans = 0;
    ReadSpan *spans;
    ReadPhase *phases = bench_step_reads(b->model, &s->kv_cache, keys_attended(b, position), &spans, &n_phases);
    for (int k = 0; phases && k < n_phases; k++) n_spans += phases[k].n_spans;
    ReadSpan *sorted = phases ? malloc((size_t)n_spans * sizeof(ReadSpan) + 1) : NULL;
    double *t = malloc(3 * PAIRED_STEPS * sizeof(double));
    int rc = sorted && t ? 0 : -1;
    if (!rc) {
        ReadPhase one_pass = bench_one_pass(phases, n_phases, part, sorted);
        unsigned long long sum = 0; /* the reads' result, kept */
        p->position = position;
        p->bytes = 0;
        for (int i = 0; i < one_pass.n_spans; i++) p->bytes += one_pass.spans[i].bytes;
        double *step = t, *one = t + PAIRED_STEPS, *order = t + 2 * PAIRED_STEPS;
        for (int i = 0; i < PAIRED_STEPS; i++) {
            StepTime st = timed_forward(b->model, s, tokens, position - 1, 1);
            step[i] = (part ? st.attention : st.total - st.attention) * 1e3;
            one[i] = roofline_read_phases(b->team, &one_pass, 1, part, NULL, &sum) * 1e3;
            order[i] = roofline_read_phases(b->team, phases, n_phases, part, NULL, &sum) * 1e3;
        }
        paired_medians(p, step, one, order);
    }
    free(t);
    free(sorted);
    free(phases);
    free(spans);
    return rc;
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
/* What a child process measures: a prefill of n tokens with a KV cache of
 * kv_type (the window's, with its sinks, if any), observed or not */
typedef struct {
    const Model *m;
    int n, kv_type, observed, window, sinks;
    Progress *progress; /* the parent's bar, drawn on by the child: NULL for none */
} ChildJob;

/* The prefill's tokens between redraws of the bar: whole chunks (512 of
 * QKV_CHUNK's 128), so forward_tokens runs the same chunks, and touches
 * the same rows of their buffers, in n / PREFILL_PIECE calls as in one. */
#define PREFILL_PIECE (4 * QKV_CHUNK)

/* A prefill of n tokens from position 0, in pieces of PREFILL_PIECE, the
 * bar showing how far it is: the first child's half of the bar, or the second's */
static void prefill_showing(const ChildJob *job, RunState *s, const int *tokens, const ForwardObserver *o) {
    int n = job->n;
    for (int done = 0; done < n; done += PREFILL_PIECE) {
        show_count(job->progress, job->observed * n + done, 2.0 * n, job->observed ? "observed: token" : "tiled: token",
                   done, n);
        forward_tokens(job->m, s, tokens + done, n - done < PREFILL_PIECE ? n - done : PREFILL_PIECE, done, o);
    }
}

static long child_prefill_growth_kb(const ChildJob *job) {
    const Model *m = job->m;
    int n = job->n;
    RunState s;
    long growth = -1;
    int *tokens = malloc(sizeof(int) * (size_t)n);
    ForwardObserver o = { .attention = ignore_attention };
    if (!tokens || run_state_init_window(&s, &m->config, n, (KVType)job->kv_type, job->window, job->sinks)) return -1;
    fill_tokens(tokens, n, m->config.vocab_size);
    touch_mapping(m);
    /* the thread runtime's own memory is not the prefill's: started before
     * the baseline (clang's libomp added 1.3 MB to a 2 MB margin) */
#pragma omp parallel
    {
        (void)0;
    }
    FILE *reset = fopen("/proc/self/clear_refs", "w");
    long before = status_kb("VmRSS");
    if (reset && fputs("5", reset) >= 0 && fclose(reset) == 0 && before > 0) {
        prefill_showing(job, &s, tokens, job->observed ? &o : NULL);
        growth = status_kb("VmHWM") - before;
    }
    return growth;
}

/* The child's side of the first logits' check, from the token a sequence
 * starts from (a sampled one if the vocabulary has none) */
enum { LOGITS_FINITE, LOGITS_NAN, LOGITS_INFINITE, LOGITS_NO_MEMORY };
static long child_first_logits(const ChildJob *job) {
    const Config *c = &job->m->config;
    RunState s;
    int token = c->start_id;
    if (token < 0) fill_tokens(&token, 1, c->vocab_size);
    if (run_state_init_window(&s, c, 1, (KVType)job->kv_type, 0, 0)) return LOGITS_NO_MEMORY;
    const float *logits = forward(job->m, &s, token, 0, NULL);
    int bad = logits_check(logits, c->vocab_size);
    return bad < 0 ? LOGITS_FINITE : isnan(logits[bad]) ? LOGITS_NAN : LOGITS_INFINITE;
}

/* job's task run in a child process, and its answer (-3 if none came).
 * A child, because the parent must run no OpenMP region before its last
 * fork: libgomp's threads are not the child's, which waited for them
 * forever (the prefill's memory, measured after a first step). */
static long in_child(long (*task)(const ChildJob *job), const ChildJob *job) {
    int fd[2];
    if (pipe(fd)) return -3;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        long answer = task(job);
        _exit(write(fd[1], &answer, sizeof answer) == sizeof answer ? 0 : 1);
    }
    long answer = -3;
    close(fd[1]);
    if (pid < 0 || read(fd[0], &answer, sizeof answer) != sizeof answer) answer = -3;
    close(fd[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    return answer;
}

static long prefill_growth_kb(const Model *m, int n, int kv_type, int observed, int window, int sinks,
                              Progress *progress) {
    long growth = in_child(child_prefill_growth_kb, &(ChildJob){ m, n, kv_type, observed, window, sinks, progress });
    return growth < 0 ? -1 : growth;
}

long bench_prefill_growth_kb(const Model *m, int n, int kv_type, int observed) {
    return prefill_growth_kb(m, n, kv_type, observed, 0, 0, NULL);
}

/* Peak resident bytes so far */
static size_t peak_resident_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux reports kilobytes */
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
        if (o->window)
            fprintf(stderr, "warning: ten contexts of %d are %d positions; timing the first %d (--ctx N for more)\n",
                    c->seq_len, ctx, BENCH_DEFAULT_MAX_CTX);
        else
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
                      (size_t)keys_attended(b, b->ctx);
    fprintf(stderr, "bench: probing read bandwidth (over the weights' bytes, the step's at ctx, the KV cache's "
            "after the weights') and FMA peak\n");
    roofline_measure(&b->roofline, weights, o->threads);
    roofline_measure(&b->kv_roofline, weights + kv_bytes, o->threads);
    roofline_measure_after(&b->kv_alone_roofline, kv_bytes, weights, o->threads);
}

/* The CSV and the chart, opened once the measuring is done (options.c
 * checked at the start that their paths can be written): a run that fails
 * leaves a file already there as it was. */
static int write_outputs(const Bench *b, const Derived *d, char *err, size_t err_len) {
    const BenchOptions *o = b->options;
    FILE *f;
    if (o->csv_path) {
        if (!(f = output_open(o->csv_path, "--csv", err, err_len))) return -1;
        write_csv(b, f);
        if (output_close(f, o->csv_path, 0, err, err_len)) return -1;
    }
    if (o->svg_path) {
        if (!(f = output_open(o->svg_path, "--svg", err, err_len))) return -1;
        int rc = write_svg(b, d, f);
        if (rc) snprintf(err, err_len, "out of memory for the benchmark");
        if (output_close(f, o->svg_path, rc, err, err_len)) return -1;
    }
    return 0;
}

/* A model whose logits are not finite has no next token to time (generate,
 * ppl and heads refuse it): one step at position 0 says (in a child:
 * in_child). Returns 0, or -1 with err. */
static int check_first_logits(const Model *m, int kv_type, char *err, size_t err_len) {
    long found = in_child(child_first_logits, &(ChildJob){ m, 1, kv_type, 0, 0, 0, NULL });
    if (found == LOGITS_FINITE) return 0;
    if (found == LOGITS_NAN || found == LOGITS_INFINITE)
        bad_logits_message(err, err_len, found == LOGITS_NAN, 0, (KVType)kv_type);
    else if (found == LOGITS_NO_MEMORY) snprintf(err, err_len, "out of memory for the benchmark");
    else snprintf(err, err_len, "the bench's first step gave no answer (the child process that runs it failed)");
    return -1;
}

int bench_run(const Model *m, const BenchOptions *o, char *err, size_t err_len) {
    const Config *c = &m->config;
    Bench b;
    memset(&b, 0, sizeof b);
    b.model = m;
    b.options = o;
    b.repeats = o->repeats > 0 ? o->repeats : 1;
    b.ctx = bench_context(c, o);
    if (check_first_logits(m, o->kv_type, err, err_len)) return -1;
    /* the children first: the parent's own steps start OpenMP (in_child) */
    b.prefill_tokens = b.ctx < PREFILL_MEMORY_TOKENS ? b.ctx : PREFILL_MEMORY_TOKENS;
    fprintf(stderr, "bench: the memory of a %d-token prefill, tiled and observed\n", b.prefill_tokens);
    Progress progress = progress_start("bench");
    for (int observed = 0; observed < 2; observed++)
        b.prefill_kb[observed] = prefill_growth_kb(m, b.prefill_tokens, o->kv_type, observed, o->window, o->sinks,
                                                   &progress);
    progress_end(&progress);
    RunState s;
    Derived d = { 0 };
    int *tokens = malloc((size_t)b.ctx * sizeof(int));
    if (!tokens || run_state_init_window(&s, c, b.ctx, (KVType)o->kv_type, o->window, o->sinks)) {
        free(tokens);
        snprintf(err, err_len, "out of memory for the benchmark");
        return -1;
    }
    fill_tokens(tokens, b.ctx, c->vocab_size);
    MeasureRun run = { &b, &s, tokens };
    int rc = team_main(o->threads, measure_on_team, &run) || derive(&b, &d) ? -1 : 0;
    if (rc) snprintf(err, err_len, "out of memory for the benchmark");
    b.peak_rss = peak_resident_bytes();
    run_state_free(&s);
    if (!rc) {
        probe_roofline(&b);
        find_crossover(&b, &d);
        print_report(&b);
        rc = write_outputs(&b, &d, err, err_len);
    }
    free(d.block);
    curve_free(&b.cached);
    curve_free(&b.recomputed);
    curve_free(&b.full);
    free(tokens);
    return rc;
}
