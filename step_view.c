/* step_view.c — step mode (--step): the view drawn at each pause (the step's
 * heads, the chosen head's table or its layer's weights, the next tokens)
 * from the recorded step, and what each key does. The keys are read by
 * stepper.c; the view's pieces are trace_text.c's. */
#include "trace.h"
#include "stepper.h"
#include "trace_internal.h"

#include <stdio.h>
#include <string.h>

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
