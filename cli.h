/* cli.h — what the command line's modes share (run.c's generate and
 * tokenize, ppl.c): an error exit of one line, a text read whole and
 * encoded from the model's start token, the check of a step's logits, and
 * the KV cache and threads of a run. These exit on bad input: they serve
 * the command line, not a library. */
#ifndef QKV_CLI_H
#define QKV_CLI_H

#include <stdio.h>
#include "model.h"
#include "threads.h"
#include "tokenizer.h"

/* The largest text qkv reads (-m ppl, a prompt): 4x the largest corpus here, and about
 * 1.5 GB of encoder scratch at 90 bytes per byte of text. */
#define MAX_TEXT_BYTES (16u << 20)

/* The exit status once what was printed has reached stdout's file: status,
 * or 1 after an error line when a write failed (a full disk, a closed pipe) */
int output_status(int status);

/* Prints "error: " and fmt (a printf format and its arguments) as one line
 * on stderr, and exits with 1. */
__attribute__((format(printf, 1, 2), noreturn)) void die(const char *fmt, ...);

#include "progress.h" /* now_seconds: seconds on the monotonic clock */

/* Reads f to its end into a NUL-terminated buffer: at most MAX_TEXT_BYTES
 * (the limit is checked as it reads, so a stream that never ends is cut
 * off, with an error), and no NUL byte inside. path names f in errors. */
char *read_stream(FILE *f, const char *path, size_t *n);

/* Reads a whole text file: only a regular file of at most MAX_TEXT_BYTES.
 * flag names it in errors ("--prompt-file", "-f"). */
char *read_text_file(const char *path, const char *flag, size_t *n);

/* Exits with one error line unless text is valid UTF-8 made of characters the
 * vocabulary has (a character-level model has no byte fallback). what names
 * the text ("the prompt", a path). */
void check_text(const Tokenizer *t, const char *text, const char *what);

/* Encodes a whole text (a prompt or a file); exits on bad input. The
 * sequence starts with start, the model's start token (Config.start_id), for
 * llama2.c's kind (BOS), with always_start (ppl's GPT-2 text), and, for the
 * other kinds, when the text is empty; *started says whether it does. The
 * caller frees the tokens. */
int *encode_text(const Tokenizer *t, int start, const char *text, const char *what, int always_start, int *n,
                 int *started);

/* Non-finite logits mean the weights (or the arithmetic) broke down: there is
 * no distribution to sample from, and no silent answer to give. Returns 0
 * if the logits at pos are all finite, else says so and returns -1. */
int report_bad_logits(const RunState *s, const float *logits, int n, int pos);

/* A run state for the run's positions: capacity of them, or with --window
 * W positions however long the run (positions past it evict); KV rows of
 * kv_type (a KVType), sinks kept (kv_window.h). Exits if memory runs out. */
void run_state_for(RunState *s, const Config *c, int capacity, int kv_type, int window, int sinks);

/* The threads of generate and ppl: measured step by step (threads.h),
 * unless --threads (threads > 0) or OMP_NUM_THREADS sets them. Called
 * before any step. */
ThreadChoice choose_threads(int threads);

#endif
