/* compare_logits — runs the same tokens through two checkpoints and prints
 * the largest difference of their logits (for tests/test_gguf.sh):
 *
 *   compare_logits A B 1,283,290,...   ->  "max_abs_diff D max_abs_logit L positions N"
 *
 * Each position goes through forward() one token at a time, so both models
 * do exactly the engine's arithmetic; bit-identical weights give D = 0.
 * Linked with the engine's implementation (tests/fuzz/engine.c). */
#include "../model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: compare_logits A B TOKEN,TOKEN,...\n");
        return 2;
    }
    Model a, b;
    RunState sa, sb;
    char err[512];
    if (model_load(&a, argv[1], err, sizeof err) || model_load(&b, argv[2], err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    if (a.config.vocab_size != b.config.vocab_size || run_state_init(&sa, &a.config, 0) || run_state_init(&sb, &b.config, 0)) {
        fprintf(stderr, "error: the vocabularies differ, or out of memory\n");
        return 1;
    }
    double worst = 0, largest = 0;
    int pos = 0;
    for (char *p = argv[3]; *p && pos < a.config.seq_len; pos++) {
        int token = (int)strtol(p, &p, 10);
        if (*p == ',') p++;
        const float *la = forward(&a, &sa, token, pos, NULL), *lb = forward(&b, &sb, token, pos, NULL);
        for (int i = 0; i < a.config.vocab_size; i++) {
            if (fabs(la[i] - lb[i]) > worst || isnan(la[i] - lb[i])) worst = isnan(la[i] - lb[i]) ? INFINITY : fabs(la[i] - lb[i]);
            if (fabs(la[i]) > largest) largest = fabs(la[i]);
        }
    }
    printf("max_abs_diff %.9g max_abs_logit %.9g positions %d\n", worst, largest, pos);
    run_state_free(&sa);
    run_state_free(&sb);
    model_free(&a);
    model_free(&b);
    return 0;
}
