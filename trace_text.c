/* trace_text.c — the text trace (--trace, --trace-out): one head's row of
 * scores, mask and weights as a table of key columns wrapped to the line's
 * width, a step's block (its heads, the mask in words, the next tokens, how
 * the next was chosen), and the pieces step mode's view is made of
 * (step_view.c). Every number is a recorded one (trace.c's Steps). */
#include "trace.h"
#include "trace_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define CELL_WIDTH 8         /* characters per key column */
#define ROW_LABEL_WIDTH 10   /* "  q·k/√d_k" (the seeds' d_k: the head size) */
#define FILE_WIDTH (ROW_LABEL_WIDTH + 12 * CELL_WIDTH) /* a file: 12 keys a block, 106 columns */
#define MIN_KEYS_PER_BLOCK 1 /* a terminal narrower than 42 columns: fewer keys, not wider lines */
#define LABEL_CHARS 7        /* a key's token text is cut to this many columns */
#define PIECE_CHARS 24       /* a quoted token's text (headers, next tokens, top logits) is cut to this many */
#define TOP_ATTENDED 3       /* most attended keys listed under each head */

/* ------------------------------------------------------------------------ */
/* Where the text goes                                                       */

/* Colour only for a terminal, and never when NO_COLOR is set (no-color.org). */
int wants_colour(FILE *f) {
    const char *no_colour = getenv("NO_COLOR");
    return isatty(fileno(f)) && !(no_colour && no_colour[0]);
}

/* Characters per line: a terminal's width (terminal_columns); a file or a
 * pipe keeps FILE_WIDTH, so its lines do not depend on where it was made. */
int output_width(FILE *f) {
    int columns = terminal_columns(f);
    return columns ? columns : FILE_WIDTH;
}

/* A terminal's rows (0 for a file or a pipe, or when it does not say) */
int output_rows(FILE *f) {
    struct winsize ws;
    if (!isatty(fileno(f)) || ioctl(fileno(f), TIOCGWINSZ, &ws) != 0) return 0;
    return ws.ws_row;
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

/* Columns on screen (utf8_columns: a CJK character takes two) */
int display_width(const char *s) {
    int w = 0, n;
    for (; *s; s += n) w += utf8_columns(s, &n);
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

/* Bytes of piece_escape's escape at p (p[0] is its backslash): \xNN, \u00NN,
 * or a backslash and one character (\n, \t, \r, \\, \") */
int escape_length(const char *p) { return p[1] == 'x' ? 4 : p[1] == 'u' ? 6 : 2; }

/* A piece escaped (quoted: its " too, and spaces kept; else spaces as ␣)
 * and cut to max_chars columns, the last of them … where it is longer;
 * an escape (\n, \xNN, \u00NN: piece_escape's, whole in escaped) is
 * kept whole or cut whole */
static void put_cut_piece(Text *out, const char *piece, int len, int quoted, int max_chars) {
    char escaped[4 * PIECE_CHARS + 16];
    Text e = { escaped, sizeof escaped, 0 };
    escaped[0] = '\0';
    int whole = escape_piece(&e, piece, len, quoted, 0);
    int chars = 0, total = whole ? display_width(escaped) : max_chars + 1;
    for (const char *p = escaped; *p;) {
        int n, width;
        if (*p == '\\') n = width = escape_length(p);
        else width = utf8_columns(p, &n);
        if (total > max_chars && chars + width > max_chars - 1) { text_puts(out, "…"); break; }
        if (*p == ' ' && !quoted) text_puts(out, "␣");
        else text_put(out, p, (size_t)n);
        chars += width;
        p += n;
    }
}

/* A key's column label: the piece without its leading space (every word
 * has one), other spaces as ␣, cut to LABEL_CHARS with an ellipsis. */
static void key_label(char *label, const Tokenizer *t, int token) {
    const char *piece = t->vocab[token];
    int len = t->piece_lengths[token];
    if (len > 1 && piece[0] == ' ') { piece++; len--; }
    Text out = { label, LABEL_BYTES, 0 };
    label[0] = '\0';
    put_cut_piece(&out, piece, len, 0, LABEL_CHARS);
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

/* The column shown i-th (row->shown's, else column i) */
static int row_column(const AttentionRow *row, int i) { return row->shown ? row->shown[i] : i; }

typedef enum { ROW_SCORES, ROW_SCALED, ROW_MASK, ROW_WEIGHTS } RowKind;

/* One line of the block for shown columns first..last-1. Masked columns (keys
 * after the query) show "·" for scores: forward() never computes them. */
static void print_row_line(FILE *out, const AttentionRow *row, RowKind kind, int first, int last, int colour) {
    static const char *const names[] = { "q·k", "q·k/√d_k", "mask", "weight" };
    float scale = 1.0f / sqrtf((float)row->head_size); /* as attention_layer() scales */
    char cell[32];
    put_row_label(out, names[kind]);
    for (int i = first; i < last; i++) {
        int t = row_column(row, i), visible = t < row->n_visible;
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

/* With a window, what column t is in the cache: a sink, the first recent
 * key after an eviction (window>), or NULL. The marked columns come first. */
static const char *cache_mark(const AttentionRow *row, int t) {
    int after_gap = t > 0 && t == row->sinks && row_position(row, t) > row_position(row, t - 1) + 1;
    int window_start = after_gap || (t == 0 && row_position(row, 0) > 0);
    return t < row->sinks ? "sink" : window_start ? "window>" : NULL;
}

/* Lines key pos, key (and cache, with a window, where a shown column is
 * marked) of shown columns first..last-1 */
static void print_key_lines(FILE *out, const AttentionRow *row, int first, int last) {
    char cell[32];
    put_row_label(out, "key pos");
    for (int i = first; i < last; i++) {
        snprintf(cell, sizeof cell, "%d", row_position(row, row_column(row, i)));
        put_cell(out, cell, CELL_WIDTH);
    }
    fputc('\n', out);
    put_row_label(out, "key");
    for (int i = first; i < last; i++) put_cell(out, row->labels[row_column(row, i)], CELL_WIDTH);
    fputc('\n', out);
    if (!row->positions || first >= last || !cache_mark(row, row_column(row, first))) return;
    put_row_label(out, "cache");
    for (int i = first; i < last && cache_mark(row, row_column(row, i)); i++)
        put_cell(out, cache_mark(row, row_column(row, i)), CELL_WIDTH);
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

/* lead and text, its words on lines of at most width characters, later
 * lines indented by indent. A newline in text is a line break where the
 * width holds text's lines (they were laid out for 80 columns), a space
 * where it does not. */
static void print_wrapped_lines(FILE *out, int width, const char *lead, int indent, const char *text) {
    Wrap w = { out, width, indent, 0 };
    char word[256];
    int longest = 0; /* the longest of text's own lines, the lead or indent included */
    for (const char *p = text; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != '\0')) {
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(p, "\n"), p);
        int columns = display_width(line) + (p == text ? display_width(lead) : indent);
        longest = columns > longest ? columns : longest;
    }
    wrap_put(&w, lead);
    for (const char *p = text; *p;) {
        if (*p == '\n' && longest > width) { /* narrower than its lines: one paragraph */
            p++;
            continue;
        }
        if (*p == '\n') {
            fprintf(out, "\n%*s", w.indent, "");
            w.column = w.indent;
            p++;
            continue;
        }
        size_t n = strcspn(p + 1, " \n") + 1; /* a word with the space before it */
        int joined = p > text && p[-1] == '\n' && *p != ' ' && longest > width; /* after a dropped break */
        snprintf(word, sizeof word, "%s%.*s", joined ? " " : "", (int)(n < sizeof word - 1 ? n : sizeof word - 2), p);
        wrap_put(&w, word);
        p += n;
    }
    wrap_end(&w);
}

/* A note in parentheses: "  " and text, later lines indented by three */
void print_wrapped(FILE *out, int width, const char *text) { print_wrapped_lines(out, width, "  ", 3, text); }

/* A title or a statement: text, later lines indented by two */
static void print_hanging(FILE *out, int width, const char *text) { print_wrapped_lines(out, width, "", 2, text); }

void print_line_for_reader(FILE *f, const char *text) {
    if (isatty(fileno(f))) print_hanging(f, output_width(f), text);
    else fprintf(f, "%s\n", text);
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

/* "a..b", or "a" when they are one position; returns buf (32 bytes) */
static const char *positions_span(char *buf, int a, int b) {
    snprintf(buf, 32, a == b ? "%d" : "%d..%d", a, b);
    return buf;
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
        char span[32];
        snprintf(item, sizeof item, " %s (pos %s) %.3f;", row->sinks == 1 ? "sink" : "sinks",
                 positions_span(span, 0, row->sinks - 1), sinks);
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

/* The blocks of key columns, without the summary below them */
static void print_attention_blocks(FILE *out, const AttentionRow *row, int colour) {
    int keys = keys_per_block(row->width), n = row->shown ? row->n_shown : row->n_cols;
    for (int first = 0; first < n; first += keys) {
        int last = first + keys < n ? first + keys : n;
        print_key_lines(out, row, first, last);
        print_row_line(out, row, ROW_SCORES, first, last, colour);
        print_row_line(out, row, ROW_SCALED, first, last, colour);
        print_row_line(out, row, ROW_MASK, first, last, colour);
        print_row_line(out, row, ROW_WEIGHTS, first, last, colour);
    }
}

/* line = lead, then as many of the output's numbers as fit width with the
 * tail that says how many ("…] (k of n)", or "]" for all of them), and a
 * newline (at least one number, even past the width); returns how many */
static int output_numbers(const AttentionRow *row, const char *lead, int width, char *line, size_t cap) {
    int n = row->head_size, shown = 0, columns = display_width(lead);
    size_t len = (size_t)snprintf(line, cap, "%s", lead);
    char item[48], tail[48];
    for (; shown < n; shown++) {
        snprintf(item, sizeof item, "%s%.3f", shown ? ", " : "", row->output[shown]);
        snprintf(tail, sizeof tail, shown + 1 < n ? ", …] (%d of %d)" : "]", shown + 1, n);
        int fits = columns + display_width(item) + display_width(tail) <= width;
        if ((shown && !fits) || len + strlen(item) + sizeof tail >= cap) break;
        len += (size_t)snprintf(line + len, cap - len, "%s", item);
        columns += display_width(item);
    }
    snprintf(line + len, cap - len, shown < n ? ", …] (%d of %d)\n" : "]\n", shown, n);
    return shown;
}

/* The head's output, the weighted sum of the values (the seeds' last move,
 * "mix"), on one line: every number that fits the width (the seeds' two;
 * the first few of a real head's 48 or 64, with how many: --trace-json
 * holds them all). Where the formula leaves room for fewer than three,
 * the numbers go alone. */
static void print_row_output(FILE *out, const AttentionRow *row) {
    int width = row->width ? row->width : FILE_WIDTH, fewest = row->head_size < 3 ? row->head_size : 3;
    char line[1024];
    if (output_numbers(row, "  output = Σ weight · value = [", width, line, sizeof line) < fewest)
        output_numbers(row, "  output = [", width, line, sizeof line);
    fputs(line, out);
}

void trace_print_attention(FILE *out, const AttentionRow *row, int colour) {
    print_attention_blocks(out, row, colour);
    print_row_summary(out, row);
    if (row->output) print_row_output(out, row);
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
    put_cut_piece(&out, t->vocab[token], t->piece_lengths[token], 1, PIECE_CHARS);
    text_puts(&out, "\"");
    return buf;
}

const char *method_name(SampleMethod m) {
    switch (m) {
    case SAMPLE_GREEDY: return "greedy";
    case SAMPLE_TEMPERATURE: return "temperature";
    case SAMPLE_TOP_K: return "top-k";
    case SAMPLE_TOP_P: return "top-p";
    case SAMPLE_TOP_K_TOP_P: return "top-k+top-p";
    }
    return "?";
}

/* How a step's next token was chosen, in a word or three */
static const char *chosen_by(const Step *st) {
    return st->forced ? "forced by the prompt" : st->info.method == SAMPLE_GREEDY ? "greedy" : "sampled";
}

/* "== pos P: input ... -> next ..., how ==", on two lines if one is wider than width */
void print_step_header(FILE *out, int width, const Tracer *tr, const Step *st) {
    char a[256], b[256], position[32], input_id[32], next_id[48];
    quoted_piece(a, sizeof a, tr->tok, st->token);
    quoted_piece(b, sizeof b, tr->tok, st->next);
    snprintf(position, sizeof position, "== pos %d:", st->pos);
    snprintf(input_id, sizeof input_id, " (id %d)", st->token);
    snprintf(next_id, sizeof next_id, " (id %d), %s ==", st->next, chosen_by(st));
    const char *items[] = { position, " input ", a, input_id, "-> next ", b, next_id }; /* the input's 4, the next's 3 */
    int columns = 1;
    for (int i = 0; i < 7; i++) columns += display_width(items[i]);
    /* one line if it fits; else the next token on a line of its own,
     * indented, and each part on as many lines as the width needs (a
     * narrow terminal), a quoted piece never split */
    Wrap w = { out, width, 3, 0 };
    fputc('\n', out);
    for (int i = 0; i < 7; i++) {
        if (i == 4) {
            fputs(columns <= width ? " " : "\n   ", out);
            w.column = columns <= width ? w.column + 1 : 3;
        }
        wrap_put(&w, items[i]);
    }
    wrap_end(&w);
}

/* What the mask did for this query, in words (lines fit 80 columns). */
void print_mask_note(FILE *out, int width, const Step *st, int n_cols) {
    char note[512];
    if (st->window_start > st->sinks) {
        char sinks[48] = "", window[32], evicted[32];
        if (st->sinks)
            snprintf(sinks, sizeof sinks, "the sink%s %s and ", st->sinks == 1 ? "" : "s",
                     positions_span(window, 0, st->sinks - 1));
        positions_span(window, st->window_start, st->pos);
        positions_span(evicted, st->sinks, st->window_start - 1);
        int one = st->window_start - 1 == st->sinks;
        snprintf(note, sizeof note, "(sliding window: pos %d sees %sthe window %s; position%s %s\n"
                                    "%s evicted from the KV cache: never computed, as if masked)",
                 st->pos, sinks, window, one ? "" : "s", evicted, one ? "was" : "were");
    }
    else if (n_cols > st->n_visible)
        snprintf(note, sizeof note, "(prompt row: keys %d..%d come later in the prompt; the causal mask adds -inf\n"
                                    "to their scores; their weights are 0, and forward() never computes them)",
                 st->n_visible, n_cols - 1);
    else
        snprintf(note, sizeof note, "(pos %d sees every cached key 0..%d; later positions do not exist yet,\n"
                                    "so the mask has nothing to hide)", st->pos, st->n_visible - 1);
    print_wrapped(out, width, note);
}


int labels_make(Labels *lb, const Tracer *tr, const Step *st, int n_cols) {
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

void labels_free(Labels *lb) {
    free(lb->text);
    free(lb->ptrs);
    free(lb->positions);
}

/* When the step view has no rows for a table of every key: the keys of one
 * block (as many as fit the width) with the most weight in any of rows
 * (n_rows weight rows of n keys), in position order, into shown[MAX_CHOSEN]; returns
 * how many, or -1 out of memory. */
#define MAX_CHOSEN 64 /* keys chosen at most (a block of a 522-column terminal) */
static int most_weighted_columns(const float *const *rows, int n_rows, int n, int width, int *shown) {
    int k = keys_per_block(width) < MAX_CHOSEN ? keys_per_block(width) : MAX_CHOSEN;
    if (k > n) k = n;
    float *most = malloc((size_t)n * sizeof *most);
    if (!most) return -1;
    for (int t = 0; t < n; t++) {
        most[t] = rows[0][t];
        for (int r = 1; r < n_rows; r++) most[t] = rows[r][t] > most[t] ? rows[r][t] : most[t];
    }
    most_attended(most, n, shown, k);
    free(most);
    for (int i = 1; i < k; i++) /* into position order */
        for (int j = i; j > 0 && shown[j - 1] > shown[j]; j--) {
            int swap = shown[j];
            shown[j] = shown[j - 1];
            shown[j - 1] = swap;
        }
    return k;
}

/* The line under a table of chosen keys: how many of how many, the weight
 * the shown keys hold, and the sum of all the weights (the summary's line,
 * which the heads' list repeats) */
static void print_chosen_note(FILE *out, int shown, const AttentionRow *row, const char *which) {
    double sum = 0, held = 0;
    for (int t = 0; t < row->n_visible; t++) sum += row->weights ? row->weights[t] : 0;
    for (int i = 0; i < shown && row->shown && row->weights; i++)
        if (row->shown[i] < row->n_visible) held += row->weights[row->shown[i]];
    char note[200], total[80] = "";
    if (row->weights && shown < row->n_visible)
        snprintf(total, sizeof total, ": weight %.3f of %.6f", held, sum); /* of all the keys' sum */
    else if (row->weights) snprintf(total, sizeof total, "; weights sum to %.6f", sum);
    if (shown < row->n_visible)
        snprintf(note, sizeof note, "(%d of %d keys shown, %s%s)", shown, row->n_visible, which, total);
    else snprintf(note, sizeof note, "(all %d keys%s)", shown, total);
    print_wrapped(out, row->width, note);
}

/* A step's keys as an AttentionRow's n_cols columns, without its numbers:
 * their labels, and with a window their positions and the sinks (marked) */
static AttentionRow step_columns(const Tracer *tr, const Step *st, const Labels *lb, int width, int n_cols) {
    int window = tr->opt.window > 0;
    return (AttentionRow){ NULL, NULL, st->n_visible, n_cols, tr->model->config.head_size, lb->ptrs, width,
                           window ? lb->positions : NULL, window ? st->sinks : 0, NULL, 0, NULL };
}

/* One head's table: every key, or (one_block, for a step view short of
 * rows) the keys of one block with the most weight, a line for the
 * summary's two and the output line. 0, or -1 out of memory. */
int print_head_table(FILE *out, int width, const Tracer *tr, const Step *st, int l, int h, int n_cols,
                     const Labels *lb, int colour, int one_block) {
    const Config *c = &tr->model->config;
    char title[160];
    snprintf(title, sizeof title, "layer %d head %d (kv head %d), d_k = %d, scale 1/√%d = %.4f", l, h,
             h / (c->n_heads / c->n_kv_heads), c->head_size, c->head_size, 1.0 / sqrt((double)c->head_size));
    print_hanging(out, width, title);
    AttentionRow row = step_columns(tr, st, lb, width, n_cols);
    row.scores = step_scores(st, &tr->capture, l, h);
    row.weights = step_weights(st, &tr->capture, l, h);
    row.output = step_output(st, &tr->capture, l, h);
    int shown[MAX_CHOSEN];
    if (one_block && n_cols > keys_per_block(width)) {
        row.n_shown = most_weighted_columns(&row.weights, 1, st->n_visible, width, shown);
        if (row.n_shown < 0) return -1;
        row.shown = shown;
    }
    if (!one_block) trace_print_attention(out, &row, colour);
    else {
        print_attention_blocks(out, &row, colour);
        print_chosen_note(out, row.shown ? row.n_shown : n_cols, &row, "the most attended");
        print_row_output(out, &row); /* the seeds' fourth move stays when the rest is cut */
    }
    return 0;
}

/* One head on one line: its most attended keys with their weights. */
void print_head_summary(FILE *out, int width, const Tracer *tr, const Step *st, int l, int h,
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
 * at the temperature the sampler drew from (p@T) when it is not 1 (or 0);
 * a sampled token (not greedy's) marked with a *. On one line cut short,
 * the sampled token (when among them) still ends it: " … *piece p". */
void print_next_summary(FILE *out, int width, const Tracer *tr, const Step *st, int one_line) {
    char piece[256], item[300], marked[300] = "", last[320] = " …";
    int with_t = !st->forced && tr->temperature > 0.0f && tr->temperature != 1.0f, sampled = -1;
    int drawn = !st->forced && st->info.method != SAMPLE_GREEDY;
    for (int i = 0; drawn && i < st->n_top; i++)
        if (st->top[i].id == st->next) {
            sampled = i;
            quoted_piece(piece, sizeof piece, tr->tok, st->next);
            snprintf(marked, sizeof marked, " *%s %.3f", piece, with_t ? st->top[i].prob_t : st->top[i].prob);
            snprintf(last, sizeof last, " …%s", marked);
        }
    Wrap wr = { out, width, 8, 0 };
    snprintf(item, sizeof item, with_t ? "  next (p@T, T = %g):" : "  next:", tr->temperature);
    wrap_put(&wr, item);
    for (int i = 0; i < st->n_top; i++) {
        const Candidate *cand = &st->top[i];
        quoted_piece(piece, sizeof piece, tr->tok, cand->id);
        snprintf(item, sizeof item, " %s%s %.3f%s", i == sampled ? "*" : "", piece, with_t ? cand->prob_t : cand->prob,
                 i + 1 < st->n_top ? "," : "");
        int reserve = display_width(sampled > i ? last : " …"); /* what a cut after this item would print */
        if (one_line && i > 0 && wr.column + display_width(item) + reserve > width) { /* more than the line holds */
            if (i == sampled) { /* the room kept for " … *piece p" holds "*piece p …" */
                wrap_put(&wr, marked);
                wrap_put(&wr, " …");
            } else wrap_put(&wr, sampled > i ? last : " …");
            break;
        }
        wrap_put(&wr, item);
    }
    wrap_end(&wr);
}

static int digits(int n) {
    int d = 1;
    for (; n >= 10; n /= 10) d++;
    return d;
}

/* The top logits as a table, as wide as 80 columns and a file take it
 * (every column, the arrow's words); where the width cannot: one space
 * between columns, three decimals, only the p the sampler drew from (p@T
 * at a temperature) and a bare arrow, which the title explains */
static void print_top_logits(FILE *out, int width, const Tracer *tr, const Step *st) {
    int with_t = !st->forced && tr->temperature > 0.0f && tr->temperature != 1.0f, longest = 5;
    char arrow[32], marks[64];
    snprintf(arrow, sizeof arrow, "  <- %s", st->forced ? "next (prompt)" : chosen_by(st));
    snprintf(marks, sizeof marks, "; <- the %s token", st->forced ? "prompt's next" : chosen_by(st));
    char piece[256], title[192], temperature[64] = "";
    for (int i = 0; i < st->n_top; i++) {
        quoted_piece(piece, sizeof piece, tr->tok, st->top[i].id);
        if (display_width(piece) > longest) longest = display_width(piece);
    }
    int wide = 36 + (longest > 16 ? longest : 16) + (with_t ? 10 : 0) + (int)strlen(arrow) <= width;
    int rank = digits(st->n_top), id = digits(tr->model->config.vocab_size - 1), pad_to = wide ? 16 : longest;
    if (id < 2) id = 2; /* the heading's "id" */
    if (with_t) snprintf(temperature, sizeof temperature, "p@T = softmax of the logits / %g", tr->temperature);
    snprintf(title, sizeof title, "top %d logits (%s%s%s%s)", st->n_top, !with_t || wide ? "p = softmax of the logits" : "",
             with_t && wide ? "; " : "", temperature,
             wide ? "" : marks);
    print_hanging(out, width, title);
    if (wide) fprintf(out, "  rank      id  %-16s %9s %9s%s\n", "token", "logit", "p", with_t ? "       p@T" : "");
    else fprintf(out, " %*s %*s %-*s %7s %5s\n", rank, "#", id, "id", longest, "token", "logit",
                 with_t ? "p@T" : "p");
    for (int i = 0; i < st->n_top; i++) {
        const Candidate *cand = &st->top[i];
        quoted_piece(piece, sizeof piece, tr->tok, cand->id);
        if (wide) fprintf(out, "  %4d  %6d  %s", i + 1, cand->id, piece);
        else fprintf(out, " %*d %*d %s", rank, i + 1, id, cand->id, piece);
        for (int pad = pad_to - display_width(piece); pad > 0; pad--) fputc(' ', out);
        if (wide) {
            fprintf(out, " %9.4f %9.4f", cand->logit, cand->prob);
            if (with_t) fprintf(out, " %9.4f", cand->prob_t);
        } else fprintf(out, " %7.3f %5.3f", cand->logit, with_t ? cand->prob_t : cand->prob);
        if (cand->id == st->next) fputs(wide ? arrow : " <-", out);
        fputc('\n', out);
    }
}

/* How the next token was chosen, on lines of at most width columns (the
 * text's breaks are where an 80-column line breaks it) */
void print_sampling(FILE *out, int width, const Tracer *tr, const Step *st) {
    char piece[256], text[768], p[32];
    quoted_piece(piece, sizeof piece, tr->tok, st->next);
    const SampleInfo *in = &st->info;
    /* four decimals, or a small p's digits (a draw of p 2.9e-05 read 0.0000) */
    snprintf(p, sizeof p, in->probability >= 1e-4f || in->probability == 0.0f ? "%.4f" : "%.2g", in->probability);
    if (st->forced)
        snprintf(text, sizeof text, "next %s (id %d) is the prompt's next token\n(teacher forcing: nothing is "
                                    "sampled)", piece, st->next);
    else if (in->method == SAMPLE_GREEDY && tr->temperature > 0.0f) /* the sampler's limit T -> 0: logit / T overflowed */
        snprintf(text, sizeof text, "next %s (id %d): greedy, the largest logit (-t %g: a logit over T\n"
                                    "overflows a float, so T is taken as 0)", piece, st->next, tr->temperature);
    else if (in->method == SAMPLE_GREEDY)
        snprintf(text, sizeof text, "next %s (id %d): greedy (-t 0), the largest logit", piece, st->next);
    else if (in->method == SAMPLE_TEMPERATURE)
        snprintf(text, sizeof text, "sampled %s (id %d): temperature %g over all %d tokens;\ncoin %.4f fell on "
                                    "it in the cumulative distribution, the tokens\nin id order (as llama2.c "
                                    "adds them up); p@T = %s",
                 piece, st->next, tr->temperature, in->n_candidates, in->coin, p);
    else { /* top-k, top-p or both */
        int n = snprintf(text, sizeof text, "sampled %s (id %d): temperature %g", piece, st->next, tr->temperature);
        if (tr->topk > 0) n += snprintf(text + n, sizeof text - n, ", top-k %d", tr->topk);
        if (tr->topp > 0.0f && tr->topp < 1.0f) n += snprintf(text + n, sizeof text - n, ", top-p %g", tr->topp);
        snprintf(text + n, sizeof text - n, ":\n%d candidate%s kept after the cutoff; coin %.4f (scaled by their "
                                            "mass)\nfell on it; p@T = %s", in->n_candidates,
                 in->n_candidates == 1 ? "" : "s", in->coin, p);
    }
    print_hanging(out, width, text);
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
                if (tr->level == TRACE_FULL) print_head_table(out, tr->width, tr, st, l, h, n_cols, &lb, tr->colour, 0);
                else print_head_summary(out, tr->width, tr, st, l, h, &lb, 0);
            }
        if (tr->level == TRACE_FULL) {
            print_mask_note(out, tr->width, st, n_cols);
            print_top_logits(out, tr->width, tr, st);
        } else print_next_summary(out, tr->width, tr, st, 0);
        print_sampling(out, tr->width, tr, st);
    }
    labels_free(&lb);
    return rc;
}


/* Writes the text blocks that can be written now. A prompt row waits for the
 * end of the prompt (the first sampled step), so its columns can run over
 * the whole prompt with the later keys masked. Forced rows are only shown
 * with --trace-prompt; the others are kept for their tokens (key labels). */
int write_pending_text(Tracer *tr, int at_close) {
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


/* Step mode's m: the chosen head's weights as rows of a matrix, one a
 * query, the last STEP_MATRIX_ROWS steps (few: half as many) up to st's,
 * over st's latest keys that fit the width: a key after a row's query is
 * the causal mask's (·: it did not exist yet). The seeds' masked matrix,
 * as the KV cache makes it row by row. (With a window, an earlier row's
 * window held every later key st holds: none of these is evicted there.) */
int print_head_matrix(FILE *out, int width, const Tracer *tr, const Step *st, const Labels *lb, int colour, int few) {
    int n = st->n_visible, keys = keys_per_block(width), last = (int)(st - tr->run.steps), first = last;
    int cols = n < keys ? n : keys < MAX_CHOSEN ? keys : MAX_CHOSEN, shown[MAX_CHOSEN];
    for (int i = 0; i < cols; i++) shown[i] = n - cols + i;
    AttentionRow columns = step_columns(tr, st, lb, width, n);
    columns.shown = shown, columns.n_shown = cols;
    /* the rows: recorded steps back from st, none whose query comes before
     * every shown key (a row of nothing but the mask) */
    while (first > 0 && last - first + 1 < (few ? STEP_MATRIX_ROWS / 2 : STEP_MATRIX_ROWS) &&
           tr->run.steps[first - 1].attention && tr->run.steps[first - 1].pos >= row_position(&columns, shown[0]))
        first--;
    char title[200], label[32], cell[32];
    snprintf(title, sizeof title, "layer %d head %d: the weights of the last %d queries, a row each, over the "
             "latest keys; · a key after the query: the causal mask (m: back to the table)", tr->focus_layer,
             tr->focus_head, last - first + 1);
    print_hanging(out, width, title);
    print_key_lines(out, &columns, 0, cols);
    for (int r = first; r <= last; r++) {
        const Step *row = &tr->run.steps[r];
        const float *w = step_weights(row, &tr->capture, tr->focus_layer, tr->focus_head);
        snprintf(label, sizeof label, "%sq@%d", r == last ? ">" : " ", row->pos);
        if (display_width(label) > ROW_LABEL_WIDTH - 2) /* positions past 99,999 (a window) */
            snprintf(label, sizeof label, "%s%d", r == last ? ">" : " ", row->pos);
        put_row_label(out, label);
        for (int i = 0; i < cols; i++) {
            int key = row_position(&columns, shown[i]), at = step_key_index(row, key);
            if (at < 0) { /* key > row->pos */
                put_cell(out, "·", CELL_WIDTH);
                continue;
            }
            snprintf(cell, sizeof cell, "%.3f", w[at]);
            if (colour) put_heat_cell(out, cell, w[at]);
            else put_cell(out, cell, CELL_WIDTH);
        }
        fputc('\n', out);
    }
    /* where a row's keys are not all shown, its weights shown do not sum to 1 */
    if (cols < n)
        snprintf(title, sizeof title, "(the latest %d of the %d keys pos %d sees; each row's weights sum to 1 over all "
                 "the keys it saw)", cols, n, st->pos);
    else snprintf(title, sizeof title, "(each row's weights sum to 1 over all the keys it saw, some since evicted)");
    if (cols < n || tr->opt.window > 0) print_wrapped(out, width, title);
    return 0;
}

/* Step mode's a: the chosen layer's heads side by side, a weights row each
 * (> marks the chosen head), in blocks of the keys that fit: how the
 * layer's heads divide the keys among them; or (one_block) the keys of one
 * block that some head weighs most. 0, or -1 out of memory. */
int print_layer_weights(FILE *out, int width, const Tracer *tr, const Step *st, const Labels *lb, int colour,
                        int one_block) {
    const Config *c = &tr->model->config;
    int n = st->n_visible, keys = keys_per_block(width), shown[MAX_CHOSEN];
    AttentionRow columns = step_columns(tr, st, lb, width, n);
    const float **heads = malloc((size_t)c->n_heads * sizeof *heads);
    if (!heads) return -1;
    for (int h = 0; h < c->n_heads; h++) heads[h] = step_weights(st, &tr->capture, tr->focus_layer, h);
    if (one_block && n > keys) {
        columns.n_shown = most_weighted_columns(heads, c->n_heads, n, width, shown);
        columns.shown = columns.n_shown >= 0 ? shown : NULL;
        if (!columns.shown) { free(heads); return -1; }
        n = columns.n_shown;
    }
    char label[16], cell[32];
    char title[96];
    snprintf(title, sizeof title, "layer %d: every head's weights (a: back to head %d's table)", tr->focus_layer,
             tr->focus_head);
    print_hanging(out, width, title);
    for (int first = 0; first < n; first += keys) {
        int last = first + keys < n ? first + keys : n;
        print_key_lines(out, &columns, first, last);
        for (int h = 0; h < c->n_heads; h++) {
            snprintf(label, sizeof label, "%s H%d", h == tr->focus_head ? ">" : " ", h);
            put_row_label(out, label);
            for (int i = first; i < last; i++) {
                float w = heads[h][row_column(&columns, i)];
                snprintf(cell, sizeof cell, "%.3f", w);
                if (colour) put_heat_cell(out, cell, w);
                else put_cell(out, cell, CELL_WIDTH);
            }
            fputc('\n', out);
        }
    }
    if (columns.shown) print_chosen_note(out, n, &columns, "those some head weighs most");
    free(heads);
    return 0;
}
