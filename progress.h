/* progress.h: a one-line progress bar on stderr for long runs (-m ppl, -m bench).
 *
 *     Progress p = progress_start("ppl");     (silent unless stderr is a terminal)
 *     progress_update(&p, done, total, "document 12/149");
 *     progress_end(&p);                       (clears the line)
 *
 * The bar is redrawn at most ten times a second, so it costs nothing beside
 * the work it reports; a pipe or a file never receives it. */
#ifndef QKV_PROGRESS_H
#define QKV_PROGRESS_H

#include <stdio.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *label;
    int on;                 /* stderr is a terminal */
    double start, last;     /* seconds: when it began, when it last drew */
} Progress;

/* Seconds on the monotonic clock (the timings of every mode) */
static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline Progress progress_start(const char *label) {
    Progress p = { label, isatty(2), now_seconds(), 0 };
    return p;
}

/* [#########.........]  45%  what  12 s left: 20 columns of bar, the rest of
 * an 80-column line for the caller's words. */
static inline void progress_update(Progress *p, double done, double total, const char *what) {
    double now = now_seconds();
    if (!p->on || total <= 0 || (now - p->last < 0.1 && done < total)) return;
    p->last = now;
    double f = done / total > 1 ? 1 : done / total;
    char bar[21];
    for (int i = 0; i < 20; i++) bar[i] = i < (int)(f * 20 + 0.5) ? '#' : '.';
    bar[20] = '\0';
    double elapsed = now - p->start, left = f > 0 ? elapsed * (1 - f) / f : 0;
    fprintf(stderr, "\r%s [%s] %3.0f%%  %.28s  %.0f s left\033[K", p->label, bar, 100 * f, what, left);
    fflush(stderr);
}

static inline void progress_end(Progress *p) {
    if (p->on) fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

#endif
