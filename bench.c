/* bench.c — placeholder until the benchmark lands */
#include "bench.h"
#include <stdio.h>
int bench_run(const Model *m, const BenchOptions *o, char *err, size_t err_len) {
    (void)m; (void)o;
    snprintf(err, err_len, "bench mode is not built yet");
    return -1;
}
