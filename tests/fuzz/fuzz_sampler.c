/* fuzz_sampler.c — libFuzzer target: sample() on arbitrary logits and
 * settings. Input: u16 vocab size, f32 temperature, f32 top-p, u16 top-k,
 * u64 seed, then f32 logits (little-endian). The answer is a token of the
 * vocabulary, or -1 exactly when a logit is NaN or infinite. */
#ifndef QKV_FUZZ_ENGINE_APART /* make test's replay links build/engine.o (engine.c) */
#define QKV_MODEL_IMPLEMENTATION
#define QKV_SAMPLER_IMPLEMENTATION
#endif
#include "../../model.h"
#include "../../sampler.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_BYTES 20

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < HEADER_BYTES) return 0;
    uint16_t vocab, topk;
    float temperature, topp;
    uint64_t seed;
    memcpy(&vocab, data, 2);
    memcpy(&temperature, data + 2, 4);
    memcpy(&topp, data + 6, 4);
    memcpy(&topk, data + 10, 2);
    memcpy(&seed, data + 12, 8);
    size_t n = (size - HEADER_BYTES) / sizeof(float);
    if (n > vocab) n = vocab;
    if (n == 0) return 0;
    float *logits = malloc(n * sizeof(float));
    if (!logits) return 0;
    memcpy(logits, data + HEADER_BYTES, n * sizeof(float));
    int bad = logits_check(logits, (int)n) >= 0;
    Sampler s;
    if (sampler_init(&s, (int)n, temperature, topp, topk, seed) == 0) {
        int id = sample(&s, logits, NULL);
        if (bad ? id != -1 : (id < 0 || id >= (int)n)) __builtin_trap();
        sampler_free(&s);
    }
    free(logits);
    return 0;
}
