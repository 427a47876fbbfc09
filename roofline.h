/* roofline.h — what this machine can do at most, measured by small probes
 * (reads, multiply-adds, float16 conversions), so the bench can say how
 * close a kernel comes to it. */
#ifndef QKV_ROOFLINE_H
#define QKV_ROOFLINE_H

#include <stddef.h>
#include "kernels.h" /* Fetch */
#include "team.h"

typedef struct {
    int threads;
    size_t probe_bytes;  /* the working set the bandwidth was read over */
    double read_gbps;    /* GB/s (1e9 bytes) of reading probe_bytes, summing them */
    double fma_gflops;   /* float32 GFLOP/s of independent fused multiply-adds in registers */
    double f16_gbps;     /* GB/s of float16 weights converted to float32 and multiply-added, from L1, as the
                            float16 kernels do (0: no vector conversion on this path) */
    const char *isa;     /* the vector instructions the probes used */
} Roofline;

/* Measures both with threads threads: bandwidth over a buffer of bytes (pass
 * the bytes a decode step streams, so the probe sees the same caches), the
 * best of the passes of 0.3 s (at least 5); the FMA peak over about 0.1 s. */
void roofline_measure(Roofline *r, size_t bytes, int threads);

/* The same, each timed pass after an untimed one over other_bytes of
 * another buffer (the 0.3 s count both, so fewer passes are timed): pass
 * the bytes a step reads between two reads of these (the weights', for the
 * keys and values), which evict them from the caches as far as their size
 * does. A buffer read again and again stays in a
 * cache as large as itself; a step's keys and values do not. */
void roofline_measure_after(Roofline *r, size_t bytes, size_t other_bytes, int threads);

/* A run of bytes a decode step reads. */
typedef struct {
    const void *data;
    size_t bytes;
} ReadSpan;

/* What a step reads between two meetings of its threads (one matrix
 * product, or one layer's attention), in order. part: whose time it is
 * (0 the weights, 1 the keys and values). fetch: its lines are requested
 * QKV_KV_AHEAD bytes ahead into L1 or L2, or not at all, as its kernels
 * request theirs (the weights' kernel's KernelEntry.fetch; the KV cache's
 * into L1 or L2 as its fetch_ahead says). */
typedef struct {
    const ReadSpan *spans;
    int n_spans;
    int part;
    Fetch fetch;
} ReadPhase;

/* Reads the phases of part `part` (-1: every phase) one after another on
 * team (NULL: on this thread alone), each cut into the team's contiguous
 * shares of its bytes (as the step shares a product's rows and attention's
 * blocks of keys), the threads meeting after each; no arithmetic but a sum
 * of the bytes, added to *sum. seconds (or NULL): each phase's time added
 * to its part's. Returns the seconds of the whole read. */
double roofline_read_phases(Team *team, const ReadPhase *phases, int n_phases, int part, double seconds[2],
                            unsigned long long *sum);

/* The in-order read: every phase, as roofline_read_phases reads them; the
 * best of several passes (at least 3, up to 20 or 0.3 s). */
typedef struct {
    int passes;
    double seconds[2];   /* the best pass's time in each part */
    size_t bytes[2];     /* the bytes of each part */
    unsigned long long byte_sum; /* Σ of every byte of one pass (tests: each is read once) */
} InOrderRead;

void roofline_read_in_order(InOrderRead *r, Team *team, const ReadPhase *phases, int n_phases);
/* Σ of bytes begin..end-1 of a phase (its spans end to end), read as the
 * in-order read reads them (the widest vectors isa has, its fetch) */
unsigned long long roofline_read_share(Isa isa, const ReadPhase *phase, size_t begin, size_t end);

#endif
