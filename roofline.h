/* roofline.h — what this machine can do at most, measured by two small
 * probes, so the bench can say how close a kernel comes to it. */
#ifndef QKV_ROOFLINE_H
#define QKV_ROOFLINE_H

#include <stddef.h>

typedef struct {
    int threads;
    size_t probe_bytes;  /* the working set the bandwidth was read over */
    double read_gbps;    /* GB/s (1e9 bytes) of reading probe_bytes, summing them */
    double fma_gflops;   /* float32 GFLOP/s of independent fused multiply-adds in registers */
    const char *isa;     /* the vector instructions the probes used */
} Roofline;

/* Measures both with threads threads: bandwidth over a buffer of bytes (pass
 * the bytes a decode step streams, so the probe sees the same caches), the
 * best of several passes; the FMA peak over about 0.1 s. */
void roofline_measure(Roofline *r, size_t bytes, int threads);

#endif
