/* checkpoint.h — loading checkpoints: qkv files, llama2.c's legacy,
 * version-1 and version-2 (Q8_0) files, and model_load's choice among them
 * and GGUF (read by gguf.h). Every size is checked against the file before a byte of
 * data is touched; a bad file gets one line in err and -1.
 *
 * Implementation only, included by model.h's implementation section; the
 * interface (Model, model_load, model_free) is in model.h. */
#ifndef QKV_CHECKPOINT_IMPLEMENTED
#define QKV_CHECKPOINT_IMPLEMENTED

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokenizer.h" /* TokenizerKind, checked in the header */
#include "input_file.h"

/* ------------------------------------------------------------------------ */
/* A bounds-checked view of the file in memory (mapped or read)            */

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
    if (c->arch != ARCH_LLAMA && c->arch != ARCH_GPT2)
        return load_error(f, "unknown architecture %d (0 Llama, 1 GPT-2)", c->arch);
    if (c->arch == ARCH_LLAMA ? c->activation != ACT_SWIGLU
                              : c->activation != ACT_GELU_ERF && c->activation != ACT_GELU_TANH)
        return load_error(f, "activation %d does not go with the %s architecture (Llama: 0 SwiGLU; GPT-2: "
                             "1 exact GELU, 2 tanh GELU)", c->activation, c->arch == ARCH_LLAMA ? "Llama" : "GPT-2");
    if (!check_range(c->tokenizer_kind, TOKENIZER_LLAMA, TOKENIZER_GPT2_BPE))
        return load_error(f, "unknown tokenizer kind %d (0 llama2.c BPE, 1 characters, 2 GPT-2 byte-level BPE)",
                          c->tokenizer_kind);
    /* RoPE turns pairs of dimensions; GPT-2 has no RoPE, so any head size */
    if (!check_range(c->head_size, 1, QKV_MAX_DIM) || (c->arch == ARCH_LLAMA && c->head_size % 2 != 0))
        return load_error(f, "bad head_size %d (must be even, for RoPE pairs)", c->head_size);
    if ((long long)c->n_heads * c->head_size > QKV_MAX_DIM)
        return load_error(f, "n_heads*head_size %lld too large", (long long)c->n_heads * c->head_size);
    if (!check_range(c->vocab_size, 1, QKV_MAX_VOCAB)) return load_error(f, "bad vocab_size %d", c->vocab_size);
    if (!check_range(c->seq_len, 1, QKV_MAX_SEQ_LEN)) return load_error(f, "bad seq_len %d", c->seq_len);
    if (!(c->norm_eps > 0.0f && c->norm_eps < 1.0f)) return load_error(f, "bad norm_eps %g", c->norm_eps);
    if (c->arch == ARCH_LLAMA && !(c->rope_theta > 1.0f && isfinite(c->rope_theta)))
        return load_error(f, "bad rope_theta %g", c->rope_theta);
    if (c->arch == ARCH_GPT2 && c->rope_theta != 0.0f)
        return load_error(f, "rope_theta %g in a GPT-2 file (it has no RoPE: 0)", c->rope_theta);
    if (!weight_traits(c->weight_type))
        return load_error(f, "unsupported weight type %d (0 float32, 1 float16, 2 q8_0, 3 q4_0)", c->weight_type);
    /* a character vocabulary has neither (-1); every other has both */
    int lowest = c->tokenizer_kind == TOKENIZER_CHAR ? -1 : 0;
    if (!check_range(c->bos_id, lowest, c->vocab_size - 1) || !check_range(c->eos_id, lowest, c->vocab_size - 1))
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

/* count elements of size bytes each at the cursor, or NULL if the file ends */
static const void *take_bytes(Cursor *cur, size_t count, size_t size) {
    size_t bytes;
    if (!mul_sizes(&bytes, count, size) || cur->offset > cur->f->size || bytes > cur->f->size - cur->offset) {
        load_error(cur->f, "truncated file: tensor data runs past the end (%zu bytes)", cur->f->size);
        return NULL;
    }
    const void *p = cur->f->base + cur->offset;
    cur->offset += bytes;
    return p;
}

static const float *take_floats(Cursor *cur, size_t count) { return take_bytes(cur, count, sizeof(float)); }

/* llama2.c's files have no table and no length: the header implies where
 * the weights end, and a file that goes on past that is not the model the
 * header describes (a wrong config, or two files joined). The truncated case
 * was caught by take_floats. */
static int check_file_ends(Cursor *cur) {
    if (cur->offset == cur->f->size) return 0;
    return load_error(cur->f, "file size %zu does not match its header: the weights it describes end at byte %zu",
                      cur->f->size, cur->offset);
}

static Matrix f32_matrix(const float *data, int rows, int cols) {
    return matrix_make(WEIGHT_F32, rows, cols, data);
}

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
#define LEGACY_HEADER_BYTES 28

static int load_llama2c_legacy(FileView *f, Model *m) {
    if (f->size < LEGACY_HEADER_BYTES) return load_error(f, "truncated file: %zu bytes, shorter than a header", f->size);
    Config *c = &m->config;
    if (config_from_llama2c(f, c, f->base)) return -1;
    c->shared_classifier = c->vocab_size > 0;
    /* -INT_MIN does not exist: refuse it before negating */
    if (c->vocab_size == INT_MIN) return load_error(f, "bad vocab_size %d", c->vocab_size);
    if (c->vocab_size < 0) c->vocab_size = -c->vocab_size;
    if (validate_config(f, c)) return -1;
    m->weights.layers = calloc((size_t)c->n_layers, sizeof(LayerWeights));
    if (!m->weights.layers) return load_error(f, "out of memory");
    Cursor cur = { f, LEGACY_HEADER_BYTES };
    const float *embedding = take_floats(&cur, (size_t)c->vocab_size * c->dim);
    if (!embedding) return -1;
    m->weights.token_embedding = f32_matrix(embedding, c->vocab_size, c->dim);
    if (take_attention_and_mlp(&cur, m, 1)) return -1;
    if (!(m->weights.final_norm = take_floats(&cur, (size_t)c->dim))) return -1;
    /* precomputed RoPE tables (freq_cis_real, freq_cis_imag): skipped, we compute them */
    if (!take_floats(&cur, (size_t)c->seq_len * c->head_size)) return -1;
    if (take_classifier(&cur, m)) return -1;
    return check_file_ends(&cur);
}

/* ---- llama2.c version 2 (runq.c's int8): repacked into ggml Q8_0 blocks ---- */

/* One tensor of version 2: rows*cols int8 values, then a float32 scale per
 * group of group_size values, into Q8_0 blocks of 32 at *out (each block
 * lies within one group, since groups and rows are whole blocks); the scale
 * is rounded to float16 (Q8_0's): a relative change of at most 2^-11 for a
 * scale in float16's normal range (a group whose largest |weight| is above
 * 127 * 2^-14, about 0.0078), far below int8's own rounding; below it the
 * scale is subnormal and the change grows (7e-4 at 0.005, 1.6% at 2e-4), and
 * a group under about 4e-6 becomes zeros: the same loss as any Q8_0 file. */
static int take_v2_matrix(Cursor *cur, int rows, int cols, int group_size, unsigned char **out, Matrix *m) {
    size_t n = (size_t)rows * cols;
    if (n % (size_t)group_size != 0) /* its last block would read a scale past its own */
        return load_error(cur->f, "llama2.c version 2: a %d x %d tensor is not whole groups of %d", rows, cols,
                          group_size);
    const int8_t *q = take_bytes(cur, n, 1);
    const float *scales = q ? take_floats(cur, n / (size_t)group_size) : NULL;
    if (!scales) return -1;
    unsigned char *blocks = *out;
    for (size_t b = 0; b < n / QKV_QBLOCK; b++) {
        uint16_t d = float_to_half(read_f32((const unsigned char *)(scales + b * QKV_QBLOCK / (size_t)group_size)));
        memcpy(blocks + b * 34, &d, 2);
        memcpy(blocks + b * 34 + 2, q + b * QKV_QBLOCK, QKV_QBLOCK);
    }
    *m = matrix_make(WEIGHT_Q8_0, rows, cols, blocks);
    *out += n / QKV_QBLOCK * 34;
    return 0;
}

/* The matrices of one kind for every layer: version 2 stores them kind by kind. */
static int take_v2_layers(Cursor *cur, Model *m, size_t field, int rows, int cols, int group_size,
                          unsigned char **out) {
    for (int l = 0; l < m->config.n_layers; l++)
        if (take_v2_matrix(cur, rows, cols, group_size, out, (Matrix *)((char *)&m->weights.layers[l] + field)))
            return -1;
    return 0;
}

/* Version 2: the version-1 header plus the group size at byte 37; the norms
 * in float32, then tok_embeddings, wq, wk, wv, wo, w1, w2, w3 (each for all
 * layers) and the classifier if not shared, as int8 + float32 scales. */
static int load_llama2c_v2(FileView *f, Model *m) {
    Config *c = &m->config;
    if (config_from_llama2c(f, c, f->base + 8)) return -1;
    c->shared_classifier = f->base[36] != 0;
    c->weight_type = WEIGHT_Q8_0;
    int group_size = read_i32(f->base + 37);
    if (validate_config(f, c)) return -1;
    int q_dim = c->n_heads * c->head_size, kv_dim = c->n_kv_heads * c->head_size;
    if (group_size <= 0 || group_size % QKV_QBLOCK != 0 || c->dim % QKV_QBLOCK != 0 || c->hidden_dim % QKV_QBLOCK != 0)
        return load_error(f, "llama2.c version 2: group size %d, dim %d and hidden_dim %d must be multiples of %d",
                          group_size, c->dim, c->hidden_dim, QKV_QBLOCK);
    size_t params = (size_t)c->vocab_size * c->dim * (c->shared_classifier ? 1 : 2) +
                    (size_t)c->n_layers * ((size_t)c->dim * (2 * q_dim + 2 * kv_dim) + 3 * (size_t)c->dim * c->hidden_dim);
    if (params > f->size) return load_error(f, "truncated file: %zu bytes, the header implies more", f->size);
    m->weights.layers = calloc((size_t)c->n_layers, sizeof(LayerWeights));
    unsigned char *out = m->repacked = malloc(params / QKV_QBLOCK * 34);
    if (!m->weights.layers || !out) return load_error(f, "out of memory");
    Cursor cur = { f, 256 };
    if (take_layer_vectors(&cur, m, LAYER_FIELD(attention_norm), c->dim) ||
        take_layer_vectors(&cur, m, LAYER_FIELD(ffn_norm), c->dim)) return -1;
    if (!(m->weights.final_norm = take_floats(&cur, (size_t)c->dim))) return -1;
    if (take_v2_matrix(&cur, c->vocab_size, c->dim, group_size, &out, &m->weights.token_embedding) ||
        take_v2_layers(&cur, m, LAYER_FIELD(wq), q_dim, c->dim, group_size, &out) ||
        take_v2_layers(&cur, m, LAYER_FIELD(wk), kv_dim, c->dim, group_size, &out) ||
        take_v2_layers(&cur, m, LAYER_FIELD(wv), kv_dim, c->dim, group_size, &out) ||
        take_v2_layers(&cur, m, LAYER_FIELD(wo), c->dim, q_dim, group_size, &out) ||
        take_v2_layers(&cur, m, LAYER_FIELD(w1), c->hidden_dim, c->dim, group_size, &out) ||
        take_v2_layers(&cur, m, LAYER_FIELD(w2), c->dim, c->hidden_dim, group_size, &out) ||
        take_v2_layers(&cur, m, LAYER_FIELD(w3), c->hidden_dim, c->dim, group_size, &out)) return -1;
    if (c->shared_classifier) m->weights.classifier = m->weights.token_embedding;
    else if (take_v2_matrix(&cur, c->vocab_size, c->dim, group_size, &out, &m->weights.classifier)) return -1;
    return check_file_ends(&cur);
}

/* Version 1: "ak42" magic, version, 7 ints, shared flag, padded to 256. Norms
 * come first, then the embedding, then the matrices. Version 2 is its int8
 * sibling (above). */
static int load_llama2c_v1(FileView *f, Model *m) {
    if (f->size < 256) return load_error(f, "truncated file: %zu bytes, shorter than the 256-byte header", f->size);
    int version = read_i32(f->base + 4);
    if (version == 2) {
        m->format = FORMAT_LLAMA2C_V2;
        return load_llama2c_v2(f, m);
    }
    if (version != 1)
        return load_error(f, "llama2.c checkpoint version %d is not supported (1: float32, 2: int8)", version);
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
    if (take_classifier(&cur, m)) return -1;
    return check_file_ends(&cur);
}

/* ---- qkv format: header, embedded tokenizer, table of named tensors ---- */

#include "qkv_format.h"

/* A stretch of the file that one thing owns: the header, the tokenizer
 * section, the tensor table, each tensor. No two may share a byte. */
typedef struct {
    uint64_t begin, end; /* [begin, end) */
    char name[QKV_TENSOR_NAME_BYTES];
} Section;

typedef struct {
    const unsigned char **by_name; /* the table's entries, sorted by name */
    uint32_t n_tensors;
    uint32_t alignment;
    FileView *f;
    const Config *config;
    Section *sections; /* every section found so far */
    int n_sections, max_sections;
} TensorTable;

static void add_section(TensorTable *t, const char *name, uint64_t begin, uint64_t bytes) {
    if (bytes == 0 || t->n_sections == t->max_sections) return; /* empty: owns nothing */
    Section *s = &t->sections[t->n_sections++];
    s->begin = begin;
    s->end = begin + bytes; /* no wrap: every section was checked against the file size */
    snprintf(s->name, sizeof s->name, "%.*s", (int)sizeof s->name - 1, name); /* a long GGUF name cut */
}

static int by_begin(const void *a, const void *b) {
    const Section *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Sorted by start, sections are disjoint when each ends before the next
 * begins: a tensor that points into the header, the tokenizer or another
 * tensor would be read as two things at once. */
static int check_sections_disjoint(TensorTable *t) {
    qsort(t->sections, (size_t)t->n_sections, sizeof(Section), by_begin);
    for (int i = 1; i < t->n_sections; i++) {
        const Section *a = &t->sections[i - 1], *b = &t->sections[i];
        if (b->begin < a->end)
            return load_error(t->f, "%s overlaps %s (bytes %llu..%llu and %llu..%llu)", b->name, a->name,
                              (unsigned long long)b->begin, (unsigned long long)b->end - 1,
                              (unsigned long long)a->begin, (unsigned long long)a->end - 1);
    }
    return 0;
}

static int compare_names(const unsigned char *a, const unsigned char *b) {
    return strncmp((const char *)a, (const char *)b, QKV_TENSOR_NAME_BYTES);
}

static int by_name(const void *a, const void *b) {
    return compare_names(*(const unsigned char *const *)a, *(const unsigned char *const *)b);
}

/* The entries sorted by name, so that each of the 9 * n_layers + 3 lookups
 * is a binary search: a file listing millions of tensors costs n log n, not
 * n per lookup. NULL if out of memory. */
static const unsigned char **sort_entries(const unsigned char *entries, uint32_t n) {
    const unsigned char **sorted = malloc(((size_t)n + 1) * sizeof *sorted);
    if (!sorted) return NULL;
    for (uint32_t i = 0; i < n; i++) sorted[i] = entries + (size_t)i * QKV_TENSOR_ENTRY_BYTES;
    qsort(sorted, n, sizeof *sorted, by_name);
    return sorted;
}

/* The table entry called name; NULL if absent. A name listed twice is
 * ambiguous, so it is an error, not a choice. */
static const unsigned char *find_entry(TensorTable *t, const char *name) {
    const unsigned char *key = (const unsigned char *)name;
    uint32_t lo = 0, hi = t->n_tensors; /* the first entry not below name is in [lo, hi] */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (compare_names(t->by_name[mid], key) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo == t->n_tensors || compare_names(t->by_name[lo], key) != 0) {
        load_error(t->f, "tensor %s missing", name);
        return NULL;
    }
    if (lo + 1 < t->n_tensors && compare_names(t->by_name[lo + 1], key) == 0) {
        load_error(t->f, "tensor %s is listed twice", name);
        return NULL;
    }
    return t->by_name[lo];
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
    size_t row_bytes = cols > 0 ? weight_row_bytes(want_type, cols) : sizeof(float), bytes;
    if (row_bytes == 0) {
        load_error(t->f, "tensor %s: %d columns are not a whole number of %s blocks", name, cols,
                   weight_type_name(want_type));
        return NULL;
    }
    if (!mul_sizes(&bytes, (size_t)rows, row_bytes)) {
        load_error(t->f, "tensor %s: size overflows", name);
        return NULL;
    }
    if (offset % t->alignment != 0) {
        load_error(t->f, "tensor %s: data offset %llu is not %u-byte aligned", name,
                   (unsigned long long)offset, t->alignment);
        return NULL;
    }
    if (offset > t->f->size || bytes > t->f->size - offset) {
        load_error(t->f, "truncated file: tensor %s runs past the end", name);
        return NULL;
    }
    char label[QKV_TENSOR_NAME_BYTES];
    snprintf(label, sizeof label, "tensor %s", name);
    add_section(t, label, offset, bytes);
    return t->f->base + offset;
}

/* Every matrix has the header's weight type, except that a file quantized
 * to blocks keeps in float16 a matrix whose width is not a whole number of
 * them (as -m quantize writes it). */
static int find_matrix(TensorTable *t, const char *name, int rows, int cols, Matrix *out) {
    const unsigned char *e = find_entry(t, name);
    if (!e) return -1;
    WeightType header_type = (WeightType)t->config->weight_type, type = header_type;
    if (read_u32(e + 64) == WEIGHT_F16 && weight_row_bytes(header_type, cols) == 0) type = WEIGHT_F16;
    const void *p = find_tensor(t, name, type, rows, cols);
    if (!p) return -1;
    *out = matrix_make(type, rows, cols, p);
    return 0;
}

/* Layer tensor QKV_LAYER_TENSORS[tensor] (its bias if bias), where it goes
 * in LayerWeights, its shape (cols 0: a float32 vector) */
typedef struct { int tensor, bias; size_t field; int rows, cols; } TensorSpec;

/* GPT-2's tensors beyond the shared ones: no w3, and a bias for every norm
 * and matrix (float32 vectors). */
static int gpt2_layer_specs(const Config *c, TensorSpec *specs) {
    int q_dim = c->n_heads * c->head_size, kv_dim = c->n_kv_heads * c->head_size;
    const TensorSpec gpt2[] = {
        { 0, 1, LAYER_FIELD(attention_norm_bias), c->dim, 0 },
        { 1, 1, LAYER_FIELD(bq), q_dim, 0 },
        { 2, 1, LAYER_FIELD(bk), kv_dim, 0 },
        { 3, 1, LAYER_FIELD(bv), kv_dim, 0 },
        { 4, 1, LAYER_FIELD(bo), c->dim, 0 },
        { 5, 1, LAYER_FIELD(ffn_norm_bias), c->dim, 0 },
        { 6, 1, LAYER_FIELD(b1), c->hidden_dim, 0 },
        { 7, 1, LAYER_FIELD(b2), c->dim, 0 },
    };
    memcpy(specs, gpt2, sizeof gpt2);
    return (int)(sizeof gpt2 / sizeof gpt2[0]);
}

static int find_layer_tensors(TensorTable *t, Model *m, int l) {
    const Config *c = &m->config;
    int q_dim = c->n_heads * c->head_size, kv_dim = c->n_kv_heads * c->head_size;
    TensorSpec specs[17] = {
        { 0, 0, LAYER_FIELD(attention_norm), c->dim, 0 },
        { 1, 0, LAYER_FIELD(wq), q_dim, c->dim },
        { 2, 0, LAYER_FIELD(wk), kv_dim, c->dim },
        { 3, 0, LAYER_FIELD(wv), kv_dim, c->dim },
        { 4, 0, LAYER_FIELD(wo), c->dim, q_dim },
        { 5, 0, LAYER_FIELD(ffn_norm), c->dim, 0 },
        { 6, 0, LAYER_FIELD(w1), c->hidden_dim, c->dim },
        { 7, 0, LAYER_FIELD(w2), c->dim, c->hidden_dim },
        { 8, 0, LAYER_FIELD(w3), c->hidden_dim, c->dim },
    };
    int n_specs = QKV_PER_LAYER;
    if (c->arch == ARCH_GPT2) /* w3 (the 9th) replaced by the biases */
        n_specs = QKV_GPT2_PER_LAYER + gpt2_layer_specs(c, specs + QKV_GPT2_PER_LAYER);
    char name[QKV_TENSOR_NAME_BYTES];
    for (int i = 0; i < n_specs; i++) {
        snprintf(name, sizeof name, "layers.%d.%s%s", l, QKV_LAYER_TENSORS[specs[i].tensor], specs[i].bias ? QKV_BIAS : "");
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
    c->arch = read_i32(h + 104); c->activation = read_i32(h + 108); c->tokenizer_kind = read_i32(h + 112);
}

static int find_all_tensors(TensorTable *t, Model *m) {
    const Config *c = &m->config;
    if (find_matrix(t, QKV_EMBEDDING_TENSOR, c->vocab_size, c->dim, &m->weights.token_embedding)) return -1;
    for (int l = 0; l < c->n_layers; l++)
        if (find_layer_tensors(t, m, l)) return -1;
    if (!(m->weights.final_norm = find_tensor(t, QKV_NORM_TENSOR, WEIGHT_F32, c->dim, 0))) return -1;
    if (c->arch == ARCH_GPT2 &&
        (find_matrix(t, QKV_POSITION_TENSOR, c->seq_len, c->dim, &m->weights.position_embedding) ||
         !(m->weights.final_norm_bias = find_tensor(t, QKV_NORM_TENSOR QKV_BIAS, WEIGHT_F32, c->dim, 0))))
        return -1;
    if (c->shared_classifier) m->weights.classifier = m->weights.token_embedding;
    else if (find_matrix(t, QKV_OUTPUT_TENSOR, c->vocab_size, c->dim, &m->weights.classifier)) return -1;
    return 0;
}

/* Bytes 116..255 of the header (QKV_HEADER_USED_BYTES on) are reserved, and written as zero: a file
 * with anything there was made by a writer this engine does not know. */
static int check_reserved_zero(FileView *f) {
    for (int i = QKV_HEADER_USED_BYTES; i < QKV_HEADER_BYTES; i++)
        if (f->base[i] != 0)
            return load_error(f, "reserved header byte %d is %d, not zero (a newer or damaged file?)", i, f->base[i]);
    return 0;
}

static int load_qkv(FileView *f, Model *m) {
    const unsigned char *h = f->base;
    if (f->size < QKV_HEADER_BYTES) return load_error(f, "truncated file: %zu bytes, shorter than the header", f->size);
    uint32_t version = read_u32(h + 4);
    if (version != 1) return load_error(f, "qkv format version %u is not supported (this engine reads 1)", version);
    if (check_reserved_zero(f)) return -1;
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
    /* the header, tokenizer, table, then at most 16 tensors per layer (GPT-2) and 5 more */
    int max_sections = 3 + 16 * c->n_layers + 5;
    TensorTable t = { sort_entries(f->base + table_off, n_tensors), n_tensors, alignment, f, c,
                      calloc((size_t)max_sections, sizeof(Section)), 0, max_sections };
    int rc = !m->weights.layers || !t.by_name || !t.sections ? load_error(f, "out of memory") : 0;
    if (rc == 0) {
        add_section(&t, "the header", 0, QKV_HEADER_BYTES);
        add_section(&t, "the tokenizer section", tok_off, tok_bytes);
        add_section(&t, "the tensor table", table_off, table_bytes);
        rc = find_all_tensors(&t, m);
    }
    if (rc == 0) rc = check_sections_disjoint(&t);
    free(t.by_name);
    free(t.sections);
    return rc;
}

/* Parameters in the vectors (float32 in every format): the norms, and
 * GPT-2's norm biases and matrix biases. */
static size_t count_norm_params(const Config *c) {
    size_t norms = (2 * (size_t)c->n_layers + 1) * c->dim;
    if (c->arch != ARCH_GPT2) return norms;
    size_t q_dim = (size_t)c->n_heads * c->head_size, kv_dim = (size_t)c->n_kv_heads * c->head_size;
    size_t biases = q_dim + 2 * kv_dim + 2 * (size_t)c->dim + (size_t)c->hidden_dim;
    return 2 * norms + (size_t)c->n_layers * biases;
}

/* Parameters in the matrices (the weight type's). */
static size_t count_matrix_params(const Config *c) {
    size_t per_layer = attention_matrix_params(c) + mlp_matrix_params(c);
    size_t n = (size_t)c->vocab_size * c->dim + per_layer * c->n_layers;
    if (c->arch == ARCH_GPT2) n += (size_t)c->seq_len * c->dim; /* the position embedding */
    if (!c->shared_classifier) n += (size_t)c->vocab_size * c->dim;
    return n;
}

const char *model_format_name(FileFormat f) {
    switch (f) {
    case FORMAT_QKV: return "qkv v1";
    case FORMAT_LLAMA2C_LEGACY: return "llama2.c legacy";
    case FORMAT_LLAMA2C_V1: return "llama2.c v1";
    case FORMAT_LLAMA2C_V2: return "llama2.c v2 (int8, repacked to q8_0)";
    case FORMAT_GGUF: return "GGUF";
    }
    return "?";
}

/* The format a file's first four bytes name. llama2.c's legacy format has
 * no magic: it is what none names (load_view then checks its header). */
static FileFormat format_of_magic(const unsigned char head[4]) {
    if (memcmp(head, "QKVM", 4) == 0) return FORMAT_QKV;
    if (memcmp(head, "GGUF", 4) == 0) return FORMAT_GGUF;
    if (read_u32(head) == 0x616b3432u) return FORMAT_LLAMA2C_V1; /* or v2: load_llama2c_v1 reads the version */
    return FORMAT_LLAMA2C_LEGACY;
}

static int map_file(FileView *f, Model *m, const char *path) {
    size_t size;
    int fd = input_open(path, &size);
    if (fd == INPUT_CANNOT_OPEN) return load_error(f, "cannot open %s: %s", path, strerror(errno));
    if (fd == INPUT_NOT_REGULAR) return load_error(f, "%s is not a regular file", path);
    if (size < 8) {
        close(fd);
        return load_error(f, "truncated file: %s has %zu bytes", path, size);
    }
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return load_error(f, "cannot map %s: %s", path, strerror(errno));
    m->mapping = p;
    m->file_bytes = size;
    f->base = m->file = p;
    f->size = size;
    return 0;
}

#include "weights_pack.h" /* pick_kernels, pack_matrices, layer_matrices */

static int load_gguf(FileView *f, Model *m); /* gguf.h */

/* The id of the one-byte piece "\n" in a tokenizer section (tokenizer.h's
 * layout: i32 max_token_length, then per token f32 score, i32 length,
 * bytes), or -1 if it has none. A damaged section gives -1 too: the
 * tokenizer's own loader refuses it later, with the reason. */
static int newline_piece(const unsigned char *section, size_t bytes, int vocab_size) {
    size_t at = 4;
    for (int id = 0; id < vocab_size && at <= bytes && bytes - at >= 8; id++) {
        int32_t len = read_i32(section + at + 4);
        if (len < 0 || (size_t)len > bytes - at - 8) return -1;
        if (len == 1 && section[at + 8] == '\n') return id;
        at += 8 + (size_t)len;
    }
    return -1;
}

/* The token a sequence starts from when none of its text comes before it:
 * one definition, recorded at load, for generate's prompt, -m ppl and -m
 * heads' probes (which load no tokenizer). It follows the tokenizer kind the
 * file declares (legacy, v1, v2 and GGUF files are llama2.c's kind):
 *   llama2.c BPE  BOS, always first: llama2.c's 1 in its own formats, the
 *                 qkv header's bos_id, GGUF's tokenizer.ggml.bos_token_id
 *   GPT-2 BPE     <|endoftext|>, its EOS: GPT-2 has no BOS, and starts an
 *                 unconditional sample from it
 *   characters    "\n", where nanoGPT's sample.py starts an empty prompt.
 *                 Only the vocabulary knows its id, and the loader has it: a
 *                 character model's tokenizer is always the file's own
 *                 section (-z gives llama2.c's kind only). -1 if the
 *                 vocabulary has no "\n": then nothing starts a sequence
 *                 but a text, and an empty prompt or a probe is refused. */
static int start_id_of(const Config *c, const unsigned char *tokenizer, size_t bytes) {
    if (c->tokenizer_kind == TOKENIZER_LLAMA) return c->bos_id;
    if (c->tokenizer_kind == TOKENIZER_GPT2_BPE) return c->eos_id;
    return tokenizer ? newline_piece(tokenizer, bytes, c->vocab_size) : -1;
}

/* Parses the file's bytes by their format, then counts what it holds. */
static int load_view(FileView *f, Model *m, const char *name) {
    int rc;
    if (f->size < 8) {
        rc = load_error(f, "truncated file: %s has %zu bytes", name, f->size);
    } else if (format_of_magic(f->base) == FORMAT_QKV) {
        m->format = FORMAT_QKV;
        rc = load_qkv(f, m);
    } else if (format_of_magic(f->base) == FORMAT_GGUF) {
        m->format = FORMAT_GGUF;
        rc = load_gguf(f, m);
    } else if (format_of_magic(f->base) == FORMAT_LLAMA2C_V1) {
        m->format = FORMAT_LLAMA2C_V1;
        rc = load_llama2c_v1(f, m);
    } else {
        /* The legacy format has no magic: a plausible header is its only sign. */
        int32_t dim = read_i32(f->base), hidden = read_i32(f->base + 4);
        if (f->size < LEGACY_HEADER_BYTES || dim <= 0 || dim > QKV_MAX_DIM || hidden <= 0 || hidden > QKV_MAX_HIDDEN) {
            rc = load_error(f, "%s: not a checkpoint (unknown magic, and not a llama2.c legacy header)", name);
        } else {
            m->format = FORMAT_LLAMA2C_LEGACY;
            rc = load_llama2c_legacy(f, m);
        }
    }
    if (rc != 0) return -1;
    m->config.start_id = start_id_of(&m->config, m->tokenizer_data, m->tokenizer_bytes);
    const Config *c = &m->config;
    m->n_params = count_norm_params(c) + count_matrix_params(c);
    m->weight_bytes = count_norm_params(c) * sizeof(float) + matrix_bytes(&m->weights.token_embedding) +
                      matrix_bytes(&m->weights.position_embedding);
    for (int l = 0; l < c->n_layers; l++) {
        Matrix *mats[LAYER_MATRICES];
        layer_matrices(&m->weights.layers[l], mats);
        for (int i = 0; i < LAYER_MATRICES; i++) m->weight_bytes += matrix_bytes(mats[i]);
    }
    if (!c->shared_classifier) m->weight_bytes += matrix_bytes(&m->weights.classifier);
    pick_kernels(m, isa_available());
    if (pack_matrices(m)) return load_error(f, "out of memory for the weights' panels");
    return 0;
}

int model_load(Model *m, const char *path, char *err, size_t err_len) {
    memset(m, 0, sizeof *m);
    FileView f = { NULL, 0, err, err_len };
    if (map_file(&f, m, path) || load_view(&f, m, path)) {
        model_free(m);
        return -1;
    }
    return 0;
}

int model_load_memory(Model *m, const void *data, size_t size, char *err, size_t err_len) {
    memset(m, 0, sizeof *m);
    FileView f = { data, size, err, err_len };
    m->file = data;
    if (load_view(&f, m, "the checkpoint")) {
        model_free(m);
        return -1;
    }
    return 0;
}

void model_free(Model *m) {
    free(m->weights.layers);
    free(m->repacked);
    free_aligned(m->panels);
    free(m->tokenizer_owned);
    free(m->metadata);
    if (m->mapping) munmap(m->mapping, m->file_bytes);
    memset(m, 0, sizeof *m);
}

#endif /* QKV_CHECKPOINT_IMPLEMENTED */
