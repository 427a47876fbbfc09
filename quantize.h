/* quantize.h — writes a loaded checkpoint back out as a qkv file (or a GGUF
 * file for llama.cpp) with another weight type: float32, float16, Q8_0 or
 * Q4_0 (kernels.h). */
#ifndef QKV_QUANTIZE_H
#define QKV_QUANTIZE_H

#include "model.h"
#include "tokenizer.h"

/* Converts every matrix of m to type (norms stay float32) and writes a qkv
 * file with t embedded as its tokenizer; a GGUF file (version 3, llama
 * architecture, t in its metadata) if out_path ends in ".gguf". The file
 * appears whole or not at all (written beside, then renamed). Returns 0, or
 * -1 with one line in err. */
int quantize_checkpoint(const Model *m, const Tokenizer *t, WeightType type, const char *out_path, char *err,
                        size_t err_len);

#endif
