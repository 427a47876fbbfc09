/* fuzz_checkpoint.c — libFuzzer target: any bytes as a checkpoint (qkv of
 * either architecture, llama2.c legacy or v1). A file either loads or is
 * refused with a reason; one that loads has its tokenizer section read (as
 * its kind) and one position run through every weight, as `./run` would,
 * with a float32 KV cache and with an int8 one. */
#ifndef QKV_FUZZ_ENGINE_APART /* make test's replay links build/engine.o (engine.c) */
#define QKV_MODEL_IMPLEMENTATION
#define QKV_SAMPLER_IMPLEMENTATION
#endif
#include "../../model.h"
#include "../../sampler.h"
#include "../../tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a mapped file starts on a page: give the loader an aligned copy */
    unsigned char *file = malloc(size ? size : 1);
    if (!file) return 0;
    memcpy(file, data, size);
    Model m;
    char err[512] = "";
    if (model_load_memory(&m, file, size, err, sizeof err) != 0) {
        if (!err[0]) __builtin_trap(); /* a refusal always says why */
        free(file);
        return 0;
    }
    if (m.tokenizer_data) {
        Tokenizer t;
        if (tokenizer_load_kind(&t, m.tokenizer_data, m.tokenizer_bytes, m.config.vocab_size, m.config.tokenizer_kind,
                                err, sizeof err) == 0)
            tokenizer_free(&t);
    }
    RunState s;
    if (run_state_init(&s, &m.config, 1) == 0) {
        float *logits = forward(&m, &s, m.config.bos_id >= 0 ? m.config.bos_id : 0, 0, NULL); /* a character model has no BOS */
        Sampler sampler;
        if (sampler_init(&sampler, m.config.vocab_size, 1.0f, 0.9f, 0, 1) == 0) {
            int next = sample(&sampler, logits, NULL);
            if (next < -1 || next >= m.config.vocab_size) __builtin_trap();
            sampler_free(&sampler);
        }
        run_state_free(&s);
    }
    /* the position again into an int8 KV cache: its rows are quantized from
     * whatever the weights made of them (NaN, infinity, 1e38) */
    if (run_state_init_kv(&s, &m.config, 1, KV_Q8) == 0) {
        forward(&m, &s, m.config.bos_id >= 0 ? m.config.bos_id : 0, 0, NULL);
        run_state_free(&s);
    }
    model_free(&m);
    free(file);
    return 0;
}
