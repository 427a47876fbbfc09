/* bench_report.c — the bench's text report and its CSV: what bench.c
 * measured (bench_internal.h's Bench), printed. The chart is bench_svg.c's.
 *
 * Reading order: the header, the table at the log-spaced positions, the
 * slopes and what the FLOP count predicts, prefill against decode, the
 * roofline, the crossover, the prefill's memory, a window against the full
 * cache; then the CSV. */
#include "bench_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Text report                                                               */

static double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

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
    printf("  threads %d, median of %d run%s, positions 1..%d", b->options->threads, b->repeats,
           plural(b->repeats), b->ctx);
    if (b->cached.n < b->ctx)
        printf(" (each up to %d, then %d log-spaced a doubling: %d in all)", DENSE_POSITIONS, STEPS_PER_DOUBLING,
               b->cached.n);
    printf("\n");
    printf("  weights   %zu bytes (%.1f MiB, %zu parameters)\n", b->model->weight_bytes,
           mib(b->model->weight_bytes), b->model->n_params);
    printf("  kernel    %s (QKV_ISA caps the set, QKV_VENDOR names the maker)\n", model_kernel_name(b->model));
    int held = b->options->window ? b->options->window : b->ctx; /* a window holds W positions */
    printf("  KV cache  %s, %zu bytes per token; %zu bytes (%.1f MiB) for %d position%s\n",
           kv_type_name((KVType)b->options->kv_type), kv, kv * (size_t)held, mib((double)kv * held), held,
           plural(held));
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
               flops_weights_per_token(c) * 1e-6);
        if (b->options->no_cache && j >= 0)
            printf(" %12.3f %9.2f", b->recomputed.total_ms[j], b->recomputed.total_ms[j] / total);
        printf("\n");
    }
    if (b->repeats == 1) { /* (0%: one run has no spread) */
        printf("run-to-run spread: one run, none measured (--repeats 3 or more)\n");
        return;
    }
    printf("run-to-run spread, (max - min) / median, median over positions: %.1f%% with the cache",
           100 * b->cached.spread);
    if (b->options->no_cache) printf(", %.1f%% without", 100 * b->recomputed.spread);
    printf("\n");
}

/* Tokens of context the slope is quoted per: a power of ten within the
 * measured range, so a 256-token model is not extrapolated to 1000. */
int slope_unit(int ctx) {
    int unit = 1;
    while (unit * 10 <= ctx) unit *= 10;
    return unit;
}

/* The slope of per-token latency against context, and what the FLOP count
 * predicts it to be if attention ran at the rate the weights run at. */
static void print_slopes(const Bench *b) {
    const Config *c = &b->model->config;
    int unit = slope_unit(b->ctx);
    double predicted_flops = flops_attention_per_token(c, unit);
    double predicted_ms = b->small_flop_rate > 0 ? predicted_flops / b->small_flop_rate * 1e3 : 0;
    double last_attention_s = b->cached.attention_ms[b->cached.n - 1] * 1e-3;
    printf("\nslope (least squares over the %d position%s measured in %d..%d)\n", b->fit_count, plural(b->fit_count),
           b->fit_from, b->ctx);
    if (!has_slope(b)) {
        /* with a window the fit starts past it once --ctx does (and a
         * --ctx of 8 does when the window is under 7) */
        int W = b->options->window;
        int enough = b->fit_from > 1 || (W && W + 1 < BENCH_MIN_FIT) ? W + BENCH_MIN_FIT : BENCH_MIN_FIT;
        printf("  too few positions for a slope (at least %d: --ctx %d or more)\n", BENCH_MIN_FIT, enough);
        return;
    }
    char spread[96] = "one run: no spread measured, --repeats 3 or more to judge the slope";
    if (b->repeats > 1)
        snprintf(spread, sizeof spread, "run-to-run spread %.0f%%: trust the slope accordingly", 100 * b->cached.spread);
    const char *tokens = unit == 1 ? "token" : "tokens";
    printf("  measured: per-token latency grows %.4f ms per %d %s of context (attention alone %.4f; intercept "
           "%.3f ms; %s)\n", b->total_fit.slope * unit, unit, tokens, b->attention_fit.slope * unit,
           b->total_fit.intercept, spread);
    int W = b->options->window;
    if (W && b->fit_from > W) { /* every fitted position reads W keys: no growth to predict */
        printf("  FLOPs prediction: 0 ms per %d %s past the window (attention reads %d key%s at each)\n", unit, tokens,
               W, plural(W));
        predicted_ms = 0;
    } else
        printf("  FLOPs prediction: %.4f ms per %d %s = %.4g MFLOP of attention per %d %s"
               " / %.3g GFLOP/s (the median over positions 1..%d)\n",
               predicted_ms, unit, tokens, predicted_flops * 1e-6, unit, tokens, b->small_flop_rate * 1e-9,
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

/* GB/s of bytes in ms milliseconds */
static double gbps(size_t bytes, double ms) { return ms > 0 ? (double)bytes / (ms * 1e-3) * 1e-9 : 0; }

/* A Paired's line: what (the step's part) against the plain reads of its bytes */
static void print_paired(const Paired *p, const char *what, const char *bytes) {
    printf("  %s paired with plain reads of its %.1f MiB of %s (%d steps at position %d, each followed by a read"
           " in one pass, as the probe reads, and one in the step's order with its meetings): it streams them at"
           " %.0f%% of the first and %.0f%% of the second (medians of the pairs' ratios; %s %.1f GB/s, the reads"
           " %.1f and %.1f)\n", what, mib((double)p->bytes), bytes, PAIRED_STEPS, p->position, 100 * p->one_pass_share,
           100 * p->in_order_share, what, gbps(p->bytes, p->step_ms), gbps(p->bytes, p->one_pass_ms),
           gbps(p->bytes, p->in_order_ms));
}

static void print_roofline(const Bench *b) {
    const Roofline *r = &b->roofline;
    RooflineFigures f = roofline_figures(b);
    int small = b->ctx < SMALL_CONTEXT ? b->ctx : SMALL_CONTEXT;
    printf("\nroofline (%d thread%s; probes: one pass of %s reads over %.1f MiB, FMAs in registers)\n", r->threads,
           plural(r->threads), r->isa, mib((double)r->probe_bytes));
    printf("  machine: read bandwidth %.1f GB/s, float32 FMA peak %.1f GFLOP/s\n", r->read_gbps, r->fma_gflops);
    printf("  decode, positions 1..%d: weights stream at %.1f GB/s = %.0f%% of the read bandwidth"
           " (%zu bytes a token)\n", small, f.decode_gbps, 100 * f.decode_gbps / r->read_gbps,
           weight_bytes_per_token(b->model));
    printf("  decode's fastest of its %d step%s (the probe's figure is its fastest pass): %.1f GB/s = %.0f%%\n",
           small * b->repeats, plural(small * b->repeats), f.fastest_gbps, 100 * f.fastest_gbps / r->read_gbps);
    if (model_matrices_of(b->model, WEIGHT_F16) > 0 && r->f16_gbps > 0) /* the arithmetic's own ceiling */
        printf("  float16's conversions alone (each weight converted and multiply-added, from L1, as its kernels do):"
               " %.1f GB/s; decode streams at %.0f%% of the lesser of it and the read\n", r->f16_gbps,
               100 * f.decode_gbps / (r->f16_gbps < r->read_gbps ? r->f16_gbps : r->read_gbps));
    print_paired(&b->paired[0], "decode", "weights");
    printf("  prefill of %d token%s: %.1f GFLOP/s = %.0f%% of the FMA peak; the weights' products (all but"
           " attention) %.1f GFLOP/s = %.0f%%\n", f.prompt, plural(f.prompt), f.prefill_gflops, 100 * f.prefill_gflops / r->fma_gflops,
           f.weights_gflops, 100 * f.weights_gflops / r->fma_gflops);
    const Config *c = &b->model->config;
    double kv_bytes = (double)kv_bytes_per_position((KVType)b->options->kv_type, c->n_layers, c->n_kv_heads, c->head_size) *
                      keys_attended(b, b->ctx);
    double kv_gbps = kv_bytes / (b->last_attention_ms * 1e-3) * 1e-9;
    char runs[32] = "one run";
    if (b->repeats > 1) snprintf(runs, sizeof runs, "median of %d runs", b->repeats);
    printf("  attention at position %d: %.1f MiB of keys and values in %.3f ms (%s) = %.1f GB/s ="
           " %.0f%% of the read bandwidth over the step's bytes (weights and KV, %.1f MiB: %.1f GB/s);"
           " %.0f%% of a read over the KV bytes alone, after the weights' (%.1f GB/s)\n", b->ctx, mib(kv_bytes),
           b->last_attention_ms, runs, kv_gbps, 100 * kv_gbps / b->kv_roofline.read_gbps,
           mib((double)b->kv_roofline.probe_bytes), b->kv_roofline.read_gbps,
           100 * kv_gbps / b->kv_alone_roofline.read_gbps, b->kv_alone_roofline.read_gbps);
    print_paired(&b->paired[1], "attention", "keys and values");
    const InOrderRead *in = &b->in_order;
    if (in->passes && in->seconds[0] > 0 && in->seconds[1] > 0) {
        double weights_order = in->bytes[0] / in->seconds[0] * 1e-9, kv_order = in->bytes[1] / in->seconds[1] * 1e-9;
        printf("  the step's own bytes read in its order at position %d, no arithmetic (best of %d passes):"
               " weights %.1f GB/s, keys and values %.1f GB/s; attention reads at %.0f%% of the latter\n", b->ctx,
               in->passes, weights_order, kv_order, 100 * kv_gbps / kv_order);
    }
    printf("summary: %s %s %d thread%s: decode %.1f tok/s, %.1f GB/s (%.0f%%; fastest step %.0f%%; paired %.0f%%);"
           " prefill %d: "
           "%.1f tok/s, %.1f GFLOP/s (%.0f%%; weights %.0f%%)\n", base_name(b->options->model_path),
           weight_type_name((WeightType)b->model->config.weight_type), r->threads, plural(r->threads),
           f.decode_tok_s, f.decode_gbps, 100 * f.decode_gbps / r->read_gbps, 100 * f.fastest_gbps / r->read_gbps,
           100 * b->paired[0].one_pass_share, f.prompt, f.prefill_tok_s, f.prefill_gflops, 100 * f.prefill_gflops / r->fma_gflops,
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

/* A window of fewer keys than the predicted crossover's: attention's bytes
 * stop growing before they reach the weights' */
int window_stays_below(const Bench *b, double predicted) {
    return b->options->window && b->options->window < predicted;
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
    for (int t = 0; t < KV_TYPE_COUNT; t++) {
        double predicted = predicted_crossover(b, (KVType)t);
        char where[64];
        if (window_stays_below(b, predicted))
            snprintf(where, sizeof where, "never (%.0f, past the window's %d key%s)", predicted, b->options->window,
                     plural(b->options->window));
        else snprintf(where, sizeof where, "position %.0f", predicted);
        printf("    %-3s KV cache: %6zu bytes a position -> %s%s\n", kv_type_name((KVType)t),
               kv_bytes_per_position((KVType)t, c->n_layers, c->n_kv_heads, c->head_size), where,
               t == (int)measured ? " (the one measured)" : "");
    }
    if (b->options->window)
        printf("  (with --window %d attention reads at most %d key%s: past the window its share stops growing)\n",
               b->options->window, b->options->window, plural(b->options->window));
}

/* The prefill's memory: tiled, and with the rows of scores an observer
 * makes the engine keep (as every prefill kept them before tiling). */
static void print_prefill_memory(const Bench *b) {
    const Config *c = &b->model->config;
    int n = b->prefill_tokens, held = keys_attended(b, n); /* the cache's positions: n, or a window's W */
    double kv = (double)kv_bytes_per_position((KVType)b->options->kv_type, c->n_layers, c->n_kv_heads, c->head_size) * held;
    int rows = attention_rows_for(c->n_heads, held);
    double kept = (double)rows * c->n_heads * held * 2 * sizeof(float);
    printf("\nprefill memory, %d token%s: peak resident growth over the prefill (a child process; KV cache %.1f MiB%s)\n",
           n, plural(n), mib(kv), b->options->window ? ", the window's" : "");
    if (b->prefill_kb[0] < 0 || b->prefill_kb[1] < 0) {
        printf("  not measured (no /proc/self/clear_refs)\n");
        return;
    }
    printf("  tiled (no observer):          %8.1f MiB = the KV cache %+.1f MiB\n", b->prefill_kb[0] / 1024.0,
           b->prefill_kb[0] / 1024.0 - mib(kv));
    printf("  score rows kept (an observer): %8.1f MiB = the KV cache %+.1f MiB (%d rows x %d head%s x %d key%s,"
           " scores and weights: %.1f MiB)\n", b->prefill_kb[1] / 1024.0, b->prefill_kb[1] / 1024.0 - mib(kv), rows,
           c->n_heads, plural(c->n_heads), held, plural(held), mib(kept));
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
    printf("\nsliding window: --window %d --sinks %d (the KV cache holds %d position%s)\n", W, o->sinks, W, plural(W));
    int filled = W < b->ctx ? W : b->ctx; /* --ctx below W: the window never fills */
    printf("  median ms per token: positions 1..%d %.3f", filled, median_total(&b->cached, 1, filled, scratch));
    if (b->ctx > W) printf("; %d..%d %.3f", W + 1, b->ctx, median_total(&b->cached, W + 1, b->ctx, scratch));
    if (b->ctx > 2 * W) printf("; last %d (%d..%d) %.3f", W, b->ctx - W + 1, b->ctx,
                                median_total(&b->cached, b->ctx - W + 1, b->ctx, scratch));
    printf("\n");
    if (b->fit_from > 1 && has_slope(b))
        printf("  beyond the window (least squares over %d..%d): %.4f ms per %d token%s (flat: each token reads %d key%s)\n",
               b->fit_from, b->ctx, b->total_fit.slope * unit, unit, plural(unit), W, plural(W));
    if (full->n) {
        int tail = full->n > 16 ? 16 : full->n; /* the last 16 positions measured, or all of fewer */
        int last = full->positions[full->n - 1], from = full->positions[full->n - tail];
        printf("  full cache, no window: positions 1..%d %.3f ms median, at %d %.3f ms (median of the last %d)\n",
               last, median_total(full, 1, last, scratch), last, median_total(full, from, last, scratch), tail);
    }
    if (b->cached.rss_every <= b->ctx) { /* sampled once a context: none before the first ends */
        printf("  resident memory (MiB) at positions");
        for (int k = 0; (k + 1) * b->cached.rss_every <= b->ctx; k++) printf(" %d", (k + 1) * b->cached.rss_every);
        printf(":");
        for (int k = 0; (k + 1) * b->cached.rss_every <= b->ctx; k++) printf(" %.2f", mib((double)b->cached.rss[k]));
        printf("\n");
    }
    free(scratch);
}

void print_report(const Bench *b) {
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
/* CSV                                                                       */

/* One row per position decoded; the no-cache columns are filled at the
 * positions where the prefix was recomputed, and empty elsewhere. */
void write_csv(const Bench *b, FILE *f) {
    const Config *c = &b->model->config;
    fprintf(f, "position,total_ms,attention_ms,other_ms,attention_flops,other_flops,"
               "no_cache_ms,no_cache_attention_ms,ratio\n");
    for (int i = 0; i < b->cached.n; i++) {
        int position = b->cached.positions[i];
        int j = b->options->no_cache ? curve_find(&b->recomputed, position) : -1;
        double total = b->cached.total_ms[i], attention = b->cached.attention_ms[i];
        fprintf(f, "%d,%.6f,%.6f,%.6f,%.0f,%.0f,", position, total, attention, total - attention,
                attention_flops(b, position), flops_weights_per_token(c));
        if (j >= 0)
            fprintf(f, "%.6f,%.6f,%.4f\n", b->recomputed.total_ms[j], b->recomputed.attention_ms[j],
                    b->recomputed.total_ms[j] / total);
        else
            fprintf(f, ",,\n");
    }
}

