/* test_trace_format.c — the text trace prints the docs' worked example with
 * its hand-checked numbers ("The river bank flooded", the query of "bank").
 *
 * The attention is computed by model.h's own attention_head() from the
 * article's Q, K and V (d_k = 2), then printed by the tracer's row printer,
 * trace_print_attention(). Prints "ok NAME" / "FAIL NAME: why" lines.
 * Built by tests/test_trace.sh with trace.c and tokenizer.c. */
#define QKV_MODEL_IMPLEMENTATION
#include "../model.h"
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

/* Prints one row into a string (the caller frees it). */
static char *print_row(const float *scores, const float *weights, int n_visible, int n_cols, int colour) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    AttentionRow row = { scores, weights, n_visible, n_cols, D_K, LABELS };
    trace_print_attention(f, &row, colour);
    fclose(f);
    return text;
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

static void test_unmasked_row(void) {
    float scores[N_TOKENS], weights[N_TOKENS], out[D_K];
    attention_head(out, scores, weights, BANK_QUERY, &KEYS[0][0], &VALUES[0][0], D_K, N_TOKENS, D_K);
    char *text = print_row(scores, weights, N_TOKENS, N_TOKENS, 0);
    check_line(text, "key", (const char *[]){ "The", "river", "bank", "flooded" }, 4, "trace row: key tokens");
    check_line(text, "q·k", (const char *[]){ "0.00", "4.00", "0.00", "4.00" }, 4,
               "worked example: bank's raw scores [0, 4, 0, 4]");
    check_line(text, "q·k/√d", (const char *[]){ "0.00", "2.83", "0.00", "2.83" }, 4,
               "worked example: scaled by sqrt(2) [0, 2.83, 0, 2.83]");
    check_line(text, "weight", (const char *[]){ "0.028", "0.472", "0.028", "0.472" }, 4,
               "worked example: softmax weights [0.028, 0.472, 0.028, 0.472]");
    report(strstr(text, "sum 1.000000") && strstr(text, "river (pos 1) 0.472"),
           "worked example: row sum and most attended key", "summary line differs");
    report(fabsf(out[0] - 0.944f) < 5e-4f && fabsf(out[1] - 0.028f) < 5e-4f,
           "worked example: bank's output [0.944, 0.028]", "attention_head output differs");
    free(text);
}

static void test_causal_row(void) {
    float scores[N_TOKENS], weights[N_TOKENS], out[D_K];
    attention_head(out, scores, weights, BANK_QUERY, &KEYS[0][0], &VALUES[0][0], D_K, 3, D_K);
    char *text = print_row(scores, weights, 3, N_TOKENS, 0);
    check_line(text, "q·k", (const char *[]){ "0.00", "4.00", "0.00", "·" }, 4,
               "causal example: the future key is not scored");
    check_line(text, "mask", (const char *[]){ "0", "0", "0", "-inf" }, 4, "causal example: mask [0, 0, 0, -inf]");
    check_line(text, "weight", (const char *[]){ "0.053", "0.894", "0.053", "masked" }, 4,
               "causal example: weights [0.053, 0.894, 0.053, masked]");
    report(strstr(text, "river (pos 1) 0.894") != NULL, "causal example: river gets 89.4%", "summary line differs");
    report(fabsf(out[0] - 0.894f) < 5e-4f && fabsf(out[1] - 0.053f) < 5e-4f,
           "causal example: bank's output [0.894, 0.053]", "attention_head output differs");
    free(text);
}

/* Heat colours only when asked, and only on visible weights. */
static void test_colour(void) {
    float scores[N_TOKENS], weights[N_TOKENS], out[D_K];
    attention_head(out, scores, weights, BANK_QUERY, &KEYS[0][0], &VALUES[0][0], D_K, 3, D_K);
    char *plain = print_row(scores, weights, 3, N_TOKENS, 0);
    char *coloured = print_row(scores, weights, 3, N_TOKENS, 1);
    int backgrounds = 0;
    for (const char *p = coloured; (p = strstr(p, "\033[48;5;")); p++) backgrounds++;
    report(!strchr(plain, '\033'), "no escape codes without colour", "plain output has ESC");
    report(backgrounds == 3, "one heat background per visible weight", "wrong count of 256-colour backgrounds");
    free(plain);
    free(coloured);
}

/* A long row wraps into chunks, each with its own key header. */
static void test_wrapping(void) {
    enum { N = 30 };
    float scores[N], weights[N];
    const char *labels[N];
    for (int i = 0; i < N; i++) { scores[i] = (float)i; weights[i] = (float)i; labels[i] = "w"; }
    softmax(weights, N);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    AttentionRow row = { scores, weights, N, N, 4, labels };
    trace_print_attention(f, &row, 0);
    fclose(f);
    int chunks = 0;
    for (const char *p = text; (p = strstr(p, "key pos")); p++) chunks++;
    int widest = 0, width = 0;
    for (const char *p = text; *p; p++) {
        if (*p == '\n') { if (width > widest) widest = width; width = 0; }
        else width += ((unsigned char)*p & 0xC0) != 0x80;
    }
    report(chunks == 3 && widest <= 120, "a 30-key row wraps into 3 chunks under 120 columns", "wrong chunks or width");
    free(text);
}

int main(void) {
    test_unmasked_row();
    test_causal_row();
    test_colour();
    test_wrapping();
    return failures ? 1 : 0;
}
