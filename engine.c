/* engine.c — the engine's implementation as one translation unit: model.h
 * (loading, kernels, KV cache, attention, the forward pass) and sampler.h.
 *
 * Its kernels are most of the build's time (each tile shape is a function of
 * its own), so they are compiled once, to build/engine.o, and linked into
 * ./run, the test programs that use the engine through its interface, and
 * the fuzz replays. The libFuzzer prompt target links it too, built without
 * the fuzzer's coverage instrumentation: the forward pass's loops do not
 * branch on the prompt's bytes, and tracing their compares made that target
 * 20x slower (the tokenizer, which does branch on them, stays instrumented). */
#define QKV_MODEL_IMPLEMENTATION
#include "model.h"
#define QKV_SAMPLER_IMPLEMENTATION
#include "sampler.h"
