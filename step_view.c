/* step_view.c — step mode (--step): the view drawn at each pause (the step's
 * heads, the chosen head's table or its layer's weights, the next tokens)
 * from the recorded step, and what each key does. The keys are read by
 * stepper.c; the view's pieces are trace_text.c's. */
#include "trace.h"
#include "stepper.h"
#include "trace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The step view's heads, one line each (> marks the chosen one): every
 * head, unless their lines would fill more than half the terminal's rows
 * (the stories model's 36 in 24 rows pushed the chosen head's table off
 * the screen), then the chosen layer's, with a line saying so. */
static void print_step_heads(FILE *out, int width, int rows, const Tracer *tr, const Step *st, const Labels *lb) {
    const Config *c = &tr->model->config;
    int one_layer = rows > 0 && 2 * c->n_layers * c->n_heads > rows;
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < c->n_heads; h++)
            if (!one_layer || l == tr->focus_layer)
                print_head_summary(out, width, tr, st, l, h, lb, l == tr->focus_layer && h == tr->focus_head);
    char note[96];
    snprintf(note, sizeof note, "(layer %d of 0..%d; j/k: other layers, a: its heads side by side)", tr->focus_layer,
             c->n_layers - 1);
    if (one_layer) print_wrapped(out, width, note);
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

/* A part of the view drawn in memory first, so its rows on the screen can
 * be counted before the table's form is chosen */
typedef struct {
    char *text;
    size_t len;
    FILE *f;
} Part;

static int part_open(Part *p) {
    p->text = NULL;
    p->len = 0;
    p->f = open_memstream(&p->text, &p->len);
    return p->f ? 0 : -1;
}

static void part_close(Part *p) {
    if (p->f) fclose(p->f);
    free(p->text);
    p->f = NULL;
    p->text = NULL;
}

/* The rows a part takes on a terminal width columns wide: a line longer
 * than the width wraps onto more rows (ANSI colours take no column) */
static int part_rows(Part *p, int width) {
    fflush(p->f);
    int rows = 0, column = 0;
    for (size_t i = 0; i < p->len; i++) {
        unsigned char ch = (unsigned char)p->text[i];
        if (ch == '\033') { /* ESC [ ... m */
            while (i < p->len && p->text[i] != 'm') i++;
        } else if (ch == '\n') {
            rows += 1 + (column > 0 ? (column - 1) / width : 0);
            column = 0;
        } else if ((ch & 0xC0) != 0x80) column++;
    }
    return rows;
}

/* The chosen head's table (or its layer's weights), what the mask did, the
 * next tokens and how the next was chosen, each part drawn in memory;
 * compact: the table's keys of one block with the most weight only, and
 * the next tokens on one line */
static int print_step_lower(Part *table, Part *bottom, int width, Tracer *tr, const Step *st, const Labels *lb,
                            int colour, int compact) {
    if (part_open(table) || part_open(bottom)) return -1;
    print_mask_note(bottom->f, width, st, st->n_visible);
    print_next_summary(bottom->f, width, tr, st, compact);
    print_sampling(bottom->f, tr, st);
    if (tr->layer_weights) return print_layer_weights(table->f, width, tr, st, lb, colour, compact);
    return print_head_table(table->f, width, tr, st, tr->focus_layer, tr->focus_head, st->n_visible, lb, colour,
                            compact);
}

/* The step view: the step, the text so far and the heads
 * (print_step_heads), then print_step_lower's parts; as wide as stderr's
 * terminal is now (it may have been resized). When they would pass the
 * terminal's rows (the step and the heads scrolled away above), the lower
 * parts are drawn compact (and the layer's weights without the heads'
 * lines, which say the same). */
static int print_step_view(Tracer *tr, const Step *st) {
    FILE *out = stderr;
    int width = output_width(out), rows = output_rows(out), colour = wants_colour(out);
    Labels lb;
    Part top = { 0 }, heads = { 0 }, table = { 0 }, bottom = { 0 };
    int rc = labels_make(&lb, tr, st, st->n_visible) || part_open(&top) || part_open(&heads);
    if (rc == 0) {
        print_step_header(top.f, width, tr, st);
        print_text_so_far(top.f, width, tr, st);
        print_step_heads(heads.f, width, rows, tr, st, &lb);
        rc = print_step_lower(&table, &bottom, width, tr, st, &lb, colour, 0);
        /* + 1: the keys' prompt line below it all */
        int taller = rc == 0 && rows > 0 &&
                     part_rows(&top, width) + part_rows(&heads, width) + part_rows(&table, width) +
                             part_rows(&bottom, width) + 1 > rows;
        if (taller) {
            part_close(&table);
            part_close(&bottom);
            rc = print_step_lower(&table, &bottom, width, tr, st, &lb, colour, 1);
            /* the layer's weights show what its heads' lines would */
            if (tr->layer_weights) part_close(&heads);
        }
    }
    Part *parts[] = { &top, &heads, &table, &bottom };
    for (int i = 0; i < 4; i++) {
        if (rc == 0 && parts[i]->f && fflush(parts[i]->f) == 0) fwrite(parts[i]->text, 1, parts[i]->len, out);
        part_close(parts[i]);
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
        fputs(output_width(stderr) < 64 ? "-- [Enter] next, [c] to the end, [q] quit, [?] keys: "
                                         : "-- [Enter] next token, [c] run to the end, [q] quit, [?] keys: ",
              stderr);
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
        case KEY_LAYER_WEIGHTS: tr->layer_weights = !tr->layer_weights; break;
        case KEY_HELP: fputs(STEP_KEYS_HELP, stderr); redraw = 0; break;
        case KEY_OTHER: fputs("  (not a key of step mode: ? lists them)\n", stderr); redraw = 0; break;
        }
    }
}
