/* gguf_format.h — the numbers and names of llama.cpp's GGUF format that its
 * reader (gguf.h) and its writer (quantize.c) share, so the two cannot
 * drift apart: the metadata's value types, the tokenizer's token types,
 * ggml's tensor types and the "llama" architecture's tensor names. */
#ifndef QKV_GGUF_FORMAT_H
#define QKV_GGUF_FORMAT_H

/* Metadata value types */
enum { GGUF_U8, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING,
       GGUF_ARRAY, GGUF_U64, GGUF_I64, GGUF_F64, GGUF_VALUE_TYPES };

/* tokenizer.ggml.token_type of a piece */
enum { GGUF_TOKEN_NORMAL = 1, GGUF_TOKEN_UNKNOWN = 2, GGUF_TOKEN_CONTROL = 3, GGUF_TOKEN_BYTE = 6 };

/* ggml's tensor types that qkv reads and writes (their blocks are qkv's own) */
enum { GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1, GGML_TYPE_Q4_0 = 2, GGML_TYPE_Q8_0 = 8 };

/* The tensors: token_embd.weight, output_norm.weight, output.weight, and
 * for block l blk.l.NAME.weight, NAME in LayerWeights' order (the order of
 * a qkv file's layer tensors too) */
static const char *const GGUF_GLOBAL_TENSORS[3] = { "token_embd.weight", "output_norm.weight", "output.weight" };
static const char *const GGUF_LAYER_TENSORS[] = { "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                                  "ffn_norm", "ffn_gate", "ffn_down", "ffn_up" };
#define GGUF_PER_LAYER 9

#endif
