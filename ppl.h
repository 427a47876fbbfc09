/* ppl.h — -m ppl: how well a model predicts a text file (nats a token,
 * perplexity, bits a byte). The file may hold several documents, split at
 * <|endoftext|> lines, each scored from the model's start token. */
#ifndef QKV_PPL_H
#define QKV_PPL_H

#include "model.h"
#include "tokenizer.h"

typedef struct {
    const char *text_file; /* -f FILE */
    int recompute;         /* --recompute: each token from scratch over the window */
    int kv_type;           /* --kv-type: a KVType */
    int window, sinks;     /* --window W --sinks S (kv_window.h); window 0: the whole context */
    int threads;           /* --threads N; 0: measured (threads.h) */
} PplOptions;

/* Scores o->text_file with m and t and prints the report on stdout: each
 * document restarting every context, or with --window one stream through
 * a sliding window, or with --recompute each window from scratch. Returns
 * the exit status: 0, or 1 after one error line (an empty text, bad
 * logits); a text it cannot read or encode exits with one error line. */
int ppl_run(const Model *m, const Tokenizer *t, const PplOptions *o);

#endif
