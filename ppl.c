/* ppl.c — -m ppl: the mean loss of predicting each token of a text file
 * from the ones before it, as nats a token, perplexity and bits a byte.
 *
 * The file may hold several documents (TinyStories' layout), each scored
 * from the model's start token; the scoring runs each document restarting
 * every context (the default), the whole text through one stream with a
 * sliding window (--window, --sinks), or each window recomputed
 * (--recompute, StreamingLLM's quality reference). */
#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "ppl.h"
#include "progress.h"

/* ------------------------------------------------------------------------ */
/* Documents                                                                 */

/* A text for -m ppl may hold several documents, in TinyStories' layout: a
 * line that reads <|endoftext|> between two stories. */
#define DOCUMENT_SEPARATOR "<|endoftext|>"

/* The end of the document that starts at text: the start of its separator
 * line, or the end of the text. *next is where the next document starts. */
static const char *document_end(const char *text, const char **next) {
    size_t sep = strlen(DOCUMENT_SEPARATOR);
    for (const char *line = text; *line; ) {
        const char *eol = strchr(line, '\n');
        const char *stop = eol ? eol : line + strlen(line);
        const char *end = line + sep;
        if (stop - line >= (ptrdiff_t)sep && memcmp(line, DOCUMENT_SEPARATOR, sep) == 0) {
            while (end < stop && isspace((unsigned char)*end)) end++;
            if (end == stop) {
                *next = eol ? eol + 1 : stop;
                return line;
            }
        }
        line = eol ? eol + 1 : stop;
    }
    *next = text + strlen(text);
    return *next;
}

/* The tokens of every document of text, each start (the model's start
 * token, BOS) + its tokens (without the line break before a separator
 * line), one after another: the BOS that starts a document is what the
 * model predicts at the end of the one before, so the bytes of the
 * separators between documents are scored too. starts[d] is the index of
 * document d's BOS, starts[*n_docs] = *n. A character or GPT-2 vocabulary
 * reads the whole text as one document: GPT-2's starts from its
 * <|endoftext|>, as GPT-2 was trained (every token of the text is scored);
 * a character model has no start token, and its first character is not
 * scored. *span: the bytes from the
 * first document's start to the last one's end (a separator line before
 * the first or after the last is not scored: no token predicts it). */
static int *encode_documents(const Tokenizer *t, int start, char *text, const char *what, int *n, int **starts,
                             int *n_docs, size_t *span) {
    size_t len = strlen(text), max_docs = len / (sizeof DOCUMENT_SEPARATOR - 1) + 2;
    *starts = malloc((max_docs + 1) * sizeof(int));
    if (!*starts) die("out of memory encoding %s", what);
    if (t->kind != TOKENIZER_LLAMA) {
        int started;
        int *tokens = encode_text(t, start, text, what, t->kind == TOKENIZER_GPT2_BPE, n, &started);
        (*starts)[0] = 0, (*starts)[1] = *n, *n_docs = 1;
        *span = len;
        return tokens;
    }
    const char *first = NULL, *last = text;
    int *tokens = malloc((len + 3 * max_docs) * sizeof(int));
    if (!tokens) die("out of memory encoding %s", what);
    check_text(t, text, what);
    *n = *n_docs = 0;
    for (char *doc = text; *doc; ) {
        const char *next;
        char *end = (char *)document_end(doc, &next);
        int at_separator = end != next;
        if (at_separator && end > doc && end[-1] == '\n') end--;
        if (at_separator && end > doc && end[-1] == '\r') end--;
        if (end > doc) {
            char saved = *end;
            *end = '\0';
            int k = tokenizer_encode(t, doc, 0, 0, tokens + *n + 1);
            *end = saved;
            if (k < 0) die("out of memory encoding %s", what);
            tokens[*n] = start;
            (*starts)[(*n_docs)++] = *n;
            *n += k + 1;
            if (!first) first = doc;
            last = end;
        }
        doc = (char *)next;
    }
    (*starts)[*n_docs] = *n;
    *span = first ? (size_t)(last - first) : 0;
    return tokens;
}

/* ------------------------------------------------------------------------ */
/* Scoring                                                                   */

/* What -m ppl carries through its scoring loops. */
typedef struct {
    const Model *m;
    RunState *s;
    const int *tokens;  /* the text's n tokens */
    int n;
    double total;       /* the sum of -log p(next token) so far, in nats */
    Progress progress;
    ThreadChoice threads;
} Scoring;

/* Adds -log p(next token) for the rows of logits that predict the tokens
 * after at..at+rows-1. Returns 0, or -1 after one error line (bad logits). */
static int add_losses(Scoring *sc, const float *logits, int rows, int at) {
    int V = sc->m->config.vocab_size;
    for (int j = 0; j < rows; j++) {
        if (report_bad_logits(sc->s, logits + (size_t)j * V, V, at + j)) return -1;
        sc->total += negative_log_likelihood(logits + (size_t)j * V, V, sc->tokens[at + j + 1]);
    }
    return 0;
}

static void show_scoring(Scoring *sc, int done) {
    char what[48];
    snprintf(what, sizeof what, "token %d/%d", done, sc->n - 1);
    progress_update(&sc->progress, done, sc->n - 1, what);
}

/* Tokens first+from..first+to-1 of the text at positions from..to-1 of one
 * stream, as chunks that never pass the cache's capacity (a window evicts
 * one position a token beyond it). */
static int score_stream(Scoring *sc, int first, int from, int to) {
    for (int pos = from; pos < to;) {
        int chunk = chunk_rows(sc->s, pos, to - pos);
        thread_choice_apply(&sc->threads);
        double start = now_seconds();
        float *logits = forward_logits(sc->m, sc->s, sc->tokens + first + pos, chunk, pos, NULL);
        thread_choice_record(&sc->threads, now_seconds() - start, chunk);
        if (add_losses(sc, logits, chunk, first + pos)) return -1;
        pos += chunk;
        show_scoring(sc, first + pos);
    }
    return 0;
}

/* Without --window, each document from BOS at position 0, restarting when
 * full: window w of a document runs its tokens w*T..w*T+T-1 from position 0
 * and predicts the token after each (the last window of a document predicts
 * the next document's BOS). A text without separators is one document. */
static int score_restarting(Scoring *sc, const int *starts, int n_docs) {
    int T = sc->m->config.seq_len;
    for (int d = 0; d < n_docs; d++) {
        int end = starts[d + 1] < sc->n - 1 ? starts[d + 1] : sc->n - 1; /* the last token predicts nothing */
        for (int start = starts[d]; start < end; start += T)
            if (score_stream(sc, start, 0, end - start < T ? end - start : T)) return -1;
    }
    return 0;
}

/* --window W --recompute: each position p past the window runs from scratch
 * over what a sliding cache would hold, the S sinks and the W-S tokens up
 * to p, at positions 0..W-1 (StreamingLLM's "sliding window with
 * re-computation", the quality reference); positions inside the window are
 * one stream. */
static int score_recomputing(Scoring *sc, int W, int S) {
    int V = sc->m->config.vocab_size, n = sc->n, first = n - 1 < W ? n - 1 : W;
    if (score_stream(sc, 0, 0, first)) return -1;
    int *view = malloc((size_t)W * sizeof(int));
    if (!view) die("out of memory");
    int rc = 0;
    for (int p = first; p < n - 1 && rc == 0; p++) {
        memcpy(view, sc->tokens, (size_t)S * sizeof(int));
        memcpy(view + S, sc->tokens + p - (W - S) + 1, (size_t)(W - S) * sizeof(int));
        float *logits = forward_tokens(sc->m, sc->s, view, W, 0, NULL);
        if (report_bad_logits(sc->s, logits, V, p)) rc = -1;
        else sc->total += negative_log_likelihood(logits, V, sc->tokens[p + 1]);
        show_scoring(sc, p + 1);
    }
    free(view);
    return rc;
}

int ppl_run(const Model *m, const Tokenizer *t, const PplOptions *o) {
    size_t bytes;
    char *text = read_text_file(o->text_file, "-f", &bytes);
    int n = 0, n_docs = 0, *starts = NULL;
    size_t span = 0;
    int *tokens =
        bytes ? encode_documents(t, m->config.start_id, text, o->text_file, &n, &starts, &n_docs, &span) : NULL;
    if (!tokens || n < 2) {
        if (!bytes) fprintf(stderr, "error: %s is empty: no token to score\n", o->text_file);
        else if (tokens && n == 0)
            fprintf(stderr, "error: %s holds no document, only <|endoftext|> lines: no token to score\n", o->text_file);
        else if (tokens) /* one token, and nothing before it to predict it from */
            fprintf(stderr, "error: %s is one token: scoring needs at least two (one predicts the next)\n",
                    o->text_file);
        free(tokens);
        free(starts);
        free(text);
        return 1;
    }
    int T = m->config.seq_len;
    RunState s;
    /* a window is at most T positions, and no more than the text has */
    run_state_for(&s, &m->config, n - 1 < T ? n - 1 : T, o->kv_type, o->window, o->sinks);
    Scoring sc = { m, &s, tokens, n, 0, progress_start("ppl"), choose_threads(o->threads) };
    double start = now_seconds();
    int rc;
    if (o->recompute) rc = score_recomputing(&sc, o->window, o->sinks);
    else if (o->window) rc = score_stream(&sc, 0, 0, n - 1);
    else rc = score_restarting(&sc, starts, n_docs);
    double seconds = now_seconds() - start;
    progress_end(&sc.progress);
    if (rc == 0) {
        int predicted = n - 1;
        double total = sc.total;
        /* the bytes of the tokens scored: a character model's first is not */
        size_t scored = span - (t->kind == TOKENIZER_CHAR ? (size_t)t->piece_lengths[tokens[0]] : 0);
        printf("tokens %d  bytes %zu  documents %d  %.1f tok/s\n", predicted, scored, n_docs,
               predicted / (seconds + 1e-9));
        printf("nats/token %.6f  perplexity %.4f  bits/byte %.6f\n", total / predicted,
               exp(total / predicted), total / log(2.0) / scored);
    }
    run_state_free(&s);
    free(tokens);
    free(starts);
    free(text);
    return rc ? 1 : 0;
}
