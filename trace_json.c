/* trace_json.c — the tracer's JSON: JSON Lines (--trace-json), one object
 * per position, and the HTML attention explorer (--html), which embeds the
 * same objects in explorer.html. See trace.c for how steps are recorded. */
#include "trace_internal.h"
#include "heads.h"
#include "explorer_html.h" /* EXPLORER_HTML: explorer.html as a C string, made by the Makefile */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTML_DATA_MARKER "/*QKV_DATA*/"

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

/* A JSON string for any bytes (tokenizer.h's write_escaped_text): valid
 * UTF-8 kept, each other byte U+FFFD; inside the page, < escaped too. */
static void json_string(const Json *j, const char *s, int len) {
    fputc('"', j->f);
    write_escaped_text(j->f, s, len, j->in_html ? ESCAPE_JSON_IN_HTML : ESCAPE_JSON);
    fputc('"', j->f);
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

static void json_attention(const Json *j, const Step *st, const Capture *cap, const Config *c, Selection sel,
                           int window) {
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
            /* the page draws no outputs: head_size more numbers a head, a fifth
             * more at stories.bin's 256 positions, more than double on a short run */
            if (!j->in_html) {
                fputs(",\"output\":", j->f);
                json_numbers(j, step_output(st, cap, l, h), c->head_size);
            }
            if (window) json_field(j, "sink_share", step_sink_share(st, cap, l, h));
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
    /* with --window (the run's own steps, not a --compare model's) */
    int window = tr->opt.window && cap == &tr->capture;
    if (window) {
        fprintf(j->f, ",\"window\":{\"size\":%d,\"sinks\":%d,\"start\":%d,\"evicted\":", tr->opt.window,
                st->sinks, st->window_start);
        if (st->window_start > st->sinks) fprintf(j->f, "[%d,%d]}", st->sinks, st->window_start - 1);
        else fputs("null}", j->f);
    }
    fputs(",\"layers\":", j->f);
    json_attention(j, st, cap, c, sel, window);
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

/* Each head's dominant role and score by -m heads' probes (default count
 * and seed), for the thumbnails: "roles":[[{"role":..,"score":..}|null per
 * head] per layer], or null when the model is too small for the probes. */
static void html_roles(FILE *f, const Model *m) {
    HeadsReport r;
    char err[256];
    if (heads_measure(m, HEADS_DEFAULT_PROBES, HEADS_DEFAULT_SEED, &r, err, sizeof err)) {
        fputs(",\"roles\":null", f);
        return;
    }
    fputs(",\"roles\":[", f);
    for (int l = 0; l < r.n_layers; l++)
        for (int h = 0; h < r.n_heads; h++) {
            double score;
            int role = heads_dominant(&r, l, h, &score);
            fputs(h ? "," : l ? "],[" : "[", f);
            if (role >= 0) fprintf(f, "{\"role\":\"%s\",\"score\":%.3f}", HEAD_ROLE_NAMES[role], score);
            else fputs("null", f);
        }
    fputs("]]", f);
    heads_report_free(&r);
}

static void html_run(const Json *j, const Tracer *tr, const char *name, const Recording *rec,
                     const Capture *cap, const Model *m) {
    const Config *c = &m->config;
    fputs("{\"name\":", j->f);
    json_string(j, name, (int)strlen(name));
    html_roles(j->f, m);
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
 * prediction), how many came from the prompt, whether the last one ended
 * the text, and one entry per model. */
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
    const Step *last = &run->steps[run->n - 1];
    fprintf(f, "],\"end_of_text\":%s,", step_ends_text(tr, last) ? "true" : "false"); /* the last token ended the text: not generated */
    if (tr->opt.window) fprintf(f, "\"window\":{\"size\":%d,\"sinks\":%d},", tr->opt.window, tr->opt.sinks);
    fputs("\"runs\":[\n", f);
    html_run(&j, tr, tr->opt.model_path ? tr->opt.model_path : "model", run, &tr->capture, tr->model);
    if (compare) {
        fputs(",\n", f);
        html_run(&j, tr, tr->opt.compare_path, compare, compare_cap, &tr->compare);
    }
    fputs("]}", f);
}

/* explorer.html with the data where its marker is. */
int write_html(Tracer *tr, char *err, size_t err_len) {
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
        fwrite(EXPLORER_HTML, 1, (size_t)(marker - EXPLORER_HTML), tr->html.f);
        html_data(tr->html.f, tr, tr->has_compare ? &compare : NULL, &compare_cap);
        fputs(marker + strlen(HTML_DATA_MARKER), tr->html.f); /* a failed write: whole_file_commit says so */
    }
    recording_free(&compare);
    capture_free(&compare_cap);
    return rc;
}

void write_json_line(const Tracer *tr, const Step *st) {
    const Json j = { tr->json, tr->tok, 9, 0 }; /* %.9g: every float32 survives the round trip */
    Selection sel = { tr->opt.layer, tr->opt.head };
    json_step(&j, st, tr, &tr->capture, &tr->model->config, sel);
    fputc('\n', tr->json);
    fflush(tr->json);
}
