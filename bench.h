/* bench.h — per-token latency against context length, with and without the
 * KV cache, timed through the forward pass's own stage hooks. */
#ifndef QKV_BENCH_H
#define QKV_BENCH_H

#include "model.h"

typedef struct {
    int ctx;              /* --ctx N: measure positions up to N (0 = seq_len) */
    int no_cache;         /* --no-cache: also recompute the prefix every token */
    int repeats;          /* --repeats N: median over N runs (default 3) */
    int threads;          /* threads in use (reported) */
    int kv_type;          /* --kv-type: a KVType */
    int window, sinks;    /* --window W --sinks S (0: the full cache) */
    const char *csv_path; /* --csv FILE */
    const char *svg_path; /* --svg FILE */
    const char *model_path;
} BenchOptions;

/* Runs the benchmark and prints its report on stdout. Returns 0, or -1 with
 * err filled. */
int bench_run(const Model *m, const BenchOptions *o, char *err, size_t err_len);

/* The peak resident growth, in kB, of a prefill of n tokens (a KV cache of
 * kv_type rows), observed (an observer that reads every score) or not,
 * measured in a child process after one step has faulted in the weights;
 * -1 where Linux's /proc/self/clear_refs and /proc/self/status are missing. */
long bench_prefill_growth_kb(const Model *m, int n, int kv_type, int observed);

#endif
