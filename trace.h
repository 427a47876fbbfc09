/* trace.h — watching the real forward pass: a text trace, JSON Lines, an HTML
 * attention explorer and step-through mode. The tracer is a ForwardObserver:
 * it copies what forward() computed; it never computes attention itself. */
#ifndef QKV_TRACE_H
#define QKV_TRACE_H

#include <stdio.h>
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

typedef struct {
    int trace;                /* --trace: text trace of each generated token */
    int trace_prompt;         /* --trace-prompt: prompt positions too */
    int layer, head;          /* --layer L, --head H: narrow the text and JSON; -1 = all.
                                 In step mode: the head whose table is shown. */
    int pos[2];               /* --pos A-B: text and JSON only for positions A..B */
    const char *level_name;   /* --trace-level full|summary; NULL: summary on a
                                 terminal unless one head is chosen, else full */
    const char *out_path;     /* --trace-out FILE; NULL = stderr */
    const char *json_path;    /* --trace-json FILE */
    const char *html_path;    /* --html FILE */
    const char *compare_path; /* --compare MODEL (with --html) */
    int step;                 /* --step: pause after each token, show a view, read keys */
    int top_logits;           /* logits shown per step */
    const char *model_path;   /* the checkpoint, to name it on the HTML page */
    int window, sinks;        /* --window W --sinks S of the run (0: none), to mark them */
    int positions;            /* the run's positions at most (-n, clamped; 0: unknown):
                                 --pos is checked against it */
    int prompt_tokens;        /* the prompt's length (0: unknown): checked against
                                 a --compare model's context */
} TraceOptions;

typedef enum { TRACE_FULL, TRACE_SUMMARY } TraceLevel;

/* "full" or "summary" as a TraceLevel; -1 if neither. */
int trace_level_parse(const char *name);

typedef struct Tracer Tracer;

/* Opens every output the options ask for. Returns NULL and fills err on
 * failure (err[0] == 0 and NULL when nothing is asked for); *bad_flag is 1
 * when the failure is a flag's value the model or the run cannot have
 * (--layer, --head, --pos: a usage error), else 0. */
Tracer *tracer_open(const TraceOptions *o, const Model *m, const Tokenizer *t,
                    float temperature, float topp, int topk, char *err, size_t err_len, int *bad_flag);

/* The positions a run traced by tr can have: steps, or fewer when a
 * --compare model's context is shorter (its pass over the run's tokens
 * must hold them all). tr may be NULL. */
int tracer_max_positions(const Tracer *tr, int steps);

/* The observer to pass to forward() (NULL when off: tracing then costs nothing). */
const ForwardObserver *tracer_observer(Tracer *tr);

/* Whether prompt positions must be run one by one and reported. */
int tracer_wants_prompt(const Tracer *tr);

/* After forward() at pos with input token: logits (before sampling) and the
 * next token, which is forced (a prompt token) or sampled (info != NULL). */
void tracer_step(Tracer *tr, int pos, int token, const float *logits, int next,
                 const SampleInfo *info);

/* In step mode, shows the step just made and waits for the user (one key on
 * a terminal, one line otherwise): returns 1 to quit, 0 to go on. */
int tracer_pause(Tracer *tr);

/* Finishes the outputs (the HTML page is written here, with the compare model
 * run over the same tokens). Returns 0, or -1 with err filled. */
int tracer_close(Tracer *tr, char *err, size_t err_len);

/* Frees the tracer after a failed run: the HTML page is not written. */
void tracer_discard(Tracer *tr);

/* One head's attention for one query, as the text trace prints it. Public so
 * a test can feed it any numbers (the worked example of the docs). */
typedef struct {
    const float *scores;       /* [n_visible] raw q·k */
    const float *weights;      /* [n_visible] softmax(scores / sqrt(head_size)) */
    int n_visible;             /* keys 0..n_visible-1 were visible to the query */
    int n_cols;                /* columns shown, >= n_visible: the rest are masked */
    int head_size;
    const char *const *labels; /* [n_cols] each key's token text, already escaped */
    int width;                 /* characters per line; 0: 106, 12 keys a block (files) */
    const int *positions;      /* [n_cols] each key's position; NULL: 0..n_cols-1 */
    int sinks;                 /* keys 0..sinks-1 are attention sinks (--window), marked */
    const int *shown;          /* [n_shown] the columns shown, in order; NULL: all n_cols */
    int n_shown;
    const float *output;       /* [head_size] the head's output, Σ weight · value; NULL: not shown */
} AttentionRow;

/* Prints key positions, key tokens, q·k, q·k/√d_k, the mask, the weights (with
 * ANSI 256-colour heat if colour) and the most attended keys, wrapped into
 * blocks of as many key columns as fit in row->width, so rows stay readable
 * at any context length; then the output (when given), as many of its
 * numbers as fit one line. */
void trace_print_attention(FILE *out, const AttentionRow *row, int colour);

/* A line for the reader on f (generate's speed line): on a terminal its
 * words wrapped to the width (the terminal's own wrap cut numbers in two),
 * later lines indented by two; to a file or a pipe one line, as scripts
 * read it. */
void print_line_for_reader(FILE *f, const char *text);

#endif
