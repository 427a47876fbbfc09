/* team_stress.c — team.h under ThreadSanitizer (.ci/run): thousands of
 * tasks on teams of 2 and 3, the thread count changed between them, pauses
 * long enough for the waiting threads to fall asleep on the futex, and a
 * real forward pass of models/stories.bin on a team. Any race ThreadSanitizer
 * sees, or an item a task missed or saw twice, fails it (exit status not 0).
 *
 * libgomp is not instrumented, so the synchronization this checks is
 * team.h's own (C11 atomics and the futex); the team's threads only meet
 * through it. */
#define QKV_MODEL_IMPLEMENTATION
#include "../model.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct {
    long items;
    int marks[4096];
} Marks;

static void mark(void *ctx, int id, int n) {
    Marks *m = ctx;
    long first, last;
    team_share(m->items, id, n, &first, &last);
    for (long i = first; i < last; i++) m->marks[i]++;
}

static int tasks(Team *team, void *ctx) {
    int *bad = ctx;
    static Marks m;
    for (int r = 0; r < 3000; r++) {
        team_set_threads(team, 1 + r % 3);
        m.items = (r * 37) % 4096;
        memset(m.marks, 0, sizeof m.marks);
        team_run(team, mark, &m, r % 7 != 0);
        for (long i = 0; i < m.items; i++) *bad += m.marks[i] != 1;
        if (r % 400 == 0) { /* past the spin: the others sleep, and the next post wakes them */
            struct timespec nap = { 0, 400000 };
            nanosleep(&nap, NULL);
        }
    }
    return team != NULL;
}

static int forward_steps(Team *team, void *ctx) {
    const Model *m = ctx;
    RunState s;
    if (run_state_init(&s, &m->config, 64)) return -1;
    s.team = team;
    int tokens[40];
    for (int i = 0; i < 40; i++) tokens[i] = 1 + i * 13 % (m->config.vocab_size - 1);
    forward_tokens(m, &s, tokens, 30, 0, NULL);
    for (int pos = 30; pos < 40; pos++) forward(m, &s, tokens[pos], pos, NULL);
    run_state_free(&s);
    return team != NULL;
}

int main(void) {
    int bad = 0;
    int on_team = team_main(2, tasks, &bad) + team_main(3, tasks, &bad);
    Model m;
    char err[256];
    if (model_load(&m, "models/stories.bin", err, sizeof err)) {
        fprintf(stderr, "team_stress: %s\n", err);
        return 1;
    }
    on_team += team_main(2, forward_steps, &m);
    model_free(&m);
    printf("team_stress: %d items missed or seen twice, %d of 3 runs on a team\n", bad, on_team);
    return bad == 0 && on_team == 3 ? 0 : 1;
}
