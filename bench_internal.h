/* bench_internal.h — what bench.c (measuring), bench_report.c (the text
 * report, the CSV) and bench_svg.c (the chart, and the series it derives
 * from the curve) share. */
#ifndef QKV_BENCH_INTERNAL_H
#define QKV_BENCH_INTERNAL_H

#include <stdio.h>

#include "bench.h"
#include "roofline.h"

/* The FLOP rate that predicts the slope is measured where attention is
 * negligible: over the first SMALL_CONTEXT positions. */
#define SMALL_CONTEXT 32
/* Prompt lengths of the prefill-vs-decode table (capped by the context). */
#define N_PREFILL_LENGTHS 3 /* bench.c's PREFILL_LENGTHS: 16, 64, 256 */
/* Powers of two up to QKV_MAX_SEQ_LEN, plus the last position. */
#define MAX_LOG_POSITIONS 24
/* Decoding each of 16k positions takes many minutes, and the curve is
 * smooth: every position up to DENSE_POSITIONS is timed, then
 * STEPS_PER_DOUBLING log-spaced ones per doubling (DENSE_POSITIONS *
 * 2^(k/STEPS_PER_DOUBLING)) and the last, each after a prefill (untimed)
 * fills the cache up to it and WARM_STEPS (bench.c) untimed steps. A
 * window's steps cost the same past W, so with --window every position is
 * timed (and its memory sampled once a context). */
#define DENSE_POSITIONS 2048
#define STEPS_PER_DOUBLING 8

/* A curve: median latency at a list of positions. */
typedef struct {
    int n;
    int *positions;       /* [n], 1-based, ascending */
    double *total_ms;     /* [n] median over repeats */
    double *attention_ms; /* [n] median over repeats */
    double *other_fastest_ms; /* [n] the least over repeats of a step's time
                                 but attention's */
    double spread;        /* median over positions of (max - min) / median of
                             the total: how noisy the machine was */
    size_t *rss;          /* resident bytes at positions rss_every, 2*rss_every, ...
                             (first run), or NULL */
    int rss_every;
} Curve;

typedef struct {
    double intercept, slope; /* y = intercept + slope * x */
} LineFit;

/* Decode steps at one position, each followed by two plain reads of the
 * bytes one part of it streams (bench.c: measure_paired): a neighbour that
 * slows the machine for a while slows the three alike, so their ratios
 * hold where a probe taken at another moment does not. Medians over the
 * pairs. */
#define PAIRED_STEPS 64
typedef struct {
    int position;
    size_t bytes;           /* the part's bytes a step streams */
    double step_ms;         /* the step's time for the part: all but attention (weights), attention (KV) */
    double one_pass_ms;     /* the part's buffers read in one pass in memory order, no meetings (the probe's read) */
    double in_order_ms;     /* read in the step's order, the threads meeting where the step's do */
    double one_pass_share;  /* median of one_pass / step: the share of the plain read the step reaches */
    double in_order_share;  /* median of in_order / step */
} Paired;

typedef struct {
    const Model *model;
    const BenchOptions *options;
    int ctx;                 /* positions measured: 1..ctx */
    int repeats;
    Curve cached;            /* positions 1..ctx with the KV cache (past 2048 log-spaced, but
                                every one with a window) */
    Curve recomputed;        /* prefix recomputed: the log positions with
                                --no-cache, else only the prefill lengths */
    Curve full;              /* with --window: the full cache over 1..min(ctx, seq_len), beside it */
    int fit_from, fit_count; /* the fits are over the fit_count positions measured in fit_from..ctx */
    LineFit total_fit;       /* cached total_ms against position */
    LineFit attention_fit;   /* cached attention_ms against position */
    double small_flop_rate;  /* FLOP/s over the first SMALL_CONTEXT positions */
    Roofline roofline;       /* what the machine can do at most */
    size_t peak_rss;         /* peak resident bytes of the measuring, before the probes' buffer */
    double crossover;        /* the position where attention takes as long as the rest of the step
                                (its share's running median reaches 50%), or 0 if not within 1..ctx */
    double last_attention_ms, last_share; /* attention at ctx (running median) and its share of the step */
    Roofline kv_roofline;    /* the read bandwidth over the bytes a step streams at ctx: the weights,
                                then the keys and values (each pass pushes the other's out of the
                                caches, as a decode step does), attention's yardstick */
    Roofline kv_alone_roofline; /* over the keys and values alone, each pass after one over the
                                weights' bytes (untimed), as in a decode step: read again and
                                again with nothing between, a cache as large as they keep them */
    Paired paired[2];        /* decode steps each followed by plain reads of their weights (at the
                                last of the small contexts), of their keys and values (at ctx) */
    InOrderRead in_order;    /* the step's own bytes at ctx (its weights, then its keys and values,
                                layer by layer) read in its order with no arithmetic */
    int prefill_tokens;      /* the prompt whose memory is measured: 8192 tokens, or ctx if shorter */
    long prefill_kb[2];      /* its peak resident growth in kB: tiled (no observer), observed; -1 unknown */
    Team *team;              /* the threads the timed steps run on, as generate's (team.h) */
} Bench;

/* A vertical line at a position across a panel: the crossover, measured
 * (solid) or predicted from bytes (dashed). */
typedef struct {
    double x;
    const char *label;
    int dashed;
} Marker;

/* Per-position series of the cached curve derived for the chart: the raw
 * ones and their running medians. */
typedef struct {
    double *block;                         /* one allocation for all below */
    double *other_ms, *time_share, *flop_share; /* shares in percent */
    double *total_smooth, *attention_smooth, *other_smooth, *share_smooth;
    double *full_smooth;                   /* the full cache beside a window */
    Marker crossover[2];                   /* measured, predicted from bytes */
    char labels[2][48];
} Derived;

/* bench.c */
/* What a decode step reads with n_keys keys in the cache, in its order, as
 * read phases (roofline.h): per layer wq, wk and wv (one product), the
 * attention's keys and values, wo, w1 and w3, w2; then the classifier (the
 * norms' and biases' few KiB left out). The spans in *spans; free both.
 * NULL when out of memory. */
ReadPhase *bench_step_reads(const Model *m, const KVCache *kv, int n_keys, ReadSpan **spans, int *n_phases);
/* One phase of the bytes of phases' part (0 the weights, 1 the keys and
 * values), each byte once however often the step reads it (a kv head's
 * rows, once for each of its query heads), in memory order, spans that
 * meet or overlap joined (out: room for every span of phases): the probe's
 * one pass over the step's own buffers, no requests ahead */
ReadPhase bench_one_pass(const ReadPhase *phases, int n_phases, int part, ReadSpan *out);
double median(double *v, int n); /* sorts v */
double attention_flops(const Bench *b, int position);
int curve_find(const Curve *c, int position);     /* its index, or -1 when not measured */
int log_positions(int ctx, int *out);             /* out[MAX_LOG_POSITIONS]; returns how many */
int prefill_lengths(int ctx, int *out);           /* out[N_PREFILL_LENGTHS]; returns how many */
int keys_attended(const Bench *b, int position);      /* keys the step at position reads */

/* bench_report.c */
const char *base_name(const char *path);
int slope_unit(int ctx);
/* Positions a slope is fitted over at least: fewer make a noisy line
 * through two or three points (negative slopes, absurd ratios). */
#define BENCH_MIN_FIT 8
static inline int has_slope(const Bench *b) { return b->fit_count >= BENCH_MIN_FIT; }

/* The plural ending of a count the bench prints: "1 position", "2 positions". */
static inline const char *plural(long n) { return n == 1 ? "" : "s"; }
double predicted_crossover(const Bench *b, KVType type);
/* 1 when a --window of fewer keys than that position keeps attention below it */
int window_stays_below(const Bench *b, double predicted);
void print_report(const Bench *b);
void write_csv(const Bench *b, FILE *f);

/* bench_svg.c */
int derive(const Bench *b, Derived *d); /* -1 when out of memory */
void find_crossover(Bench *b, Derived *d);
int write_svg(const Bench *b, const Derived *d, FILE *f);

#endif
