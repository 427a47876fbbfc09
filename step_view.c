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
#include <unistd.h>

/* The step view's heads, one line each (> marks the chosen one): every
 * head, or (one_layer) the chosen layer's, with a line saying so. */
static void print_step_heads(FILE *out, int width, int one_layer, const Tracer *tr, const Step *st, const Labels *lb) {
    const Config *c = &tr->model->config;
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < c->n_heads; h++)
            if (!one_layer || l == tr->focus_layer)
                print_head_summary(out, width, tr, st, l, h, lb, l == tr->focus_layer && h == tr->focus_head);
    char note[96];
    snprintf(note, sizeof note, "(layer %d of 0..%d; j/k: other layers, a: its heads side by side)", tr->focus_layer,
             c->n_layers - 1);
    if (one_layer && c->n_layers > 1) print_wrapped(out, width, note);
}

/* The first character or escape of the escaped text from begin at or
 * after at: a cut inside an escape moves past it */
static const char *escape_start(const char *begin, const char *at) {
    const char *p = begin;
    while (p < at) p += *p == '\\' ? escape_length(p) : 1;
    return p;
}

/* Whether step i's token is not the text's (generate prints neither):
 * llama2.c's BOS and EOS, or the start token GPT-2's text began from (a
 * character model's "\n" is its text, as nanoGPT prints it) */
static int not_text(const Tracer *tr, int i) {
    int token = tr->run.steps[i].token;
    if (tr->tok->kind == TOKENIZER_LLAMA) return tokenizer_ends_text(tr->tok, token);
    return tr->tok->kind == TOKENIZER_GPT2_BPE && i == 0 && token == tr->model->config.start_id;
}

/* "  text: …" the run's text up to the step's input, escaped, its end as
 * much as fits the width (the story so far, where stdout may be elsewhere).
 * The pieces' bytes are joined before they are escaped: a character made
 * of several tokens' bytes (byte-level BPE's, llama2.c's <0xXX> tokens) is
 * that character, not its bytes' \xNN escapes. */
static void print_text_so_far(FILE *out, int width, const Tracer *tr, const Step *st) {
    char raw[4096 + 1], text[6 * sizeof raw + 1]; /* an escape is at most 6 bytes a byte (\u0080) */
    int i = (int)(st - tr->run.steps), room = width - (int)sizeof "  text: …";
    size_t end = sizeof raw - 1, start = end, need = 4 * (size_t)(room > 0 ? room : 0) + 4; /* a column: 4 bytes at most */
    raw[end] = '\0'; /* piece_escape reads a character's bytes up to a NUL */
    for (; i >= 0 && end - start < need; i--) { /* raw[start..end) holds the text's last bytes */
        int len, prev = i ? tr->run.steps[i - 1].token : -1, token = tr->run.steps[i].token;
        if (not_text(tr, i)) continue;
        const char *p = tokenizer_decode(tr->tok, prev, token, &len);
        if ((size_t)len > start) break;
        start -= (size_t)len;
        memcpy(raw + start, p, (size_t)len);
    }
    while (i >= 0 && not_text(tr, i)) i--;
    int cut = i >= 0; /* text before what was gathered: a character may be cut at its front */
    while (cut && start < end && ((unsigned char)raw[start] & 0xC0) == 0x80) start++;
    piece_escape(text, sizeof text, raw + start, (int)(end - start), 0);
    /* as many whole characters from the end as fit the room's columns, and
     * no escape (piece_escape's \n, \xNN, \u00NN) cut at its front */
    const char *tail = text + strlen(text);
    for (int chars = 0; tail > text;) {
        const char *lead = tail;
        do lead--; while (lead > text && ((unsigned char)*lead & 0xC0) == 0x80); /* back to a lead byte */
        int n, columns = utf8_columns(lead, &n);
        if (chars + columns > room) break;
        chars += columns;
        tail = lead;
    }
    tail = escape_start(text, tail);
    fprintf(out, "  text: %s%s\n", cut || tail > text ? "…" : "", tail);
}

/* "(the last step: ...)" when no step follows this one: the next token
 * ends the text (generate prints neither BOS nor EOS), or the run's last
 * position (-n, or the context) is reached */
static void print_last_step_note(FILE *out, int width, const Tracer *tr, const Step *st) {
    char note[128];
    if (step_ends_text(tr, st)) snprintf(note, sizeof note, "(the last step: its next token ends the text)");
    else if (tr->opt.positions > 0 && st->pos + 1 >= tr->opt.positions)
        snprintf(note, sizeof note, "(the last step: position %d is the run's last, -n or the context)", st->pos);
    else return;
    print_wrapped(out, width, note);
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
        } else if ((ch & 0xC0) != 0x80) {
            int n;
            column += utf8_columns(p->text + i, &n);
        }
    }
    return rows;
}

/* How much of the view is drawn: the first level that fits the terminal's
 * rows. Each level keeps what the one before did and gives up more. */
enum {
    VIEW_FULL,       /* every head's line (one layer's when they would fill half the rows), every key */
    VIEW_ONE_BLOCK,  /* the table: one block of the keys with most weight, a line for the summary's two;
                        the next tokens on one line */
    VIEW_ONE_LAYER,  /* the chosen layer's heads only */
    VIEW_NO_MASK,    /* without the mask's note */
    VIEW_NO_HEADS,   /* without the heads' lines (the table below is the chosen head's or its layer's) */
    VIEW_LEVELS
};

typedef struct {
    Part top, heads, table, bottom; /* drawn in this order */
} View;

static void view_close(View *v) {
    part_close(&v->top);
    part_close(&v->heads);
    part_close(&v->table);
    part_close(&v->bottom);
}

/* The view drawn in memory at a level; 0, or -1 out of memory */
static int view_draw(View *v, int level, int width, int rows, Tracer *tr, const Step *st, const Labels *lb,
                     int colour) {
    const Config *c = &tr->model->config;
    if (part_open(&v->top) || part_open(&v->heads) || part_open(&v->table) || part_open(&v->bottom)) return -1;
    print_step_header(v->top.f, width, tr, st);
    print_text_so_far(v->top.f, width, tr, st);
    print_last_step_note(v->top.f, width, tr, st);
    /* the layer's weights show what its heads' lines would */
    int one_layer = level >= VIEW_ONE_LAYER || (rows > 0 && 2 * c->n_layers * c->n_heads > rows);
    if (level < VIEW_NO_HEADS && !(level >= VIEW_ONE_BLOCK && tr->layer_weights))
        print_step_heads(v->heads.f, width, one_layer, tr, st, lb);
    if (level < VIEW_NO_MASK) print_mask_note(v->bottom.f, width, st, st->n_visible);
    print_next_summary(v->bottom.f, width, tr, st, level >= VIEW_ONE_BLOCK);
    print_sampling(v->bottom.f, width, tr, st);
    int one_block = level >= VIEW_ONE_BLOCK;
    if (tr->matrix_view) return print_head_matrix(v->table.f, width, tr, st, lb, colour, one_block);
    if (tr->layer_weights) return print_layer_weights(v->table.f, width, tr, st, lb, colour, one_block);
    return print_head_table(v->table.f, width, tr, st, tr->focus_layer, tr->focus_head, st->n_visible, lb, colour,
                            one_block);
}

/* The terminal the view is sized for: stderr's, else the one the keys come
 * from (stderr piped, to tee or cat, while a person reads the view live and
 * presses keys); a view read from a file or a pipe alone keeps its width */
static FILE *view_terminal(const Tracer *tr) { return !isatty(STDERR_FILENO) && tr->raw_keys ? stdin : stderr; }

/* The step view: the step, the text so far, the heads, the chosen head's
 * table (or its layer's weights), what the mask did, the next tokens and
 * how the next was chosen; as wide as its terminal is now (it may have
 * been resized), and at the first level that fits its rows with the keys'
 * prompt line below (the step and the heads would scroll away above). */
static int print_step_view(Tracer *tr, const Step *st) {
    FILE *out = stderr;
    int width = output_width(view_terminal(tr)), rows = output_rows(view_terminal(tr)), colour = wants_colour(out);
    Labels lb;
    View v = { 0 };
    int rc = labels_make(&lb, tr, st, st->n_visible);
    for (int level = VIEW_FULL; rc == 0 && level < VIEW_LEVELS; level++) {
        view_close(&v);
        rc = view_draw(&v, level, width, rows, tr, st, &lb, colour);
        int taller = rc == 0 && rows > 0 &&
                     part_rows(&v.top, width) + part_rows(&v.heads, width) + part_rows(&v.table, width) +
                             part_rows(&v.bottom, width) + 1 > rows;
        if (!taller) break;
    }
    Part *parts[] = { &v.top, &v.heads, &v.table, &v.bottom };
    for (int i = 0; i < 4; i++)
        if (rc == 0 && fflush(parts[i]->f) == 0) fwrite(parts[i]->text, 1, parts[i]->len, out);
    view_close(&v);
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
        int width = output_width(view_terminal(tr));
        fputs(width >= 64   ? "-- [Enter] next token, [c] run to the end, [q] quit, [?] keys: "
              : width >= 54 ? "-- [Enter] next, [c] to the end, [q] quit, [?] keys: "
                            : "-- [q] quit, [?] keys: ",
              stderr);
        fflush(stderr);
        StepKey key = keys_read(tr->raw_keys);
        fputc('\n', stderr);
        redraw = 1;
        switch (key) {
        case KEY_NEXT: return 0;
        case KEY_CONTINUE: tr->run_to_end = 1; return 0;
        case KEY_QUIT: return 1;
        case KEY_NOT_KEYS: tr->not_keys = 1; return 1;
        case KEY_HEAD_NEXT: tr->focus_head = wrap_index(tr->focus_head, 1, c->n_heads); break;
        case KEY_HEAD_PREV: tr->focus_head = wrap_index(tr->focus_head, -1, c->n_heads); break;
        case KEY_LAYER_NEXT: tr->focus_layer = wrap_index(tr->focus_layer, 1, c->n_layers); break;
        case KEY_LAYER_PREV: tr->focus_layer = wrap_index(tr->focus_layer, -1, c->n_layers); break;
        case KEY_LAYER_WEIGHTS: tr->layer_weights = !tr->layer_weights, tr->matrix_view = 0; break;
        case KEY_MATRIX: tr->matrix_view = !tr->matrix_view, tr->layer_weights = 0; break;
        case KEY_REDRAW: break;
        case KEY_HELP: fputs(width >= 77 ? STEP_KEYS_HELP : STEP_KEYS_HELP_NARROW, stderr); redraw = 0; break;
        case KEY_OTHER: fputs("  (not a key of step mode: ? lists them)\n", stderr); redraw = 0; break;
        }
    }
}
