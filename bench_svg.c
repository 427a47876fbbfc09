/* bench_svg.c — the bench's chart: three panels (log-log latency, linear
 * latency, attention's share) with the crossover marked, drawn by one small
 * plotting kit; and the series derived from the measured curve (running
 * medians) that the chart and the crossover use. */
#include "bench_internal.h"
#include "tokenizer.h" /* write_escaped_text */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* SVG chart: three panels sharing one small plotting kit                    */

#define SVG_WIDTH 960
#define PLOT_LEFT 90      /* room for the y tick labels and title */
#define PLOT_WIDTH 600
#define LEGEND_LEFT 715   /* the legend sits right of the plot: it never hides data */
#define PLOT_HEIGHT 240
#define PANEL_HEIGHT 330  /* plot plus title above and x axis labels below */
#define CHART_TOP 102
/* The running median's window is position/SMOOTH_DIVISOR either side. */
#define SMOOTH_DIVISOR 16

/* A data range mapped onto a pixel range, linear or logarithmic. */
typedef struct {
    double lo, hi;
    int log;
    double from, to; /* pixels of lo and hi */
} Axis;

static double axis_pixel(const Axis *a, double v) {
    double t = a->log ? log(v / a->lo) / log(a->hi / a->lo) : (v - a->lo) / (a->hi - a->lo);
    return a->from + t * (a->to - a->from);
}

/* A log axis over whole decades around [lo, hi] (lo > 0). */
static void log_range(Axis *a, double lo, double hi) {
    a->log = 1;
    a->lo = pow(10, floor(log10(lo)));
    a->hi = pow(10, ceil(log10(hi)));
    if (a->hi <= a->lo) a->hi = a->lo * 10;
}

/* A linear axis from 0 to a round number at or above hi. */
static void linear_range(Axis *a, double hi) {
    a->log = 0;
    a->lo = 0;
    double step = pow(10, floor(log10(hi > 0 ? hi : 1)));
    a->hi = ceil(hi / step * 2) * step / 2;
    if (a->hi <= 0) a->hi = 1;
}

/* The log axis of positions 1..ctx: ticks at powers of two. */
static void position_range(Axis *a, int ctx) {
    a->log = 1;
    a->lo = 1;
    a->hi = ctx > 1 ? ctx : 2;
}

/* Tick values of an axis, at most max of them. Positions (log, lo = 1)
 * tick at powers of two; other log axes at 1, 2, 5 per decade if that gives
 * few enough ticks, else at decades; linear axes at a round step. */
static int axis_ticks(const Axis *a, int powers_of_two, double *out, int max) {
    int n = 0;
    if (a->log && powers_of_two) {
        double factor = 2;
        while (log(a->hi) / log(factor) + 1 > max) factor *= factor;
        for (double v = 1; v <= a->hi * 1.0001 && n < max; v *= factor) out[n++] = v;
    } else if (a->log) {
        static const double steps[] = { 1, 2, 5 };
        int decades = (int)lround(log10(a->hi / a->lo));
        int per_decade = decades * 3 + 1 <= max ? 3 : 1;
        for (int d = 0; d <= decades; d++)
            for (int k = 0; k < per_decade; k++) {
                double v = a->lo * pow(10, d) * steps[k];
                if (v <= a->hi * 1.0001 && n < max) out[n++] = v;
            }
    } else {
        double step = pow(10, floor(log10(a->hi)));
        if (a->hi / step < 2) step /= 5;
        else if (a->hi / step < 5) step /= 2;
        for (double v = a->lo; v <= a->hi * 1.0001 && n < max; v += step) out[n++] = v;
    }
    return n;
}

/* A line on the chart: y[i] at position x[i]; points a log axis cannot show
 * (zero, negative) break the line rather than end it. A faint line is the
 * raw data under its smoothed twin, and has no legend entry of its own. */
typedef struct {
    const char *label, *color;
    int dashed, markers, faint;
    int n;
    const int *x;
    const double *y;
} Series;

/* The raw measurements along the cached curve, drawn faint. */
static Series raw_series(const Curve *c, const char *color, const double *y) {
    return (Series){ "", color, 0, 0, 1, c->n, c->positions, y };
}

/* A line with a legend entry along the cached curve (dashed for theory). */
static Series line_series(const Curve *c, const char *label, const char *color, int dashed, const double *y) {
    return (Series){ label, color, dashed, 0, 0, c->n, c->positions, y };
}

typedef struct {
    FILE *f;
    Axis x, y;
    int x_powers_of_two;
} Panel;

static void svg_text(FILE *f, double x, double y, const char *anchor, const char *extra, const char *text) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>", x, y, anchor, extra);
    write_escaped_text(f, text, (int)strlen(text), ESCAPE_XML);
    fputs("</text>\n", f);
}

static int point_visible(const Panel *p, double x, double y) {
    return isfinite(y) && (!p->y.log || y > 0) && (!p->x.log || x > 0);
}

/* The pixel row of y, held inside the plot: a spike beyond the range is cut
 * at the plot's edge. Done here rather than with an SVG clipPath, which
 * ImageMagick's renderer applies to the whole group (it drew empty plots). */
static double plot_y(const Panel *p, double y) {
    double pixel = axis_pixel(&p->y, y);
    return pixel < p->y.to ? p->y.to : pixel > p->y.from ? p->y.from : pixel;
}

static void draw_series(const Panel *p, const Series *s) {
    FILE *f = p->f;
    fprintf(f, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s d=\"", s->color,
            s->faint ? "1\" stroke-opacity=\"0.3" : "2",
            s->dashed ? " stroke-dasharray=\"6 4\"" : "");
    int pen_down = 0;
    for (int i = 0; i < s->n; i++) {
        if (!point_visible(p, s->x[i], s->y[i])) { pen_down = 0; continue; }
        fprintf(f, "%s%.1f %.1f ", pen_down ? "L" : "M", axis_pixel(&p->x, s->x[i]), plot_y(p, s->y[i]));
        pen_down = 1;
    }
    fputs("\"/>\n", f);
    for (int i = 0; s->markers && i < s->n; i++)
        if (point_visible(p, s->x[i], s->y[i]))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                    axis_pixel(&p->x, s->x[i]), axis_pixel(&p->y, s->y[i]), s->color);
}

/* Grid lines and tick labels of both axes. */
static void draw_axes(const Panel *p) {
    FILE *f = p->f;
    double ticks[40], top = p->y.to, bottom = p->y.from, left = p->x.from, right = p->x.to;
    char label[32];
    int n = axis_ticks(&p->x, p->x_powers_of_two, ticks, 14);
    for (int i = 0; i < n; i++) {
        double x = axis_pixel(&p->x, ticks[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, top, x, bottom);
        snprintf(label, sizeof label, "%g", ticks[i]);
        svg_text(f, x, bottom + 16, "middle", "", label);
    }
    n = axis_ticks(&p->y, 0, ticks, 12);
    for (int i = 0; i < n; i++) {
        double y = axis_pixel(&p->y, ticks[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", left, y, right, y);
        snprintf(label, sizeof label, "%g", ticks[i]);
        svg_text(f, left - 6, y + 4, "end", "", label);
    }
}

static void draw_legend(const Panel *p, const Series *series, int n) {
    FILE *f = p->f;
    double y = p->y.to + 14;
    for (int i = 0; i < n; i++, y += 22) {
        if (series[i].faint) { y -= 22; continue; }
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2.5\"%s/>\n",
                LEGEND_LEFT, y, LEGEND_LEFT + 28, y, series[i].color,
                series[i].dashed ? " stroke-dasharray=\"6 4\"" : "");
        if (series[i].markers)
            fprintf(f, "<circle cx=\"%d\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", LEGEND_LEFT + 14, y, series[i].color);
        svg_text(f, LEGEND_LEFT + 36, y + 4, "start", "", series[i].label);
    }
}

/* One panel at vertical offset top: title, axes, axis titles, lines, legend. */

#define COLOR_CROSSOVER "#2ca02c"

static void draw_markers(const Panel *p, const Marker *m, int n) {
    for (int i = 0; i < n; i++) {
        if (!(m[i].x >= p->x.lo && m[i].x <= p->x.hi)) continue;
        double x = axis_pixel(&p->x, m[i].x);
        fprintf(p->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.5\"%s/>\n",
                x, p->y.to, x, p->y.from, COLOR_CROSSOVER, m[i].dashed ? " stroke-dasharray=\"3 3\"" : "");
        int left = x - p->x.from > 200; /* the label beside the line, inside the plot */
        /* a white outline under the letters: a curve through the label leaves it readable */
        svg_text(p->f, left ? x - 4 : x + 4, p->y.to + 14 + 14 * i, left ? "end" : "start",
                 " fill=\"" COLOR_CROSSOVER "\" stroke=\"white\" stroke-width=\"4\" stroke-linejoin=\"round\""
                 " paint-order=\"stroke\"",
                 m[i].label);
    }
}

static void draw_panel(FILE *f, int top, Axis x, Axis y, const char *title, const char *x_title,
                       const char *y_title, const Series *series, int n_series, const Marker *markers,
                       int n_markers) {
    Panel p = { f, x, y, x.log };
    p.x.from = PLOT_LEFT; p.x.to = PLOT_LEFT + PLOT_WIDTH;
    p.y.from = top + 30 + PLOT_HEIGHT; p.y.to = top + 30;
    svg_text(f, PLOT_LEFT, top + 18, "start", " font-size=\"14\" font-weight=\"bold\"", title);
    draw_axes(&p);
    svg_text(f, PLOT_LEFT + PLOT_WIDTH / 2.0, p.y.from + 38, "middle", "", x_title);
    char rotate[96];
    double cx = PLOT_LEFT - 62, cy = top + 30 + PLOT_HEIGHT / 2.0;
    snprintf(rotate, sizeof rotate, " transform=\"rotate(-90 %.1f %.1f)\"", cx, cy);
    svg_text(f, cx, cy, "middle", rotate, y_title);
    for (int i = 0; i < n_series; i++) draw_series(&p, &series[i]);
    draw_markers(&p, markers, n_markers);
    fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n",
            PLOT_LEFT, p.y.to, PLOT_WIDTH, PLOT_HEIGHT);
    draw_legend(&p, series, n_series);
}

static double min_positive(const double *v, int n, double current) {
    for (int i = 0; i < n; i++) if (v[i] > 0 && v[i] < current) current = v[i];
    return current;
}

static double max_of(const double *v, int n, double current) {
    for (int i = 0; i < n; i++) if (v[i] > current) current = v[i];
    return current;
}

/* Running median over positions n - n/SMOOTH_DIVISOR .. n + n/SMOOTH_DIVISOR,
 * and at least the measured position either side (the log-spaced ones are
 * 9% apart, past n/16), narrowed near the ends to stay symmetric: a window
 * that grows with the position looks the same width on a log axis, and a
 * median ignores the one-sided spikes of a shared machine. The last
 * position is its own (the median of its runs). y is along the curve c;
 * scratch holds c->n doubles. */
static void running_median(const Curve *c, const double *y, double *out, double *scratch) {
    int n = c->n;
    for (int i = 0, lo = 0, hi = 0; i < n; i++) {
        int reach = c->positions[i] / SMOOTH_DIVISOR;
        while (c->positions[lo] < c->positions[i] - reach) lo++;
        while (hi + 1 < n && c->positions[hi + 1] <= c->positions[i] + reach) hi++;
        int w = i - lo < hi - i ? i - lo : hi - i;
        if (w < 1 && i > 0 && i + 1 < n) w = 1;
        memcpy(scratch, y + i - w, (size_t)(2 * w + 1) * sizeof(double));
        out[i] = median(scratch, 2 * w + 1);
    }
}

/* The smoothed series; 0, or -1 when out of memory */
int derive(const Bench *b, Derived *d) {
    size_t n = (size_t)(b->cached.n > b->full.n ? b->cached.n : b->full.n);
    d->block = malloc(9 * n * sizeof(double));
    if (!d->block) return -1;
    d->other_ms = d->block;
    d->time_share = d->block + n;
    d->flop_share = d->block + 2 * n;
    d->total_smooth = d->block + 3 * n;
    d->attention_smooth = d->block + 4 * n;
    d->other_smooth = d->block + 5 * n;
    d->share_smooth = d->block + 6 * n;
    d->full_smooth = d->block + 8 * n;
    double *scratch = d->block + 7 * n;
    for (int i = 0; i < b->cached.n; i++) {
        double a = attention_flops(b, b->cached.positions[i]);
        d->other_ms[i] = b->cached.total_ms[i] - b->cached.attention_ms[i];
        d->time_share[i] = 100.0 * b->cached.attention_ms[i] / b->cached.total_ms[i];
        d->flop_share[i] = 100.0 * a / (a + flops_weights_per_token(&b->model->config));
    }
    running_median(&b->cached, b->cached.total_ms, d->total_smooth, scratch);
    running_median(&b->cached, b->cached.attention_ms, d->attention_smooth, scratch);
    running_median(&b->cached, d->other_ms, d->other_smooth, scratch);
    running_median(&b->cached, d->time_share, d->share_smooth, scratch);
    if (b->full.n) running_median(&b->full, b->full.total_ms, d->full_smooth, scratch);
    return 0;
}

#define COLOR_TOTAL "#1f77b4"
#define COLOR_ATTENTION "#e6750a"
#define COLOR_OTHER "#7f7f7f"
#define COLOR_NO_CACHE "#d62728"
#define COLOR_THEORY "#7b4fbf"
#define COLOR_FULL "#8c564b" /* not the crossover's green */

/* Panel A: log-log, so the linear (cached) and quadratic (recomputed) costs
 * and a thousandfold range fit in one picture. */
static void draw_loglog_panel(FILE *f, const Bench *b, const Derived *d, int top) {
    const Curve *cc = &b->cached, *rc = &b->recomputed;
    Series s[6] = { /* the sixth: the full cache beside a window */
        raw_series(cc, COLOR_TOTAL, cc->total_ms),
        raw_series(cc, COLOR_ATTENTION, cc->attention_ms),
        line_series(cc, b->options->window ? "sliding window: total" : "with KV cache: total", COLOR_TOTAL, 0,
                    d->total_smooth),
        line_series(cc, "with KV cache: attention", COLOR_ATTENTION, 0, d->attention_smooth),
        { "no cache: recompute prefix", COLOR_NO_CACHE, 0, 1, 0, rc->n, rc->positions, rc->total_ms },
    };
    int n = b->options->no_cache ? 5 : 4;
    if (b->options->window) s[n++] = line_series(&b->full, "full cache (its context)", COLOR_FULL, 1, d->full_smooth);
    double lo = HUGE_VAL, hi = 0;
    for (int i = 0; i < n; i++) {
        lo = min_positive(s[i].y, s[i].n, lo);
        hi = max_of(s[i].y, s[i].n, hi);
    }
    Axis x, y;
    position_range(&x, b->ctx);
    log_range(&y, lo, hi);
    char keys[64] = "position n of the new token (it attends to n keys)";
    if (b->options->window)
        snprintf(keys, sizeof keys, "position n of the new token (it attends to min(n, %d) keys)", b->options->window);
    draw_panel(f, top, x, y, "A. Time for one new token against context (log-log)", keys, "ms per token", s, n,
               d->crossover, 2);
}

/* Panel B: linear axes, where "linear in context" is a straight line. The
 * y range follows the smoothed lines; spikes of the raw ones are clipped. */
static void draw_linear_panel(FILE *f, const Bench *b, const Derived *d, int top) {
    const Curve *cc = &b->cached;
    int fit_x[2] = { b->fit_from, b->ctx };
    double fit_y[2] = { b->total_fit.intercept + b->total_fit.slope * b->fit_from,
                        b->total_fit.intercept + b->total_fit.slope * b->ctx };
    char title[128], spread[32] = "one run";
    int unit = slope_unit(b->ctx);
    if (b->repeats > 1) snprintf(spread, sizeof spread, "spread %.0f%%", 100 * b->cached.spread);
    if (has_slope(b))
        snprintf(title, sizeof title, "B. With the KV cache, linear axes: %.3g ms more per %d token%s of context (%s)",
                 b->total_fit.slope * unit, unit, plural(unit), spread);
    else snprintf(title, sizeof title, "B. With the KV cache, linear axes (too few positions for a slope)");
    Series s[8] = {
        raw_series(cc, COLOR_TOTAL, cc->total_ms),
        raw_series(cc, COLOR_OTHER, d->other_ms),
        raw_series(cc, COLOR_ATTENTION, cc->attention_ms),
        line_series(cc, "total", COLOR_TOTAL, 0, d->total_smooth),
        line_series(cc, "other (weights, MLP, ...)", COLOR_OTHER, 0, d->other_smooth),
        line_series(cc, "attention", COLOR_ATTENTION, 0, d->attention_smooth),
        { "least-squares line", "#000", 1, 0, 0, 2, fit_x, fit_y },
        line_series(&b->full, "full cache (its context)", COLOR_FULL, 1, d->full_smooth),
    };
    int n_series = b->options->window ? 8 : 7;
    if (!has_slope(b)) s[6] = s[7], n_series--; /* no line through too few points */
    Axis x, y;
    linear_range(&x, b->ctx);
    x.hi = b->ctx; /* the data ends at ctx: no empty margin on the right */
    linear_range(&y, 1.25 * max_of(d->total_smooth, cc->n, has_slope(b) ? max_of(fit_y, 2, 0) : 0));
    draw_panel(f, top, x, y, title, "position n of the new token", "ms per token", s, n_series, d->crossover, 2);
}

/* Panel C: attention's share of the step, measured time against FLOPs. */
static void draw_share_panel(FILE *f, const Bench *b, const Derived *d, int top) {
    const Curve *cc = &b->cached;
    Series s[3] = {
        raw_series(cc, COLOR_ATTENTION, d->time_share),
        line_series(cc, "share of time (measured)", COLOR_ATTENTION, 0, d->share_smooth),
        line_series(cc, "share of FLOPs (theory)", COLOR_THEORY, 1, d->flop_share),
    };
    Axis x, y;
    position_range(&x, b->ctx);
    linear_range(&y, 1.1 * max_of(d->share_smooth, cc->n, max_of(d->flop_share, cc->n, 1)));
    if (y.hi > 100) y.hi = 100;
    draw_panel(f, top, x, y, "C. Attention's share of each token, with the KV cache",
               "position n of the new token", "attention, % of the token", s, 3, d->crossover, 2);
}

/* The measured crossover: the first position where attention's share of
 * the step (its running median) reaches one half, interpolated between it
 * and the position before. A share, not two times: both parts of a step
 * share whatever else the machine was doing meanwhile, so a busy machine
 * slows them alike and the share holds. Also the chart's two markers. */
void find_crossover(Bench *b, Derived *d) {
    const Curve *c = &b->cached;
    int i = 0;
    while (i < c->n && d->share_smooth[i] < 50) i++;
    b->crossover = 0;
    if (i == 0) b->crossover = c->positions[0];
    else if (i < c->n) {
        double below = 50 - d->share_smooth[i - 1], above = d->share_smooth[i] - 50;
        b->crossover = c->positions[i - 1] + (c->positions[i] - c->positions[i - 1]) * below / (below + above);
    }
    b->last_attention_ms = d->attention_smooth[c->n - 1];
    b->last_share = d->share_smooth[c->n - 1];
    double predicted = predicted_crossover(b, (KVType)b->options->kv_type);
    snprintf(d->labels[0], sizeof d->labels[0], "crossover, measured: %.0f", b->crossover);
    snprintf(d->labels[1], sizeof d->labels[1], "predicted from bytes: %.0f", predicted);
    d->crossover[0] = (Marker){ b->crossover > 0 ? b->crossover : NAN, d->labels[0], 0 };
    d->crossover[1] = (Marker){ window_stays_below(b, predicted) ? NAN : predicted, d->labels[1], 1 };
}

int write_svg(const Bench *b, const Derived *dp, FILE *f) {
    const Config *c = &b->model->config;
    Derived d = *dp;
    int height = CHART_TOP + 3 * PANEL_HEIGHT;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\""
               " font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
               SVG_WIDTH, height, SVG_WIDTH, height);
    char line[512];
    snprintf(line, sizeof line, "qkv: per-token latency against context, %s", base_name(b->options->model_path));
    svg_text(f, PLOT_LEFT, 28, "start", " font-size=\"17\" font-weight=\"bold\"", line);
    snprintf(line, sizeof line, "dim %d, %d layer%s, %d head%s (%d kv), vocab %d; %d thread%s; median of %d run%s",
             c->dim, c->n_layers, plural(c->n_layers), c->n_heads, plural(c->n_heads), c->n_kv_heads,
             c->vocab_size, b->options->threads, plural(b->options->threads), b->repeats,
             plural(b->repeats));
    svg_text(f, PLOT_LEFT, 48, "start", " fill=\"#555\"", line);
    snprintf(line, sizeof line, "faint lines: each position; bold: running median over positions n \u00b1 n/%d"
             " (at least the neighbours)", SMOOTH_DIVISOR);
    svg_text(f, PLOT_LEFT, 66, "start", " fill=\"#555\"", line);
    double predicted = predicted_crossover(b, (KVType)b->options->kv_type);
    char prediction[96];
    if (window_stays_below(b, predicted))
        snprintf(prediction, sizeof prediction, "predicted never to cross: the window reads at most %d key%s",
                 b->options->window, plural(b->options->window));
    else snprintf(prediction, sizeof prediction, "predicted from bytes: %.0f", predicted);
    if (b->crossover > 0)
        snprintf(line, sizeof line, "%s KV cache: attention takes as long as the rest of the step at n = %.0f"
                 " (%s)", kv_type_name((KVType)b->options->kv_type), b->crossover, prediction);
    else
        snprintf(line, sizeof line, "%s KV cache: attention stays below the rest of the step up to n = %d"
                 " (%s)", kv_type_name((KVType)b->options->kv_type), b->ctx, prediction);
    svg_text(f, PLOT_LEFT, 84, "start", " fill=\"" COLOR_CROSSOVER "\"", line);
    draw_loglog_panel(f, b, &d, CHART_TOP);
    draw_linear_panel(f, b, &d, CHART_TOP + PANEL_HEIGHT);
    draw_share_panel(f, b, &d, CHART_TOP + 2 * PANEL_HEIGHT);
    fputs("</svg>\n", f);
    return 0;
}

