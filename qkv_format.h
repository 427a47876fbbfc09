/* qkv_format.h — the numbers and names of qkv's own checkpoint format that
 * its reader (checkpoint.h) and its writer (quantize.c) share, so the two
 * cannot drift apart (README's "Checkpoint format" has the whole layout). */
#ifndef QKV_QKV_FORMAT_H
#define QKV_QKV_FORMAT_H

#define QKV_HEADER_BYTES 256
#define QKV_HEADER_USED_BYTES 116 /* the fields; the rest is reserved, zero */
#define QKV_TENSOR_ENTRY_BYTES 96
#define QKV_TENSOR_NAME_BYTES 64
#define QKV_ALIGNMENT 64 /* of each tensor's data, as the writer lays them out */

/* The tensors outside the layers: the embedding, the final norm, the
 * classifier (a file with a tied one has none); GPT-2's position table */
#define QKV_EMBEDDING_TENSOR "tok_embeddings"
#define QKV_NORM_TENSOR "norm"
#define QKV_OUTPUT_TENSOR "output"
#define QKV_POSITION_TENSOR "pos_embeddings"
/* GPT-2's bias of a norm or matrix NAME is NAME.bias */
#define QKV_BIAS ".bias"

/* Layer l's tensors are layers.l.NAME, NAME in LayerWeights' order (GGUF's,
 * gguf_format.h, come in the same order). GPT-2 has the first
 * QKV_GPT2_PER_LAYER, each followed by its bias. */
static const char *const QKV_LAYER_TENSORS[] = {
    "attention_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo",
    "ffn_norm", "feed_forward.w1", "feed_forward.w2", "feed_forward.w3",
};
#define QKV_PER_LAYER 9
#define QKV_GPT2_PER_LAYER 8

#endif
