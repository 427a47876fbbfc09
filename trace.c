/* trace.c — watching the real forward pass (see trace.h).
 *
 * How it works: the tracer is a ForwardObserver. After each layer's attention,
 * forward() calls capture_attention(), which copies the raw scores and the
 * softmax weights of every head out of the run state. When the step's logits
 * are known, run.c calls tracer_step(), which freezes the capture into a Step
 * and writes it out: a JSON line at once, a text block (prompt rows wait for
 * the end of the prompt, so they can show later prompt keys as masked), and,
 * for the HTML page, the Step stays in memory until tracer_close().
 *
 * Nothing here computes attention: every number is the one forward() used.
 * The --compare model runs through the same forward() with the same observer.
 */
#include "trace.h"
#include "explorer_html.h" /* EXPLORER_HTML: explorer.html as a C string, made by the Makefile */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COLUMNS_PER_CHUNK 12 /* key columns per line; longer rows wrap */
#define CELL_WIDTH 8         /* characters per key column */
#define ROW_LABEL_WIDTH 10   /* "  q·k/√d  " */
#define LABEL_CHARS 7        /* a key's token text is cut to this many characters */
#define LABEL_BYTES 64       /* room for an escaped, cut label */
#define TOP_ATTENDED 3       /* most attended keys listed under each head */
#define HTML_DATA_MARKER "/*QKV_DATA*/"

/* ------------------------------------------------------------------------ */
/* What the observer captures, and what a step keeps                         */

/* The attention of the latest position, every layer and head, copied from
 * the run state right after forward() computed it. */
typedef struct {
    int n_layers, n_heads, seq_len;
    int n_visible;  /* keys 0..n_visible-1 */
    float *scores;  /* [n_layers, n_heads, seq_len] raw q·k */
    float *weights; /* [n_layers, n_heads, seq_len] softmax of the scaled scores */
} Capture;

typedef struct {
    int id;
    float logit;
    float prob;   /* softmax of the logits */
    float prob_t; /* softmax of the logits / temperature: what the sampler drew from */
} Candidate;

typedef struct {
    int pos, token, next;
    int forced;       /* next is the prompt's next token, not a sample */
    SampleInfo info;  /* how next was sampled (when not forced) */
    int n_visible;    /* keys 0..n_visible-1 */
    float *attention; /* [2, n_layers, n_heads, n_visible]: scores, then weights;
                         NULL once no output needs it */
    Candidate *top;   /* [n_top], largest logit first */
    int n_top;
} Step;

typedef struct {
    Step *steps;
    int n, cap;
} Recording;

struct Tracer {
    TraceOptions opt;
    const Model *model;
    const Tokenizer *tok;
    float temperature, topp;
    int topk;
    FILE *text;        /* text trace (stderr or --trace-out), or NULL */
    int colour;        /* ANSI heat colours in the text trace */
    FILE *json;        /* --trace-json, or NULL */
    FILE *html;        /* --html, opened early so a bad path fails early, */
    char *html_tmp;    /*   as html_path + ".part", renamed when complete: a failed run leaves no page */
    Model compare;     /* --compare, loaded early for the same reason */
    int has_compare;
    Capture capture;
    ForwardObserver observer;
    Recording run;
    int n_text_done;   /* steps whose text block is written (or skipped) */
    int n_released;    /* steps whose attention is freed (no output needs it) */
    int run_to_end;    /* step mode: the user pressed c, stop pausing */
    int out_of_memory; /* a step could not be recorded: reported at close */
    float *probs;      /* [vocab_size] scratch */
};

/* ------------------------------------------------------------------------ */
/* Capture                                                                   */

static int capture_init(Capture *cap, const Config *c) {
    size_t n = (size_t)c->n_layers * c->n_heads * c->seq_len;
    cap->n_layers = c->n_layers;
    cap->n_heads = c->n_heads;
    cap->seq_len = c->seq_len;
    cap->n_visible = 0;
    cap->scores = calloc(n, sizeof(float));
    cap->weights = calloc(n, sizeof(float));
    return cap->scores && cap->weights ? 0 : -1;
}

static void capture_free(Capture *cap) {
    free(cap->scores);
    free(cap->weights);
    cap->scores = cap->weights = NULL;
}

/* The ForwardObserver callback: row h of the run state is at h*capacity. */
static void capture_attention(void *ctx, int layer, int pos, int n_visible, const RunState *s) {
    Capture *cap = ctx;
    (void)pos;
    for (int h = 0; h < cap->n_heads; h++) {
        size_t from = (size_t)h * s->kv_cache.capacity;
        size_t to = ((size_t)layer * cap->n_heads + h) * cap->seq_len;
        memcpy(cap->scores + to, s->attention_scores + from, (size_t)n_visible * sizeof(float));
        memcpy(cap->weights + to, s->attention_weights + from, (size_t)n_visible * sizeof(float));
    }
    cap->n_visible = n_visible;
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                     */

static const float *step_scores(const Step *st, const Capture *cap, int layer, int head) {
    return st->attention + ((size_t)layer * cap->n_heads + head) * st->n_visible;
}

static const float *step_weights(const Step *st, const Capture *cap, int layer, int head) {
    return step_scores(st, cap, layer, head) + (size_t)cap->n_layers * cap->n_heads * st->n_visible;
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
static Step *record_step(Recording *rec, const Capture *cap, int pos, int token, const float *logits,
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

static void recording_free(Recording *rec) {
    for (int i = 0; i < rec->n; i++) step_release(&rec->steps[i]);
    free(rec->steps);
    memset(rec, 0, sizeof *rec);
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

/* A piece as printable text: \n \t \r \\ and \xNN for other control bytes
 * and for bytes that are not valid UTF-8, so a token can never move the
 * cursor or colour the terminal. With quoted, " becomes \" too. */
static void escape_piece(Text *out, const char *piece, int len, int quoted) {
    char hex[8];
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)piece[i];
        if (c == '\\') text_puts(out, "\\\\");
        else if (c == '"' && quoted) text_puts(out, "\\\"");
        else if (c == '\n') text_puts(out, "\\n");
        else if (c == '\t') text_puts(out, "\\t");
        else if (c == '\r') text_puts(out, "\\r");
        else if (c < 0x20 || c == 0x7F) { snprintf(hex, sizeof hex, "\\x%02X", c); text_puts(out, hex); }
        else if (c < 0x80) text_put(out, piece + i, 1);
        else {
            /* pieces are NUL-terminated, so the decoder stops at the end */
            int n = utf8_sequence_length((const unsigned char *)piece + i);
            if (n == 0 || i + n > len) { snprintf(hex, sizeof hex, "\\x%02X", c); text_puts(out, hex); }
            else { text_put(out, piece + i, (size_t)n); i += n - 1; }
        }
    }
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
    escape_piece(&e, piece, len, 0);
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

static void print_key_lines(FILE *out, const AttentionRow *row, int first, int last) {
    char cell[32];
    put_row_label(out, "key pos");
    for (int t = first; t < last; t++) {
        snprintf(cell, sizeof cell, "%d", t);
        put_cell(out, cell, CELL_WIDTH);
    }
    fputc('\n', out);
    put_row_label(out, "key");
    for (int t = first; t < last; t++) put_cell(out, row->labels[t], CELL_WIDTH);
    fputc('\n', out);
}

/* The sum of the weights (1 up to rounding) and the keys with most weight. */
static void print_row_summary(FILE *out, const AttentionRow *row) {
    double sum = 0;
    for (int t = 0; t < row->n_visible; t++) sum += row->weights[t];
    fprintf(out, "  sum %.6f; most attended:", sum);
    int shown[TOP_ATTENDED];
    int n_shown = row->n_visible < TOP_ATTENDED ? row->n_visible : TOP_ATTENDED;
    for (int k = 0; k < n_shown; k++) {
        int best = -1;
        for (int t = 0; t < row->n_visible; t++) {
            int taken = 0;
            for (int j = 0; j < k; j++) taken |= shown[j] == t;
            if (!taken && (best < 0 || row->weights[t] > row->weights[best])) best = t;
        }
        shown[k] = best;
        fprintf(out, "%s %s (pos %d) %.3f", k ? "," : "", row->labels[best], best, row->weights[best]);
    }
    fputc('\n', out);
}

void trace_print_attention(FILE *out, const AttentionRow *row, int colour) {
    for (int first = 0; first < row->n_cols; first += COLUMNS_PER_CHUNK) {
        int last = first + COLUMNS_PER_CHUNK < row->n_cols ? first + COLUMNS_PER_CHUNK : row->n_cols;
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
    escape_piece(&out, t->vocab[token], t->piece_lengths[token], 1);
    text_puts(&out, "\"");
    return buf;
}

static const char *method_name(SampleMethod m) {
    switch (m) {
    case SAMPLE_GREEDY: return "greedy";
    case SAMPLE_TEMPERATURE: return "temperature";
    case SAMPLE_TOP_P: return "top-p";
    }
    return "?";
}

static void print_step_header(const Tracer *tr, const Step *st) {
    char a[256], b[256];
    fprintf(tr->text, "\n== pos %d: input %s (id %d) -> next %s (id %d), %s ==\n", st->pos,
            quoted_piece(a, sizeof a, tr->tok, st->token), st->token,
            quoted_piece(b, sizeof b, tr->tok, st->next), st->next,
            st->forced ? "forced by the prompt" : "sampled");
}

/* What the mask did for this query, in words. */
static void print_mask_note(const Tracer *tr, const Step *st, int n_cols) {
    if (n_cols > st->n_visible)
        fprintf(tr->text, "  (prompt row: keys %d..%d come later in the prompt; the causal mask adds -inf to their "
                          "scores, so their weights are exactly 0, and forward() never computes them)\n",
                st->n_visible, n_cols - 1);
    else
        fprintf(tr->text, "  (the query at pos %d sees every cached key 0..%d; later positions do not exist yet, "
                          "so the mask has nothing to hide)\n", st->pos, st->n_visible - 1);
}

static void print_heads(Tracer *tr, const Step *st, int n_cols, char (*labels)[LABEL_BYTES],
                        const char **label_ptrs) {
    const Config *c = &tr->model->config;
    for (int t = 0; t < n_cols; t++) {
        key_label(labels[t], tr->tok, tr->run.steps[t].token);
        label_ptrs[t] = labels[t];
    }
    for (int l = 0; l < c->n_layers; l++) {
        if (!layer_selected(tr, l)) continue;
        for (int h = 0; h < c->n_heads; h++) {
            if (!head_selected(tr, h)) continue;
            fprintf(tr->text, "layer %d head %d (kv head %d), d = %d, scale 1/√%d = %.4f\n", l, h,
                    h / (c->n_heads / c->n_kv_heads), c->head_size, c->head_size,
                    1.0 / sqrt((double)c->head_size));
            AttentionRow row = { step_scores(st, &tr->capture, l, h), step_weights(st, &tr->capture, l, h),
                                 st->n_visible, n_cols, c->head_size, label_ptrs };
            trace_print_attention(tr->text, &row, tr->colour);
        }
    }
    print_mask_note(tr, st, n_cols);
}

static void print_top_logits(const Tracer *tr, const Step *st) {
    int with_t = !st->forced && tr->temperature > 0.0f && tr->temperature != 1.0f;
    char piece[256];
    fprintf(tr->text, "top %d logits (p = softmax of the logits", st->n_top);
    if (with_t) fprintf(tr->text, "; p@T = softmax of the logits / %g", tr->temperature);
    fprintf(tr->text, ")\n  rank      id  %-16s %9s %9s%s\n", "token", "logit", "p", with_t ? "       p@T" : "");
    for (int i = 0; i < st->n_top; i++) {
        const Candidate *cand = &st->top[i];
        fprintf(tr->text, "  %4d  %6d  ", i + 1, cand->id);
        quoted_piece(piece, sizeof piece, tr->tok, cand->id);
        fputs(piece, tr->text);
        for (int pad = 16 - display_width(piece); pad > 0; pad--) fputc(' ', tr->text);
        fprintf(tr->text, " %9.4f %9.4f", cand->logit, cand->prob);
        if (with_t) fprintf(tr->text, " %9.4f", cand->prob_t);
        if (cand->id == st->next) fputs(st->forced ? "  <- next (prompt)" : "  <- sampled", tr->text);
        fputc('\n', tr->text);
    }
}

static void print_sampling(const Tracer *tr, const Step *st) {
    char piece[256];
    quoted_piece(piece, sizeof piece, tr->tok, st->next);
    if (st->forced) {
        fprintf(tr->text, "next %s (id %d) is the prompt's next token (teacher forcing: nothing is sampled)\n",
                piece, st->next);
        return;
    }
    const SampleInfo *in = &st->info;
    switch (in->method) {
    case SAMPLE_GREEDY:
        fprintf(tr->text, "sampled %s (id %d): greedy (-t 0), the largest logit\n", piece, st->next);
        break;
    case SAMPLE_TEMPERATURE:
        fprintf(tr->text, "sampled %s (id %d): temperature %g over all %d tokens; coin %.4f fell on it "
                          "in the cumulative distribution; p@T = %.4f\n",
                piece, st->next, tr->temperature, in->n_candidates, in->coin, in->probability);
        break;
    case SAMPLE_TOP_P:
        fprintf(tr->text, "sampled %s (id %d): temperature %g", piece, st->next, tr->temperature);
        if (tr->topk > 0) fprintf(tr->text, ", top-k %d", tr->topk);
        if (tr->topp > 0.0f && tr->topp < 1.0f) fprintf(tr->text, ", top-p %g", tr->topp);
        fprintf(tr->text, ": %d candidates kept after the cutoff; coin %.4f (scaled by their mass) "
                          "fell on it; p@T = %.4f\n", in->n_candidates, in->coin, in->probability);
        break;
    }
}

static int print_step_text(Tracer *tr, const Step *st, int n_cols) {
    char (*labels)[LABEL_BYTES] = malloc((size_t)n_cols * sizeof *labels);
    const char **label_ptrs = malloc((size_t)n_cols * sizeof *label_ptrs);
    if (!labels || !label_ptrs) {
        free(labels);
        free(label_ptrs);
        return -1;
    }
    print_step_header(tr, st);
    print_heads(tr, st, n_cols, labels, label_ptrs);
    print_top_logits(tr, st);
    print_sampling(tr, st);
    free(labels);
    free(label_ptrs);
    return 0;
}

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
        if (st->forced && !tr->opt.trace_prompt) continue;
        if (print_step_text(tr, st, st->forced ? n_cols_prompt : st->n_visible)) return -1;
    }
    fflush(tr->text);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */

/* Where and how JSON goes: JSON Lines keep every bit of a float; the HTML
 * page keeps fewer digits and escapes <, so no string can close its
 * <script> element. */
typedef struct {
    FILE *f;
    const Tokenizer *tok;
    int digits;
    int in_html;
} Json;

/* A JSON string for any bytes: " and \ escaped, control bytes as \u00XX,
 * and each byte that is not part of a valid UTF-8 sequence as U+FFFD. */
static void json_string(const Json *j, const char *s, int len) {
    FILE *f = j->f;
    fputc('"', f);
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { fputc('\\', f); fputc(c, f); }
        else if (c < 0x20 || c == 0x7F || (c == '<' && j->in_html)) fprintf(f, "\\u%04x", c);
        else if (c < 0x80) fputc(c, f);
        else {
            int n = utf8_sequence_length((const unsigned char *)s + i); /* s is NUL-terminated */
            if (n == 0 || i + n > len) fputs("\\ufffd", f);
            else { fwrite(s + i, 1, (size_t)n, f); i += n - 1; }
        }
    }
    fputc('"', f);
}

static void json_piece(const Json *j, int token) {
    json_string(j, j->tok->vocab[token], j->tok->piece_lengths[token]);
}

/* JSON has no NaN or infinity: those become null. */
static void json_number(const Json *j, double v) {
    if (isfinite(v)) fprintf(j->f, "%.*g", j->digits, v);
    else fputs("null", j->f);
}

static void json_numbers(const Json *j, const float *v, int n) {
    fputc('[', j->f);
    for (int i = 0; i < n; i++) {
        if (i) fputc(',', j->f);
        json_number(j, v[i]);
    }
    fputc(']', j->f);
}

/* "key":number, after a comma */
static void json_field(const Json *j, const char *key, double v) {
    fprintf(j->f, ",\"%s\":", key);
    json_number(j, v);
}

static void json_sample(const Json *j, const Step *st, const Tracer *tr) {
    if (st->forced) { fputs("null", j->f); return; }
    fprintf(j->f, "{\"method\":\"%s\"", method_name(st->info.method));
    json_field(j, "temperature", tr->temperature);
    json_field(j, "topp", tr->topp);
    fprintf(j->f, ",\"topk\":%d,\"candidates\":%d", tr->topk, st->info.n_candidates);
    json_field(j, "coin", st->info.coin);
    json_field(j, "probability", st->info.probability);
    fputc('}', j->f);
}

/* Which layers and heads a step's object holds: all (-1) or one. */
typedef struct { int layer, head; } Selection;

static void json_attention(const Json *j, const Step *st, const Capture *cap, const Config *c, Selection sel) {
    fputc('[', j->f);
    int first_layer = 1;
    for (int l = 0; l < c->n_layers; l++) {
        if (sel.layer >= 0 && sel.layer != l) continue;
        fprintf(j->f, "%s{\"layer\":%d,\"heads\":[", first_layer ? "" : ",", l);
        first_layer = 0;
        int first_head = 1;
        for (int h = 0; h < c->n_heads; h++) {
            if (sel.head >= 0 && sel.head != h) continue;
            fprintf(j->f, "%s{\"head\":%d,\"kv_head\":%d,\"scores\":", first_head ? "" : ",", h,
                    h / (c->n_heads / c->n_kv_heads));
            first_head = 0;
            json_numbers(j, step_scores(st, cap, l, h), st->n_visible);
            fputs(",\"weights\":", j->f);
            json_numbers(j, step_weights(st, cap, l, h), st->n_visible);
            fputc('}', j->f);
        }
        fputs("]}", j->f);
    }
    fputc(']', j->f);
}

/* One step as a JSON object (the schema is in README.md, "Tracing"). */
static void json_step(const Json *j, const Step *st, const Tracer *tr, const Capture *cap, const Config *c,
                      Selection sel) {
    fprintf(j->f, "{\"pos\":%d,\"token\":%d,\"piece\":", st->pos, st->token);
    json_piece(j, st->token);
    fprintf(j->f, ",\"forced\":%s,\"next\":%d,\"next_piece\":", st->forced ? "true" : "false", st->next);
    json_piece(j, st->next);
    fputs(",\"sample\":", j->f);
    json_sample(j, st, tr);
    fputs(",\"layers\":", j->f);
    json_attention(j, st, cap, c, sel);
    fputs(",\"top\":[", j->f);
    for (int i = 0; i < st->n_top; i++) {
        fprintf(j->f, "%s{\"id\":%d,\"piece\":", i ? "," : "", st->top[i].id);
        json_piece(j, st->top[i].id);
        json_field(j, "logit", st->top[i].logit);
        json_field(j, "prob", st->top[i].prob);
        fputc('}', j->f);
    }
    fputs("]}", j->f);
}

/* ------------------------------------------------------------------------ */
/* HTML explorer                                                             */

/* Runs the --compare checkpoint over the run's tokens, teacher-forced: the
 * same forward() and the same observer, so its rows are real too. */
static int run_compare(Tracer *tr, Recording *out, Capture *cap, char *err, size_t err_len) {
    const Config *c = &tr->compare.config;
    const Recording *run = &tr->run;
    if (run->n > c->seq_len) {
        snprintf(err, err_len, "--compare %s: its context is %d positions, the run has %d",
                 tr->opt.compare_path, c->seq_len, run->n);
        return -1;
    }
    RunState s;
    if (run_state_init(&s, c, run->n) || capture_init(cap, c)) {
        run_state_free(&s);
        snprintf(err, err_len, "out of memory for the --compare model");
        return -1;
    }
    ForwardObserver observer = { cap, capture_attention, NULL };
    int rc = 0;
    for (int i = 0; i < run->n && rc == 0; i++) {
        const Step *src = &run->steps[i];
        float *logits = forward(&tr->compare, &s, src->token, src->pos, &observer);
        Step *st = record_step(out, cap, src->pos, src->token, logits, c->vocab_size, tr->opt.top_logits,
                               0.0f, tr->probs);
        if (!st) rc = -1;
        else { st->next = src->next; st->forced = 1; }
    }
    run_state_free(&s);
    if (rc) snprintf(err, err_len, "out of memory running the --compare model");
    return rc;
}

static void html_run(const Json *j, const Tracer *tr, const char *name, const Recording *rec,
                     const Capture *cap, const Config *c) {
    fputs("{\"name\":", j->f);
    json_string(j, name, (int)strlen(name));
    fprintf(j->f, ",\"n_layers\":%d,\"n_heads\":%d,\"n_kv_heads\":%d,\"head_size\":%d,\"steps\":[\n",
            c->n_layers, c->n_heads, c->n_kv_heads, c->head_size);
    Selection all = { -1, -1 };
    for (int i = 0; i < rec->n; i++) {
        json_step(j, &rec->steps[i], tr, cap, c, all);
        fputs(i + 1 < rec->n ? ",\n" : "\n", j->f);
    }
    fputs("]}", j->f);
}

/* The page's data: the tokens (inputs at positions 0..n-1, then the last
 * prediction), how many came from the prompt, and one entry per model. */
static void html_data(FILE *f, const Tracer *tr, const Recording *compare, const Capture *compare_cap) {
    const Json j = { f, tr->tok, 6, 1 }; /* 6 digits: plenty for hover values, and a smaller page */
    const Recording *run = &tr->run;
    int n_prompt = run->n;
    for (int i = 0; i < run->n; i++)
        if (!run->steps[i].forced) { n_prompt = i + 1; break; }
    fprintf(f, "{\"prompt_tokens\":%d,\"tokens\":[", n_prompt);
    for (int i = 0; i <= run->n; i++) {
        int token = i < run->n ? run->steps[i].token : run->steps[run->n - 1].next;
        fprintf(f, "%s{\"id\":%d,\"piece\":", i ? "," : "", token);
        json_piece(&j, token);
        fputc('}', f);
    }
    fputs("],\"runs\":[\n", f);
    html_run(&j, tr, tr->opt.model_path ? tr->opt.model_path : "model", run, &tr->capture, &tr->model->config);
    if (compare) {
        fputs(",\n", f);
        html_run(&j, tr, tr->opt.compare_path, compare, compare_cap, &tr->compare.config);
    }
    fputs("]}", f);
}

/* explorer.html with the data where its marker is. */
static int write_html(Tracer *tr, char *err, size_t err_len) {
    Recording compare = { 0 };
    Capture compare_cap = { 0 };
    int rc = 0;
    if (tr->run.n == 0) {
        snprintf(err, err_len, "--html %s: no positions were run", tr->opt.html_path);
        rc = -1;
    }
    if (rc == 0 && tr->has_compare) rc = run_compare(tr, &compare, &compare_cap, err, err_len);
    if (rc == 0) {
        const char *marker = strstr(EXPLORER_HTML, HTML_DATA_MARKER);
        fwrite(EXPLORER_HTML, 1, (size_t)(marker - EXPLORER_HTML), tr->html);
        html_data(tr->html, tr, tr->has_compare ? &compare : NULL, &compare_cap);
        fputs(marker + strlen(HTML_DATA_MARKER), tr->html);
        if (ferror(tr->html)) {
            snprintf(err, err_len, "cannot write %s", tr->opt.html_path);
            rc = -1;
        }
    }
    recording_free(&compare);
    capture_free(&compare_cap);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The tracer's life                                                         */

static FILE *open_output(const char *path, const char *what, char *err, size_t err_len) {
    FILE *f = fopen(path, "w");
    if (!f) snprintf(err, err_len, "cannot open %s %s: %s", what, path, strerror(errno));
    return f;
}

/* The page is written to a temporary name beside it and renamed when
 * complete, so a run that fails (a bad --compare model, an error while
 * generating) leaves neither a page nor an empty file behind. */
static int open_html(Tracer *tr, char *err, size_t err_len) {
    size_t n = strlen(tr->opt.html_path) + sizeof ".part";
    if (!(tr->html_tmp = malloc(n))) {
        snprintf(err, err_len, "out of memory for the tracer");
        return 1;
    }
    snprintf(tr->html_tmp, n, "%s.part", tr->opt.html_path);
    tr->html = open_output(tr->html_tmp, "HTML page", err, err_len);
    return tr->html == NULL;
}

static int finish_html(Tracer *tr, char *err, size_t err_len) {
    int rc = write_html(tr, err, err_len);
    if (rc == 0) {
        int closed = fclose(tr->html);
        tr->html = NULL;
        if (closed != 0 || rename(tr->html_tmp, tr->opt.html_path) != 0) {
            snprintf(err, err_len, "cannot write %s: %s", tr->opt.html_path, strerror(errno));
            remove(tr->html_tmp);
            rc = -1;
        }
    }
    return rc;
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
    if (tr->text && tr->text != stderr) fclose(tr->text);
    if (tr->json) fclose(tr->json);
    if (tr->html) { /* still open: the page was never completed */
        fclose(tr->html);
        remove(tr->html_tmp);
    }
    free(tr->html_tmp);
    if (tr->has_compare) model_free(&tr->compare);
    capture_free(&tr->capture);
    recording_free(&tr->run);
    free(tr->probs);
    free(tr);
}

/* Colour only for a terminal, and never when NO_COLOR is set (no-color.org). */
static int wants_colour(FILE *f) {
    const char *no_colour = getenv("NO_COLOR");
    return isatty(fileno(f)) && !(no_colour && no_colour[0]);
}

static int records(const Tracer *tr) { return tr->text || tr->json || tr->html; }

Tracer *tracer_open(const TraceOptions *o, const Model *m, const Tokenizer *t,
                    float temperature, float topp, int topk, char *err, size_t err_len) {
    if (err_len) err[0] = '\0';
    int text = o->trace || o->trace_prompt || o->out_path;
    if (!text && !o->json_path && !o->html_path && !o->step) return NULL;
    const Config *c = &m->config;
    if ((o->layer >= 0 && check_selection("--layer", o->layer, c->n_layers, "layers", err, err_len)) ||
        (o->head >= 0 && check_selection("--head", o->head, c->n_heads, "heads", err, err_len)))
        return NULL;
    if (o->step && !isatty(0)) {
        snprintf(err, err_len, "--step needs a terminal on stdin, to read Enter (next), c (continue) or q (quit)");
        return NULL;
    }
    Tracer *tr = calloc(1, sizeof *tr);
    if (!tr) { snprintf(err, err_len, "out of memory for the tracer"); return NULL; }
    tr->opt = *o;
    if (tr->opt.top_logits <= 0) tr->opt.top_logits = 10;
    tr->model = m;
    tr->tok = t;
    tr->temperature = temperature;
    tr->topp = topp;
    tr->topk = topk;
    int failed = 0;
    if (text) tr->text = o->out_path ? open_output(o->out_path, "trace output", err, err_len) : stderr;
    failed |= text && !tr->text;
    if (!failed && o->json_path) failed |= !(tr->json = open_output(o->json_path, "trace JSON", err, err_len));
    if (!failed && o->html_path) failed |= open_html(tr, err, err_len);
    if (!failed && o->compare_path) failed |= load_compare(tr, err, err_len) != 0;
    if (!failed && records(tr)) {
        tr->colour = tr->text && wants_colour(tr->text);
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
    if (tr->html) return;
    int done = tr->text ? tr->n_text_done : tr->run.n;
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
    if (tr->json) {
        const Json j = { tr->json, tr->tok, 9, 0 }; /* %.9g: every float32 survives the round trip */
        Selection sel = { tr->opt.layer, tr->opt.head };
        json_step(&j, st, tr, &tr->capture, c, sel);
        fputc('\n', tr->json);
        fflush(tr->json);
    }
    if (tr->text && write_pending_text(tr, 0)) tr->out_of_memory = 1;
    release_written(tr);
}

int tracer_pause(Tracer *tr) {
    if (!tr || !tr->opt.step || tr->run_to_end) return 0;
    fprintf(stderr, "\n-- [Enter] next token, [c] run to the end, [q] quit: ");
    fflush(stderr);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 1; /* end of input: nobody to ask */
    if (line[0] == 'q' || line[0] == 'Q') return 1;
    if (line[0] == 'c' || line[0] == 'C') tr->run_to_end = 1;
    return 0;
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
    if (rc == 0 && tr->html) rc = finish_html(tr, err, err_len);
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
