/* test_trace_format.c — the text trace prints the docs' worked example with
 * its hand-checked numbers ("The river bank flooded", the query of "bank").
 *
 * The attention is computed by model.h's own attention_head() from the
 * article's Q, K and V (d_k = 2), then printed by the tracer's row printer,
 * trace_print_attention(). Prints "ok NAME" / "FAIL NAME: why" lines.
 * Built by tests/test_trace.sh with trace.c, heads.c, stepper.c, tokenizer.c
 * and the engine's implementation (tests/fuzz/engine.c: model.h, and
 * sampler.h, with which heads.c samples its text probes). With --print it
 * prints the two rows (and each output) as the README shows them, and the
 * tests check the README's block against that printout. */
#include "../model.h"
#include "../sampler.h"
#include "../trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TOKENS 4
#define D_K 2

static int failures;

static void report(int ok, const char *name, const char *why) {
    if (ok) printf("ok %s\n", name);
    else { printf("FAIL %s: %s\n", name, why); failures++; }
}

/* Rows of the article's worked example: The, river, bank, flooded. */
static const float KEYS[N_TOKENS][D_K] = { { 0, 1 }, { 2, 0 }, { 0, 1 }, { 2, 1 } };
static const float VALUES[N_TOKENS][D_K] = { { 0, 0 }, { 1, 0 }, { 0, 1 }, { 1, 0 } };
static const float BANK_QUERY[D_K] = { 2, 0 };
static const char *const LABELS[N_TOKENS] = { "The", "river", "bank", "flooded" };

/* Prints one row, with its output, into a string (the caller frees it). */
static char *print_row(const float *scores, const float *weights, const float *out, int n_visible, int n_cols,
                       int colour, int width) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    AttentionRow row = { scores, weights, n_visible, n_cols, D_K, LABELS, width, NULL, 0, NULL, 0, out };
    trace_print_attention(f, &row, colour);
    fclose(f);
    return text;
}

/* Bank's query against the first n_keys keys, printed as a trace row (the
 * caller frees it): 4 keys is the worked example, 3 the causal one, where
 * "flooded" is still in the future. out receives the attention output. */
static char *bank_row_width(int n_keys, int colour, float out[D_K], int width) {
    float scores[N_TOKENS], weights[N_TOKENS];
    attention_head(out, scores, weights, BANK_QUERY, &KEYS[0][0], &VALUES[0][0], n_keys, D_K);
    return print_row(scores, weights, out, n_keys, N_TOKENS, colour, width);
}

static char *bank_row(int n_keys, int colour, float out[D_K]) {
    return bank_row_width(n_keys, colour, out, 0);
}

/* The cells of the line whose label is label (the words after it; a label
 * is followed by at least two spaces, so "key" is not "key pos"). */
static int cells_of(const char *text, const char *label, char cells[][16], int max) {
    const char *line = text;
    size_t n = strlen(label);
    while (line && *line) {
        const char *start = line + strspn(line, " ");
        if (!strncmp(start, label, n) && !strncmp(start + n, "  ", 2)) {
            const char *end = strchr(start, '\n');
            char buf[512];
            size_t len = end ? (size_t)(end - start - n) : strlen(start + n);
            if (len >= sizeof buf) len = sizeof buf - 1;
            memcpy(buf, start + n, len);
            buf[len] = '\0';
            int count = 0;
            for (char *tok = strtok(buf, " "); tok && count < max; tok = strtok(NULL, " "))
                snprintf(cells[count++], 16, "%s", tok);
            return count;
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
    return -1;
}

/* Whether the line labelled label holds exactly the cells want. */
static void check_line(const char *text, const char *label, const char *const *want, int n, const char *name) {
    char cells[16][16], why[512];
    int got = cells_of(text, label, cells, 16);
    int ok = got == n;
    for (int i = 0; ok && i < n; i++) ok = !strcmp(cells[i], want[i]);
    int at = snprintf(why, sizeof why, "line '%s' has", label);
    for (int i = 0; i < got && at < (int)sizeof why - 20; i++) at += snprintf(why + at, sizeof why - at, " [%s]", cells[i]);
    report(ok, name, why);
}

/* A line the printed row must hold: its label, its cells, the test's name. */
typedef struct {
    const char *label, *cells[N_TOKENS], *name;
} RowLine;

/* An example of the articles: bank's query against the first n_keys keys.
 * The numbers are the articles' own (hand-checked), not the code's output. */
typedef struct {
    int n_keys, n_lines;
    RowLine lines[6];
    const char *summary[2], *summary_name; /* words the summary line holds */
    float out[D_K];                       /* bank's attention output */
    const char *out_name;
    const char *out_line;                 /* and the line the row printer shows of it */
} RowExample;

static const RowExample WORKED_EXAMPLE = {
    N_TOKENS, 6,
    { { "key pos", { "0", "1", "2", "3" }, "trace row: key positions" },
      { "key", { "The", "river", "bank", "flooded" }, "trace row: key tokens" },
      { "q·k", { "0.00", "4.00", "0.00", "4.00" }, "worked example: bank's raw scores [0, 4, 0, 4]" },
      { "q·k/√d_k", { "0.00", "2.83", "0.00", "2.83" }, "worked example: scaled by sqrt(2) [0, 2.83, 0, 2.83]" },
      { "mask", { "0", "0", "0", "0" }, "worked example: no mask [0, 0, 0, 0]" },
      { "weight", { "0.028", "0.472", "0.028", "0.472" },
        "worked example: softmax weights [0.028, 0.472, 0.028, 0.472]" } },
    { "sum 1.000000", "river (pos 1) 0.472" }, "worked example: row sum and most attended key",
    { 0.944f, 0.028f }, "worked example: bank's output [0.944, 0.028]",
    "  output = Σ weight · value = [0.944, 0.028]\n",
};

/* The causal version: "flooded" comes after "bank", so it is masked. */
static const RowExample CAUSAL_EXAMPLE = {
    3, 5,
    { { "key", { "The", "river", "bank", "flooded" }, "causal example: every key named, the future one too" },
      { "q·k", { "0.00", "4.00", "0.00", "·" }, "causal example: the future key is not scored" },
      { "q·k/√d_k", { "0.00", "2.83", "0.00", "·" }, "causal example: scaled [0, 2.83, 0], the future key not" },
      { "mask", { "0", "0", "0", "-inf" }, "causal example: mask [0, 0, 0, -inf]" },
      { "weight", { "0.053", "0.894", "0.053", "masked" }, "causal example: weights [0.053, 0.894, 0.053, masked]" } },
    { "sum 1.000000", "river (pos 1) 0.894" }, "causal example: row sum and river gets 89.4%",
    { 0.894f, 0.053f }, "causal example: bank's output [0.894, 0.053]",
    "  output = Σ weight · value = [0.894, 0.053]\n",
};

static void check_example(const RowExample *e) {
    float out[D_K];
    char *text = bank_row(e->n_keys, 0, out);
    for (int i = 0; i < e->n_lines; i++)
        check_line(text, e->lines[i].label, e->lines[i].cells, N_TOKENS, e->lines[i].name);
    report(strstr(text, e->summary[0]) && strstr(text, e->summary[1]), e->summary_name, "summary line differs");
    report(fabsf(out[0] - e->out[0]) < 5e-4f && fabsf(out[1] - e->out[1]) < 5e-4f, e->out_name,
           "attention_head output differs");
    char name[160];
    snprintf(name, sizeof name, "%s, printed at the seed's three decimals", e->out_name);
    report(strstr(text, e->out_line) != NULL, name, "no such output line");
    free(text);
}

/* Heat colours only when asked, and only on visible weights. */
static void test_colour(void) {
    float out[D_K];
    char *plain = bank_row(3, 0, out);
    char *coloured = bank_row(3, 1, out);
    int backgrounds = 0;
    for (const char *p = coloured; (p = strstr(p, "\033[48;5;")); p++) backgrounds++;
    report(!strchr(plain, '\033'), "no escape codes without colour", "plain output has ESC");
    report(backgrounds == 3, "one heat background per visible weight", "wrong count of 256-colour backgrounds");
    free(plain);
    free(coloured);
}

/* A long row of width columns (0: a file's), printed; the caller frees it.
 * Returns its blocks (one "key pos" line each) and its widest line. */
static char *wrapped_row(int width, int *blocks, int *widest) {
    enum { N = 30 };
    float scores[N], weights[N];
    const char *labels[N];
    for (int i = 0; i < N; i++) { scores[i] = (float)i; weights[i] = (float)i; labels[i] = "w"; }
    softmax(weights, N);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    AttentionRow row = { scores, weights, N, N, 4, labels, width, NULL, 0, NULL, 0, NULL };
    trace_print_attention(f, &row, 0);
    fclose(f);
    *blocks = 0;
    for (const char *p = text; (p = strstr(p, "key pos")); p++) (*blocks)++;
    int w = 0;
    *widest = 0;
    for (const char *p = text; *p; p++) {
        if (*p == '\n') { if (w > *widest) *widest = w; w = 0; }
        else w += ((unsigned char)*p & 0xC0) != 0x80;
    }
    return text;
}

/* A long row wraps into blocks, each with its own key header: 12 keys in a
 * file, as many as fit on a terminal. */
static void test_wrapping(void) {
    int blocks, widest;
    free(wrapped_row(0, &blocks, &widest));
    report(blocks == 3 && widest == 106, "a 30-key row in a file: 3 blocks of 12 keys, 106 columns",
           "wrong blocks or width");
    free(wrapped_row(80, &blocks, &widest));
    report(blocks == 4 && widest <= 80, "a 30-key row at 80 columns: 4 blocks of 8 keys, within 80",
           "wrong blocks or width");
    free(wrapped_row(200, &blocks, &widest));
    report(blocks == 2 && widest <= 200, "a 30-key row at 200 columns: 2 blocks", "wrong blocks or width");
}

/* A head of 48 numbers' output line at width columns (0: a file's): the
 * first numbers that fit, each the value rounded to three decimals, and
 * how many of the 48 they are. Returns the count shown, or -1 when the
 * line breaks a rule; *columns gets its width. */
static int output_line(int width, int *columns, int *formula) {
    enum { HS = 48 };
    float scores[1] = { 0 }, weights[1] = { 1 }, out[HS];
    const char *labels[1] = { "w" };
    for (int i = 0; i < HS; i++) out[i] = (float)(i % 2 ? -1 : 1) * (0.25f + (float)i / 8);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    AttentionRow row = { scores, weights, 1, 1, HS, labels, width, NULL, 0, NULL, 0, out };
    trace_print_attention(f, &row, 0);
    fclose(f);
    const char *line = strstr(text, "  output = "), *open = line ? strchr(line, '[') : NULL;
    int shown = 0, ok = open != NULL;
    *columns = 0;
    *formula = line && !strncmp(line, "  output = Σ weight · value = [", strlen("  output = Σ weight · value = ["));
    for (const char *p = line; ok && *p && *p != '\n'; p++) *columns += ((unsigned char)*p & 0xC0) != 0x80;
    for (const char *p = open ? open + 1 : NULL; ok && shown < HS;) {
        char want[16];
        snprintf(want, sizeof want, "%.3f", out[shown]); /* 0.250, -0.375, 0.500, ... */
        if (strncmp(p, want, strlen(want))) break;
        p += strlen(want);
        shown++;
        if (strncmp(p, ", ", 2)) break;
        p += 2;
    }
    char tail[32];
    snprintf(tail, sizeof tail, shown < HS ? "…] (%d of %d)\n" : "]\n", shown, HS);
    const char *end = open ? strstr(open, shown < HS ? "…]" : "]") : NULL;
    ok = ok && end && !strncmp(end, tail, strlen(tail)) && shown > 0;
    free(text);
    return ok ? shown : -1;
}

/* The output line of a real head (48 numbers) fits the width: as many of
 * its numbers as fit, at least one, and how many of the 48 */
static void test_output_line(void) {
    int columns, formula, shown = output_line(0, &columns, &formula);
    report(formula && shown >= 8 && columns <= 106 && columns > 106 - 9,
           "output line in a file: the formula, the first numbers that fill 106 columns, '(k of 48)'",
           "wrong count or width");
    shown = output_line(80, &columns, &formula);
    report(formula && shown >= 4 && columns <= 80 && columns > 80 - 9,
           "output line at 80 columns: the formula, filled, within 80", "wrong count or width");
    /* the formula (31 columns), 0.250, -0.375, 0.500 (20) and ", …] (3 of 48)" (14): 65 */
    shown = output_line(65, &columns, &formula);
    report(formula && shown == 3 && columns == 65, "output line at 65 columns: the formula and three numbers",
           "wrong count or width");
    shown = output_line(64, &columns, &formula);
    report(!formula && shown >= 3 && columns <= 64 && columns > 64 - 9,
           "output line at 64 columns: room for two numbers after the formula, so the numbers alone, filled",
           "wrong count or width");
    shown = output_line(40, &columns, &formula);
    report(!formula && shown >= 1 && columns <= 40, "output line at 40 columns: the numbers alone, within 40",
           "wrong count or width");
    shown = output_line(500, &columns, &formula);
    report(formula && shown == 48 && columns <= 500, "output line at 500 columns: all 48 numbers", "wrong count or width");
}

/* The two rows as the README shows them (--print, 80 columns): bank's query against
 * every key, then under the causal mask, each with its output, the
 * weighted sum of the values, at the seeds' three decimals. The caller
 * frees the text. */
static char *worked_example_text(void) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < 2; i++) {
        const RowExample *e = i ? &CAUSAL_EXAMPLE : &WORKED_EXAMPLE;
        float out[D_K];
        char *row = bank_row_width(e->n_keys, 0, out, 80); /* as an 80-column terminal shows it */
        fprintf(f, i ? "with the causal mask (\"flooded\" comes after \"bank\"):\n"
                     : "\"bank\", query [2, 0], d_k = %d, scale 1/\u221a%d = %.4f:\n", D_K, D_K, 1 / sqrtf(D_K));
        fputs(row, f);
        free(row);
    }
    fclose(f);
    return text;
}

/* The README's block of `$ build/test_trace_format --print` is what it
 * prints, line for line, and nothing else (run from the repository's root). */
static void test_readme(void) {
    static const char command[] = "$ build/test_trace_format --print\n";
    FILE *f = fopen("README.md", "r");
    if (!f) { printf("skip README's worked example: README.md not found\n"); return; }
    char *readme = NULL;
    size_t cap = 0;
    ssize_t n = getdelim(&readme, &cap, '\0', f);
    fclose(f);
    const char *at = n > 0 ? strstr(readme, command) : NULL;
    const char *end = at ? strstr(at, "\n```") : NULL;
    char *text = worked_example_text(), why[256] = "no `$ build/test_trace_format --print` block";
    int ok = at && end;
    if (ok) {
        at += strlen(command);
        size_t shown = (size_t)(end + 1 - at), printed = strlen(text), same = 0;
        while (same < shown && same < printed && at[same] == text[same]) same++;
        ok = same == shown && same == printed;
        if (!ok) { /* the line where they part: the printed one, or the README's past the printout */
            const char *base = same < printed ? text : at, *line = base + same;
            while (line > base && line[-1] != '\n') line--;
            snprintf(why, sizeof why, "they part at the %s line '%.*s'", same < printed ? "printed" : "README's",
                     (int)strcspn(line, "\n"), line);
        }
    }
    report(ok, "README shows the worked example exactly as the row printer prints it", why);
    free(text);
    free(readme);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--print")) {
        char *text = worked_example_text();
        fputs(text, stdout);
        free(text);
        return 0;
    }
    check_example(&WORKED_EXAMPLE);
    check_example(&CAUSAL_EXAMPLE);
    test_colour();
    test_wrapping();
    test_output_line();
    test_readme();
    return failures ? 1 : 0;
}
