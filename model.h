/* model.h — the transformer: config, weights, KV cache and the forward pass.
 *
 * stb-style: this header is the interface everywhere, and the implementation
 * in the one file that defines QKV_MODEL_IMPLEMENTATION before including it.
 *
 * Reading order: config and weights (what a checkpoint holds), loading (three
 * file formats, every size checked before a byte of data is touched), the run
 * state and KV cache, the kernels (small named functions, shapes in comments),
 * then forward(), which strings the kernels into Llama-style blocks.
 */
#ifndef QKV_MODEL_H
#define QKV_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* Config and weights                                                        */

typedef struct {
    int dim;          /* width of the residual stream */
    int hidden_dim;   /* MLP inner width */
    int n_layers;
    int n_heads;      /* query heads */
    int n_kv_heads;   /* key/value heads; n_heads is a multiple (GQA, MQA) */
    int head_size;
    int vocab_size;
    int seq_len;      /* context length: positions the KV cache holds */
    float norm_eps;   /* RMSNorm epsilon */
    float rope_theta; /* RoPE base frequency */
    int shared_classifier; /* 1: logits use tok_embeddings as the classifier */
    int weight_type;  /* WeightType of the matrices */
    int bos_id, eos_id;
} Config;

/* The weight type is a property of each matrix, so a kernel per type can be
 * swapped in: float32, or IEEE half precision (float16: half the bytes to
 * stream per token, converted to float32 as it is read; arithmetic stays
 * float32). int8 group-quantized weights are the next one. Norm weights are
 * always float32: they are tiny and read once per token. */
typedef enum { WEIGHT_F32 = 0, WEIGHT_F16 = 1 } WeightType;

size_t weight_type_size(WeightType type); /* bytes per element */
const char *weight_type_name(WeightType type);

typedef struct {
    WeightType type;
    int rows, cols;   /* y[rows] = W[rows, cols] x[cols], row-major */
    const void *data;
} Matrix;

typedef struct {
    const float *attention_norm; /* [dim] */
    Matrix wq;                   /* [n_heads*head_size, dim] */
    Matrix wk, wv;               /* [n_kv_heads*head_size, dim] */
    Matrix wo;                   /* [dim, n_heads*head_size] */
    const float *ffn_norm;       /* [dim] */
    Matrix w1, w3;               /* [hidden_dim, dim]: gate and up */
    Matrix w2;                   /* [dim, hidden_dim]: down */
} LayerWeights;

typedef struct {
    Matrix token_embedding;       /* [vocab_size, dim] */
    LayerWeights *layers;         /* [n_layers] */
    const float *final_norm;      /* [dim] */
    Matrix classifier;            /* [vocab_size, dim] */
} Weights;

typedef enum { FORMAT_QKV, FORMAT_LLAMA2C_LEGACY, FORMAT_LLAMA2C_V1 } FileFormat;

typedef struct {
    Config config;
    Weights weights;
    FileFormat format;
    const unsigned char *tokenizer_data; /* embedded tokenizer (qkv files), else NULL */
    size_t tokenizer_bytes;
    size_t weight_bytes;  /* bytes of all weight tensors, as stored */
    size_t n_params;
    void *mapping;        /* the mmap'd file */
    size_t file_bytes;
} Model;

/* Sizes that ought to be enough for any model this engine runs on a CPU; a
 * header beyond them is hostile or corrupt, and is refused before allocating. */
#define QKV_MAX_DIM      (1 << 16)
#define QKV_MAX_HIDDEN   (1 << 18)
#define QKV_MAX_LAYERS   1024
#define QKV_MAX_HEADS    1024
#define QKV_MAX_VOCAB    (1 << 20)
#define QKV_MAX_SEQ_LEN  (1 << 20)

/* Loads a checkpoint of any of the three formats. Returns 0, or -1 with a
 * one-line reason in err. */
int model_load(Model *m, const char *path, char *err, size_t err_len);
void model_free(Model *m);
const char *model_format_name(FileFormat f);

/* ------------------------------------------------------------------------ */
/* KV cache and run state                                                    */

/* Keys and values of every layer for every position seen so far, stored
 * per key/value head so that one head's keys are contiguous: a query row
 * streams through them in order. A position lives in slot pos % capacity, so
 * a sliding window is a change of capacity and of which positions attention
 * visits, not of layout. */
typedef struct {
    int n_layers, n_kv_heads, capacity, head_size;
    float *keys;   /* [n_layers, n_kv_heads, capacity, head_size] */
    float *values; /* [n_layers, n_kv_heads, capacity, head_size] */
} KVCache;

/* Positions forward_tokens pushes through the weights together, as rows of
 * a matrix: each weight row is read from memory once per chunk of positions
 * instead of once per token. The per-position buffers below hold QKV_CHUNK
 * rows; a single forward() uses row 0. */
#ifndef QKV_CHUNK
#define QKV_CHUNK 32
#endif

typedef struct {
    float *x;       /* [QKV_CHUNK, dim] residual stream */
    float *xb;      /* [QKV_CHUNK, width = max(dim, q_dim)] normed input / attention output */
    float *xb2;     /* [QKV_CHUNK, dim] a block's output before the residual add */
    float *q;       /* [QKV_CHUNK, q_dim] queries of all heads */
    float *k, *v;   /* [QKV_CHUNK, kv_dim] these positions' keys and values */
    float *hb, *hb2;/* [QKV_CHUNK, hidden_dim] MLP gate and up */
    float *attention_scores;  /* [n_heads, seq_len] raw q·k of the current layer */
    float *attention_weights; /* [n_heads, seq_len] softmax of the scaled scores */
    float *logits;  /* [QKV_CHUNK, vocab_size]; forward() fills row 0 */
    int width;      /* row length of xb */
    KVCache kv_cache;
} RunState;

int run_state_init(RunState *s, const Config *c);
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
     * state's attention_scores and attention_weights hold row h at
     * h*seq_len, entries 0..n_visible-1 (keys of positions
     * pos-n_visible+1..pos). forward_tokens calls it for every position of
     * a chunk in layer 0, then in layer 1, and so on. */
    void (*attention)(void *ctx, int layer, int pos, int n_visible, const RunState *s);
    /* Called at stage boundaries (for timing): around each position's
     * attention in each layer. */
    void (*stage)(void *ctx, ForwardStage stage, int layer);
} ForwardObserver;

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */

void rmsnorm(float *out, const float *x, const float *weight, int n, float eps);
void matrix_row(float *out, const Matrix *w, int row);
void softmax(float *x, int n);
void matmul(float *out, const float *x, const Matrix *w);
void rope(float *vec, int n_heads, int head_size, int pos, float theta);
void attention_head(float *out, float *scores, float *weights, const float *q,
                    const float *keys, const float *values, int stride,
                    int n_visible, int head_size);

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

/* Runs n tokens, 1 <= n <= QKV_CHUNK, at positions pos..pos+n-1 as one
 * matrix and returns the logits of every one: row t at t * vocab_size
 * (inside s). The numbers are those of n forward() calls. */
float *forward_logits(const Model *m, RunState *s, const int *tokens, int n, int pos,
                      const ForwardObserver *observer);

/* Arithmetic of one decode step, counting a multiply-add as 2 FLOPs. */
double flops_weights_per_token(const Config *c);
double flops_attention_per_token(const Config *c, int n_visible);
size_t kv_cache_bytes_per_token(const Config *c);

#endif /* QKV_MODEL_H */

/* ======================================================================== */
#ifdef QKV_MODEL_IMPLEMENTATION
#ifndef QKV_MODEL_IMPLEMENTED
#define QKV_MODEL_IMPLEMENTED

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Loading: a bounds-checked view of the mapped file                         */

typedef struct {
    const unsigned char *base;
    size_t size;
    char *err;
    size_t err_len;
} FileView;

static int load_error(FileView *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, f->err_len, fmt, ap);
    va_end(ap);
    return -1;
}

static uint32_t read_u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static int32_t read_i32(const unsigned char *p) { int32_t v; memcpy(&v, p, 4); return v; }
static uint64_t read_u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static float read_f32(const unsigned char *p) { float v; memcpy(&v, p, 4); return v; }

/* a*b*c... with overflow detection; returns 0 on overflow */
static int mul_sizes(size_t *out, size_t a, size_t b) {
    return !__builtin_mul_overflow(a, b, out);
}

static int check_range(int v, int lo, int hi) { return v >= lo && v <= hi; }

/* Every check a config must pass before any size derived from it is trusted. */
static int validate_config(FileView *f, const Config *c) {
    if (!check_range(c->dim, 1, QKV_MAX_DIM)) return load_error(f, "bad dim %d", c->dim);
    if (!check_range(c->hidden_dim, 1, QKV_MAX_HIDDEN)) return load_error(f, "bad hidden_dim %d", c->hidden_dim);
    if (!check_range(c->n_layers, 1, QKV_MAX_LAYERS)) return load_error(f, "bad n_layers %d", c->n_layers);
    if (!check_range(c->n_heads, 1, QKV_MAX_HEADS)) return load_error(f, "bad n_heads %d", c->n_heads);
    if (!check_range(c->n_kv_heads, 1, c->n_heads))
        return load_error(f, "bad n_kv_heads %d (must be 1..n_heads=%d)", c->n_kv_heads, c->n_heads);
    if (c->n_heads % c->n_kv_heads != 0)
        return load_error(f, "n_heads %d is not a multiple of n_kv_heads %d", c->n_heads, c->n_kv_heads);
    if (!check_range(c->head_size, 2, QKV_MAX_DIM) || c->head_size % 2 != 0)
        return load_error(f, "bad head_size %d (must be even, for RoPE pairs)", c->head_size);
    if ((long long)c->n_heads * c->head_size > QKV_MAX_DIM)
        return load_error(f, "n_heads*head_size %lld too large", (long long)c->n_heads * c->head_size);
    if (!check_range(c->vocab_size, 1, QKV_MAX_VOCAB)) return load_error(f, "bad vocab_size %d", c->vocab_size);
    if (!check_range(c->seq_len, 1, QKV_MAX_SEQ_LEN)) return load_error(f, "bad seq_len %d", c->seq_len);
    if (!(c->norm_eps > 0.0f && c->norm_eps < 1.0f)) return load_error(f, "bad norm_eps %g", c->norm_eps);
    if (!(c->rope_theta > 1.0f && isfinite(c->rope_theta))) return load_error(f, "bad rope_theta %g", c->rope_theta);
    if (c->weight_type != WEIGHT_F32 && c->weight_type != WEIGHT_F16)
        return load_error(f, "unsupported weight type %d (0 float32, 1 float16)", c->weight_type);
    if (!check_range(c->bos_id, 0, c->vocab_size - 1) || !check_range(c->eos_id, 0, c->vocab_size - 1))
        return load_error(f, "bos/eos id outside the vocabulary");
    return 0;
}

/* llama2.c's two headers carry the 7 ints; the rest is llama2.c's constants. */
static int config_from_llama2c(FileView *f, Config *c, const unsigned char *p) {
    memset(c, 0, sizeof *c);
    c->dim = read_i32(p); c->hidden_dim = read_i32(p + 4); c->n_layers = read_i32(p + 8);
    c->n_heads = read_i32(p + 12); c->n_kv_heads = read_i32(p + 16);
    c->vocab_size = read_i32(p + 20); c->seq_len = read_i32(p + 24);
    c->norm_eps = 1e-5f; c->rope_theta = 10000.0f; c->weight_type = WEIGHT_F32;
    c->bos_id = 1; c->eos_id = 2;
    if (c->n_heads <= 0 || c->dim <= 0) return load_error(f, "bad dim %d or n_heads %d", c->dim, c->n_heads);
    if (c->dim % c->n_heads != 0)
        return load_error(f, "dim %d is not divisible by n_heads %d", c->dim, c->n_heads);
    c->head_size = c->dim / c->n_heads;
    return 0;
}

/* Lays out the weights of llama2.c's layouts: consecutive tensors in a fixed
 * order. A cursor walks the file; each step checks the bytes are there. */
typedef struct { FileView *f; size_t offset; } Cursor;

static const float *take_floats(Cursor *cur, size_t count) {
    size_t bytes;
    if (!mul_sizes(&bytes, count, sizeof(float)) || cur->offset > cur->f->size ||
        bytes > cur->f->size - cur->offset) {
        load_error(cur->f, "truncated file: tensor data runs past the end (%zu bytes)", cur->f->size);
        return NULL;
    }
    const float *p = (const float *)(cur->f->base + cur->offset);
    cur->offset += bytes;
    return p;
}

static Matrix f32_matrix(const float *data, int rows, int cols) {
    Matrix mat = { WEIGHT_F32, rows, cols, data };
    return mat;
}

size_t weight_type_size(WeightType type) { return type == WEIGHT_F16 ? 2 : 4; }

const char *weight_type_name(WeightType type) { return type == WEIGHT_F16 ? "float16" : "float32"; }

/* Takes one [rows, cols] matrix per layer, consecutive in the file. */
static int take_layer_matrices(Cursor *cur, Model *m, size_t field, int rows, int cols) {
    for (int l = 0; l < m->config.n_layers; l++) {
        const float *p = take_floats(cur, (size_t)rows * cols);
        if (!p) return -1;
        *(Matrix *)((char *)&m->weights.layers[l] + field) = f32_matrix(p, rows, cols);
    }
    return 0;
}

static int take_layer_vectors(Cursor *cur, Model *m, size_t field, int n) {
    for (int l = 0; l < m->config.n_layers; l++) {
        const float *p = take_floats(cur, (size_t)n);
        if (!p) return -1;
        *(const float **)((char *)&m->weights.layers[l] + field) = p;
    }
    return 0;
}

#define LAYER_FIELD(name) offsetof(LayerWeights, name)

static int take_attention_and_mlp(Cursor *cur, Model *m, int with_norms) {
    const Config *c = &m->config;
    int q_dim = c->n_heads * c->head_size, kv_dim = c->n_kv_heads * c->head_size;
    if (with_norms && take_layer_vectors(cur, m, LAYER_FIELD(attention_norm), c->dim)) return -1;
    if (take_layer_matrices(cur, m, LAYER_FIELD(wq), q_dim, c->dim) ||
        take_layer_matrices(cur, m, LAYER_FIELD(wk), kv_dim, c->dim) ||
        take_layer_matrices(cur, m, LAYER_FIELD(wv), kv_dim, c->dim) ||
        take_layer_matrices(cur, m, LAYER_FIELD(wo), c->dim, q_dim)) return -1;
    if (with_norms && take_layer_vectors(cur, m, LAYER_FIELD(ffn_norm), c->dim)) return -1;
    if (take_layer_matrices(cur, m, LAYER_FIELD(w1), c->hidden_dim, c->dim) ||
        take_layer_matrices(cur, m, LAYER_FIELD(w2), c->dim, c->hidden_dim) ||
        take_layer_matrices(cur, m, LAYER_FIELD(w3), c->hidden_dim, c->dim)) return -1;
    return 0;
}

static int take_classifier(Cursor *cur, Model *m) {
    const Config *c = &m->config;
    if (c->shared_classifier) {
        m->weights.classifier = m->weights.token_embedding;
        return 0;
    }
    const float *p = take_floats(cur, (size_t)c->vocab_size * c->dim);
    if (!p) return -1;
    m->weights.classifier = f32_matrix(p, c->vocab_size, c->dim);
    return 0;
}

/* Legacy: 7 x i32 header; negative vocab_size means a separate classifier. */
static int load_llama2c_legacy(FileView *f, Model *m) {
    if (f->size < 28) return load_error(f, "truncated file: %zu bytes, shorter than a header", f->size);
    Config *c = &m->config;
    if (config_from_llama2c(f, c, f->base)) return -1;
    c->shared_classifier = c->vocab_size > 0;
    if (c->vocab_size < 0) c->vocab_size = -c->vocab_size;
    if (validate_config(f, c)) return -1;
    m->weights.layers = calloc((size_t)c->n_layers, sizeof(LayerWeights));
    if (!m->weights.layers) return load_error(f, "out of memory");
    Cursor cur = { f, 28 };
    const float *embedding = take_floats(&cur, (size_t)c->vocab_size * c->dim);
    if (!embedding) return -1;
    m->weights.token_embedding = f32_matrix(embedding, c->vocab_size, c->dim);
    if (take_attention_and_mlp(&cur, m, 1)) return -1;
    if (!(m->weights.final_norm = take_floats(&cur, (size_t)c->dim))) return -1;
    /* precomputed RoPE tables (freq_cis_real, freq_cis_imag): skipped, we compute them */
    if (!take_floats(&cur, (size_t)c->seq_len * c->head_size)) return -1;
    return take_classifier(&cur, m);
}

/* Version 1: "ak42" magic, version, 7 ints, shared flag, padded to 256. Norms
 * come first, then the embedding, then the matrices. */
static int load_llama2c_v1(FileView *f, Model *m) {
    if (f->size < 256) return load_error(f, "truncated file: %zu bytes, shorter than the 256-byte header", f->size);
    int version = read_i32(f->base + 4);
    if (version != 1)
        return load_error(f, "llama2.c checkpoint version %d is not supported (only 1, float32)", version);
    Config *c = &m->config;
    if (config_from_llama2c(f, c, f->base + 8)) return -1;
    c->shared_classifier = f->base[36] != 0;
    if (validate_config(f, c)) return -1;
    m->weights.layers = calloc((size_t)c->n_layers, sizeof(LayerWeights));
    if (!m->weights.layers) return load_error(f, "out of memory");
    Cursor cur = { f, 256 };
    if (take_layer_vectors(&cur, m, LAYER_FIELD(attention_norm), c->dim) ||
        take_layer_vectors(&cur, m, LAYER_FIELD(ffn_norm), c->dim)) return -1;
    if (!(m->weights.final_norm = take_floats(&cur, (size_t)c->dim))) return -1;
    const float *embedding = take_floats(&cur, (size_t)c->vocab_size * c->dim);
    if (!embedding) return -1;
    m->weights.token_embedding = f32_matrix(embedding, c->vocab_size, c->dim);
    if (take_attention_and_mlp(&cur, m, 0)) return -1;
    return take_classifier(&cur, m);
}

/* ---- qkv format: header, embedded tokenizer, table of named tensors ---- */

#define QKV_HEADER_BYTES 256
#define QKV_TENSOR_ENTRY_BYTES 96
#define QKV_TENSOR_NAME_BYTES 64

typedef struct {
    const unsigned char *entries;
    uint32_t n_tensors;
    uint32_t alignment;
    FileView *f;
    const Config *config;
} TensorTable;

/* The table entry called name; NULL if absent. A name listed twice is
 * ambiguous, so it is an error, not a choice. */
static const unsigned char *find_entry(TensorTable *t, const char *name) {
    const unsigned char *found = NULL;
    for (uint32_t i = 0; i < t->n_tensors; i++) {
        const unsigned char *e = t->entries + (size_t)i * QKV_TENSOR_ENTRY_BYTES;
        if (strncmp((const char *)e, name, QKV_TENSOR_NAME_BYTES) != 0) continue;
        if (found) {
            load_error(t->f, "tensor %s is listed twice", name);
            return NULL;
        }
        found = e;
    }
    if (!found) load_error(t->f, "tensor %s missing", name);
    return found;
}

/* Finds the tensor called name, checks its type, shape and data bounds.
 * Matrices (cols > 0) have the header's weight type; vectors are float32. */
static const void *find_tensor(TensorTable *t, const char *name, WeightType want_type, int rows, int cols) {
    const unsigned char *e = find_entry(t, name);
    if (!e) return NULL;
    uint32_t type = read_u32(e + 64), ndim = read_u32(e + 68);
    uint32_t d0 = read_u32(e + 72), d1 = read_u32(e + 76);
    uint64_t offset = read_u64(e + 88);
    int want_ndim = cols > 0 ? 2 : 1;
    if (type != (uint32_t)want_type) {
        load_error(t->f, "tensor %s: type %u, expected %u (%s)", name, type, (unsigned)want_type,
                   weight_type_name(want_type));
        return NULL;
    }
    if ((int)ndim != want_ndim || d0 != (uint32_t)rows || (want_ndim == 2 && d1 != (uint32_t)cols)) {
        load_error(t->f, "tensor %s: shape does not match the config", name);
        return NULL;
    }
    size_t bytes = (size_t)rows * (size_t)(cols > 0 ? cols : 1) * weight_type_size(want_type);
    if (offset % t->alignment != 0) {
        load_error(t->f, "tensor %s: data offset %llu is not %u-byte aligned", name,
                   (unsigned long long)offset, t->alignment);
        return NULL;
    }
    if (offset > t->f->size || bytes > t->f->size - offset) {
        load_error(t->f, "truncated file: tensor %s runs past the end", name);
        return NULL;
    }
    return t->f->base + offset;
}

static int find_matrix(TensorTable *t, const char *name, int rows, int cols, Matrix *out) {
    WeightType type = (WeightType)t->config->weight_type;
    const void *p = find_tensor(t, name, type, rows, cols);
    if (!p) return -1;
    Matrix mat = { type, rows, cols, p };
    *out = mat;
    return 0;
}

static int find_layer_tensors(TensorTable *t, Model *m, int l) {
    const Config *c = &m->config;
    int q_dim = c->n_heads * c->head_size, kv_dim = c->n_kv_heads * c->head_size;
    struct { const char *name; size_t field; int rows, cols; } specs[] = {
        { "attention_norm", LAYER_FIELD(attention_norm), c->dim, 0 },
        { "attention.wq", LAYER_FIELD(wq), q_dim, c->dim },
        { "attention.wk", LAYER_FIELD(wk), kv_dim, c->dim },
        { "attention.wv", LAYER_FIELD(wv), kv_dim, c->dim },
        { "attention.wo", LAYER_FIELD(wo), c->dim, q_dim },
        { "ffn_norm", LAYER_FIELD(ffn_norm), c->dim, 0 },
        { "feed_forward.w1", LAYER_FIELD(w1), c->hidden_dim, c->dim },
        { "feed_forward.w2", LAYER_FIELD(w2), c->dim, c->hidden_dim },
        { "feed_forward.w3", LAYER_FIELD(w3), c->hidden_dim, c->dim },
    };
    char name[QKV_TENSOR_NAME_BYTES];
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        snprintf(name, sizeof name, "layers.%d.%s", l, specs[i].name);
        char *slot = (char *)&m->weights.layers[l] + specs[i].field;
        if (specs[i].cols > 0) {
            if (find_matrix(t, name, specs[i].rows, specs[i].cols, (Matrix *)slot)) return -1;
        } else if (!(*(const float **)slot = find_tensor(t, name, WEIGHT_F32, specs[i].rows, 0))) {
            return -1;
        }
    }
    return 0;
}

static void config_from_qkv(Config *c, const unsigned char *h) {
    c->dim = read_i32(h + 8); c->hidden_dim = read_i32(h + 12); c->n_layers = read_i32(h + 16);
    c->n_heads = read_i32(h + 20); c->n_kv_heads = read_i32(h + 24); c->head_size = read_i32(h + 28);
    c->vocab_size = read_i32(h + 32); c->seq_len = read_i32(h + 36);
    c->norm_eps = read_f32(h + 40); c->rope_theta = read_f32(h + 44);
    c->shared_classifier = read_i32(h + 48); c->weight_type = read_i32(h + 52);
    c->bos_id = read_i32(h + 56); c->eos_id = read_i32(h + 60);
}

static int load_qkv(FileView *f, Model *m) {
    const unsigned char *h = f->base;
    if (f->size < QKV_HEADER_BYTES) return load_error(f, "truncated file: %zu bytes, shorter than the header", f->size);
    uint32_t version = read_u32(h + 4);
    if (version != 1) return load_error(f, "qkv format version %u is not supported (this engine reads 1)", version);
    Config *c = &m->config;
    config_from_qkv(c, h);
    if (c->shared_classifier != 0 && c->shared_classifier != 1) return load_error(f, "bad shared_classifier flag");
    if (validate_config(f, c)) return -1;
    uint32_t n_tensors = read_u32(h + 64), alignment = read_u32(h + 68);
    if (alignment < 4 || alignment > 4096 || (alignment & (alignment - 1)) != 0)
        return load_error(f, "bad tensor alignment %u (a power of two from 4 to 4096)", alignment);
    uint64_t tok_off = read_u64(h + 72), tok_bytes = read_u64(h + 80);
    uint64_t table_off = read_u64(h + 88), file_bytes = read_u64(h + 96);
    if (file_bytes != f->size)
        return load_error(f, "truncated or padded file: header says %llu bytes, file has %zu",
                          (unsigned long long)file_bytes, f->size);
    if (tok_off > f->size || tok_bytes > f->size - tok_off)
        return load_error(f, "tokenizer section runs past the end of the file");
    size_t table_bytes;
    if (!mul_sizes(&table_bytes, n_tensors, QKV_TENSOR_ENTRY_BYTES) || table_off > f->size ||
        table_bytes > f->size - table_off)
        return load_error(f, "tensor table runs past the end of the file");
    m->tokenizer_data = f->base + tok_off;
    m->tokenizer_bytes = tok_bytes;
    m->weights.layers = calloc((size_t)c->n_layers, sizeof(LayerWeights));
    if (!m->weights.layers) return load_error(f, "out of memory");
    TensorTable t = { f->base + table_off, n_tensors, alignment, f, c };
    if (find_matrix(&t, "tok_embeddings", c->vocab_size, c->dim, &m->weights.token_embedding)) return -1;
    for (int l = 0; l < c->n_layers; l++)
        if (find_layer_tensors(&t, m, l)) return -1;
    if (!(m->weights.final_norm = find_tensor(&t, "norm", WEIGHT_F32, c->dim, 0))) return -1;
    if (c->shared_classifier) m->weights.classifier = m->weights.token_embedding;
    else if (find_matrix(&t, "output", c->vocab_size, c->dim, &m->weights.classifier)) return -1;
    return 0;
}

/* Parameters in the norm vectors (float32 in every format). */
static size_t count_norm_params(const Config *c) {
    return (2 * (size_t)c->n_layers + 1) * c->dim;
}

/* Parameters in the matrices (the weight type's). */
static size_t count_matrix_params(const Config *c) {
    size_t q_dim = (size_t)c->n_heads * c->head_size, kv_dim = (size_t)c->n_kv_heads * c->head_size;
    size_t per_layer = q_dim * c->dim * 2 + kv_dim * c->dim * 2 + 3 * (size_t)c->hidden_dim * c->dim;
    size_t n = (size_t)c->vocab_size * c->dim + per_layer * c->n_layers;
    if (!c->shared_classifier) n += (size_t)c->vocab_size * c->dim;
    return n;
}

const char *model_format_name(FileFormat f) {
    switch (f) {
    case FORMAT_QKV: return "qkv v1";
    case FORMAT_LLAMA2C_LEGACY: return "llama2.c legacy";
    case FORMAT_LLAMA2C_V1: return "llama2.c v1";
    }
    return "?";
}

static int map_file(FileView *f, Model *m, const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return load_error(f, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return load_error(f, "%s is not a regular file", path);
    }
    if (st.st_size < 8) {
        close(fd);
        return load_error(f, "truncated file: %s has %lld bytes", path, (long long)st.st_size);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return load_error(f, "cannot map %s: %s", path, strerror(errno));
    m->mapping = p;
    m->file_bytes = (size_t)st.st_size;
    f->base = p;
    f->size = (size_t)st.st_size;
    return 0;
}

int model_load(Model *m, const char *path, char *err, size_t err_len) {
    memset(m, 0, sizeof *m);
    FileView f = { NULL, 0, err, err_len };
    if (map_file(&f, m, path)) return -1;
    int rc;
    if (memcmp(f.base, "QKVM", 4) == 0) {
        m->format = FORMAT_QKV;
        rc = load_qkv(&f, m);
    } else if (read_u32(f.base) == 0x616b3432u) {
        m->format = FORMAT_LLAMA2C_V1;
        rc = load_llama2c_v1(&f, m);
    } else {
        /* The legacy format has no magic: a plausible header is its only sign. */
        int32_t dim = read_i32(f.base), hidden = read_i32(f.base + 4);
        if (f.size < 28 || dim <= 0 || dim > QKV_MAX_DIM || hidden <= 0 || hidden > QKV_MAX_HIDDEN) {
            load_error(&f, "%s: not a checkpoint (unknown magic, and not a llama2.c legacy header)", path);
            rc = -1;
        } else {
            m->format = FORMAT_LLAMA2C_LEGACY;
            rc = load_llama2c_legacy(&f, m);
        }
    }
    if (rc != 0) {
        model_free(m);
        return -1;
    }
    const Config *c = &m->config;
    m->n_params = count_norm_params(c) + count_matrix_params(c);
    m->weight_bytes = count_norm_params(c) * sizeof(float) +
                      count_matrix_params(c) * weight_type_size((WeightType)c->weight_type);
    return 0;
}

void model_free(Model *m) {
    free(m->weights.layers);
    if (m->mapping) munmap(m->mapping, m->file_bytes);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------------ */
/* Run state                                                                 */

int run_state_init(RunState *s, const Config *c) {
    memset(s, 0, sizeof *s);
    size_t q_dim = (size_t)c->n_heads * c->head_size, kv_dim = (size_t)c->n_kv_heads * c->head_size;
    size_t width = q_dim > (size_t)c->dim ? q_dim : (size_t)c->dim;
    size_t cache_floats;
    if (!mul_sizes(&cache_floats, (size_t)c->n_layers * c->seq_len, kv_dim)) return -1;
    s->width = (int)width;
    s->x = calloc((size_t)QKV_CHUNK * c->dim, sizeof(float));
    s->xb = calloc((size_t)QKV_CHUNK * width, sizeof(float));
    s->xb2 = calloc((size_t)QKV_CHUNK * c->dim, sizeof(float));
    s->q = calloc((size_t)QKV_CHUNK * q_dim, sizeof(float));
    s->k = calloc((size_t)QKV_CHUNK * kv_dim, sizeof(float));
    s->v = calloc((size_t)QKV_CHUNK * kv_dim, sizeof(float));
    s->hb = calloc((size_t)QKV_CHUNK * c->hidden_dim, sizeof(float));
    s->hb2 = calloc((size_t)QKV_CHUNK * c->hidden_dim, sizeof(float));
    s->attention_scores = calloc((size_t)c->n_heads * c->seq_len, sizeof(float));
    s->attention_weights = calloc((size_t)c->n_heads * c->seq_len, sizeof(float));
    s->logits = calloc((size_t)QKV_CHUNK * c->vocab_size, sizeof(float));
    s->kv_cache.n_layers = c->n_layers;
    s->kv_cache.n_kv_heads = c->n_kv_heads;
    s->kv_cache.capacity = c->seq_len;
    s->kv_cache.head_size = c->head_size;
    s->kv_cache.keys = calloc(cache_floats, sizeof(float));
    s->kv_cache.values = calloc(cache_floats, sizeof(float));
    if (!s->x || !s->xb || !s->xb2 || !s->q || !s->k || !s->v || !s->hb || !s->hb2 ||
        !s->attention_scores || !s->attention_weights || !s->logits || !s->kv_cache.keys ||
        !s->kv_cache.values) {
        run_state_free(s);
        return -1;
    }
    return 0;
}

void run_state_free(RunState *s) {
    free(s->x); free(s->xb); free(s->xb2); free(s->q); free(s->k); free(s->v);
    free(s->hb); free(s->hb2); free(s->attention_scores); free(s->attention_weights);
    free(s->logits); free(s->kv_cache.keys); free(s->kv_cache.values);
    memset(s, 0, sizeof *s);
}

/* Where position pos of one key/value head of one layer lives. */
static float *kv_slot(float *base, const KVCache *kv, int layer, int kv_head, int pos) {
    size_t head = (size_t)layer * kv->n_kv_heads + (size_t)kv_head;
    size_t slot = head * kv->capacity + (size_t)(pos % kv->capacity);
    return base + slot * kv->head_size;
}

/* Appends this position's key and value (all kv heads) to the cache. */
static void kv_cache_store(KVCache *kv, int layer, int pos, const float *k, const float *v) {
    size_t bytes = (size_t)kv->head_size * sizeof(float);
    for (int h = 0; h < kv->n_kv_heads; h++) {
        memcpy(kv_slot(kv->keys, kv, layer, h, pos), k + (size_t)h * kv->head_size, bytes);
        memcpy(kv_slot(kv->values, kv, layer, h, pos), v + (size_t)h * kv->head_size, bytes);
    }
}

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */

/* out[n] = weight[n] * x[n] / sqrt(mean(x^2) + eps) */
void rmsnorm(float *out, const float *x, const float *weight, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float scale = 1.0f / sqrtf(ss / n + eps);
    for (int i = 0; i < n; i++) out[i] = weight[i] * (scale * x[i]);
}

/* x[n] <- exp(x - max) / sum: subtracting the max keeps exp from overflowing */
void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) if (x[i] > max) max = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - max); sum += x[i]; }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

/* The hot loops are built three times, for AVX-512, AVX2+FMA and baseline
 * x86-64 (target_clones), and the CPU's features pick one at load time. The
 * dot product is inlined into each, so it is vectorized for each. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(QKV_NO_CLONES)
#define QKV_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define QKV_SIMD_CLONES
#endif

/* Dot product of n floats. Sixteen independent partial sums let the compiler
 * keep them in vector registers. */
static inline float dot_f32(const float *a, const float *b, int n) {
    float acc[16] = { 0 };
    int j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) acc[l] += a[j + l] * b[j + l];
    float sum = 0.0f;
    for (int l = 0; l < 16; l++) sum += acc[l];
    for (; j < n; j++) sum += a[j] * b[j];
    return sum;
}

/* IEEE 754 binary16 -> float32, exact for every one of the 65536 values,
 * in portable C: sign, 5-bit exponent (bias 15), 10-bit mantissa. */
static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    uint32_t bits;
    if (exponent == 0x1f) {          /* infinity or NaN */
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {      /* normal: rebias 15 -> 127 */
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else {                         /* zero or subnormal: mantissa * 2^-24 */
        float f = (float)mantissa * 0x1p-24f;
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Dot product of n halves with n floats, accumulated in float32: the
 * portable path (the fast one is the F16C kernel below). */
static float dot_f16(const uint16_t *a, const float *b, int n) {
    float sum = 0.0f;
    for (int j = 0; j < n; j++) sum += half_to_float(a[j]) * b[j];
    return sum;
}

/* Work below this many multiply-adds is not worth waking other threads for. */
#define QKV_PARALLEL_MIN_WORK (1 << 15)

#define QKV_ROWS_PER_TASK 16

/* Activations of n positions, rows stride floats apart: x[t * stride + i]. */
typedef struct {
    const float *x;
    int n, stride;
} Rows;

/* Row t of x; element i of output row t. */
static inline const float *row_of(Rows x, int t) { return x.x + (size_t)t * x.stride; }
static inline float *out_at(float *out, int stride, int t, int i) { return out + (size_t)t * stride + i; }

/* out[t, begin..end) = W[begin..end, :cols] @ x[t, :] for every position t
 * of x: one kernel per weight type and CPU. Each weight row is used for all
 * positions while it is in L1. The explicit AVX2 kernels take positions two
 * at a time, each vector of weights loaded once for both, with the same
 * arithmetic per position as one at a time, so a prompt gives the same bits
 * in one call as token by token. The plain C kernels go one position at a
 * time: a compiler may fuse multiply-adds differently in a two-position loop. */
typedef void (*MatmulBlock)(float *out, int out_stride, Rows x, const void *w, int cols, int begin, int end);

QKV_SIMD_CLONES
static void matmul_block_f32(float *out, int out_stride, Rows x, const void *w, int cols, int begin, int end) {
    for (int i = begin; i < end; i++)
        for (int t = 0; t < x.n; t++)
            *out_at(out, out_stride, t, i) = dot_f32((const float *)w + (size_t)i * cols, row_of(x, t), cols);
}

static void matmul_block_f16(float *out, int out_stride, Rows x, const void *w, int cols, int begin, int end) {
    for (int i = begin; i < end; i++)
        for (int t = 0; t < x.n; t++)
            *out_at(out, out_stride, t, i) = dot_f16((const uint16_t *)w + (size_t)i * cols, row_of(x, t), cols);
}

/* On x86-64 with AVX2 and FMA (and F16C for halves), explicit kernels: eight
 * weights per vector (vcvtph2ps widens 8 halves to floats), four accumulators
 * to hide the multiply-add latency, picked at run time. GCC 12 does not
 * vectorize half -> float conversion by itself (not even of _Float16). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(QKV_NO_CLONES)
#include <immintrin.h>
#define QKV_HAVE_F16C_KERNEL 1
#define QKV_SIMD_TARGET __attribute__((target("avx2,fma,f16c")))

/* Eight weights from row + j as floats; half is a constant at each call. */
QKV_SIMD_TARGET
static inline __attribute__((always_inline)) __m256 load8(const void *row, int j, int half) {
    if (half) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + j)));
    return _mm256_loadu_ps((const float *)row + j);
}

static inline float weight_at(const void *row, int j, int half) {
    return half ? half_to_float(((const uint16_t *)row)[j]) : ((const float *)row)[j];
}

/* The sum of the lanes of four accumulators, in one fixed order. */
QKV_SIMD_TARGET
static inline float sum_lanes(__m256 acc0, __m256 acc1, __m256 acc2, __m256 acc3) {
    __m256 acc = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_hadd_ps(s, s);
    s = _mm_hadd_ps(s, s);
    return _mm_cvtss_f32(s);
}

/* row . x over n, as: 32 at a time into four accumulators, then 8 at a
 * time into the first, then their lanes, then one at a time. */
QKV_SIMD_TARGET
static inline __attribute__((always_inline)) float dot_simd(const void *row, const float *x, int n, int half) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int j = 0;
    for (; j + 32 <= n; j += 32) {
        a0 = _mm256_fmadd_ps(load8(row, j, half), _mm256_loadu_ps(x + j), a0);
        a1 = _mm256_fmadd_ps(load8(row, j + 8, half), _mm256_loadu_ps(x + j + 8), a1);
        a2 = _mm256_fmadd_ps(load8(row, j + 16, half), _mm256_loadu_ps(x + j + 16), a2);
        a3 = _mm256_fmadd_ps(load8(row, j + 24, half), _mm256_loadu_ps(x + j + 24), a3);
    }
    for (; j + 8 <= n; j += 8) a0 = _mm256_fmadd_ps(load8(row, j, half), _mm256_loadu_ps(x + j), a0);
    float sum = sum_lanes(a0, a1, a2, a3);
    for (; j < n; j++) sum += weight_at(row, j, half) * x[j];
    return sum;
}

/* dot_simd for x0 and x1 at once, the same arithmetic for each. */
QKV_SIMD_TARGET
static inline __attribute__((always_inline)) void dot2_simd(const void *row, const float *x0, const float *x1, int n,
                                                           float *out0, float *out1, int half) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int j = 0;
    for (; j + 32 <= n; j += 32) {
        __m256 w0 = load8(row, j, half), w1 = load8(row, j + 8, half);
        __m256 w2 = load8(row, j + 16, half), w3 = load8(row, j + 24, half);
        a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x0 + j), a0);
        a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x0 + j + 8), a1);
        a2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x0 + j + 16), a2);
        a3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x0 + j + 24), a3);
        b0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x1 + j), b0);
        b1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x1 + j + 8), b1);
        b2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x1 + j + 16), b2);
        b3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x1 + j + 24), b3);
    }
    for (; j + 8 <= n; j += 8) {
        __m256 w = load8(row, j, half);
        a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x0 + j), a0);
        b0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x1 + j), b0);
    }
    float sum0 = sum_lanes(a0, a1, a2, a3), sum1 = sum_lanes(b0, b1, b2, b3);
    for (; j < n; j++) {
        float w = weight_at(row, j, half);
        sum0 += w * x0[j];
        sum1 += w * x1[j];
    }
    *out0 = sum0;
    *out1 = sum1;
}

QKV_SIMD_TARGET
static inline __attribute__((always_inline)) void matmul_block_simd(float *out, int out_stride, Rows x, const void *w,
                                                                   int cols, int begin, int end, int half) {
    size_t row_bytes = (size_t)cols * (half ? 2 : 4);
    for (int i = begin; i < end; i++) {
        const void *row = (const char *)w + (size_t)i * row_bytes;
        int t = 0;
        for (; t + 2 <= x.n; t += 2)
            dot2_simd(row, row_of(x, t), row_of(x, t + 1), cols, out_at(out, out_stride, t, i),
                      out_at(out, out_stride, t + 1, i), half);
        for (; t < x.n; t++) *out_at(out, out_stride, t, i) = dot_simd(row, row_of(x, t), cols, half);
    }
}

QKV_SIMD_TARGET
static void matmul_block_f16_f16c(float *out, int out_stride, Rows x, const void *w, int cols, int begin, int end) {
    matmul_block_simd(out, out_stride, x, w, cols, begin, end, 1);
}

QKV_SIMD_TARGET
static void matmul_block_f32_fma(float *out, int out_stride, Rows x, const void *w, int cols, int begin, int end) {
    matmul_block_simd(out, out_stride, x, w, cols, begin, end, 0);
}

static int cpu_has_f16c(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
#endif

static MatmulBlock matmul_kernel(WeightType type) {
#ifdef QKV_HAVE_F16C_KERNEL
    if (cpu_has_f16c()) return type == WEIGHT_F16 ? matmul_block_f16_f16c : matmul_block_f32_fma;
#endif
    return type == WEIGHT_F16 ? matmul_block_f16 : matmul_block_f32;
}

/* out[t, :rows] = W[rows, cols] @ x[t, :cols] for the n positions of x;
 * blocks of weight rows are split across threads */
static void matmul_rows(float *out, int out_stride, Rows x, const Matrix *w) {
    MatmulBlock kernel = matmul_kernel(w->type);
    int rows = w->rows, cols = w->cols;
    int n_blocks = (rows + QKV_ROWS_PER_TASK - 1) / QKV_ROWS_PER_TASK, b;
#pragma omp parallel for schedule(static) if ((long)rows * cols * x.n >= QKV_PARALLEL_MIN_WORK)
    for (b = 0; b < n_blocks; b++) {
        int begin = b * QKV_ROWS_PER_TASK, end = begin + QKV_ROWS_PER_TASK < rows ? begin + QKV_ROWS_PER_TASK : rows;
        kernel(out, out_stride, x, w->data, cols, begin, end);
    }
}

/* out[rows] = W[rows, cols] @ x[cols] */
void matmul(float *out, const float *x, const Matrix *w) {
    Rows one = { x, 1, w->cols };
    matmul_rows(out, w->rows, one, w);
}

/* out[cols] = W[row, :] as float32 (an embedding lookup) */
void matrix_row(float *out, const Matrix *w, int row) {
    if (w->type == WEIGHT_F16) {
        const uint16_t *p = (const uint16_t *)w->data + (size_t)row * w->cols;
        for (int i = 0; i < w->cols; i++) out[i] = half_to_float(p[i]);
    } else {
        memcpy(out, (const float *)w->data + (size_t)row * w->cols, (size_t)w->cols * sizeof(float));
    }
}

/* Rotary position embedding, in place on vec[n_heads*head_size]: within each
 * head, the pair (2i, 2i+1) turns by pos * theta^(-2i/head_size) radians. */
void rope(float *vec, int n_heads, int head_size, int pos, float theta) {
    for (int i = 0; i < head_size; i += 2) {
        float freq = 1.0f / powf(theta, (float)i / (float)head_size);
        float angle = pos * freq, c = cosf(angle), s = sinf(angle);
        for (int h = 0; h < n_heads; h++) {
            float *v = vec + (size_t)h * head_size + i;
            float a = v[0], b = v[1];
            v[0] = a * c - b * s;
            v[1] = a * s + b * c;
        }
    }
}

/* One head of scaled dot-product attention for one query row:
 *   scores[t]  = q · keys[t]                       t < n_visible (raw, kept for the trace)
 *   weights[t] = softmax(scores / sqrt(head_size))[t]
 *   out        = sum_t weights[t] * values[t]       out[head_size]
 * keys and values point at this head's slice of row 0; rows are stride floats
 * apart. Positions a query may not see are simply not visited: that is the
 * causal mask, and why the cache holds only the past. */
QKV_SIMD_CLONES
void attention_head(float *out, float *scores, float *weights, const float *q,
                    const float *keys, const float *values, int stride,
                    int n_visible, int head_size) {
    float scale = 1.0f / sqrtf((float)head_size);
    for (int t = 0; t < n_visible; t++) {
        scores[t] = dot_f32(q, keys + (size_t)t * stride, head_size);
        weights[t] = scores[t] * scale;
    }
    softmax(weights, n_visible);
    memset(out, 0, (size_t)head_size * sizeof(float));
    for (int t = 0; t < n_visible; t++) {
        const float *v = values + (size_t)t * stride;
        float w = weights[t];
        for (int i = 0; i < head_size; i++) out[i] += w * v[i];
    }
}

/* x <- silu(gate) * up, elementwise over hidden_dim */
static void swiglu(float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
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

static void notify_attention(const ForwardObserver *o, int layer, int pos, const RunState *s) {
#ifndef QKV_NO_OBSERVER
    if (o && o->attention) o->attention(o->ctx, layer, pos, pos + 1, s);
#endif
}

/* Attention of every query head of the position in row t (pos), against
 * the cache, which already holds its key: q row t -> xb row t. */
static void attention(const Config *c, RunState *s, int layer, int pos, int t) {
    const KVCache *kv = &s->kv_cache;
    int heads_per_kv = c->n_heads / c->n_kv_heads;
    int n_visible = pos + 1;
    const float *q = s->q + (size_t)t * c->n_heads * c->head_size;
    float *out = s->xb + (size_t)t * s->width;
    int h;
#pragma omp parallel for schedule(static) if ((long)c->n_heads * n_visible * c->head_size >= QKV_PARALLEL_MIN_WORK)
    for (h = 0; h < c->n_heads; h++) {
        int kv_head = h / heads_per_kv;
        attention_head(out + (size_t)h * c->head_size,
                       s->attention_scores + (size_t)h * c->seq_len,
                       s->attention_weights + (size_t)h * c->seq_len,
                       q + (size_t)h * c->head_size,
                       kv_slot(kv->keys, kv, layer, kv_head, 0),
                       kv_slot(kv->values, kv, layer, kv_head, 0),
                       kv->head_size, n_visible, c->head_size);
    }
}

/* rmsnorm of each of n rows: x rows dim apart -> out rows out_stride apart */
static void rmsnorm_rows(float *out, int out_stride, const float *x, const float *weight, int n, int dim,
                         float eps) {
    for (int t = 0; t < n; t++)
        rmsnorm(out + (size_t)t * out_stride, x + (size_t)t * dim, weight, dim, eps);
}

/* Queries, keys and values of rows 0..n-1 (positions pos..pos+n-1), rotated;
 * the keys and values go into the cache. */
static void project_qkv(const Config *c, const LayerWeights *w, RunState *s, int layer, int pos, int n) {
    int q_dim = c->n_heads * c->head_size, kv_dim = c->n_kv_heads * c->head_size;
    Rows normed = { s->xb, n, s->width };
    matmul_rows(s->q, q_dim, normed, &w->wq);
    matmul_rows(s->k, kv_dim, normed, &w->wk);
    matmul_rows(s->v, kv_dim, normed, &w->wv);
    for (int t = 0; t < n; t++) {
        float *q = s->q + (size_t)t * q_dim, *k = s->k + (size_t)t * kv_dim, *v = s->v + (size_t)t * kv_dim;
        rope(q, c->n_heads, c->head_size, pos + t, c->rope_theta);
        rope(k, c->n_kv_heads, c->head_size, pos + t, c->rope_theta);
        kv_cache_store(&s->kv_cache, layer, pos + t, k, v);
    }
}

/* One block over rows 0..n-1 (positions pos..pos+n-1):
 *   x += attention(rmsnorm(x)); x += mlp(rmsnorm(x))
 * The weights see all n rows at once; attention goes position by position,
 * each against the keys up to its own (the causal mask). */
static void transformer_block(const Model *m, RunState *s, int layer, int pos, int n,
                              const ForwardObserver *o) {
    const Config *c = &m->config;
    const LayerWeights *w = &m->weights.layers[layer];
    int dim = c->dim, hidden = c->hidden_dim;

    rmsnorm_rows(s->xb, s->width, s->x, w->attention_norm, n, dim, c->norm_eps);
    project_qkv(c, w, s, layer, pos, n);
    for (int t = 0; t < n; t++) {
        notify_stage(o, STAGE_ATTENTION_BEGIN, layer);
        attention(c, s, layer, pos + t, t);
        notify_stage(o, STAGE_ATTENTION_END, layer);
        notify_attention(o, layer, pos + t, s);
    }
    matmul_rows(s->xb2, dim, (Rows){ s->xb, n, s->width }, &w->wo);
    add_residual(s->x, s->xb2, n * dim);

    rmsnorm_rows(s->xb, s->width, s->x, w->ffn_norm, n, dim, c->norm_eps);
    Rows normed = { s->xb, n, s->width };
    matmul_rows(s->hb, hidden, normed, &w->w1);
    matmul_rows(s->hb2, hidden, normed, &w->w3);
    swiglu(s->hb, s->hb2, n * hidden);
    matmul_rows(s->xb2, dim, (Rows){ s->hb, n, hidden }, &w->w2);
    add_residual(s->x, s->xb2, n * dim);
}

/* tokens[0..n-1] at positions pos..pos+n-1 (n <= QKV_CHUNK) through every block */
static void forward_chunk(const Model *m, RunState *s, const int *tokens, int n, int pos,
                          const ForwardObserver *o) {
    const Config *c = &m->config;
    for (int t = 0; t < n; t++) matrix_row(s->x + (size_t)t * c->dim, &m->weights.token_embedding, tokens[t]);
    for (int l = 0; l < c->n_layers; l++) transformer_block(m, s, l, pos, n, o);
}

/* logits of the n positions in rows first..first+n-1, into logits rows 0..n-1 */
static float *classify(const Model *m, RunState *s, int first, int n) {
    const Config *c = &m->config;
    float *x = s->x + (size_t)first * c->dim;
    rmsnorm_rows(x, c->dim, x, m->weights.final_norm, n, c->dim, c->norm_eps);
    matmul_rows(s->logits, c->vocab_size, (Rows){ x, n, c->dim }, &m->weights.classifier);
    return s->logits;
}

float *forward(const Model *m, RunState *s, int token, int pos, const ForwardObserver *observer) {
    forward_chunk(m, s, &token, 1, pos, observer);
    return classify(m, s, 0, 1);
}

float *forward_logits(const Model *m, RunState *s, const int *tokens, int n, int pos,
                      const ForwardObserver *observer) {
    forward_chunk(m, s, tokens, n, pos, observer);
    return classify(m, s, 0, n);
}

float *forward_tokens(const Model *m, RunState *s, const int *tokens, int n, int pos,
                      const ForwardObserver *observer) {
    int done = 0, len = 0;
    while (done < n) {
        len = n - done < QKV_CHUNK ? n - done : QKV_CHUNK;
        forward_chunk(m, s, tokens + done, len, pos + done, observer);
        done += len;
    }
    return classify(m, s, len - 1, 1);
}

/* ------------------------------------------------------------------------ */
/* Cost model                                                                */

double flops_weights_per_token(const Config *c) {
    double q_dim = (double)c->n_heads * c->head_size, kv_dim = (double)c->n_kv_heads * c->head_size;
    double per_layer = c->dim * (2 * q_dim + 2 * kv_dim) + 3.0 * c->dim * c->hidden_dim;
    return 2.0 * (per_layer * c->n_layers + (double)c->vocab_size * c->dim);
}

/* scores (q·k) and the weighted sum of values: 2 multiply-adds per visible
 * position per head dimension, for every query head and layer */
double flops_attention_per_token(const Config *c, int n_visible) {
    return 4.0 * (double)c->n_layers * c->n_heads * c->head_size * n_visible;
}

size_t kv_cache_bytes_per_token(const Config *c) {
    return 2 * (size_t)c->n_layers * c->n_kv_heads * c->head_size * sizeof(float);
}

#endif /* QKV_MODEL_IMPLEMENTED */
#endif /* QKV_MODEL_IMPLEMENTATION */
