/* threads.h: how many OpenMP threads the next forward call gets, chosen by
 * measuring.
 *
 * Two threads halve a step on an idle machine, but on a busy one (another
 * job on the other core) every parallel loop waits until the second thread
 * gets the core back: measured here, a decode step on models/stories.bin ran
 * 16-20x slower with two threads than with one while another process kept
 * one core busy. So unless --threads (or OMP_NUM_THREADS) fixes the count,
 * generate and ppl time their steps with all threads and with one, keep the
 * faster, and look again at the other now and then (at doubling intervals,
 * up to every THREAD_PROBE_MAX steps, so a probe of a slow setting costs
 * little).
 * The result does not depend on the choice: every kernel gives the same bits
 * with any number of threads (tested).
 *
 *     ThreadChoice tc = thread_choice(omp_get_max_threads(), forced);
 *     thread_choice_apply(&tc);   (OpenMP's count for the step: 1 or all) ... step ...
 *     thread_choice_record(&tc, seconds, tokens);
 */
#ifndef QKV_THREADS_H
#define QKV_THREADS_H

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define THREAD_PROBE_FIRST 4
#define THREAD_PROBE_MAX 1024

typedef struct {
    int most;              /* all threads: OpenMP's count */
    int forced;            /* --threads or OMP_NUM_THREADS: always most */
    double per_token[2];   /* seconds a token, running mean: [0] one thread, [1] all; 0: unknown */
    int use;               /* the setting of choice: 0 one thread, 1 all */
    int probing;           /* the step being timed uses the other setting */
    long steps, next_probe, probe_every;
} ThreadChoice;

/* Whether OMP_NUM_THREADS's value (NULL: unset) fixes the count, as
 * libgomp reads it: a list of one or more positive numbers (strtoul's:
 * "+3", "03"), commas between, spaces around each. Empty, 0, negative,
 * "3," or anything else it warns of and ignores (every core): then the
 * choice is measured, as unset. */
static inline int omp_count_given(const char *value) {
    if (!value) return 0;
    for (const char *p = value;;) {
        char *end;
        while (isspace((unsigned char)*p)) p++;
        if (*p == '-') return 0;
        errno = 0;
        unsigned long n = strtoul(p, &end, 10);
        if (end == p || errno || n == 0) return 0;
        while (isspace((unsigned char)*end)) end++;
        if (*end == '\0') return 1;
        if (*end != ',') return 0;
        p = end + 1;
    }
}

static inline ThreadChoice thread_choice(int most, int forced) {
    ThreadChoice t = { most, forced || most < 2, { 0, 0 }, 1, 0, 0, THREAD_PROBE_FIRST, THREAD_PROBE_FIRST };
    return t;
}

/* The threads of the next step. */
static inline int thread_choice_next(ThreadChoice *t) {
    if (t->forced) return t->most;
    t->probing = t->steps == t->next_probe;
    int setting = t->probing ? !t->use : t->use;
    return setting ? t->most : 1;
}

/* The step took seconds for tokens tokens: fold it into its setting's mean;
 * after a probe, switch if the other setting was faster, and probe again
 * soon after a switch, ever later while the choice holds. */
static inline void thread_choice_record(ThreadChoice *t, double seconds, int tokens) {
    if (t->forced || tokens < 1) return;
    int setting = t->probing ? !t->use : t->use;
    double s = seconds / tokens, *mean = &t->per_token[setting];
    /* a probe's one step replaces its setting's mean: the machine's load may
     * have changed since the last probe */
    *mean = *mean > 0 && !t->probing ? 0.75 * *mean + 0.25 * s : s;
    t->steps++;
    if (!t->probing) return;
    if (t->per_token[!t->use] > 0 && t->per_token[!t->use] < t->per_token[t->use]) {
        t->use = !t->use;
        t->probe_every = THREAD_PROBE_FIRST;
    } else if (t->probe_every < THREAD_PROBE_MAX) {
        t->probe_every *= 2;
    }
    t->next_probe = t->steps + t->probe_every;
}

/* Sets OpenMP's count for the next step; returns it. */
static inline int thread_choice_apply(ThreadChoice *t) {
    int n = thread_choice_next(t);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    return n;
}

#endif
