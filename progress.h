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
#include <string.h>
#include <time.h>

#include "output_file.h" /* terminal_columns */

typedef struct {
    const char *label;
    int columns;            /* stderr's terminal's width; 0: not a terminal, no bar */
    double start, last;     /* seconds: when it began, when it last drew */
} Progress;

/* Seconds on the monotonic clock (the timings of every mode) */
static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline Progress progress_start(const char *label) {
    Progress p = { label, terminal_columns(stderr), now_seconds(), 0 };
    return p;
}

/* label [#########.........]  45%  what  12 s left: 20 columns of bar, then
 * the caller's words. Within the terminal's width less one (a line that
 * wraps leaves its first rows behind at each redraw): the words go first,
 * then the time left, then the bar shrinks. */
static inline void progress_update(Progress *p, double done, double total, const char *what) {
    double now = now_seconds();
    if (!p->columns || total <= 0 || (now - p->last < 0.1 && done < total)) return;
    p->last = now;
    double f = done / total > 1 ? 1 : done / total;
    double elapsed = now - p->start, left = f > 0 ? elapsed * (1 - f) / f : 0;
    char tail[64];
    int room = p->columns - 1 - (int)strlen(p->label) - 9; /* " [", "] ", "100%" and a bar of 1 */
    int n = snprintf(tail, sizeof tail, "  %.28s  %.0f s left", what, left);
    if (n > room - 19) n = snprintf(tail, sizeof tail, "  %.0f s left", left);
    if (n > room - 4) n = (tail[0] = '\0', 0);
    int width = room + 1 - n > 20 ? 20 : room + 1 - n;
    char bar[21];
    for (int i = 0; i < width && i < 20; i++) bar[i] = i < (int)(f * width + 0.5) ? '#' : '.';
    bar[width > 0 ? width : 0] = '\0';
    fprintf(stderr, "\r%s [%s] %3.0f%%%s\033[K", p->label, bar, 100 * f, tail);
    fflush(stderr);
}

static inline void progress_end(Progress *p) {
    if (p->columns) fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

#endif
