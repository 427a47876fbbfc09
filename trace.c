/* trace.c — placeholder until the trace lands */
#include "trace.h"
#include <stdio.h>
struct Tracer { int unused; };
Tracer *tracer_open(const TraceOptions *o, const Model *m, const Tokenizer *t,
                    float temperature, float topp, int topk, char *err, size_t err_len) {
    (void)o; (void)m; (void)t; (void)temperature; (void)topp; (void)topk;
    if (err_len) err[0] = 0;
    return NULL;
}
const ForwardObserver *tracer_observer(Tracer *tr) { (void)tr; return NULL; }
int tracer_wants_prompt(const Tracer *tr) { (void)tr; return 0; }
void tracer_step(Tracer *tr, int pos, int token, const float *logits, int next, const SampleInfo *info) {
    (void)tr; (void)pos; (void)token; (void)logits; (void)next; (void)info;
}
int tracer_pause(Tracer *tr) { (void)tr; return 0; }
int tracer_close(Tracer *tr, char *err, size_t err_len) { (void)tr; (void)err; (void)err_len; return 0; }
