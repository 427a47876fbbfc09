/* heads.c — what each attention head does (-m heads).
 *
 * Two kinds of probe sequences, made here from a seed, go through the real
 * forward pass; an observer reads each layer's attention weights as
 * forward() computed them and adds up, per head, the weight on one key:
 *
 *   text probes    BOS, then tokens sampled from the model itself
 *                  (temperature 1): self, previous, first, entropy
 *   repeat probes  BOS, then a block of L distinct random tokens, twice:
 *                  induction and duplicate, over the second copy's queries,
 *                  and the loss on the second copy against the first
 *
 * Nothing here computes attention: the scores are means of what the engine
 * did. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "heads.h"
#include "output_file.h"
#include "tokenizer.h" /* write_escaped_text */
#include "sampler.h"

const char *const HEAD_ROLE_NAMES[N_ROLES] = { "self", "previous", "first", "induction", "duplicate", "entropy" };

typedef enum { PROBE_TEXT, PROBE_REPEAT } ProbeKind;

/* What can stop the probes: memory, or weights that break down. */
enum { OUT_OF_MEMORY = -1, BAD_LOGITS = -2 };

/* Where a probe met NaN or infinite logits (BAD_LOGITS), for the message */
typedef struct {
    int pos, nan;
} BadLogits;

/* BAD_LOGITS, with where, when a row of logits is not all finite */
static int check_logits(const float *logits, int n, int pos, BadLogits *bad) {
    int at = logits_check(logits, n);
    if (at < 0) return 0;
    *bad = (BadLogits){ pos, isnan(logits[at]) };
    return BAD_LOGITS;
}

/* Sums of the observer, for the probe kind being run. */
typedef struct {
    const Config *config;
    ProbeKind kind;
    int block_len;
    double *sum;             /* [n_layers, n_heads, N_ROLES] */
    double count[N_ROLES];   /* queries added to each role (the same for every head) */
    double chance[N_ROLES];  /* sums for uniform attention over the same queries */
} Tally;

/* ------------------------------------------------------------------------ */
/* Probes                                                                    */

int heads_block_length(const Config *c) {
    int len = HEADS_BLOCK_MAX;
    if ((c->seq_len - 1) / 2 < len) len = (c->seq_len - 1) / 2;
    if (c->vocab_size - 5 < len) len = c->vocab_size - 5; /* ids 3.., less BOS and EOS */
    return len >= 3 ? len : 0;
}

/* xorshift*, as the sampler's (a state must not be 0) */
static uint32_t next_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

uint64_t heads_repeat_rng(unsigned long long seed) {
    uint64_t state = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    return state ? state : 1;
}

static int in_block(const int *block, int n, int id) {
    for (int i = 0; i < n; i++)
        if (block[i] == id) return 1;
    return 0;
}

void heads_repeat_probe(int *out, const Config *c, int block_len, uint64_t *rng) {
    out[0] = c->start_id; /* as any sequence of the model starts (checkpoint.h: start_id_of) */
    int *block = out + 1;
    for (int i = 0; i < block_len; i++) {
        int id;
        do id = 3 + (int)(next_u32(rng) % (uint32_t)(c->vocab_size - 3));
        while (id == c->bos_id || id == c->eos_id || in_block(block, i, id));
        block[i] = id;
    }
    memcpy(block + block_len, block, (size_t)block_len * sizeof(int));
}

/* ------------------------------------------------------------------------ */
/* The observer                                                              */

/* The weight on the key at position key_pos, or 0 if the query did not see
 * it (its visible keys are positions pos-n_visible+1..pos). */
static double weight_at(const float *w, int pos, int n_visible, int key_pos) {
    int j = key_pos - (pos - n_visible + 1);
    return j >= 0 && j < n_visible ? w[j] : 0.0;
}

/* The row's entropy over ln(n_visible): 1 when uniform, 0 on one key. */
static double normalized_entropy(const float *w, int n_visible) {
    double h = 0;
    for (int j = 0; j < n_visible; j++)
        if (w[j] > 0) h -= w[j] * log(w[j]);
    return h / log(n_visible);
}

/* The text probes' roles, from query 2 on (where self, previous and first
 * are three different keys). */
static void tally_text(double *sum, const float *w, int pos, int n_visible) {
    sum[ROLE_SELF] += weight_at(w, pos, n_visible, pos);
    sum[ROLE_PREVIOUS] += weight_at(w, pos, n_visible, pos - 1);
    sum[ROLE_FIRST] += weight_at(w, pos, n_visible, 0);
    sum[ROLE_ENTROPY] += normalized_entropy(w, n_visible);
}

/* The repeat probes' roles, over the second copy (positions L+1..2L): the
 * token at pos first occurred at pos-L, followed by the one at pos-L+1. */
static void tally_repeat(double *sum, const float *w, int pos, int n_visible, int block_len) {
    sum[ROLE_INDUCTION] += weight_at(w, pos, n_visible, pos - block_len + 1);
    sum[ROLE_DUPLICATE] += weight_at(w, pos, n_visible, pos - block_len);
}

/* Counts a query once for each role it is scored on (from layer 0's call:
 * every head sees the same queries), and what uniform weights would add. */
static void count_query(Tally *t, int pos, int n_visible) {
    static const HeadRole text[] = { ROLE_SELF, ROLE_PREVIOUS, ROLE_FIRST };
    static const HeadRole repeat[] = { ROLE_INDUCTION, ROLE_DUPLICATE };
    const HeadRole *roles = t->kind == PROBE_TEXT ? text : repeat;
    int n = t->kind == PROBE_TEXT ? 3 : 2;
    for (int i = 0; i < n; i++) {
        t->count[roles[i]] += 1;
        t->chance[roles[i]] += 1.0 / n_visible;
    }
    if (t->kind == PROBE_TEXT) {
        t->count[ROLE_ENTROPY] += 1;
        t->chance[ROLE_ENTROPY] += 1;
    }
}

static void observe_attention(void *ctx, int layer, int pos, int n_visible, const RunState *s) {
    Tally *t = ctx;
    const Config *c = t->config;
    int counted = t->kind == PROBE_TEXT ? pos >= 2 : pos > t->block_len;
    if (!counted) return;
    if (layer == 0) count_query(t, pos, n_visible);
    for (int h = 0; h < c->n_heads; h++) {
        const float *w = s->attention_weights + (size_t)h * s->kv_cache.capacity;
        double *sum = t->sum + ((size_t)layer * c->n_heads + h) * N_ROLES;
        if (t->kind == PROBE_TEXT) tally_text(sum, w, pos, n_visible);
        else tally_repeat(sum, w, pos, n_visible, t->block_len);
    }
}

/* ------------------------------------------------------------------------ */
/* Running the probes                                                        */

/* A text probe: BOS, then each next token sampled from the model. */
static int run_text_probe(const Model *m, RunState *s, Sampler *sampler, float *probs, int *tokens,
                          int len, const ForwardObserver *obs, BadLogits *bad) {
    const Config *c = &m->config;
    tokens[0] = c->start_id;
    for (int pos = 0; pos < len; pos++) {
        float *logits = forward(m, s, tokens[pos], pos, obs);
        if (pos + 1 == len) break;
        memcpy(probs, logits, (size_t)c->vocab_size * sizeof(float));
        tokens[pos + 1] = sample(sampler, probs, NULL);
        if (tokens[pos + 1] < 0) { /* the sampler's own check: where, for the message */
            check_logits(logits, c->vocab_size, pos, bad);
            return BAD_LOGITS;
        }
    }
    return 0;
}

/* A repeat probe through the model a chunk at a time; adds the losses of
 * predicting the first copy's tokens 2..L (from positions 1..L-1) and the
 * second copy's (from L+1..2L-1). */
static int run_repeat_probe(const Model *m, RunState *s, const int *tokens, int len, int block_len,
                            const ForwardObserver *obs, double *loss_first, double *loss_second, BadLogits *bad) {
    const Config *c = &m->config;
    for (int done = 0; done < len;) {
        int n = chunk_rows(s, done, len - done);
        float *logits = forward_logits(m, s, tokens + done, n, done, obs);
        for (int t = 0; t < n; t++) {
            int pos = done + t;
            const float *row = logits + (size_t)t * c->vocab_size;
            if (check_logits(row, c->vocab_size, pos, bad)) return BAD_LOGITS;
            if (pos >= 1 && pos < block_len) *loss_first += negative_log_likelihood(row, c->vocab_size, tokens[pos + 1]);
            if (pos > block_len && pos < 2 * block_len) *loss_second += negative_log_likelihood(row, c->vocab_size, tokens[pos + 1]);
        }
        done += n;
    }
    return 0;
}

static int run_probes(const Model *m, HeadsReport *r, Tally *t, BadLogits *bad) {
    const Config *c = &m->config;
    RunState s;
    Sampler sampler;
    float *probs = malloc((size_t)c->vocab_size * sizeof(float));
    uint64_t rng = heads_repeat_rng(r->seed);
    int rc = !probs || run_state_init(&s, c, r->probe_len) ? OUT_OF_MEMORY : 0;
    if (rc == 0 && sampler_init(&sampler, c->vocab_size, 1.0f, 1.0f, 0, r->seed ? r->seed : 1)) {
        run_state_free(&s);
        rc = OUT_OF_MEMORY;
    }
    if (rc) {
        free(probs);
        return rc;
    }
    ForwardObserver obs = { t, observe_attention, NULL };
    for (int p = 0; p < r->n_probes && rc == 0; p++) {
        t->kind = PROBE_TEXT;
        rc = run_text_probe(m, &s, &sampler, probs, r->text_tokens + (size_t)p * r->probe_len, r->probe_len, &obs, bad);
        int *repeat = r->repeat_tokens + (size_t)p * r->probe_len;
        heads_repeat_probe(repeat, c, r->block_len, &rng);
        t->kind = PROBE_REPEAT;
        if (rc == 0)
            rc = run_repeat_probe(m, &s, repeat, r->probe_len, r->block_len, &obs, &r->loss_first, &r->loss_second,
                                  bad);
    }
    sampler_free(&sampler);
    run_state_free(&s);
    free(probs);
    return rc;
}

void heads_report_free(HeadsReport *r) {
    free(r->scores);
    free(r->text_tokens);
    free(r->repeat_tokens);
    memset(r, 0, sizeof *r);
}

int heads_measure(const Model *m, int n_probes, unsigned long long seed, HeadsReport *r,
                  char *err, size_t err_len) {
    const Config *c = &m->config;
    memset(r, 0, sizeof *r);
    r->block_len = heads_block_length(c);
    if (!r->block_len) {
        snprintf(err, err_len, "the context (%d) or vocabulary (%d) is too small for the probes "
                 "(a repeated block of at least 3 tokens)", c->seq_len, c->vocab_size);
        return -1;
    }
    if (c->start_id < 0) {
        snprintf(err, err_len, "this character vocabulary has no \"\\n\", the token a probe starts from");
        return -1;
    }
    r->n_layers = c->n_layers;
    r->n_heads = c->n_heads;
    r->n_probes = n_probes;
    r->probe_len = 2 * r->block_len + 1;
    r->seed = seed;
    r->start = c->tokenizer_kind == TOKENIZER_CHAR       ? "\"\\n\""
               : c->tokenizer_kind == TOKENIZER_GPT2_BPE ? "<|endoftext|>"
                                                         : "BOS";
    r->n_candidates = c->vocab_size - 3 - (c->bos_id >= 3) - (c->eos_id >= 3 && c->eos_id != c->bos_id);
    size_t n_scores = (size_t)c->n_layers * c->n_heads * N_ROLES;
    size_t n_tokens = (size_t)n_probes * r->probe_len;
    Tally t = { c, PROBE_TEXT, r->block_len, calloc(n_scores, sizeof(double)), { 0 }, { 0 } };
    r->scores = malloc(n_scores * sizeof(double));
    r->text_tokens = malloc(n_tokens * sizeof(int));
    r->repeat_tokens = malloc(n_tokens * sizeof(int));
    BadLogits bad = { 0, 0 };
    int rc = t.sum && r->scores && r->text_tokens && r->repeat_tokens ? run_probes(m, r, &t, &bad) : OUT_OF_MEMORY;
    if (rc == 0) {
        for (size_t i = 0; i < n_scores; i++) r->scores[i] = t.sum[i] / t.count[i % N_ROLES];
        for (int k = 0; k < N_ROLES; k++) r->chance[k] = t.chance[k] / t.count[k];
        double per_copy = (double)n_probes * (r->block_len - 1);
        r->loss_first /= per_copy;
        r->loss_second /= per_copy;
    } else {
        char what[192] = "out of memory";
        if (rc == BAD_LOGITS) bad_logits_message(what, sizeof what, bad.nan, bad.pos, KV_F32); /* the probes' cache */
        snprintf(err, err_len, "%s %s", what, rc == BAD_LOGITS ? "of a head probe" : "for the head probes");
        heads_report_free(r);
    }
    free(t.sum);
    return rc;
}

int heads_dominant(const HeadsReport *r, int layer, int head, double *score) {
    const double *s = r->scores + ((size_t)layer * r->n_heads + head) * N_ROLES;
    int best = 0;
    for (int k = 1; k < N_WEIGHT_ROLES; k++)
        if (s[k] > s[best]) best = k;
    *score = s[best];
    return s[best] >= HEADS_THRESHOLD ? best : -1;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */

static const double *head_scores(const HeadsReport *r, int layer, int head) {
    return r->scores + ((size_t)layer * r->n_heads + head) * N_ROLES;
}

static void print_table(FILE *f, const HeadsReport *r, const char *model_path) {
    fprintf(f, "heads: %s, %d layer%s x %d head%s; %d probe%s of each kind, %d tokens each (seed %llu)\n",
            model_path, r->n_layers, r->n_layers == 1 ? "" : "s", r->n_heads, r->n_heads == 1 ? "" : "s", r->n_probes,
            r->n_probes == 1 ? "" : "s", r->probe_len, r->seed);
    fprintf(f, "  text probes: %s, then tokens the model samples (temperature 1); self, previous, first,\n"
               "    entropy averaged over queries 2..%d\n", r->start, r->probe_len - 1);
    fprintf(f, "  repeat probes: %s, %d random tokens, the same %d again; induction, duplicate averaged\n"
               "    over the second copy (queries %d..%d)\n", r->start, r->block_len, r->block_len, r->block_len + 1,
            2 * r->block_len);
    fprintf(f, "layer head");
    for (int k = 0; k < N_ROLES; k++) fprintf(f, " %9s", HEAD_ROLE_NAMES[k]);
    fprintf(f, "  role (largest weight role if >= %.2f)\n", HEADS_THRESHOLD);
    for (int l = 0; l < r->n_layers; l++)
        for (int h = 0; h < r->n_heads; h++) {
            const double *s = head_scores(r, l, h);
            fprintf(f, "%5d %4d", l, h);
            for (int k = 0; k < N_ROLES; k++) fprintf(f, " %9.3f", s[k]);
            double score;
            int role = heads_dominant(r, l, h, &score);
            if (role >= 0) fprintf(f, "  %s %.3f\n", HEAD_ROLE_NAMES[role], score);
            else fprintf(f, "  none\n");
        }
    fprintf(f, "  uniform ");
    for (int k = 0; k < N_ROLES; k++) fprintf(f, " %9.3f", r->chance[k]);
    fprintf(f, "  (attention spread evenly over the visible keys: chance)\n");
    fprintf(f, "in-context learning: loss %.3f nats/token on the first copy, %.3f on the second "
               "(%+.3f); a uniform guess: %.3f\n", r->loss_first, r->loss_second,
            r->loss_second - r->loss_first, log((double)r->n_candidates));
}

static void write_csv(FILE *f, const HeadsReport *r) {
    fprintf(f, "layer,head");
    for (int k = 0; k < N_ROLES; k++) fprintf(f, ",%s", HEAD_ROLE_NAMES[k]);
    fprintf(f, ",role,role_score\n");
    for (int l = 0; l < r->n_layers; l++)
        for (int h = 0; h < r->n_heads; h++) {
            const double *s = head_scores(r, l, h);
            fprintf(f, "%d,%d", l, h);
            for (int k = 0; k < N_ROLES; k++) fprintf(f, ",%.6f", s[k]);
            double score;
            int role = heads_dominant(r, l, h, &score);
            fprintf(f, ",%s,%.6f\n", role >= 0 ? HEAD_ROLE_NAMES[role] : "none", score);
        }
}

static void write_token_rows(FILE *f, const int *tokens, int n_rows, int len) {
    fputc('[', f);
    for (int p = 0; p < n_rows; p++) {
        fputs(p ? ",\n  [" : "\n  [", f);
        for (int i = 0; i < len; i++) fprintf(f, i ? ",%d" : "%d", tokens[(size_t)p * len + i]);
        fputc(']', f);
    }
    fputc(']', f);
}

static void write_json(FILE *f, const HeadsReport *r, const char *model_path) {
    fputs("{\"model\": \"", f);
    write_escaped_text(f, model_path, (int)strlen(model_path), ESCAPE_JSON);
    fprintf(f, "\", \"n_layers\": %d, \"n_heads\": %d, \"seed\": %llu, \"probes\": %d, \"probe_length\": %d, "
               "\"block_length\": %d, \"threshold\": %.2f,\n \"roles\": [", r->n_layers, r->n_heads, r->seed,
            r->n_probes, r->probe_len, r->block_len, HEADS_THRESHOLD);
    for (int k = 0; k < N_ROLES; k++) fprintf(f, "%s\"%s\"", k ? ", " : "", HEAD_ROLE_NAMES[k]);
    fputs("],\n \"chance\": {", f);
    for (int k = 0; k < N_ROLES; k++) fprintf(f, "%s\"%s\": %.9g", k ? ", " : "", HEAD_ROLE_NAMES[k], r->chance[k]);
    fprintf(f, "},\n \"loss_first_copy\": %.9g, \"loss_second_copy\": %.9g, \"loss_uniform\": %.9g,\n \"heads\": [",
            r->loss_first, r->loss_second, log((double)r->n_candidates));
    for (int l = 0; l < r->n_layers; l++)
        for (int h = 0; h < r->n_heads; h++) {
            const double *s = head_scores(r, l, h);
            fprintf(f, "%s\n  {\"layer\": %d, \"head\": %d", l + h ? "," : "", l, h);
            for (int k = 0; k < N_ROLES; k++) fprintf(f, ", \"%s\": %.9g", HEAD_ROLE_NAMES[k], s[k]);
            double score;
            int role = heads_dominant(r, l, h, &score);
            if (role >= 0) fprintf(f, ", \"role\": \"%s\", \"role_score\": %.9g}", HEAD_ROLE_NAMES[role], score);
            else fprintf(f, ", \"role\": null, \"role_score\": %.9g}", score);
        }
    fputs("],\n \"text_probes\": ", f);
    write_token_rows(f, r->text_tokens, r->n_probes, r->probe_len);
    fputs(",\n \"repeat_probes\": ", f);
    write_token_rows(f, r->repeat_tokens, r->n_probes, r->probe_len);
    fputs("}\n", f);
}

/* The heatmap: one row per role, one column per head (layer by layer);
 * darker is more; each head's dominant role is outlined. */
enum { CELL = 44, SVG_LEFT = 86, SVG_TOP = 78, SVG_MIN_WIDTH = 560 };

static void svg_header(FILE *f, const HeadsReport *r, const char *model_path, int width, int height) {
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
            width, height, width, height);
    fputs("<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">head roles: ", f);
    write_escaped_text(f, model_path, (int)strlen(model_path), ESCAPE_XML);
    fprintf(f, "</text>\n<text x=\"10\" y=\"38\" fill=\"#555\">mean attention weight on each role's key "
               "(entropy: 0 focused, 1 uniform)</text>\n<text x=\"10\" y=\"53\" fill=\"#555\">%d probes of %d "
               "tokens, seed %llu; outlined: the head's role (largest, &#8805; %.2f)</text>\n",
            r->n_probes, r->probe_len, r->seed, HEADS_THRESHOLD);
    for (int k = 0; k < N_ROLES; k++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", SVG_LEFT - 6,
                SVG_TOP + k * CELL + CELL / 2 + 4, HEAD_ROLE_NAMES[k]);
}

/* One head's column of cells, labelled L<layer>H<head>. */
static void svg_column(FILE *f, const HeadsReport *r, int l, int h, int x) {
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">L%dH%d</text>\n", x + CELL / 2, SVG_TOP - 6, l, h);
    for (int k = 0; k < N_ROLES; k++) {
        double v = head_scores(r, l, h)[k];
        int shade = (int)lround(255 * (1 - (v < 0 ? 0 : v > 1 ? 1 : v)));
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"rgb(%d,%d,255)\" stroke=\"#fff\"/>"
                   "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"%s\">%.2f</text>\n",
                x, SVG_TOP + k * CELL, CELL, CELL, shade, shade, x + CELL / 2, SVG_TOP + k * CELL + CELL / 2 + 4,
                v > 0.55 ? "#fff" : "#000", v);
    }
}

static void write_svg(FILE *f, const HeadsReport *r, const char *model_path) {
    int cols = r->n_layers * r->n_heads;
    int width = SVG_LEFT + cols * CELL + 20, height = SVG_TOP + N_ROLES * CELL + 40;
    if (width < SVG_MIN_WIDTH) width = SVG_MIN_WIDTH;
    svg_header(f, r, model_path, width, height);
    for (int col = 0; col < cols; col++) svg_column(f, r, col / r->n_heads, col % r->n_heads, SVG_LEFT + col * CELL);
    for (int col = 0; col < cols; col++) { /* outlines last, so no neighbour covers them */
        double score;
        int role = heads_dominant(r, col / r->n_heads, col % r->n_heads, &score);
        if (role >= 0)
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#d00\" "
                       "stroke-width=\"3\"/>\n", SVG_LEFT + col * CELL, SVG_TOP + role * CELL, CELL, CELL);
    }
    fprintf(f, "<text x=\"10\" y=\"%d\" fill=\"#555\">in-context learning: loss %.2f nats/token on the first copy, "
               "%.2f on the second (uniform guess %.2f)</text>\n</svg>\n",
            SVG_TOP + N_ROLES * CELL + 24, r->loss_first, r->loss_second, log((double)r->n_candidates));
}

typedef void (*ReportWriter)(FILE *f, const HeadsReport *r, const char *model_path);

static void csv_writer(FILE *f, const HeadsReport *r, const char *model_path) { write_csv(f, r); }

int heads_run(const Model *m, const HeadsOptions *o, char *err, size_t err_len) {
    const char *name = o->model_path ? o->model_path : "model";
    /* the outputs open once the probes have run (options.c checked their
     * paths at the start): a refused model leaves a file already there as it was */
    const struct { const char *flag, *path; ReportWriter writer; } outputs[] = {
        { "--csv", o->csv_path, csv_writer }, { "--json", o->json_path, write_json }, { "--svg", o->svg_path, write_svg },
    };
    HeadsReport r;
    if (heads_measure(m, o->n_probes, o->seed, &r, err, err_len)) return -1;
    print_table(stdout, &r, name);
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++) {
        FILE *f = outputs[i].path ? output_open(outputs[i].path, outputs[i].flag, err, err_len) : NULL;
        if (outputs[i].path && !f) rc = -1;
        if (f) outputs[i].writer(f, &r, name);
        if (f) rc = output_close(f, outputs[i].path, 0, err, err_len);
    }
    heads_report_free(&r);
    return rc;
}
