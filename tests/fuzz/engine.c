/* engine.c — the model and sampler implementations as a translation unit of
 * their own, for fuzz_prompt: built with ASan and UBSan but without the
 * fuzzer's coverage instrumentation. The forward pass's loops do not branch
 * on the prompt's bytes, and tracing their compares made the target 20x
 * slower; the tokenizer, which does branch on them, stays instrumented.
 * make test also links it, compiled once, into the fuzz replays and the test
 * programs that use the engine through its interface only
 * (tests/cached_build.sh: engine_build). */
#define QKV_MODEL_IMPLEMENTATION
#include "../../model.h"
#define QKV_SAMPLER_IMPLEMENTATION
#include "../../sampler.h"
