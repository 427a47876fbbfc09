/* engine.c — the engine's implementation: model.h (loading, kernels, KV
 * cache, attention, the forward pass) and sampler.h, all but the float
 * kernels, which are kernels_float.c's.
 *
 * The kernels are most of the build's time (each tile shape is a function
 * of its own), so the two translation units are compiled once, side by
 * side, and joined into build/engine.o, which ./run, the test programs that
 * use the engine through its interface, and the fuzz replays link. The
 * libFuzzer prompt target links both too, built without the fuzzer's
 * coverage instrumentation: the forward pass's loops do not branch on the
 * prompt's bytes, and tracing their compares made that target 20x slower
 * (the tokenizer, which does branch on them, stays instrumented). */
#define QKV_MODEL_IMPLEMENTATION
#include "model.h"
#define QKV_SAMPLER_IMPLEMENTATION
#include "sampler.h"
