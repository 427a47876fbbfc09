/* fuzz_prompt.c — libFuzzer target: any bytes as a prompt to a tiny model
 * (tests/data/gqa.qkv, or $QKV_FUZZ_MODEL): encode with BOS, run up to 8
 * positions through forward_tokens, sample greedily, decode. Run from the
 * repository root. */
#include "../../model.h" /* implemented in engine.c, outside the coverage instrumentation */
#include "../../sampler.h"
#include "../../tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_POSITIONS 8

static int run_prompt(const Model *m, const Tokenizer *t, const char *text) {
    int *ids = malloc((strlen(text) + 3) * sizeof(int));
    if (!ids) return 0;
    int n = tokenizer_encode(t, text, 1, 0, ids);
    if (n > MAX_POSITIONS) n = MAX_POSITIONS;
    if (n > m->config.seq_len) n = m->config.seq_len;
    RunState s;
    Sampler sampler;
    if (n > 0 && run_state_init(&s, &m->config, n) == 0) {
        for (int i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= m->config.vocab_size) __builtin_trap();
        float *logits = forward_tokens(m, &s, ids, n, 0, NULL);
        if (sampler_init(&sampler, m->config.vocab_size, 0.0f, 0.9f, 0, 1) == 0) {
            int next = sample(&sampler, logits, NULL), len;
            if (next < -1 || next >= m->config.vocab_size) __builtin_trap();
            if (next >= 0) (void)tokenizer_decode(t, ids[n - 1], next, &len);
            sampler_free(&sampler);
        }
        run_state_free(&s);
    }
    free(ids);
    return 0;
}

/* The model and tokenizer, loaded once: loading them for every input made
 * the fuzzer 50x slower. They are only read afterwards. */
typedef struct {
    Model m;
    Tokenizer t;
} Fixture;

static const Fixture *fixture(void) {
    static Fixture f;
    static int loaded = 0;
    if (loaded) return &f;
    const char *path = getenv("QKV_FUZZ_MODEL");
    char err[512];
    if (model_load(&f.m, path ? path : "tests/data/gqa.qkv", err, sizeof err) ||
        tokenizer_load_bytes(&f.t, f.m.tokenizer_data, f.m.tokenizer_bytes, f.m.config.vocab_size, err, sizeof err)) {
        fprintf(stderr, "fuzz_prompt: %s (run from the repository root)\n", err);
        abort();
    }
    f.t.bos_id = f.m.config.bos_id;
    f.t.eos_id = f.m.config.eos_id;
    loaded = 1;
    return &f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const Fixture *f = fixture();
    char *text = malloc(size + 1);
    if (text) {
        memcpy(text, data, size);
        text[size] = '\0';
        run_prompt(&f->m, &f->t, text);
    }
    free(text);
    return 0;
}
