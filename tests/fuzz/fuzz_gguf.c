/* fuzz_gguf — a libFuzzer target for the GGUF loader (gguf.h). Any input must
 * be loaded or refused with an error: never a crash, a read out of bounds, a
 * hang or a leak. A loaded model must also hold up: its tokenizer section
 * reads back as one, and every byte of every tensor lies inside the input.
 *
 * Build and run from the project's root (clang with libclang-rt-dev):
 *   clang -std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 -DQKV_PORTABLE \
 *       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *       -o build/fuzz_gguf tests/fuzz/fuzz_gguf.c tokenizer.c -lm
 *   mkdir -p build/corpus-gguf
 *   build/fuzz_gguf -max_total_time=60 -max_len=65536 build/corpus-gguf tests/fuzz/corpus/gguf
 * New inputs go to build/corpus-gguf; the seeds (tests/gguf_files.py seeds)
 * stay as they are. */
#ifndef QKV_FUZZ_ENGINE_APART /* make test's replay links build/engine.o (engine.c) */
#define QKV_MODEL_IMPLEMENTATION
#endif
#include "../../model.h"
#include "../../tokenizer.h"

#include <stdint.h>
#include <stdlib.h>

/* The sum of n bytes: reading every byte of every tensor makes a bound the
 * loader got wrong show as an out-of-bounds read. (The forward pass is not
 * run: fuzzed weights are often NaN, and the kernels' int8 conversion of
 * NaN activations is undefined behaviour of its own, kernels.h's matter.) */
static unsigned touch(const void *p, size_t n) {
    const unsigned char *b = p;
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++) sum += b[i];
    return sum;
}

static unsigned touch_weights(const Model *m) {
    const Config *c = &m->config;
    size_t norm = (size_t)c->dim * sizeof(float);
    unsigned sum = touch(m->weights.token_embedding.data, matrix_bytes(&m->weights.token_embedding)) +
                   touch(m->weights.classifier.data, matrix_bytes(&m->weights.classifier)) +
                   touch(m->weights.final_norm, norm);
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *w = &m->weights.layers[l];
        const Matrix *mats[] = { &w->wq, &w->wk, &w->wv, &w->wo, &w->w1, &w->w2, &w->w3 };
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) sum += touch(mats[i]->data, matrix_bytes(mats[i]));
        sum += touch(w->attention_norm, norm) + touch(w->ffn_norm, norm);
    }
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Model m;
    char err[512];
    if (gguf_load_memory(&m, data, size, err, sizeof err) != 0) return 0;
    Tokenizer t;
    if (m.tokenizer_data) {
        if (tokenizer_load_bytes(&t, m.tokenizer_data, m.tokenizer_bytes, m.config.vocab_size, err, sizeof err) != 0)
            __builtin_trap(); /* the loader built a section the tokenizer cannot read */
        tokenizer_free(&t);
    }
    volatile unsigned sink = touch_weights(&m);
    (void)sink;
    model_free(&m);
    return 0;
}
