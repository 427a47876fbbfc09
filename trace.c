/* trace.c — watching the real forward pass (see trace.h).
 *
 * How it works: the tracer is a ForwardObserver. After each layer's attention,
 * forward() calls capture_attention(), which copies the raw scores and the
 * softmax weights of every head out of the run state. When the step's logits
 * are known, run.c calls tracer_step(), which freezes the capture into a Step
 * and writes it out: a JSON line at once, a text block (prompt rows wait for
 * the end of the prompt, so they can show later prompt keys as masked), and,
 * for the HTML page, the Step stays in memory until tracer_close().
 * JSON and the HTML page are written by trace_json.c; the terminal's keys
 * for step mode are read by stepper.c.
 *
 * Nothing here computes attention: every number is the one forward() used.
 * The --compare model runs through the same forward() with the same observer.
 */
#include "trace.h"
#include "stepper.h"
#include "trace_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define CELL_WIDTH 8         /* characters per key column */
#define ROW_LABEL_WIDTH 10   /* "  q·k/√d  " */
#define FILE_WIDTH (ROW_LABEL_WIDTH + 12 * CELL_WIDTH) /* a file: 12 keys a block, 106 columns */
#define MIN_KEYS_PER_BLOCK 4
#define LABEL_CHARS 7        /* a key's token text is cut to this many characters */
#define LABEL_BYTES 64       /* room for an escaped, cut label */
#define TOP_ATTENDED 3       /* most attended keys listed under each head */

/* ------------------------------------------------------------------------ */
/* Capture                                                                   */

int capture_init(Capture *cap, const Config *c) {
    size_t n = (size_t)c->n_layers * c->n_heads * c->seq_len;
    cap->n_layers = c->n_layers;
    cap->n_heads = c->n_heads;
    cap->seq_len = c->seq_len;
    cap->n_visible = 0;
    cap->scores = calloc(n, sizeof(float));
    cap->weights = calloc(n, sizeof(float));
    return cap->scores && cap->weights ? 0 : -1;
}

void capture_free(Capture *cap) {
    free(cap->scores);
    free(cap->weights);
    cap->scores = cap->weights = NULL;
}

/* The ForwardObserver callback: row h of the run state is at h*capacity,
 * by cache slot; the capture keeps the keys in order of position. */
void capture_attention(void *ctx, int layer, int pos, int n_visible, const RunState *s) {
    Capture *cap = ctx;
    const KVCache *kv = &s->kv_cache;
    for (int h = 0; h < cap->n_heads; h++) {
        const float *scores = s->attention_scores + (size_t)h * kv->capacity;
        const float *weights = s->attention_weights + (size_t)h * kv->capacity;
        size_t to = ((size_t)layer * cap->n_heads + h) * cap->seq_len;
        for (int i = 0; i < n_visible; i++) {
            int slot = kv_slot(kv, kv_view_position(kv, pos, i));
            cap->scores[to + i] = scores[slot];
            cap->weights[to + i] = weights[slot];
        }
    }
    cap->n_visible = n_visible;
    cap->sinks = kv->sinks < n_visible ? kv->sinks : n_visible;
    cap->window_start = pos + 1 - (n_visible - cap->sinks); /* kv_window_start, or sinks while none is evicted */
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                     */

const float *step_scores(const Step *st, const Capture *cap, int layer, int head) {
    return st->attention + ((size_t)layer * cap->n_heads + head) * st->n_visible;
}

const float *step_weights(const Step *st, const Capture *cap, int layer, int head) {
    return step_scores(st, cap, layer, head) + (size_t)cap->n_layers * cap->n_heads * st->n_visible;
}

int step_key_position(const Step *st, int i) { return i < st->sinks ? i : st->window_start + i - st->sinks; }

double step_sink_share(const Step *st, const Capture *cap, int layer, int head) {
    const float *w = step_weights(st, cap, layer, head);
    double share = 0;
    for (int i = 0; i < st->sinks; i++) share += w[i];
    return share;
}

/* The n largest logits, largest first, with their probabilities at
 * temperature 1 and at the sampling temperature (greedy, temperature 0,
 * keeps those of 1). probs is [vocab] scratch for model.h's softmax, the one
 * sample() uses. */
static void top_candidates(Candidate *top, int n, const float *logits, int vocab, float temperature,
                           float *probs) {
    int count = 0;
    for (int i = 0; i < vocab; i++) {
        if (count == n && logits[i] <= top[n - 1].logit) continue;
        int j = count < n ? count++ : n - 1; /* insertion into the kept n, in order */
        while (j > 0 && top[j - 1].logit < logits[i]) { top[j] = top[j - 1]; j--; }
        top[j] = (Candidate){ i, logits[i], 0.0f, 0.0f };
    }
    memcpy(probs, logits, (size_t)vocab * sizeof(float));
    softmax(probs, vocab);
    for (int j = 0; j < n; j++) top[j].prob = top[j].prob_t = probs[top[j].id];
    if (temperature > 0.0f && temperature != 1.0f) {
        for (int i = 0; i < vocab; i++) probs[i] = logits[i] / temperature;
        softmax(probs, vocab);
        for (int j = 0; j < n; j++) top[j].prob_t = probs[top[j].id];
    }
}

/* Freezes the capture and the logits into a new step of rec. */
Step *record_step(Recording *rec, const Capture *cap, int pos, int token, const float *logits,
                         int vocab, int n_top, float temperature, float *probs) {
    if (rec->n == rec->cap) {
        int cap_steps = rec->cap ? 2 * rec->cap : 64;
        Step *grown = realloc(rec->steps, (size_t)cap_steps * sizeof(Step));
        if (!grown) return NULL;
        rec->steps = grown;
        rec->cap = cap_steps;
    }
    Step *st = &rec->steps[rec->n];
    memset(st, 0, sizeof *st);
    st->pos = pos;
    st->token = token;
    st->n_visible = cap->n_visible;
    st->sinks = cap->sinks;
    st->window_start = cap->window_start;
    if (n_top > vocab) n_top = vocab;
    size_t per_head = (size_t)cap->n_layers * cap->n_heads * st->n_visible;
    st->attention = malloc(2 * per_head * sizeof(float));
    st->top = malloc((size_t)n_top * sizeof(Candidate));
    if (!st->attention || !st->top) {
        free(st->attention);
        free(st->top);
        return NULL;
    }
    for (int l = 0; l < cap->n_layers; l++)
        for (int h = 0; h < cap->n_heads; h++) {
            size_t from = ((size_t)l * cap->n_heads + h) * cap->seq_len;
            size_t to = ((size_t)l * cap->n_heads + h) * st->n_visible;
            memcpy(st->attention + to, cap->scores + from, (size_t)st->n_visible * sizeof(float));
            memcpy(st->attention + per_head + to, cap->weights + from, (size_t)st->n_visible * sizeof(float));
        }
    st->n_top = n_top;
    top_candidates(st->top, n_top, logits, vocab, temperature, probs);
    rec->n++;
    return st;
}

static void step_release(Step *st) {
    free(st->attention);
    free(st->top);
    st->attention = NULL;
    st->top = NULL;
}

void recording_free(Recording *rec) {
    for (int i = 0; i < rec->n; i++) step_release(&rec->steps[i]);
    free(rec->steps);
    memset(rec, 0, sizeof *rec);
}

/* Colour only for a terminal, and never when NO_COLOR is set (no-color.org). */
static int wants_colour(FILE *f) {
    const char *no_colour = getenv("NO_COLOR");
    return isatty(fileno(f)) && !(no_colour && no_colour[0]);
}

/* Characters per line: a terminal's width (its size, else COLUMNS, else 80);
 * a file or a pipe keeps FILE_WIDTH, so its lines do not depend on where it
 * was made. */
static int output_width(FILE *f) {
    if (!isatty(fileno(f))) return FILE_WIDTH;
    struct winsize ws;
    if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *columns = getenv("COLUMNS");
    int n = columns ? atoi(columns) : 0;
    return n > 0 ? n : 80;
}

/* A terminal's rows (0 for a file or a pipe, or when it does not say) */
static int output_rows(FILE *f) {
    struct winsize ws;
    if (!isatty(fileno(f)) || ioctl(fileno(f), TIOCGWINSZ, &ws) != 0) return 0;
    return ws.ws_row;
}

int trace_level_parse(const char *name) {
    if (!strcmp(name, "full")) return TRACE_FULL;
    if (!strcmp(name, "summary")) return TRACE_SUMMARY;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Token text, made safe to print                                            */

/* A small bounded string: appends past the capacity are cut, never overrun. */
typedef struct {
    char *buf;
    size_t cap, len;
} Text;

static void text_put(Text *t, const char *s, size_t n) {
    if (t->len + 1 >= t->cap) return;
    if (n > t->cap - 1 - t->len) n = t->cap - 1 - t->len;
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

static void text_puts(Text *t, const char *s) { text_put(t, s, strlen(s)); }

/* Characters on screen: UTF-8 continuation bytes take no column of their own. */
static int display_width(const char *s) {
    int w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

/* A piece as printable text (tokenizer.h's piece_escape: \n \t \r \\, \xNN
 * for control bytes and bytes that are not UTF-8, \u00NN for C1 controls),
 * so a token can never move the cursor or colour the terminal; with quoted,
 * " becomes \" too. It leaves reserve bytes of out free and stops before a
 * character or escape that would not fit; returns whether all of it did. */
static int escape_piece(Text *out, const char *piece, int len, int quoted, size_t reserve) {
    size_t room = out->cap - out->len;
    if (room <= reserve) return len == 0;
    int done = piece_escape(out->buf + out->len, room - reserve, piece, len, quoted);
    out->len += strlen(out->buf + out->len);
    return done == len;
}

/* A key's column label: the piece without its leading space (every word
 * has one), other spaces as ␣, cut to LABEL_CHARS with an ellipsis. */
static void key_label(char *label, const Tokenizer *t, int token) {
    const char *piece = t->vocab[token];
    int len = t->piece_lengths[token];
    if (len > 1 && piece[0] == ' ') { piece++; len--; }
    char escaped[LABEL_BYTES * 2];
    Text e = { escaped, sizeof escaped, 0 };
    escaped[0] = '\0';
    escape_piece(&e, piece, len, 0, 0);
    Text out = { label, LABEL_BYTES, 0 };
    label[0] = '\0';
    int chars = 0, total = display_width(escaped);
    for (const char *p = escaped; *p; ) {
        int n = 1;
        while ((p[n] & 0xC0) == 0x80) n++;
        if (chars == LABEL_CHARS - 1 && total > LABEL_CHARS) { text_puts(&out, "…"); break; }
        if (*p == ' ') text_puts(&out, "␣");
        else text_put(&out, p, (size_t)n);
        chars++;
        p += n;
    }
}

/* ------------------------------------------------------------------------ */
/* Text trace: one head's row                                                */

/* Right-aligns text in a cell of width characters. */
static void put_cell(FILE *out, const char *text, int width) {
    for (int pad = width - display_width(text); pad > 0; pad--) fputc(' ', out);
    fputs(text, out);
}

static void put_row_label(FILE *out, const char *label) {
    fputs("  ", out);
    fputs(label, out);
    for (int pad = ROW_LABEL_WIDTH - 2 - display_width(label); pad > 0; pad--) fputc(' ', out);
}

/* ANSI 256-colour backgrounds from dark (weight 0) to bright (weight 1). */
static const unsigned char HEAT_RAMP[] = { 236, 237, 238, 239, 52, 88, 124, 160, 196, 202, 208, 214, 220, 226 };
#define HEAT_STEPS ((int)(sizeof HEAT_RAMP / sizeof HEAT_RAMP[0]))

static void put_heat_cell(FILE *out, const char *text, float weight) {
    int i = (int)(weight * (HEAT_STEPS - 1) + 0.5f);
    if (i < 0) i = 0;
    if (i >= HEAT_STEPS) i = HEAT_STEPS - 1;
    int foreground = i >= HEAT_STEPS / 2 ? 16 : 255; /* black on bright, white on dark */
    fprintf(out, "\033[48;5;%dm\033[38;5;%dm", HEAT_RAMP[i], foreground);
    put_cell(out, text, CELL_WIDTH);
    fputs("\033[0m", out);
}

typedef enum { ROW_SCORES, ROW_SCALED, ROW_MASK, ROW_WEIGHTS } RowKind;

/* One line of the block for key columns first..last-1. Masked columns (keys
 * after the query) show "·" for scores: forward() never computes them. */
static void print_row_line(FILE *out, const AttentionRow *row, RowKind kind, int first, int last, int colour) {
    static const char *const names[] = { "q·k", "q·k/√d", "mask", "weight" };
    float scale = 1.0f / sqrtf((float)row->head_size); /* as attention_head() scales */
    char cell[32];
    put_row_label(out, names[kind]);
    for (int t = first; t < last; t++) {
        int visible = t < row->n_visible;
        if (!visible) snprintf(cell, sizeof cell, "%s", kind == ROW_MASK ? "-inf" : kind == ROW_WEIGHTS ? "masked" : "·");
        else if (kind == ROW_SCORES) snprintf(cell, sizeof cell, "%.2f", row->scores[t]);
        else if (kind == ROW_SCALED) snprintf(cell, sizeof cell, "%.2f", row->scores[t] * scale);
        else if (kind == ROW_MASK) snprintf(cell, sizeof cell, "0");
        else snprintf(cell, sizeof cell, "%.3f", row->weights[t]);
        if (kind == ROW_WEIGHTS && visible && colour) put_heat_cell(out, cell, row->weights[t]);
        else put_cell(out, cell, CELL_WIDTH);
    }
    fputc('\n', out);
}

static int row_position(const AttentionRow *row, int t) { return row->positions ? row->positions[t] : t; }

static void print_key_lines(FILE *out, const AttentionRow *row, int first, int last) {
    char cell[32];
    put_row_label(out, "key pos");
    for (int t = first; t < last; t++) {
        snprintf(cell, sizeof cell, "%d", row_position(row, t));
        put_cell(out, cell, CELL_WIDTH);
    }
    fputc('\n', out);
    put_row_label(out, "key");
    for (int t = first; t < last; t++) put_cell(out, row->labels[t], CELL_WIDTH);
    fputc('\n', out);
    if (!row->positions) return;
    /* with a window: the sinks, and the first recent key after an eviction */
    put_row_label(out, "cache");
    for (int t = first; t < last; t++) {
        int after_gap = t > 0 && t == row->sinks && row_position(row, t) > row_position(row, t - 1) + 1;
        int window_start = after_gap || (t == 0 && row_position(row, 0) > 0);
        if (t >= row->sinks && !window_start) break; /* nothing more to mark on this line */
        put_cell(out, t < row->sinks ? "sink" : "window>", CELL_WIDTH);
    }
    fputc('\n', out);
}

/* Items on lines of at most width characters: when the next item would not
 * fit, a new line indented by indent. An item's leading space is dropped at
 * the start of a line. */
typedef struct {
    FILE *out;
    int width, indent, column;
} Wrap;

static void wrap_put(Wrap *w, const char *item) {
    int n = display_width(item);
    if (w->column > w->indent && w->column + n > w->width) {
        fprintf(w->out, "\n%*s", w->indent, "");
        w->column = w->indent;
        if (*item == ' ') { item++; n--; }
    }
    fputs(item, w->out);
    w->column += n;
}

static void wrap_end(Wrap *w) {
    fputc('\n', w->out);
    w->column = 0;
}

/* The indices of the k largest weights, largest first (k <= n). */
static void most_attended(const float *weights, int n, int *best, int k) {
    for (int i = 0; i < k; i++) {
        best[i] = -1;
        for (int t = 0; t < n; t++) {
            int taken = 0;
            for (int j = 0; j < i; j++) taken |= best[j] == t;
            if (!taken && (best[i] < 0 || weights[t] > weights[best[i]])) best[i] = t;
        }
    }
}

/* The sum of the weights (1 up to rounding) and the keys with most weight. */
static void print_row_summary(FILE *out, const AttentionRow *row) {
    double sum = 0;
    for (int t = 0; t < row->n_visible; t++) sum += row->weights[t];
    char item[LABEL_BYTES + 64];
    Wrap w = { out, row->width ? row->width : FILE_WIDTH, 4, 0 };
    snprintf(item, sizeof item, "  sum %.6f; most attended:", sum);
    wrap_put(&w, item);
    int best[TOP_ATTENDED], n = row->n_visible < TOP_ATTENDED ? row->n_visible : TOP_ATTENDED;
    most_attended(row->weights, row->n_visible, best, n);
    double sinks = 0;
    for (int t = 0; t < row->sinks; t++) sinks += row->weights[t];
    if (row->sinks) {
        snprintf(item, sizeof item, " sinks (pos 0..%d) %.3f;", row->sinks - 1, sinks);
        wrap_put(&w, item);
    }
    for (int k = 0; k < n; k++) {
        snprintf(item, sizeof item, " %s (pos %d) %.3f%s", row->labels[best[k]], row_position(row, best[k]),
                 row->weights[best[k]],
                 k + 1 < n ? "," : "");
        wrap_put(&w, item);
    }
    wrap_end(&w);
}

/* Key columns a block holds at a line width (0: a file's) */
static int keys_per_block(int width) {
    int keys = ((width ? width : FILE_WIDTH) - ROW_LABEL_WIDTH) / CELL_WIDTH;
    return keys < MIN_KEYS_PER_BLOCK ? MIN_KEYS_PER_BLOCK : keys;
}

void trace_print_attention(FILE *out, const AttentionRow *row, int colour) {
    int keys = keys_per_block(row->width);
    for (int first = 0; first < row->n_cols; first += keys) {
        int last = first + keys < row->n_cols ? first + keys : row->n_cols;
        print_key_lines(out, row, first, last);
        print_row_line(out, row, ROW_SCORES, first, last, colour);
        print_row_line(out, row, ROW_SCALED, first, last, colour);
        print_row_line(out, row, ROW_MASK, first, last, colour);
        print_row_line(out, row, ROW_WEIGHTS, first, last, colour);
    }
    print_row_summary(out, row);
}

/* ------------------------------------------------------------------------ */
/* Text trace: one step                                                      */

static int layer_selected(const Tracer *tr, int l) { return tr->opt.layer < 0 || tr->opt.layer == l; }
static int head_selected(const Tracer *tr, int h) { return tr->opt.head < 0 || tr->opt.head == h; }

/* A whole piece, quoted and escaped, for headers and logit tables. */
static const char *quoted_piece(char *buf, size_t cap, const Tokenizer *t, int token) {
    Text out = { buf, cap, 0 };
    buf[0] = '\0';
    text_puts(&out, "\"");
    if (!escape_piece(&out, t->vocab[token], t->piece_lengths[token], 1, sizeof "…\"")) text_puts(&out, "…");
    text_puts(&out, "\"");
    return buf;
}

const char *method_name(SampleMethod m) {
    switch (m) {
    case SAMPLE_GREEDY: return "greedy";
    case SAMPLE_TEMPERATURE: return "temperature";
    case SAMPLE_TOP_P: return "top-p";
    }
    return "?";
}

/* "== pos P: input ... -> next ..., how ==", on two lines if one is wider than width */
static void print_step_header(FILE *out, int width, const Tracer *tr, const Step *st) {
    char a[256], b[256], input[300], next[340];
    snprintf(input, sizeof input, "== pos %d: input %s (id %d)", st->pos, quoted_piece(a, sizeof a, tr->tok, st->token),
             st->token);
    snprintf(next, sizeof next, "-> next %s (id %d), %s ==", quoted_piece(b, sizeof b, tr->tok, st->next), st->next,
             st->forced ? "forced by the prompt" : "sampled");
    int one_line = display_width(input) + 1 + display_width(next) <= width;
    fprintf(out, "\n%s%s%s\n", input, one_line ? " " : "\n   ", next);
}

/* What the mask did for this query, in words (lines fit 80 columns). */
static void print_mask_note(FILE *out, const Step *st, int n_cols) {
    if (st->window_start > st->sinks)
        fprintf(out, "  (sliding window: pos %d sees %s%d..%d and the window %d..%d; positions %d..%d\n"
                     "   were evicted from the KV cache: never computed, as if masked)\n",
                st->pos, st->sinks ? "the sinks " : "", 0, st->sinks - 1, st->window_start, st->pos, st->sinks,
                st->window_start - 1);
    else if (n_cols > st->n_visible)
        fprintf(out, "  (prompt row: keys %d..%d come later in the prompt; the causal mask adds -inf\n"
                     "   to their scores; their weights are 0, and forward() never computes them)\n",
                st->n_visible, n_cols - 1);
    else
        fprintf(out, "  (pos %d sees every cached key 0..%d; later positions do not exist yet,\n"
                     "   so the mask has nothing to hide)\n", st->pos, st->n_visible - 1);
}

/* Each key's column label (the tokens of the step's key positions: 0..n_cols-1
 * without a window). */
typedef struct {
    char (*text)[LABEL_BYTES];
    const char **ptrs;
    int *positions; /* [n_cols] each column's key position */
} Labels;

static int labels_make(Labels *lb, const Tracer *tr, const Step *st, int n_cols) {
    lb->text = malloc((size_t)n_cols * sizeof *lb->text);
    lb->ptrs = malloc((size_t)n_cols * sizeof *lb->ptrs);
    lb->positions = malloc((size_t)n_cols * sizeof *lb->positions);
    if (!lb->text || !lb->ptrs || !lb->positions) return -1;
    for (int t = 0; t < n_cols; t++) {
        lb->positions[t] = step_key_position(st, t);
        key_label(lb->text[t], tr->tok, tr->run.steps[lb->positions[t]].token);
        lb->ptrs[t] = lb->text[t];
    }
    return 0;
}

static void labels_free(Labels *lb) {
    free(lb->text);
    free(lb->ptrs);
    free(lb->positions);
}

/* One head's full table. */
static void print_head_table(FILE *out, int width, const Tracer *tr, const Step *st, int l, int h, int n_cols,
                             const Labels *lb, int colour) {
    const Config *c = &tr->model->config;
    fprintf(out, "layer %d head %d (kv head %d), d = %d, scale 1/√%d = %.4f\n", l, h,
            h / (c->n_heads / c->n_kv_heads), c->head_size, c->head_size, 1.0 / sqrt((double)c->head_size));
    int window = tr->opt.window > 0; /* marks the sinks and the window */
    AttentionRow row = { step_scores(st, &tr->capture, l, h), step_weights(st, &tr->capture, l, h),
                         st->n_visible, n_cols, c->head_size, lb->ptrs, width,
                         window ? lb->positions : NULL, window ? st->sinks : 0 };
    trace_print_attention(out, &row, colour);
}

/* One head on one line: its most attended keys with their weights. */
static void print_head_summary(FILE *out, int width, const Tracer *tr, const Step *st, int l, int h,
                               const Labels *lb, int mark) {
    const float *w = step_weights(st, &tr->capture, l, h);
    int best[TOP_ATTENDED], n = st->n_visible < TOP_ATTENDED ? st->n_visible : TOP_ATTENDED;
    most_attended(w, st->n_visible, best, n);
    char item[LABEL_BYTES + 32];
    Wrap wr = { out, width, 10, 0 };
    snprintf(item, sizeof item, "%s L%d H%-3d", mark ? ">" : " ", l, h);
    wrap_put(&wr, item);
    for (int k = 0; k < n; k++) {
        snprintf(item, sizeof item, "  %s@%d %.3f", lb->ptrs[best[k]], lb->positions[best[k]], w[best[k]]);
        wrap_put(&wr, item);
    }
    if (tr->opt.window && st->sinks) {
        snprintf(item, sizeof item, "  sinks %.3f", step_sink_share(st, &tr->capture, l, h));
        wrap_put(&wr, item);
    }
    wrap_end(&wr);
}

/* The top next tokens on as few lines as fit, with their probabilities:
 * at the temperature the sampler drew from (p@T) when it is not 1 (or 0),
 * the sampled token marked with a *. */
static void print_next_summary(FILE *out, int width, const Tracer *tr, const Step *st) {
    char piece[256], item[300];
    int with_t = !st->forced && tr->temperature > 0.0f && tr->temperature != 1.0f;
    Wrap wr = { out, width, 8, 0 };
    snprintf(item, sizeof item, with_t ? "  next (p@T, T = %g):" : "  next:", tr->temperature);
    wrap_put(&wr, item);
    for (int i = 0; i < st->n_top; i++) {
        const Candidate *cand = &st->top[i];
        quoted_piece(piece, sizeof piece, tr->tok, cand->id);
        snprintf(item, sizeof item, " %s%s %.3f%s", with_t && cand->id == st->next ? "*" : "", piece,
                 with_t ? cand->prob_t : cand->prob, i + 1 < st->n_top ? "," : "");
        wrap_put(&wr, item);
    }
    wrap_end(&wr);
}

static void print_top_logits(FILE *out, const Tracer *tr, const Step *st) {
    int with_t = !st->forced && tr->temperature > 0.0f && tr->temperature != 1.0f;
    char piece[256];
    fprintf(out, "top %d logits (p = softmax of the logits", st->n_top);
    if (with_t) fprintf(out, "; p@T = softmax of the logits / %g", tr->temperature);
    fprintf(out, ")\n  rank      id  %-16s %9s %9s%s\n", "token", "logit", "p", with_t ? "       p@T" : "");
    for (int i = 0; i < st->n_top; i++) {
        const Candidate *cand = &st->top[i];
        fprintf(out, "  %4d  %6d  ", i + 1, cand->id);
        quoted_piece(piece, sizeof piece, tr->tok, cand->id);
        fputs(piece, out);
        for (int pad = 16 - display_width(piece); pad > 0; pad--) fputc(' ', out);
        fprintf(out, " %9.4f %9.4f", cand->logit, cand->prob);
        if (with_t) fprintf(out, " %9.4f", cand->prob_t);
        if (cand->id == st->next) fputs(st->forced ? "  <- next (prompt)" : "  <- sampled", out);
        fputc('\n', out);
    }
}

static void print_sampling(FILE *out, const Tracer *tr, const Step *st) {
    char piece[256];
    quoted_piece(piece, sizeof piece, tr->tok, st->next);
    if (st->forced) {
        fprintf(out, "next %s (id %d) is the prompt's next token\n  (teacher forcing: nothing is sampled)\n",
                piece, st->next);
        return;
    }
    const SampleInfo *in = &st->info;
    switch (in->method) {
    case SAMPLE_GREEDY:
        fprintf(out, "sampled %s (id %d): greedy (-t 0), the largest logit\n", piece, st->next);
        break;
    case SAMPLE_TEMPERATURE:
        fprintf(out, "sampled %s (id %d): temperature %g over all %d tokens;\n  coin %.4f fell on it "
                     "in the cumulative distribution; p@T = %.4f\n",
                piece, st->next, tr->temperature, in->n_candidates, in->coin, in->probability);
        break;
    case SAMPLE_TOP_P:
        fprintf(out, "sampled %s (id %d): temperature %g", piece, st->next, tr->temperature);
        if (tr->topk > 0) fprintf(out, ", top-k %d", tr->topk);
        if (tr->topp > 0.0f && tr->topp < 1.0f) fprintf(out, ", top-p %g", tr->topp);
        fprintf(out, ":\n  %d candidate%s kept after the cutoff; coin %.4f (scaled by their mass)\n"
                     "  fell on it; p@T = %.4f\n", in->n_candidates, in->n_candidates == 1 ? "" : "s", in->coin,
                in->probability);
        break;
    }
}

/* One step of the text trace: every selected head as a table (full) or as
 * one line (summary), then the next tokens and how the next was chosen. */
static int print_step_text(Tracer *tr, const Step *st, int n_cols) {
    FILE *out = tr->text;
    const Config *c = &tr->model->config;
    Labels lb;
    int rc = labels_make(&lb, tr, st, n_cols);
    if (rc == 0) {
        print_step_header(out, tr->width, tr, st);
        for (int l = 0; l < c->n_layers; l++)
            for (int h = 0; h < c->n_heads; h++) {
                if (!layer_selected(tr, l) || !head_selected(tr, h)) continue;
                if (tr->level == TRACE_FULL) print_head_table(out, tr->width, tr, st, l, h, n_cols, &lb, tr->colour);
                else print_head_summary(out, tr->width, tr, st, l, h, &lb, 0);
            }
        if (tr->level == TRACE_FULL) {
            print_mask_note(out, st, n_cols);
            print_top_logits(out, tr, st);
        } else print_next_summary(out, tr->width, tr, st);
        print_sampling(out, tr, st);
    }
    labels_free(&lb);
    return rc;
}

/* --pos A-B */
static int pos_selected(const Tracer *tr, int pos) { return pos >= tr->opt.pos[0] && pos <= tr->opt.pos[1]; }

/* Writes the text blocks that can be written now. A prompt row waits for the
 * end of the prompt (the first sampled step), so its columns can run over
 * the whole prompt with the later keys masked. Forced rows are only shown
 * with --trace-prompt; the others are kept for their tokens (key labels). */
static int write_pending_text(Tracer *tr, int at_close) {
    const Step *last = &tr->run.steps[tr->run.n - 1];
    if (last->forced && !at_close) return 0;
    int n_cols_prompt = last->pos + 1;
    for (; tr->n_text_done < tr->run.n; tr->n_text_done++) {
        const Step *st = &tr->run.steps[tr->n_text_done];
        if ((st->forced && !tr->opt.trace_prompt) || !pos_selected(tr, st->pos)) continue;
        /* a prompt row's masked columns are the later prompt positions */
        if (print_step_text(tr, st, st->forced ? st->n_visible + n_cols_prompt - (st->pos + 1) : st->n_visible))
            return -1;
    }
    fflush(tr->text);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Step mode                                                                 */

/* The step view's heads, one line each (> marks the chosen one): every
 * head, unless their lines would fill more than half the terminal's rows
 * (the stories model's 36 in 24 rows pushed the chosen head's table off
 * the screen), then the chosen layer's, with a line saying so. */
static void print_step_heads(FILE *out, int width, const Tracer *tr, const Step *st, const Labels *lb) {
    const Config *c = &tr->model->config;
    int rows = output_rows(out), one_layer = rows > 0 && 2 * c->n_layers * c->n_heads > rows;
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < c->n_heads; h++)
            if (!one_layer || l == tr->focus_layer)
                print_head_summary(out, width, tr, st, l, h, lb, l == tr->focus_layer && h == tr->focus_head);
    if (one_layer)
        fprintf(out, "  (layer %d of 0..%d; j/k: other layers, a: its heads side by side)\n", tr->focus_layer,
                c->n_layers - 1);
}

/* Step mode's a: the chosen layer's heads side by side, a weights row each
 * (> marks the chosen head), in blocks of the keys that fit: how the
 * layer's heads divide the keys among them */
static void print_layer_weights(FILE *out, int width, const Tracer *tr, const Step *st, const Labels *lb,
                                int colour) {
    const Config *c = &tr->model->config;
    int n = st->n_visible, keys = keys_per_block(width), window = tr->opt.window > 0;
    AttentionRow columns = { NULL, NULL, n, n, c->head_size, lb->ptrs, width, window ? lb->positions : NULL,
                             window ? st->sinks : 0 };
    char label[16], cell[32];
    fprintf(out, "layer %d: every head's weights (a: back to head %d's table)\n", tr->focus_layer, tr->focus_head);
    for (int first = 0; first < n; first += keys) {
        int last = first + keys < n ? first + keys : n;
        print_key_lines(out, &columns, first, last);
        for (int h = 0; h < c->n_heads; h++) {
            const float *w = step_weights(st, &tr->capture, tr->focus_layer, h);
            snprintf(label, sizeof label, "%s H%d", h == tr->focus_head ? ">" : " ", h);
            put_row_label(out, label);
            for (int t = first; t < last; t++) {
                snprintf(cell, sizeof cell, "%.3f", w[t]);
                if (colour) put_heat_cell(out, cell, w[t]);
                else put_cell(out, cell, CELL_WIDTH);
            }
            fputc('\n', out);
        }
    }
}

/* "  text: …" the run's text up to the step's input, escaped, its end as
 * much as fits the width (the story so far, where stdout may be elsewhere) */
static void print_text_so_far(FILE *out, int width, const Tracer *tr, const Step *st) {
    char text[4096], piece[256];
    size_t used = 0;
    int last = (int)(st - tr->run.steps);
    for (int i = last > 64 ? last - 64 : 0; i <= last; i++) {
        int len, prev = i ? tr->run.steps[i - 1].token : -1, token = tr->run.steps[i].token;
        if (tr->tok->kind == TOKENIZER_LLAMA && (token == tr->tok->bos_id || token == tr->tok->eos_id)) continue;
        const char *p = tokenizer_decode(tr->tok, prev, token, &len);
        piece_escape(piece, sizeof piece, p, len, 0);
        size_t n = strlen(piece);
        if (used + n >= sizeof text) break;
        memcpy(text + used, piece, n + 1);
        used += n;
    }
    const char *tail = text + used;
    int room = width - (int)sizeof "  text: …", chars = 0;
    while (tail > text && chars < room) { /* back one character: its lead byte */
        do tail--; while (tail > text && ((unsigned char)*tail & 0xC0) == 0x80);
        chars++;
    }
    fprintf(out, "  text: %s%s\n", tail > text ? "…" : "", tail);
}

/* The step view: the heads (print_step_heads), the chosen head's table (or
 * its layer's weights, print_layer_weights) and what the mask did, the next tokens and how the next was
 * chosen; as wide as stderr's terminal is now (it may have been resized). */
static int print_step_view(Tracer *tr, const Step *st) {
    FILE *out = stderr;
    int width = output_width(out);
    Labels lb;
    int rc = labels_make(&lb, tr, st, st->n_visible);
    if (rc == 0) {
        print_step_header(out, width, tr, st);
        print_text_so_far(out, width, tr, st);
        print_step_heads(out, width, tr, st, &lb);
        if (tr->all_heads) print_layer_weights(out, width, tr, st, &lb, wants_colour(out));
        else print_head_table(out, width, tr, st, tr->focus_layer, tr->focus_head, st->n_visible, &lb,
                              wants_colour(out));
        print_mask_note(out, st, st->n_visible);
        print_next_summary(out, width, tr, st);
        print_sampling(out, tr, st);
    }
    labels_free(&lb);
    return rc;
}

/* Moves v by delta, around 0..n-1. */
static int wrap_index(int v, int delta, int n) { return ((v + delta) % n + n) % n; }

int tracer_pause(Tracer *tr) {
    if (!tr || !tr->opt.step || tr->run_to_end || tr->run.n == 0) return 0;
    const Config *c = &tr->model->config;
    const Step *st = &tr->run.steps[tr->run.n - 1];
    int redraw = 1;
    for (;;) {
        if (redraw && st->attention && print_step_view(tr, st)) return 1;
        fprintf(stderr, "-- [Enter] next token, [c] run to the end, [q] quit, [?] keys: ");
        fflush(stderr);
        StepKey key = keys_read(tr->raw_keys);
        fputc('\n', stderr);
        redraw = 1;
        switch (key) {
        case KEY_NEXT: return 0;
        case KEY_CONTINUE: tr->run_to_end = 1; return 0;
        case KEY_QUIT: return 1;
        case KEY_HEAD_NEXT: tr->focus_head = wrap_index(tr->focus_head, 1, c->n_heads); break;
        case KEY_HEAD_PREV: tr->focus_head = wrap_index(tr->focus_head, -1, c->n_heads); break;
        case KEY_LAYER_NEXT: tr->focus_layer = wrap_index(tr->focus_layer, 1, c->n_layers); break;
        case KEY_LAYER_PREV: tr->focus_layer = wrap_index(tr->focus_layer, -1, c->n_layers); break;
        case KEY_ALL_HEADS: tr->all_heads = !tr->all_heads; break;
        case KEY_HELP: fputs(STEP_KEYS_HELP, stderr); redraw = 0; break;
        case KEY_OTHER: fputs("  (not a key of step mode: ? lists them)\n", stderr); redraw = 0; break;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The tracer's life                                                         */

static FILE *open_output(const char *path, const char *what, char *err, size_t err_len) {
    FILE *f = fopen(path, "w");
    if (!f) snprintf(err, err_len, "cannot open %s %s: %s", what, path, strerror(errno));
    return f;
}

/* The page is written whole (whole_file.h), so a run that fails (a bad
 * --compare model, an error while generating) leaves neither a page nor an
 * empty file behind. */
static int finish_html(Tracer *tr, char *err, size_t err_len) {
    int rc = write_html(tr, err, err_len);
    return rc == 0 ? whole_file_commit(&tr->html, err, err_len) : rc;
}

static int check_selection(const char *flag, int value, int count, const char *noun, char *err, size_t err_len) {
    if (value < count) return 0;
    snprintf(err, err_len, "%s %d: the model has %d %s (0..%d)", flag, value, count, noun, count - 1);
    return -1;
}

/* The compare model must read the same token ids: same vocabulary size. */
static int load_compare(Tracer *tr, char *err, size_t err_len) {
    char why[256];
    if (model_load(&tr->compare, tr->opt.compare_path, why, sizeof why)) {
        snprintf(err, err_len, "--compare: %s", why);
        return -1;
    }
    tr->has_compare = 1;
    if (tr->compare.config.vocab_size != tr->model->config.vocab_size) {
        snprintf(err, err_len, "--compare %s: vocabulary of %d tokens, the model has %d; they must share a tokenizer",
                 tr->opt.compare_path, tr->compare.config.vocab_size, tr->model->config.vocab_size);
        return -1;
    }
    return 0;
}

static void tracer_free(Tracer *tr) {
    if (tr->raw_keys) keys_restore();
    if (tr->text && tr->text != stderr) fclose(tr->text);
    if (tr->json) fclose(tr->json);
    whole_file_abandon(&tr->html); /* still open: the page was never completed */
    if (tr->has_compare) model_free(&tr->compare);
    capture_free(&tr->capture);
    recording_free(&tr->run);
    free(tr->probs);
    free(tr);
}

int tracer_max_positions(const Tracer *tr, int steps) {
    int most = tr && tr->has_compare ? tr->compare.config.seq_len : steps;
    return steps < most ? steps : most;
}

/* What can refuse the run, checked before any output file is opened: the
 * --compare model, and --pos against the positions the run can reach (a
 * trace of nothing would pass silently) */
static int check_run(Tracer *tr, char *err, size_t err_len) {
    const TraceOptions *o = &tr->opt;
    if (o->compare_path && load_compare(tr, err, err_len)) return -1;
    int positions = tracer_max_positions(tr, o->positions);
    if (positions > 0 && o->pos[0] >= positions) {
        snprintf(err, err_len, "--pos %d: the run's positions are 0..%d (-n, the context%s)", o->pos[0],
                 positions - 1, tr->has_compare ? ", --compare's context" : "");
        return -1;
    }
    return 0;
}

static int records(const Tracer *tr) { return tr->text || tr->json || tr->html.f || tr->opt.step; }

Tracer *tracer_open(const TraceOptions *o, const Model *m, const Tokenizer *t,
                    float temperature, float topp, int topk, char *err, size_t err_len) {
    if (err_len) err[0] = '\0';
    int text = o->trace || o->trace_prompt || o->out_path;
    if (!text && !o->json_path && !o->html_path && !o->step) return NULL;
    const Config *c = &m->config;
    if ((o->layer >= 0 && check_selection("--layer", o->layer, c->n_layers, "layers", err, err_len)) ||
        (o->head >= 0 && check_selection("--head", o->head, c->n_heads, "heads", err, err_len)))
        return NULL;
    Tracer *tr = calloc(1, sizeof *tr);
    if (!tr) { snprintf(err, err_len, "out of memory for the tracer"); return NULL; }
    tr->opt = *o;
    if (tr->opt.top_logits <= 0) tr->opt.top_logits = 10;
    tr->model = m;
    tr->tok = t;
    tr->temperature = temperature;
    tr->topp = topp;
    tr->topk = topk;
    tr->focus_layer = o->layer >= 0 ? o->layer : 0;
    tr->focus_head = o->head >= 0 ? o->head : 0;
    /* step mode shows its own view on stderr: a text trace goes to a file */
    if (o->step && !o->out_path) text = 0;
    int failed = check_run(tr, err, err_len) != 0;
    if (!failed && text) tr->text = o->out_path ? open_output(o->out_path, "trace output", err, err_len) : stderr;
    failed |= !failed && text && !tr->text;
    if (!failed && o->json_path) failed |= !(tr->json = open_output(o->json_path, "trace JSON", err, err_len));
    if (!failed && o->html_path) failed |= whole_file_open(&tr->html, o->html_path, "--html", err, err_len) != 0;
    if (!failed && records(tr)) {
        tr->colour = tr->text && wants_colour(tr->text);
        tr->width = output_width(tr->text ? tr->text : stderr);
        int one_head = o->layer >= 0 && o->head >= 0;
        tr->level = o->level_name ? (TraceLevel)trace_level_parse(o->level_name)
                    : tr->text && isatty(fileno(tr->text)) && !one_head ? TRACE_SUMMARY : TRACE_FULL;
        tr->probs = malloc((size_t)c->vocab_size * sizeof(float));
        if (!tr->probs || capture_init(&tr->capture, c)) {
            snprintf(err, err_len, "out of memory for the tracer");
            failed = 1;
        }
        tr->observer = (ForwardObserver){ &tr->capture, capture_attention, NULL };
    }
    if (failed) {
        tracer_free(tr);
        return NULL;
    }
    if (o->step) tr->raw_keys = keys_raw_mode();
    return tr;
}

const ForwardObserver *tracer_observer(Tracer *tr) {
    return tr && records(tr) ? &tr->observer : NULL;
}

/* Every recorded output needs the prompt's tokens (the key labels) and the
 * JSON and HTML need its rows, so the prompt runs one position at a time.
 * That only adds the classifier of each prompt position. */
int tracer_wants_prompt(const Tracer *tr) { return tr && records(tr); }

/* Drops the attention of steps no output will read again: all of them
 * unless the HTML page is coming, except prompt rows still waiting for
 * their text block. Their tokens stay, as key labels. */
static void release_written(Tracer *tr) {
    if (tr->html.f) return;
    int done = tr->text ? tr->n_text_done : tr->run.n;
    if (tr->opt.step && done > tr->run.n - 1) done = tr->run.n - 1; /* the step view's */
    for (; tr->n_released < done; tr->n_released++) step_release(&tr->run.steps[tr->n_released]);
}

void tracer_step(Tracer *tr, int pos, int token, const float *logits, int next, const SampleInfo *info) {
    if (!tr || !records(tr) || tr->out_of_memory) return;
    const Config *c = &tr->model->config;
    Step *st = record_step(&tr->run, &tr->capture, pos, token, logits, c->vocab_size, tr->opt.top_logits,
                           tr->temperature, tr->probs);
    if (!st) {
        tr->out_of_memory = 1;
        return;
    }
    st->next = next;
    st->forced = info == NULL;
    if (info) st->info = *info;
    if (tr->json && pos_selected(tr, pos)) write_json_line(tr, st);
    if (tr->text && write_pending_text(tr, 0)) tr->out_of_memory = 1;
    release_written(tr);
}

void tracer_discard(Tracer *tr) {
    if (tr) tracer_free(tr);
}

int tracer_close(Tracer *tr, char *err, size_t err_len) {
    if (!tr) return 0;
    if (err_len) err[0] = '\0';
    int rc = 0;
    if (tr->out_of_memory) {
        snprintf(err, err_len, "out of memory while tracing at position %d", tr->run.n);
        rc = -1;
    }
    if (rc == 0 && tr->text && tr->run.n > 0 && write_pending_text(tr, 1)) {
        snprintf(err, err_len, "out of memory writing the trace");
        rc = -1;
    }
    if (rc == 0 && tr->html.f) rc = finish_html(tr, err, err_len);
    if (rc == 0 && tr->json && (fflush(tr->json) || ferror(tr->json))) {
        snprintf(err, err_len, "cannot write %s", tr->opt.json_path);
        rc = -1;
    }
    if (rc == 0 && tr->text && tr->text != stderr && (fflush(tr->text) || ferror(tr->text))) {
        snprintf(err, err_len, "cannot write %s", tr->opt.out_path);
        rc = -1;
    }
    tracer_free(tr);
    return rc;
}
