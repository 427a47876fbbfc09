/* team.h — a team of threads that stays up for a whole run, so each of a
 * decode step's parallel loops costs a store and a wait, not a fork and a
 * join.
 *
 * stb-style: the interface everywhere, the implementation where
 * QKV_TEAM_IMPLEMENTATION is defined (model.h's implementation does).
 *
 * Why: a decode step of llama2.c's 15M shape runs 31 parallel loops (four
 * matrix products and attention a layer, then the classifier), each about
 * 20 us on two threads. With an OpenMP region each, the second thread
 * started 1-2 us after the first and the join took 0.5 us more (measured
 * inside the step, float16 weights, Xeon): about 10% of the step. Here the
 * other threads wait in a loop of their own between loops, reading one
 * cache line, and start a task as soon as thread 0 posts it.
 *
 *     team_main(threads, body, ctx);     body(team, ctx) runs on thread 0
 *     team_run(team, task, ctx, parallel);   task(ctx, id, n) on n threads
 *     team_run_items(team, n_items, items, ctx, parallel);
 *                                        items(ctx, first, last), a share each
 *
 * Without a team (team NULL: tests, tools, -m ppl) team_run is an OpenMP
 * region, as before. Either way a task splits its work by (id, n) alone, so
 * its results do not depend on which one ran it. */
#ifndef QKV_TEAM_H
#define QKV_TEAM_H

typedef struct Team Team;

#define TEAM_MAX 64 /* threads a team holds at most */

/* A parallel task: thread id of n does its share of ctx's work. */
typedef void (*TeamTask)(void *ctx, int id, int n);

/* Runs body(team, ctx) on this thread with threads - 1 others waiting for
 * tasks (threads <= 1, or no OpenMP: body(NULL, ctx)); returns body's
 * value. The team ends when body returns. */
int team_main(int threads, int (*body)(Team *team, void *ctx), void *ctx);

/* Threads the next tasks use: 1..the team's size (the thread choice of
 * threads.h, step by step). */
void team_set_threads(Team *team, int threads);

/* task(ctx, id, n) for id < n, id 0 on this thread; n = 1, called here
 * without any OpenMP call, when parallel is 0 (work too small to share).
 * With no team, an OpenMP region of OpenMP's thread count. Thread 0
 * returns when all are through. */
void team_run(Team *team, TeamTask task, void *ctx, int parallel);

/* Items first..last-1 of n_items: thread id's share of n, in order. */
static inline void team_share(long n_items, int id, int n, long *first, long *last) {
    *first = n_items * id / n;
    *last = n_items * (id + 1) / n;
}

/* A task over items: items first..last-1 of ctx's work. */
typedef void (*TeamItems)(void *ctx, long first, long last);

/* team_run for work that is n_items alike: each thread calls items() on
 * its team_share of them (every engine loop is of this kind). */
void team_run_items(Team *team, long n_items, TeamItems items, void *ctx, int parallel);

#endif /* QKV_TEAM_H */

/* ======================================================================== */
#ifdef QKV_TEAM_IMPLEMENTATION
#ifndef QKV_TEAM_IMPLEMENTED
#define QKV_TEAM_IMPLEMENTED

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
long syscall(long number, ...); /* unistd.h declares it only for _DEFAULT_SOURCE */
#endif

#define TEAM_SPIN_NS 200000  /* a waiting thread spins this long, then sleeps until a task comes */

/* one cache line each: each thread writes its own done */
typedef struct {
    _Alignas(64) atomic_uint value;
} TeamFlag;

/* team_run_items' work: n_items items, items() and its context */
typedef struct {
    long n_items;
    TeamItems items;
    void *ctx;
} TeamItemsJob;

/* A post: the task's number and everything a thread reads to run it, in
 * the one cache line the waiting threads watch. Seeing the number brings
 * the rest along; with the task and its context in lines of their own,
 * each was one more trip from thread 0's core before any work began. */
typedef struct {
    _Alignas(64) atomic_uint number; /* the number of the task posted last */
    atomic_int stop;                 /* the team ends at the next post */
    atomic_int sleepers;             /* threads asleep on number */
    int task_n;                      /* the task, its context and its thread count */
    TeamTask task;
    void *ctx;
    TeamItemsJob items;              /* the work, when the task is team_run_items' */
} TeamPost;
_Static_assert(sizeof(TeamPost) == 64, "a post is one cache line");

struct Team {
    TeamPost post;
    int n, size;             /* threads for the next tasks (team_set_threads); threads in the team */
    TeamFlag done[TEAM_MAX]; /* the number of the last task each thread saw through */
};

static inline void team_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void team_wake(Team *t) {
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)&t->post.number, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)t;
#endif
}

#ifdef _OPENMP /* the other threads of a team (team_main) */
static double team_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Sleeps while the post's number is still seen (Linux: a futex, woken by the next
 * post; elsewhere naps of 50 us). */
static void team_sleep(Team *t, unsigned seen) {
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)&t->post.number, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
#else
    (void)t;
    (void)seen;
    struct timespec nap = { 0, 50000 };
    nanosleep(&nap, NULL);
#endif
}

/* Waits until a task other than number seen is posted; returns its number.
 * Spinning keeps the start of a task to a cache line's trip; after
 * TEAM_SPIN_NS without one (tokenizing, printing, --step waiting for a key,
 * a stretch of one-thread steps on a busy machine) the thread sleeps, so an
 * idle team holds no core. */
static unsigned team_wait(Team *t, unsigned seen) {
    unsigned posted = atomic_load_explicit(&t->post.number, memory_order_acquire);
    double since = team_now_ns();
    for (long spins = 1; posted == seen; spins++) {
        team_pause();
        if (spins % 256 == 0 && team_now_ns() - since > TEAM_SPIN_NS) {
            atomic_fetch_add(&t->post.sleepers, 1); /* seq_cst: thread 0 sees it, or this sees the post */
            while ((posted = atomic_load(&t->post.number)) == seen) team_sleep(t, seen);
            atomic_fetch_sub(&t->post.sleepers, 1);
        }
        posted = atomic_load_explicit(&t->post.number, memory_order_acquire);
    }
    return posted;
}

/* Thread id (> 0): run each task posted, until the team ends. */
static void team_worker(Team *t, int id) {
    for (unsigned seen = 0;;) {
        seen = team_wait(t, seen);
        int stop = atomic_load_explicit(&t->post.stop, memory_order_relaxed);
        if (!stop && id < t->post.task_n) t->post.task(t->post.ctx, id, t->post.task_n);
        atomic_store_explicit(&t->done[id].value, seen, memory_order_release);
        if (stop) return;
    }
}
#endif

/* Thread 0: the next task's number is out; wake the threads asleep. */
static unsigned team_post(Team *t) {
    unsigned number = atomic_load_explicit(&t->post.number, memory_order_relaxed) + 1;
    atomic_store(&t->post.number, number); /* seq_cst: against the sleepers' count */
    if (atomic_load(&t->post.sleepers) > 0) team_wake(t);
    return number;
}

/* Thread 0: wait until every other thread is through task number. The
 * first TEAM_AWAIT_TIGHT reads go without a pause: a pause on this Xeon
 * lasts longer than the others usually take to finish once thread 0 is
 * through its share, and the step waits for that delay at every meeting
 * (without it a decode step of the stories model, float16, two threads,
 * took 2-3 us less of 275). Past them a pause leaves the core to a
 * hyperthread sibling, as in team_wait. */
#define TEAM_AWAIT_TIGHT 4096
static void team_await(Team *t, unsigned number) {
    for (int i = 1; i < t->size; i++)
        for (long reads = 0; atomic_load_explicit(&t->done[i].value, memory_order_acquire) != number; reads++)
            if (reads >= TEAM_AWAIT_TIGHT) team_pause();
}

int team_main(int threads, int (*body)(Team *team, void *ctx), void *ctx) {
#ifdef _OPENMP
    if (threads > TEAM_MAX) threads = TEAM_MAX;
    Team *t = threads > 1 ? aligned_alloc(64, (sizeof(Team) + 63) / 64 * 64) : NULL;
    if (t) {
        atomic_init(&t->post.number, 0);
        atomic_init(&t->post.sleepers, 0);
        atomic_init(&t->post.stop, 0);
        for (int i = 0; i < TEAM_MAX; i++) atomic_init(&t->done[i].value, 0);
        t->post.task = NULL;
        t->post.ctx = NULL;
        t->post.task_n = 1;
        t->post.items = (TeamItemsJob){ 0, NULL, NULL };
        t->n = t->size = threads;
        /* a release the others' first read acquires: they see t whole (the
         * fork's own ordering is libgomp's, which ThreadSanitizer cannot see) */
        atomic_store_explicit(&t->post.number, 0, memory_order_release);
        int result = 0;
#pragma omp parallel num_threads(threads)
        {
            if (omp_get_thread_num() == 0) {
                t->n = t->size = omp_get_num_threads(); /* OpenMP may give fewer; only thread 0 reads them */
                result = body(t, ctx);
                atomic_store(&t->post.stop, 1);
                team_await(t, team_post(t)); /* the others are out before t is freed */
            } else {
                team_worker(t, omp_get_thread_num());
            }
        }
        free(t);
        return result;
    }
#else
    (void)threads;
#endif
    return body(NULL, ctx);
}

void team_set_threads(Team *team, int threads) {
    if (!team) return;
    team->n = threads < 1 ? 1 : threads > team->size ? team->size : threads;
}

void team_run(Team *team, TeamTask task, void *ctx, int parallel) {
    if (!parallel) { /* small work: no OpenMP call either (even an if clause's costs 0.2 us) */
        task(ctx, 0, 1);
        return;
    }
    if (!team) {
#ifdef _OPENMP
#pragma omp parallel
        task(ctx, omp_get_thread_num(), omp_get_num_threads());
#else
        task(ctx, 0, 1);
#endif
        return;
    }
    int n = team->n;
    if (n == 1) {
        task(ctx, 0, 1);
        return;
    }
    /* every thread sees each task through (those past n only say so), so
     * none still reads this one's fields when the next is posted */
    team->post.task = task;
    team->post.ctx = ctx;
    team->post.task_n = n;
    unsigned number = team_post(team);
    task(ctx, 0, n);
    team_await(team, number);
}

static void team_items_share(void *ctx, int id, int n) {
    const TeamItemsJob *job = ctx;
    long first, last;
    team_share(job->n_items, id, n, &first, &last);
    job->items(job->ctx, first, last);
}

void team_run_items(Team *team, long n_items, TeamItems items, void *ctx, int parallel) {
    TeamItemsJob job = { n_items, items, ctx };
    if (parallel && team && team->n > 1) {
        team->post.items = job; /* in the post's line: the threads find the work with its number */
        team_run(team, team_items_share, &team->post.items, 1);
        return;
    }
    team_run(team, team_items_share, &job, parallel);
}

#endif /* QKV_TEAM_IMPLEMENTED */
#endif /* QKV_TEAM_IMPLEMENTATION */
