/* trace.h — watching the real forward pass: a text trace, JSON Lines, an HTML
 * attention explorer and step-through mode. The tracer is a ForwardObserver:
 * it copies what forward() computed; it never computes attention itself. */
#ifndef QKV_TRACE_H
#define QKV_TRACE_H

#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

typedef struct {
    int trace;                /* --trace: text trace of each generated token */
    int trace_prompt;         /* --trace-prompt: prompt positions too */
    int layer, head;          /* --layer L, --head H; -1 = all */
    const char *out_path;     /* --trace-out FILE; NULL = stderr */
    const char *json_path;    /* --trace-json FILE */
    const char *html_path;    /* --html FILE */
    const char *compare_path; /* --compare MODEL (with --html) */
    int step;                 /* --step: pause after each token */
    int top_logits;           /* logits shown per step */
} TraceOptions;

typedef struct Tracer Tracer;

/* Opens every output the options ask for. Returns NULL and fills err on
 * failure (err[0] == 0 and NULL when nothing is asked for). */
Tracer *tracer_open(const TraceOptions *o, const Model *m, const Tokenizer *t,
                    float temperature, float topp, int topk, char *err, size_t err_len);

/* The observer to pass to forward() (NULL when off: tracing then costs nothing). */
const ForwardObserver *tracer_observer(Tracer *tr);

/* Whether prompt positions must be run one by one and reported. */
int tracer_wants_prompt(const Tracer *tr);

/* After forward() at pos with input token: logits (before sampling) and the
 * next token, which is forced (a prompt token) or sampled (info != NULL). */
void tracer_step(Tracer *tr, int pos, int token, const float *logits, int next,
                 const SampleInfo *info);

/* In step mode, waits for the user: returns 1 to quit, 0 to go on. */
int tracer_pause(Tracer *tr);

/* Finishes the outputs (the HTML page is written here, with the compare model
 * run over the same tokens). Returns 0, or -1 with err filled. */
int tracer_close(Tracer *tr, char *err, size_t err_len);

#endif
