/* model.h — the transformer: config, weights, KV cache and the forward pass.
 *
 * stb-style: this header is the interface everywhere, and the implementation
 * in the one file that defines QKV_MODEL_IMPLEMENTATION before including it
 * (engine.c), linked with kernels_float.c (the float kernels, a translation
 * unit of their own: kernels_float.h).
 *
 * Reading order: config and weights (what a checkpoint holds), loading
 * (declared here, in checkpoint.h and gguf.h: qkv, llama2.c's legacy,
 * version-1 and version-2 files, GGUF; every size checked before a byte of
 * data is touched), the run
 * state and KV cache, the kernels (small named functions, shapes in comments),
 * then forward(), which strings the kernels into Llama- or GPT-2-style blocks.
 */
#ifndef QKV_MODEL_H
#define QKV_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "kv_cache.h"
#include "kv_window.h"
#include "attention.h"
#include "tokenizer.h" /* TOKENIZER_MAX_VOCAB: QKV_MAX_VOCAB */

/* Sizes from a file's header (vocab x dim, rows x cols, layers x heads x
 * context) are multiplied in size_t within the limits the loaders check:
 * 2^20 tokens, a width of 2^16, a hidden width of 2^18, whose products pass
 * 2^32. A 32-bit build wrapped them, and a hostile llama2.c file of 1.5 MB
 * then passed every size check and crashed the packing: qkv is 64-bit. */
_Static_assert(sizeof(size_t) >= 8, "qkv needs a 64-bit build (a 64-bit size_t): its size checks assume one");

/* ------------------------------------------------------------------------ */
/* Config and weights                                                        */

/* The two block designs qkv runs (README: How it works). Llama: RMSNorm,
 * RoPE, SwiGLU MLP, no biases. GPT-2 (nanoGPT): LayerNorm with bias, a
 * learned position embedding, GELU MLP, a bias on every linear layer. */
typedef enum { ARCH_LLAMA = 0, ARCH_GPT2 = 1 } Architecture;
/* The MLP's nonlinearity: SwiGLU for Llama; for GPT-2 the exact GELU
 * (x/2 (1 + erf(x/√2)), nanoGPT's nn.GELU()) or Hugging Face GPT-2's tanh
 * approximation ("gelu_new"). */
typedef enum { ACT_SWIGLU = 0, ACT_GELU_ERF = 1, ACT_GELU_TANH = 2 } Activation;

typedef struct {
    int dim;          /* width of the residual stream */
    int hidden_dim;   /* MLP inner width */
    int n_layers;
    int n_heads;      /* query heads */
    int n_kv_heads;   /* key/value heads; n_heads is a multiple (GQA, MQA) */
    int head_size;
    int vocab_size;
    int seq_len;      /* context length: positions the KV cache holds */
    float norm_eps;   /* RMSNorm or LayerNorm epsilon */
    float rope_theta; /* RoPE base frequency; 0 for GPT-2 (no RoPE) */
    int shared_classifier; /* 1: logits use tok_embeddings as the classifier */
    int weight_type;  /* WeightType of the matrices */
    int bos_id, eos_id; /* -1: none (a character-level vocabulary) */
    int start_id;       /* the token a sequence starts from, set at load (checkpoint.h: start_id_of); -1: none */
    int arch;           /* Architecture */
    int activation;     /* Activation */
    int tokenizer_kind; /* TokenizerKind (tokenizer.h) of the embedded tokenizer */
} Config;

/* The weight type is a property of each matrix (kernels.h: float32,
 * float16, ggml's Q8_0 and Q4_0), and each matrix carries the kernel that
 * multiplies by it, picked once at load for this CPU. Norm weights are
 * always float32: they are tiny and read once per token. */
typedef struct {
    WeightType type;
    int rows, cols;   /* y[rows] = W[rows, cols] x[cols], row-major */
    const void *data;
    const KernelEntry *kernel; /* NULL: the best one for type, looked up at use */
    const void *panels;        /* the data as the kernels read it (weight_pack), made at load */
} Matrix;

/* A matrix over data of a type; model_load then gives every matrix the
 * best kernel for this CPU (a matrix without one looks it up at use). */
Matrix matrix_make(WeightType type, int rows, int cols, const void *data);
/* Bytes of its data. */
size_t matrix_bytes(const Matrix *w);

/* GPT-2's extra vectors are NULL in a Llama model, and its MLP has no w3. */
typedef struct {
    const float *attention_norm; /* [dim] */
    Matrix wq;                   /* [n_heads*head_size, dim] */
    Matrix wk, wv;               /* [n_kv_heads*head_size, dim] */
    Matrix wo;                   /* [dim, n_heads*head_size] */
    const float *ffn_norm;       /* [dim] */
    Matrix w1, w3;               /* [hidden_dim, dim]: gate and up (GPT-2: w1 is c_fc) */
    Matrix w2;                   /* [dim, hidden_dim]: down (GPT-2: c_proj) */
    const float *attention_norm_bias, *ffn_norm_bias; /* [dim] LayerNorm biases */
    const float *bq, *bk, *bv, *bo; /* biases of wq [q_dim], wk, wv [kv_dim], wo [dim] */
    const float *b1, *b2;           /* biases of w1 [hidden_dim], w2 [dim] */
} LayerWeights;

typedef struct {
    Matrix token_embedding;       /* [vocab_size, dim] */
    Matrix position_embedding;    /* [seq_len, dim] GPT-2's learned positions; rows 0 for Llama */
    LayerWeights *layers;         /* [n_layers] */
    const float *final_norm;      /* [dim] */
    const float *final_norm_bias; /* [dim] GPT-2; NULL for Llama */
    Matrix classifier;            /* [vocab_size, dim] */
} Weights;

typedef enum { FORMAT_QKV, FORMAT_LLAMA2C_LEGACY, FORMAT_LLAMA2C_V1, FORMAT_LLAMA2C_V2, FORMAT_GGUF } FileFormat;

typedef struct {
    Config config;
    Weights weights;
    FileFormat format;
    const unsigned char *tokenizer_data; /* embedded tokenizer (qkv and GGUF files), else NULL */
    size_t tokenizer_bytes;
    unsigned char *tokenizer_owned; /* the section a loader built (GGUF): tokenizer_data points here */
    char *metadata;       /* the file's own metadata, as lines for -m info (GGUF), else NULL */
    size_t weight_bytes;  /* bytes of all weight tensors, as stored */
    size_t n_params;
    const void *file;     /* the file's first byte in memory (tests/make_hostile.c reads it): */
    void *mapping;        /*   the mmap'd file (NULL: a caller's buffer) */
    void *repacked;       /* weights converted at load (llama2.c version 2), else NULL */
    void *panels;         /* the matrices' panels (weight_pack) */
    size_t file_bytes;
} Model;

/* Sizes that ought to be enough for any model this engine runs on a CPU; a
 * header beyond them is hostile or corrupt, and is refused before allocating. */
#define QKV_MAX_DIM      (1 << 16)
#define QKV_MAX_HIDDEN   (1 << 18)
#define QKV_MAX_LAYERS   1024
#define QKV_MAX_HEADS    1024
#define QKV_MAX_VOCAB    TOKENIZER_MAX_VOCAB
#define QKV_MAX_SEQ_LEN  (1 << 20)

/* Loads a checkpoint of any FileFormat (the file says which). Returns 0, or -1 with a
 * one-line reason in err. */
int model_load(Model *m, const char *path, char *err, size_t err_len);
/* The same from size bytes at data (a fuzzer's input, a test's buffer): the
 * norms, the embedding tables and the tokenizer point into data, which must
 * outlive the model (the matrices are packed into panels of their own). */
int model_load_memory(Model *m, const void *data, size_t size, char *err, size_t err_len);
/* The same for a GGUF file only (gguf.h; the GGUF fuzz target's way in). */
int gguf_load_memory(Model *m, const void *data, size_t size, char *err, size_t err_len);
void model_free(Model *m);
const char *model_format_name(FileFormat f);
/* How many of the model's matrices (embeddings, classifier, layers' ones)
 * have a weight type (WEIGHT_TYPE_COUNT: any): a file quantized to blocks
 * keeps in float16 those whose rows are not whole blocks. */
int model_matrices_of(const Model *m, WeightType type);
/* The name of the kernel the model's layer matrices use ("f32 avx512", ...). */
const char *model_kernel_name(const Model *m);

/* ------------------------------------------------------------------------ */
/* KV cache and run state                                                    */

/* Positions forward_tokens pushes through the weights together, as rows of
 * a matrix: each weight row is read from memory once per chunk of positions
 * instead of once per token. The per-position buffers below hold QKV_CHUNK
 * rows; a single forward() uses row 0. 200-token prompts (Xeon, 1 and 2
 * threads, warm): 64 against 32, the 42M shape's float32 12-15% faster (its
 * 167 MB stream from memory once a chunk), float16 about 7%; 128 against
 * 64, the 42M shape's float32 8-18% faster again, the 15M shape's float32
 * and the int8 prompts 0-6%, nothing slower. The cost is memory: the
 * logits of a chunk (-m ppl scores every position) are 128 rows of the
 * vocabulary, 16 MB for 32,000 tokens. */
#ifndef QKV_CHUNK
#define QKV_CHUNK 128
#endif
/* Positions whose attention an observer receives together, at most: each
 * keeps a row of scores and one of weights per head (see attention_rows). */
#define QKV_OBSERVED_ROWS 32
/* With an observer, the attention of a chunk's positions is computed
 * together when their scores fit in this many floats (64 MiB); with a long
 * context, fewer. Without one, scores live a block of keys at a time
 * (attention.h) and these rows are never touched: zeroed pages never
 * written (zalloc_aligned, alloc.h), so never resident. */
#define QKV_ATTENTION_FLOATS ((size_t)16 << 20)

typedef struct {
    float *x;          /* [QKV_CHUNK, dim] residual stream */
    float *matmul_in;  /* [QKV_CHUNK, width = max(dim, q_dim)] the next products' input: the normed
                          stream, or attention's output (the input of wo) */
    float *block_out;  /* [QKV_CHUNK, dim] a block's output before the residual add */
    float *q;          /* [QKV_CHUNK, q_dim] queries of all heads */
    float *k, *v;      /* [QKV_CHUNK, kv_dim] these positions' keys and values */
    float *mlp_hidden; /* [QKV_CHUNK, hidden_dim] the MLP's hidden layer: gelu(w1 x + b1), or w1 x and then silu(w1 x) * (w3 x) */
    float *mlp_up;     /* [QKV_CHUNK, hidden_dim] SwiGLU's w3 x */
    float *attention_scores;  /* [n_heads, capacity] raw q·k of the position the observer is told of */
    float *attention_weights; /* [n_heads, capacity] softmax of the scaled scores (both point into:) */
    const float *attention_output; /* [n_heads, head_size] each head's Σ weight · value there (in matmul_in) */
    float *chunk_scores;      /* [attention_rows, n_heads, capacity] the scores of a chunk's positions, */
    float *chunk_weights;     /* [attention_rows, n_heads, capacity] and their weights, for an observer */
    int attention_rows;       /* positions whose observed attention is computed together (<= QKV_OBSERVED_ROWS) */
    int attention_block;      /* n_heads * capacity: one position's rows */
    float *attention_partials; /* a decode row's partial softmax per head and block of keys (attention.h) */
    float *attention_states;   /* [QKV_CHUNK, n_heads, ...] a prompt row's running softmax per head */
    float *logits;  /* [QKV_CHUNK, vocab_size]; forward() fills row 0 */
    int8_t *x_q;    /* [QKV_CHUNK, max(width, hidden_dim)] an input quantized to int8, */
    float *x_q_scale; /*   and its scales per block, for int8 and 4-bit weights */
    int32_t *x_q_sum; /*   and its sums per block */
    float *rope_cos, *rope_sin; /* [QKV_CHUNK, head_size/2] the chunk's RoPE turns, shared by the layers */
    int width;      /* row length of matmul_in */
    KVCache kv_cache;
    Team *team;     /* the threads of the forward's parallel loops (team.h); NULL: OpenMP regions */
} RunState;

/* A run state whose KV cache holds capacity positions (0..capacity-1):
 * what the run needs (-n, --ctx, a ppl window), so a header that claims a
 * context of a million positions costs nothing until a run asks for them.
 * capacity < 1 or beyond seq_len means seq_len. A position at or beyond
 * the capacity evicts the oldest (kv_window.h: --window, --sinks); without
 * a window no run goes there. Returns 0, or -1 out of memory. */
int run_state_init(RunState *s, const Config *c, int capacity);
/* The same with a KV cache of kv_type rows (float32 above). */
int run_state_init_kv(RunState *s, const Config *c, int capacity, KVType kv_type);
/* The same for a sliding window of `window` positions with `sinks` kept
 * (kv_window.h): the cache holds the window when there is one, else
 * capacity. Returns 0, or -1 out of memory (nothing left allocated). */
int run_state_init_window(RunState *s, const Config *c, int capacity, KVType kv_type, int window, int sinks);
/* Positions whose observed attention a run state computes together: as
 * many as fit in QKV_ATTENTION_FLOATS, 1 to QKV_OBSERVED_ROWS. */
int attention_rows_for(int n_heads, int capacity);
void run_state_free(RunState *s);

/* ------------------------------------------------------------------------ */
/* Observer: how trace, step mode and bench see the real forward pass        */

typedef enum {
    STAGE_ATTENTION_BEGIN, /* scores, softmax and weighted sum of one layer start */
    STAGE_ATTENTION_END,
} ForwardStage;

typedef struct {
    void *ctx;
    /* Called once per layer and position after its attention: the run
     * state's attention_scores and attention_weights (pointed at this
     * position's rows) hold row h at h*s->kv_cache.capacity, entries 0..n_visible-1
     * by slot: entry kv_slot(kv, p) is the key of position p, for the
     * n_visible positions kv_view_position lists (0..pos without a
     * window); attention_output holds each head's output, the weighted
     * sum of the values, head h's head_size numbers at h*head_size.
     * forward_tokens calls it for every position of a chunk in layer 0,
     * then in layer 1, and so on. */
    void (*attention)(void *ctx, int layer, int pos, int n_visible, const RunState *s);
    /* Called at stage boundaries (for timing): around the attention of
     * each layer (of all the positions computed together). */
    void (*stage)(void *ctx, ForwardStage stage, int layer);
} ForwardObserver;

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */

void rmsnorm(float *out, const float *x, const float *weight, int n, float eps);
void layernorm(float *out, const float *x, const float *weight, const float *bias, int n, float eps);
float gelu_erf(float x);
float gelu_tanh(float x);
void matrix_row(float *out, const Matrix *w, int row);
void softmax(float *x, int n);
double negative_log_likelihood(const float *logits, int n, int target);
void matmul(float *out, const float *x, const Matrix *w);
void rope(float *vec, int n_heads, int head_size, int pos, float theta);
/* keys and values: n_visible rows of head_size floats */
void attention_head(float *out, float *scores, float *weights, const float *q,
                    const float *keys, const float *values, int n_visible, int head_size);

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */

/* Runs token at position pos through the model, appending its key and value
 * to the KV cache; returns the logits (inside s). observer may be NULL. */
float *forward(const Model *m, RunState *s, int token, int pos, const ForwardObserver *observer);

/* Runs n >= 1 tokens at positions pos..pos+n-1 (a prompt); returns the
 * logits of the last one. The tokens go through the weights QKV_CHUNK at a
 * time, as a matrix; the numbers are the same as n forward() calls, and only
 * the last position pays for the classifier. The observer sees each layer's
 * attention position by position: layer 0 for the whole chunk, then layer 1. */
float *forward_tokens(const Model *m, RunState *s, const int *tokens, int n, int pos,
                      const ForwardObserver *observer);

/* The line that says the logits at pos are not finite (NaN if nan, else
 * infinite), with a word on float16 rows when the KV cache holds them, into
 * buf: what generate, ppl and the bench print */
void bad_logits_message(char *buf, size_t len, int nan, int pos, KVType kv_type);

/* The rows the next chunk at pos takes of the `remaining` tokens: at most
 * QKV_CHUNK, and not past the KV cache's capacity (beyond it a window
 * evicts a position a token, which the chunk's own earlier rows may still
 * see: one row at a time there). What forward_logits accepts. */
int chunk_rows(const RunState *s, int pos, int remaining);

/* Runs n tokens, 1 <= n <= QKV_CHUNK, at positions pos..pos+n-1 as one
 * matrix and returns the logits of every one: row t at t * vocab_size
 * (inside s). The numbers are those of n forward() calls. With n > 1,
 * pos + n must not pass the KV cache's capacity (a chunk must not evict
 * keys its own rows see): a call that does is a caller's error, and stops
 * the process with a line on stderr. */
float *forward_logits(const Model *m, RunState *s, const int *tokens, int n, int pos,
                      const ForwardObserver *observer);

/* What a step costs: cost.h (its FLOPs and bytes, for info and the bench) */
#include "cost.h"

#endif /* QKV_MODEL_H */

/* ======================================================================== */
#ifdef QKV_MODEL_IMPLEMENTATION
#ifndef QKV_MODEL_IMPLEMENTED
#define QKV_MODEL_IMPLEMENTED

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define QKV_TEAM_IMPLEMENTATION
#include "team.h"
#define QKV_KERNELS_IMPLEMENTATION
#include "kernels.h"
#define QKV_KV_CACHE_IMPLEMENTATION
#include "kv_cache.h"
#define QKV_KV_WINDOW_IMPLEMENTATION
#include "kv_window.h"
#define QKV_ATTENTION_IMPLEMENTATION
#include "attention.h"
#include "elementwise.h"
#include "rope.h"
#include "checkpoint.h"
#include "gguf.h"

/* ------------------------------------------------------------------------ */
/* Run state                                                                 */

int run_state_init(RunState *s, const Config *c, int capacity) {
    return run_state_init_kv(s, c, capacity, KV_F32);
}

int attention_rows_for(int n_heads, int capacity) {
    long rows = (long)(QKV_ATTENTION_FLOATS / ((size_t)n_heads * (size_t)capacity));
    return rows > QKV_OBSERVED_ROWS ? QKV_OBSERVED_ROWS : rows < 1 ? 1 : (int)rows;
}

int run_state_init_kv(RunState *s, const Config *c, int capacity, KVType kv_type) {
    memset(s, 0, sizeof *s);
    if (capacity < 1 || capacity > c->seq_len) capacity = c->seq_len;
    size_t q_dim = (size_t)c->n_heads * c->head_size, kv_dim = (size_t)c->n_kv_heads * c->head_size;
    size_t width = q_dim > (size_t)c->dim ? q_dim : (size_t)c->dim;
    s->width = (int)width;
    s->x = zalloc_aligned((size_t)QKV_CHUNK * c->dim, sizeof(float));
    s->matmul_in = zalloc_aligned((size_t)QKV_CHUNK * width, sizeof(float));
    s->block_out = zalloc_aligned((size_t)QKV_CHUNK * c->dim, sizeof(float));
    s->q = zalloc_aligned((size_t)QKV_CHUNK * q_dim, sizeof(float));
    s->k = zalloc_aligned((size_t)QKV_CHUNK * kv_dim, sizeof(float));
    s->v = zalloc_aligned((size_t)QKV_CHUNK * kv_dim, sizeof(float));
    s->mlp_hidden = zalloc_aligned((size_t)QKV_CHUNK * c->hidden_dim, sizeof(float));
    s->mlp_up = zalloc_aligned((size_t)QKV_CHUNK * c->hidden_dim, sizeof(float));
    /* a chunk's scores, as many positions as fit in QKV_ATTENTION_FLOATS */
    s->attention_block = c->n_heads * capacity;
    s->attention_rows = attention_rows_for(c->n_heads, capacity);
    s->chunk_scores = zalloc_aligned((size_t)s->attention_rows * s->attention_block, sizeof(float));
    s->chunk_weights = zalloc_aligned((size_t)s->attention_rows * s->attention_block, sizeof(float));
    s->attention_scores = s->chunk_scores;
    s->attention_partials = zalloc_aligned(attention_partials_floats(c->n_heads, capacity, c->head_size), sizeof(float));
    s->attention_states = zalloc_aligned(attention_states_floats(QKV_CHUNK, c->n_heads, c->head_size), sizeof(float));
    s->attention_weights = s->chunk_weights;
    s->logits = zalloc_aligned((size_t)QKV_CHUNK * c->vocab_size, sizeof(float));
    s->rope_cos = zalloc_aligned((size_t)QKV_CHUNK * (c->head_size / 2), sizeof(float));
    s->rope_sin = zalloc_aligned((size_t)QKV_CHUNK * (c->head_size / 2), sizeof(float));
    size_t widest = width > (size_t)c->hidden_dim ? width : (size_t)c->hidden_dim;
    s->x_q = zalloc_aligned((size_t)QKV_CHUNK * widest, 1);
    s->x_q_scale = zalloc_aligned((size_t)QKV_CHUNK * (widest / QKV_QBLOCK + 1), sizeof(float));
    s->x_q_sum = zalloc_aligned((size_t)QKV_CHUNK * (widest / QKV_QBLOCK + 1), sizeof(int32_t));
    int kv_failed = kv_cache_init(&s->kv_cache, kv_type, c->n_layers, c->n_kv_heads, capacity, c->head_size);
    if (kv_failed || !s->x || !s->matmul_in || !s->block_out || !s->q || !s->k || !s->v || !s->mlp_hidden || !s->mlp_up ||
        !s->chunk_scores || !s->chunk_weights || !s->logits || !s->rope_cos || !s->rope_sin || !s->x_q ||
        !s->x_q_scale || !s->x_q_sum || !s->attention_partials || !s->attention_states) {
        run_state_free(s);
        return -1;
    }
    return 0;
}

int run_state_init_window(RunState *s, const Config *c, int capacity, KVType kv_type, int window, int sinks) {
    if (run_state_init_kv(s, c, window ? window : capacity, kv_type)) return -1;
    if (kv_window_init(&s->kv_cache, sinks)) {
        run_state_free(s);
        return -1;
    }
    return 0;
}

void run_state_free(RunState *s) {
    void *buffers[] = { s->x, s->matmul_in, s->block_out, s->q, s->k, s->v, s->mlp_hidden, s->mlp_up, s->chunk_scores, s->chunk_weights,
                        s->rope_cos, s->rope_sin, s->logits, s->x_q, s->x_q_scale, s->x_q_sum,
                        s->attention_partials, s->attention_states };
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) free_aligned(buffers[i]);
    kv_cache_free(&s->kv_cache);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */

/* 1 / sqrt(sum / n + eps) for sum = Σ (x_i − shift)², the norms' scale.
 * A sum past FLT_MAX (elements past about 1e18: finite, legal) would make
 * it 0 and the norm's output zeros, a silent wrong answer: then the squares
 * are summed again scaled by the largest |x_i − shift|. An infinite x_i
 * (or a LayerNorm's mean past float's range: elements past FLT_MAX / n)
 * gives NaN, which the logits' check reports. */
static float inverse_rms(const float *x, float shift, float sum, int n, float eps) {
    if (sum != INFINITY) return 1.0f / sqrtf(sum / n + eps);
    float largest = 0.0f, scaled = 0.0f;
    for (int i = 0; i < n; i++) largest = fmaxf(largest, fabsf(x[i] - shift));
    for (int i = 0; i < n; i++) scaled += ((x[i] - shift) / largest) * ((x[i] - shift) / largest);
    return 1.0f / (largest * sqrtf(scaled / n + eps / largest / largest));
}

/* out[n] = weight[n] * x[n] / sqrt(mean(x^2) + eps) */
void rmsnorm(float *out, const float *x, const float *weight, int n, float eps) {
    float ss = dot_f32(x, x, n); /* sixteen running sums, not one long chain */
    float scale = inverse_rms(x, 0.0f, ss, n, eps);
    for (int i = 0; i < n; i++) out[i] = weight[i] * (scale * x[i]);
}

/* out[n] = weight * (x - mean) / sqrt(var + eps) + bias (GPT-2's LayerNorm;
 * the variance is the biased one, as torch's) */
void layernorm(float *out, const float *x, const float *weight, const float *bias, int n, float eps) {
    float mean = 0.0f, var = 0.0f;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    float scale = inverse_rms(x, mean, var, n, eps);
    for (int i = 0; i < n; i++) out[i] = weight[i] * (scale * (x[i] - mean)) + bias[i];
}

/* x[n] <- exp(x - max) / sum: subtracting the max keeps exp from overflowing */
void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) if (x[i] > max) max = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - max); sum += x[i]; }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

/* -log softmax(logits)[target], in double: log-sum-exp minus the target's
 * logit (a token's loss: -m ppl's and -m heads' scores) */
double negative_log_likelihood(const float *logits, int n, int target) {
    double max = logits[0], sum = 0;
    for (int i = 1; i < n; i++) if (logits[i] > max) max = logits[i];
    for (int i = 0; i < n; i++) sum += exp(logits[i] - max);
    return max + log(sum) - logits[target];
}

Matrix matrix_make(WeightType type, int rows, int cols, const void *data) {
    Matrix mat = { type, rows, cols, data, NULL, NULL };
    return mat;
}

size_t matrix_bytes(const Matrix *w) { return (size_t)w->rows * weight_row_bytes(w->type, w->cols); }

/* The unit of rows the threads share: one panel of every weight kernel
 * (kernels.h: weight_pack); a tile of several panels handles a run's last,
 * shorter one. */
#define QKV_ROW_UNIT 16

/* The input rows of a product: x[t * stride + i] for n positions, with the
 * run state's scratch for their int8 copy. */
static Activations activations(RunState *s, const float *x, int n, int stride, int cols) {
    Activations a = { x, n, stride, cols, s->x_q, s->x_q_scale, 0, s->x_q_sum, s->team };
    return a;
}

/* One product of a group: out[t, :rows] = W[rows, cols] @ x[t, :cols]. */
typedef struct {
    float *out;
    int out_stride;
    const Matrix *w;
} Product;

/* Units first..last-1 of a group's rows (its products' units in order),
 * each product's part in one call of its kernel. */
static void matmul_units(Activations *x, const Product *p, int n_products, int first, int last) {
    for (int i = 0, base = 0; i < n_products && base < last; i++) {
        const Matrix *w = p[i].w;
        int units = (w->rows + QKV_ROW_UNIT - 1) / QKV_ROW_UNIT;
        int from = first > base ? first : base, to = last < base + units ? last : base + units;
        if (from < to) {
            const KernelEntry *k = w->kernel ? w->kernel : kernel_best(w->type);
            int begin = (from - base) * QKV_ROW_UNIT, end = (to - base) * QKV_ROW_UNIT;
            k->run(p[i].out, p[i].out_stride, x, w->panels, w->cols, begin,
                   end < w->rows ? end : w->rows);
        }
        base += units;
    }
}

/* The products of matrices that read the same input x (wq, wk, wv; w1, w3),
 * in one parallel task over all their rows: the threads meet once for the
 * group, not once a matrix, and each takes one run of rows (as equal as
 * whole units of 16 allow), so a kernel sees long runs it can tile. A
 * quantized matrix quantizes x first (once: the matrices that share x
 * share it). */
typedef struct {
    Activations *x;
    const Product *p;
    int n_products;
} GroupTask;

static void group_rows(void *ctx, long first, long last) {
    GroupTask *g = ctx;
    matmul_units(g->x, g->p, g->n_products, (int)first, (int)last);
}

/* Before a group's task: x quantized if a product needs it; the group's
 * units and multiply-adds (the work that decides whether to share it). */
static int group_prepare(Activations *x, const Product *p, int n_products, long *work) {
    int n_units = 0;
    *work = 0;
    for (int i = 0; i < n_products; i++) {
        if (weight_traits(p[i].w->type)->quantized)
            activations_quantize(x, p[i].w->kernel ? p[i].w->kernel->isa : isa_available());
        n_units += (p[i].w->rows + QKV_ROW_UNIT - 1) / QKV_ROW_UNIT;
        *work += (long)p[i].w->rows * p[i].w->cols * x->n;
    }
    return n_units;
}

static void matmul_group(Activations *x, const Product *p, int n_products) {
    long work;
    int n_units = group_prepare(x, p, n_products, &work);
    GroupTask task = { x, p, n_products };
    team_run_items(x->team, n_units, group_rows, &task, work >= QKV_PARALLEL_MIN_WORK);
}

/* out[t, :rows] = W[rows, cols] @ x[t, :cols] for the n positions of x;
 * blocks of weight rows are split across threads. */
static void matmul_rows(float *out, int out_stride, Activations *x, const Matrix *w) {
    Product p = { out, out_stride, w };
    matmul_group(x, &p, 1);
}

/* out[rows] = W[rows, cols] @ x[cols] (for tests and one-off products: the
 * panels, and a quantized matrix's scratch for x, are allocated here; NaNs
 * if they cannot be) */
void matmul(float *out, const float *x, const Matrix *w) {
    size_t blocks = (size_t)w->cols / QKV_QBLOCK + 1, panel_bytes = weight_packed_bytes(w->type, w->rows, w->cols);
    int8_t *q = malloc((size_t)w->cols + QKV_QBLOCK);
    float *scale = malloc(blocks * sizeof(float));
    int32_t *sum = malloc(blocks * sizeof(int32_t));
    Matrix packed = *w;
    void *panels = NULL;
    if (panel_bytes && !w->panels && (panels = zalloc_aligned(panel_bytes, 1)) != NULL) {
        weight_pack(w->type, w->data, w->rows, w->cols, panels);
        packed.panels = panels;
    }
    Activations a = { x, 1, w->cols, w->cols, q, scale, 0, sum, NULL };
    if (q && scale && sum && (!panel_bytes || packed.panels)) matmul_rows(out, w->rows, &a, &packed);
    else
        for (int i = 0; i < w->rows; i++) out[i] = NAN; /* out of memory: no silent answer */
    free(q);
    free(scale);
    free(sum);
    free_aligned(panels);
}

/* out[cols] = W[row, :] as float32 (an embedding lookup). A table tied to
 * the classifier is read from the classifier's panels: its mapped pages
 * were released at load, and each new token's row faulted a page of the
 * file back in (AMD EPYC, KVM, 15M shape, a 203-token prompt: about 200
 * of the first prompt's 1,500-1,600 page faults, some 11 us each there). */
void matrix_row(float *out, const Matrix *w, int row) {
    if (w->panels) {
        weight_packed_row_to_float(w->type, w->panels, w->cols, row, out);
        return;
    }
    weight_row_to_float(w->type, (const unsigned char *)w->data + (size_t)row * weight_row_bytes(w->type, w->cols),
                        out, w->cols);
}

/* Rotary position embedding, in place on vec[n_heads*head_size]: within each
 * head, the pair (2i, 2i+1) turns by pos * theta^(-2i/head_size) radians. */
void rope(float *vec, int n_heads, int head_size, int pos, float theta) {
    float cos_buf[QKV_MAX_DIM / 2], sin_buf[QKV_MAX_DIM / 2];
    rope_angles(cos_buf, sin_buf, head_size, pos, theta);
    rope_apply(vec, n_heads, head_size, cos_buf, sin_buf);
}

/* One head of scaled dot-product attention for one query row:
 *   scores[t]  = q · keys[t]                       t < n_visible (raw, kept for the trace)
 *   weights[t] = softmax(scores / sqrt(head_size))[t]
 *   out        = sum_t weights[t] * values[t]       out[head_size]
 * keys and values point at this head's rows, head_size floats apart. The
 * scores are keys @ q, a matrix (the cached keys) times a vector, so a
 * float32 row kernel (kernels_rows.h) computes them, four keys at a time. Positions a
 * query may not see are simply not visited: that is the causal mask, and
 * why the cache holds only the past. This is the plain form, one whole row
 * of scores: the reference for forward()'s blocked attention (attention.h),
 * which gives the same numbers without keeping the row. */
void attention_head(float *out, float *scores, float *weights, const float *q,
                    const float *keys, const float *values, int n_visible, int head_size) {
    /* the rows as a float32 KV cache of one head */
    Isa isa = isa_available();
    KVCache view = { .type = KV_F32, .head_size = head_size, .row_bytes = (size_t)head_size * sizeof(float),
                     .isa = isa, .fetch_ahead = kv_fetch_ahead(4, isa) };
    kv_scores(&view, (const unsigned char *)keys, q, 1, head_size, n_visible, scores, n_visible);
    float scale = 1.0f / sqrtf((float)head_size);
    for (int t = 0; t < n_visible; t++) weights[t] = scores[t] * scale;
    softmax(weights, n_visible);
    kv_weighted_sum(&view, (const unsigned char *)values, weights, n_visible, out, 1);
}

/* GELU, exact: x Φ(x) = x/2 (1 + erf(x/√2)) (nanoGPT's nn.GELU()) */
float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

/* GELU, GPT-2's tanh approximation: x/2 (1 + tanh(√(2/π) (x + 0.044715 x³))) */
float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

/* Elementwise work below this many elements stays on one thread (a decode
 * step's); a prompt's activations and norms are split across threads (each
 * element's arithmetic is the same either way). Below it the loop runs
 * without OpenMP's call at all: a parallel region kept on one thread by an
 * if clause still costs 0.2 us (measured here), and a decode step had
 * seven a layer (2% of a step of the 15M shape in int8 on two threads). */
#define QKV_PARALLEL_ELEMENTS 8192

/* h[i] <- gelu(h[i]), the chosen GELU, for i in first..last-1 */
typedef struct {
    float *h;
    Activation act;
} GeluTask;

static void gelu_items(void *ctx, long first, long last) {
    GeluTask *g = ctx;
    for (long i = first; i < last; i++) g->h[i] = g->act == ACT_GELU_TANH ? gelu_tanh(g->h[i]) : gelu_erf(g->h[i]);
}

/* h[n] <- gelu(h), elementwise (a chunk's hidden rows: n = rows · hidden), the chosen GELU */
static void gelu(Team *team, float *h, int n, Activation act) {
    GeluTask task = { h, act };
    team_run_items(team, n, gelu_items, &task, n >= QKV_PARALLEL_ELEMENTS);
}

/* each of n rows of out (stride apart) += bias[len]; a NULL bias adds nothing (Llama) */
static void add_bias(float *out, int stride, const float *bias, int len, int n) {
    if (!bias) return;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < len; i++) out[(size_t)t * stride + i] += bias[i];
}

/* SwiGLU's gate and up products and silu(gate) * up, in one task whose
 * units pair the two matrices' rows: unit u is rows 16u..16u+15 of w1 and
 * of w3, then their silu(gate) * up at each position. Each thread combines
 * the rows it made, so none of the up rows goes to thread 0 to be
 * combined there after the threads meet (on two threads, that trip cost a
 * decode step of the stories model about 2 us a layer). Each element's
 * arithmetic is the same wherever its run starts (elementwise.h). */
typedef struct {
    Activations *x;
    Product gate, up; /* w1 into mlp_hidden, w3 into mlp_up: the same rows */
    Isa isa;
} GateUpTask;

static void gate_up_rows(void *ctx, long first, long last) {
    GateUpTask *g = ctx;
    matmul_units(g->x, &g->gate, 1, (int)first, (int)last);
    matmul_units(g->x, &g->up, 1, (int)first, (int)last);
    int begin = (int)first * QKV_ROW_UNIT, rows = g->gate.w->rows;
    int end = last * QKV_ROW_UNIT < rows ? (int)last * QKV_ROW_UNIT : rows;
    for (int t = 0; t < g->x->n; t++)
        silu_mul(g->isa, g->gate.out + (size_t)t * g->gate.out_stride + begin,
                 g->up.out + (size_t)t * g->up.out_stride + begin, end - begin);
}

/* mlp_hidden[t, :hidden] = silu(w1 x[t]) * (w3 x[t]) */
static void gate_up(Activations *x, const Product *gate, const Product *up, Isa isa) {
    Product both[] = { *gate, *up };
    long work;
    group_prepare(x, both, 2, &work);
    GateUpTask task = { x, *gate, *up, isa };
    team_run_items(x->team, (gate->w->rows + QKV_ROW_UNIT - 1) / QKV_ROW_UNIT, gate_up_rows, &task,
                   work >= QKV_PARALLEL_MIN_WORK);
}

static void add_residual(float *x, const float *delta, int n) {
    for (int i = 0; i < n; i++) x[i] += delta[i];
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */

/* Building with -DQKV_NO_OBSERVER removes the hooks altogether: the way to
 * measure that they cost nothing when no observer is passed. */
static void notify_stage(const ForwardObserver *o, ForwardStage stage, int layer) {
#ifndef QKV_NO_OBSERVER
    if (o && o->stage) o->stage(o->ctx, stage, layer);
#endif
}

/* Whether the observer reads scores and weights (then the engine keeps them). */
static int watches_attention(const ForwardObserver *o) {
#ifndef QKV_NO_OBSERVER
    return o && o->attention;
#else
    return 0;
#endif
}

/* The observer reads attention_scores, attention_weights and
 * attention_output: point them at observed row t's block of the chunk's
 * scores and weights, and at its output, row first + t of the chunk, then
 * tell it. */
static void notify_attention(const ForwardObserver *o, int layer, int pos, RunState *s, int first, int t) {
#ifndef QKV_NO_OBSERVER
    if (!o || !o->attention) return;
    size_t block = (size_t)s->attention_block * t;
    s->attention_scores = s->chunk_scores + block;
    s->attention_weights = s->chunk_weights + block;
    s->attention_output = s->matmul_in + (size_t)(first + t) * s->width;
    o->attention(o->ctx, layer, pos, kv_visible(&s->kv_cache, pos), s);
#endif
}

/* Attention of rows first..first+n-1 (positions pos..pos+n-1) for every
 * query head, against the cache, which already holds their keys: q rows ->
 * matmul_in rows, a block of keys at a time (attention.h). Observed, row t's
 * scores of head h go to chunk_scores + t*block + h*capacity, its weights
 * likewise. */
static void attention(const Config *c, RunState *s, int layer, int pos, int first, int n, int observed) {
    int q_dim = c->n_heads * c->head_size;
    AttentionRows rows = {
        .n_heads = c->n_heads, .n = n, .pos = pos,
        .q = s->q + (size_t)first * q_dim, .q_stride = q_dim,
        .out = s->matmul_in + (size_t)first * s->width, .out_stride = s->width,
        .scores = observed ? s->chunk_scores : NULL, .weights = observed ? s->chunk_weights : NULL,
        .observed_stride = s->attention_block,
        .partials = s->attention_partials, .states = s->attention_states, .team = s->team,
    };
    attention_layer(&s->kv_cache, layer, &rows);
}

/* The architecture's norm of one row: RMSNorm (Llama) or LayerNorm with
 * its bias (GPT-2). */
static void norm_row(const Config *c, float *out, const float *x, const float *weight, const float *bias) {
    if (c->arch == ARCH_GPT2) layernorm(out, x, weight, bias, c->dim, c->norm_eps);
    else rmsnorm(out, x, weight, c->dim, c->norm_eps);
}

/* Each of n rows: x rows dim apart -> out rows out_stride apart. */
typedef struct {
    const Config *c;
    float *out;
    int out_stride;
    const float *x, *weight, *bias;
} NormTask;

static void norm_items(void *ctx, long first, long last) {
    NormTask *g = ctx;
    for (long t = first; t < last; t++)
        norm_row(g->c, g->out + (size_t)t * g->out_stride, g->x + (size_t)t * g->c->dim, g->weight, g->bias);
}

static void norm_rows(Team *team, const Config *c, float *out, int out_stride, const float *x, const float *weight,
                      const float *bias, int n) {
    NormTask task = { c, out, out_stride, x, weight, bias };
    team_run_items(team, n, norm_items, &task, (long)n * c->dim >= QKV_PARALLEL_ELEMENTS);
}

/* Queries, keys and values of rows 0..n-1 (positions pos..pos+n-1), with
 * their biases (GPT-2) and rotated (Llama: RoPE); the keys and values go
 * into the cache. */
static void project_qkv(const Config *c, const LayerWeights *w, RunState *s, int layer, int pos, int n) {
    int q_dim = c->n_heads * c->head_size, kv_dim = c->n_kv_heads * c->head_size;
    Activations normed = activations(s, s->matmul_in, n, s->width, c->dim);
    Product qkv[] = { { s->q, q_dim, &w->wq }, { s->k, kv_dim, &w->wk }, { s->v, kv_dim, &w->wv } };
    matmul_group(&normed, qkv, 3);
    add_bias(s->q, q_dim, w->bq, q_dim, n);
    add_bias(s->k, kv_dim, w->bk, kv_dim, n);
    add_bias(s->v, kv_dim, w->bv, kv_dim, n);
    for (int t = 0; t < n; t++) {
        float *q = s->q + (size_t)t * q_dim, *k = s->k + (size_t)t * kv_dim, *v = s->v + (size_t)t * kv_dim;
        const float *cos_t = s->rope_cos + (size_t)t * (c->head_size / 2), *sin_t = s->rope_sin + (size_t)t * (c->head_size / 2);
        if (c->arch == ARCH_LLAMA) {
            rope_apply(q, c->n_heads, c->head_size, cos_t, sin_t);
            rope_apply(k, c->n_kv_heads, c->head_size, cos_t, sin_t);
        }
        kv_cache_store(&s->kv_cache, layer, pos + t, k, v);
        kv_window_after_store(&s->kv_cache, layer, pos + t, k, c->rope_theta);
    }
}

/* The MLP of rows 0..n-1, normed input in matmul_in -> block_out:
 *   Llama:  w2 · (silu(w1 x) * w3 x)
 *   GPT-2:  w2 · gelu(w1 x + b1) + b2 */
static void mlp(const Config *c, const LayerWeights *w, RunState *s, int n) {
    int dim = c->dim, hidden = c->hidden_dim;
    Activations normed = activations(s, s->matmul_in, n, s->width, dim);
    if (c->arch == ARCH_GPT2) {
        matmul_rows(s->mlp_hidden, hidden, &normed, &w->w1);
        add_bias(s->mlp_hidden, hidden, w->b1, hidden, n);
        gelu(s->team, s->mlp_hidden, n * hidden, (Activation)c->activation);
    } else {
        Product gate = { s->mlp_hidden, hidden, &w->w1 }, up = { s->mlp_up, hidden, &w->w3 };
        gate_up(&normed, &gate, &up, s->kv_cache.isa); /* the run state's instruction set */
    }
    Activations hidden_rows = activations(s, s->mlp_hidden, n, hidden, hidden);
    matmul_rows(s->block_out, dim, &hidden_rows, &w->w2);
    add_bias(s->block_out, dim, w->b2, dim, n);
}

/* One block over rows 0..n-1 (positions pos..pos+n-1):
 *   x += attention(norm(x)); x += mlp(norm(x))
 * The architecture's switches: the norm (norm_rows), RoPE or none
 * (project_qkv), the biases (add_bias; NULL for Llama) and the MLP (mlp).
 * The weights see all n rows at once; attention goes position by position,
 * each against the keys up to its own (the causal mask). */
static void transformer_block(const Model *m, RunState *s, int layer, int pos, int n,
                              const ForwardObserver *o) {
    const Config *c = &m->config;
    const LayerWeights *w = &m->weights.layers[layer];
    int dim = c->dim;

    norm_rows(s->team, c, s->matmul_in, s->width, s->x, w->attention_norm, w->attention_norm_bias, n);
    project_qkv(c, w, s, layer, pos, n);
    /* an observer's score rows hold attention_rows positions; without one, all n go together */
    int observed = watches_attention(o), at_once = observed ? s->attention_rows : n;
    for (int first = 0; first < n; first += at_once) {
        int rows = n - first < at_once ? n - first : at_once;
        notify_stage(o, STAGE_ATTENTION_BEGIN, layer);
        attention(c, s, layer, pos + first, first, rows, observed);
        notify_stage(o, STAGE_ATTENTION_END, layer);
        for (int t = 0; t < rows; t++) notify_attention(o, layer, pos + first + t, s, first, t);
    }
    Activations heads = activations(s, s->matmul_in, n, s->width, c->n_heads * c->head_size);
    matmul_rows(s->block_out, dim, &heads, &w->wo);
    add_bias(s->block_out, dim, w->bo, dim, n);
    add_residual(s->x, s->block_out, n * dim);

    norm_rows(s->team, c, s->matmul_in, s->width, s->x, w->ffn_norm, w->ffn_norm_bias, n);
    mlp(c, w, s, n);
    add_residual(s->x, s->block_out, n * dim);
}

/* x[dim] = the token's embedding, plus its position's (GPT-2); Llama's
 * positions are the RoPE turns of row t, made here once for every layer. */
static void embed(const Model *m, RunState *s, int t, int token, int pos) {
    const Config *c = &m->config;
    float *x = s->x + (size_t)t * c->dim;
    matrix_row(x, &m->weights.token_embedding, token);
    if (c->arch == ARCH_GPT2) {
        float *row = s->block_out + (size_t)t * c->dim; /* scratch until the block's attention output */
        /* learned positions end at seq_len; the callers stop there (run.c
         * clamps -n and --ctx), and a position past the table must not read
         * past it: it gets the last row */
        int last = m->weights.position_embedding.rows - 1;
        matrix_row(row, &m->weights.position_embedding, pos < last ? pos : last);
        add_residual(x, row, c->dim);
    } else {
        float *cos_t = s->rope_cos + (size_t)t * (c->head_size / 2), *sin_t = s->rope_sin + (size_t)t * (c->head_size / 2);
        if (pos < c->seq_len) rope_angles(cos_t, sin_t, c->head_size, pos, c->rope_theta);
        else rope_angles_exact(cos_t, sin_t, c->head_size, pos, c->rope_theta); /* only with a window */
    }
}

/* tokens[0..n-1] at positions pos..pos+n-1 (n <= QKV_CHUNK) through every block */
static void forward_chunk(const Model *m, RunState *s, const int *tokens, int n, int pos,
                          const ForwardObserver *o) {
    const Config *c = &m->config;
    for (int t = 0; t < n; t++) embed(m, s, t, tokens[t], pos + t);
    for (int l = 0; l < c->n_layers; l++) transformer_block(m, s, l, pos, n, o);
}

/* logits of the n positions in rows first..first+n-1, into logits rows 0..n-1 */
static float *classify(const Model *m, RunState *s, int first, int n) {
    const Config *c = &m->config;
    float *x = s->x + (size_t)first * c->dim;
    norm_rows(s->team, c, x, c->dim, x, m->weights.final_norm, m->weights.final_norm_bias, n);
    Activations normed = activations(s, x, n, c->dim, c->dim);
    matmul_rows(s->logits, c->vocab_size, &normed, &m->weights.classifier);
    return s->logits;
}

float *forward(const Model *m, RunState *s, int token, int pos, const ForwardObserver *observer) {
    forward_chunk(m, s, &token, 1, pos, observer);
    return classify(m, s, 0, 1);
}

void bad_logits_message(char *buf, size_t len, int nan, int pos, KVType kv_type) {
    /* float16 rows hold magnitudes up to 65504: a larger key or value is
     * infinite in the cache (a finite model, a wrong answer the other
     * types would not give), one cause among others (NaN weights) */
    snprintf(buf, len, "the model produced %s logits at position %d%s", nan ? "NaN" : "infinite", pos,
             kv_type == KV_F16 ? " (with --kv-type f16 perhaps keys or values past float16's 65504, infinite in "
                                 "that cache; f32 and q8 rows hold them)" : "");
}

int chunk_rows(const RunState *s, int pos, int remaining) {
    int rows = remaining < QKV_CHUNK ? remaining : QKV_CHUNK, room = s->kv_cache.capacity - pos;
    return rows > room ? (room > 1 ? room : 1) : rows;
}

float *forward_logits(const Model *m, RunState *s, const int *tokens, int n, int pos,
                      const ForwardObserver *observer) {
    if (n < 1 || n > QKV_CHUNK || (n > 1 && pos + n > s->kv_cache.capacity)) {
        /* a caller's error, not an input's (its rows would see evicted keys): stop, loudly */
        fprintf(stderr, "forward_logits: %d rows at position %d (at most %d, within the cache's %d)\n", n, pos,
                QKV_CHUNK, s->kv_cache.capacity);
        abort();
    }
    forward_chunk(m, s, tokens, n, pos, observer);
    return classify(m, s, 0, n);
}

float *forward_tokens(const Model *m, RunState *s, const int *tokens, int n, int pos,
                      const ForwardObserver *observer) {
    if (n < 1) { /* no row to classify: a caller's error, as forward_logits' */
        fprintf(stderr, "forward_tokens: %d tokens at position %d\n", n, pos);
        abort();
    }
    int done = 0, len = 0;
    while (done < n) {
        len = chunk_rows(s, pos + done, n - done);
        forward_chunk(m, s, tokens + done, len, pos + done, observer);
        done += len;
    }
    return classify(m, s, len - 1, 1);
}

#define QKV_COST_IMPLEMENTATION
#include "cost.h"

#endif /* QKV_MODEL_IMPLEMENTED */
#endif /* QKV_MODEL_IMPLEMENTATION */
