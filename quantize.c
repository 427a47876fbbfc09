/* quantize.c — a checkpoint of any format qkv reads, written as a qkv file
 * (README: Checkpoint format) with its matrices in another weight type, or,
 * when the output's name ends in .gguf, as a GGUF file for llama.cpp. A
 * matrix whose width is not a whole number of the type's blocks is kept in
 * float16 (said on stderr), as llama.cpp keeps some tensors in a wider type.
 *
 * qkv layout written: the 256-byte header, the tokenizer section, the tensor
 * table, then the tensors in table order, each at a multiple of 64 bytes.
 * GGUF (version 3, architecture llama): the header, the metadata (config and
 * tokenizer), the tensor infos, then the tensors in the same order, each at
 * a multiple of 32 bytes (README: Checkpoint formats qkv reads). */
#include "quantize.h"
#include "output_file.h"
#include "gguf_format.h"
#include "qkv_format.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h> /* strcasecmp */

#define GGUF_ALIGNMENT 32

/* One tensor to write: a matrix (converted to the target type) or a norm. */
typedef struct {
    char name[64];
    WeightType type;      /* of the matrix as written */
    const Matrix *matrix; /* NULL for a norm vector */
    const float *vector;
    int rows, cols;       /* cols 0 for a vector */
    size_t offset, bytes;
} TensorOut;

static int fail(char *err, size_t err_len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return -1;
}

static void put_u32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static void put_f32(unsigned char *p, float v) { memcpy(p, &v, 4); }

static void add_matrix(TensorOut *list, int *n, const char *name, const Matrix *w) {
    TensorOut *t = &list[(*n)++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->matrix = w;
    t->rows = w->rows;
    t->cols = w->cols;
}

static void add_vector(TensorOut *list, int *n, const char *name, const float *v, int len) {
    TensorOut *t = &list[(*n)++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->vector = v;
    t->rows = len;
}

/* Tensor names in qkv files (qkv_format.h) outside the layers, in the
 * order of GGUF's (gguf_format.h) */
static const char *const QKV_TENSORS[3] = { QKV_EMBEDDING_TENSOR, QKV_NORM_TENSOR, QKV_OUTPUT_TENSOR };
_Static_assert(QKV_PER_LAYER == GGUF_PER_LAYER, "a layer's tensors are the same in both formats");

/* A GPT-2 layer's tensors in the README's order (qkv files only). */
static void list_gpt2_layer(const Model *m, int l, TensorOut *list, int *n) {
    const Config *c = &m->config;
    const LayerWeights *w = &m->weights.layers[l];
    int q_dim = c->n_heads * c->head_size, kv_dim = c->n_kv_heads * c->head_size;
    /* QKV_LAYER_TENSORS' first 8, each followed by its bias */
    const struct { const Matrix *matrix; const float *vector; int len; } parts[2 * QKV_GPT2_PER_LAYER] = {
        { NULL, w->attention_norm, c->dim }, { NULL, w->attention_norm_bias, c->dim },
        { &w->wq, NULL, 0 }, { NULL, w->bq, q_dim },
        { &w->wk, NULL, 0 }, { NULL, w->bk, kv_dim },
        { &w->wv, NULL, 0 }, { NULL, w->bv, kv_dim },
        { &w->wo, NULL, 0 }, { NULL, w->bo, c->dim },
        { NULL, w->ffn_norm, c->dim }, { NULL, w->ffn_norm_bias, c->dim },
        { &w->w1, NULL, 0 }, { NULL, w->b1, c->hidden_dim },
        { &w->w2, NULL, 0 }, { NULL, w->b2, c->dim },
    };
    char name[64];
    for (int i = 0; i < 2 * QKV_GPT2_PER_LAYER; i++) {
        snprintf(name, sizeof name, "layers.%d.%s%s", l, QKV_LAYER_TENSORS[i / 2], i % 2 ? QKV_BIAS : "");
        if (parts[i].matrix) add_matrix(list, n, name, parts[i].matrix);
        else add_vector(list, n, name, parts[i].vector, parts[i].len);
    }
}

/* The tensors of the README's table, in its order, named as qkv (gguf 0)
 * or GGUF (gguf 1) files name them. */
static int list_tensors(const Model *m, TensorOut *list, int gguf) {
    const Config *c = &m->config;
    int n = 0;
    char name[64];
    const char *const *global = gguf ? GGUF_GLOBAL_TENSORS : QKV_TENSORS;
    add_matrix(list, &n, global[0], &m->weights.token_embedding);
    if (c->arch == ARCH_GPT2) {
        add_matrix(list, &n, QKV_POSITION_TENSOR, &m->weights.position_embedding);
        for (int l = 0; l < c->n_layers; l++) list_gpt2_layer(m, l, list, &n);
        add_vector(list, &n, QKV_NORM_TENSOR, m->weights.final_norm, c->dim);
        add_vector(list, &n, QKV_NORM_TENSOR QKV_BIAS, m->weights.final_norm_bias, c->dim);
        if (!c->shared_classifier) add_matrix(list, &n, QKV_OUTPUT_TENSOR, &m->weights.classifier);
        return n;
    }
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *w = &m->weights.layers[l];
        const struct { const Matrix *matrix; const float *vector; } parts[GGUF_PER_LAYER] = {
            { NULL, w->attention_norm }, { &w->wq, NULL }, { &w->wk, NULL }, { &w->wv, NULL }, { &w->wo, NULL },
            { NULL, w->ffn_norm }, { &w->w1, NULL }, { &w->w2, NULL }, { &w->w3, NULL },
        };
        for (int i = 0; i < GGUF_PER_LAYER; i++) {
            if (gguf) snprintf(name, sizeof name, "blk.%d.%s.weight", l, GGUF_LAYER_TENSORS[i]);
            else snprintf(name, sizeof name, "layers.%d.%s", l, QKV_LAYER_TENSORS[i]);
            if (parts[i].matrix) add_matrix(list, &n, name, parts[i].matrix);
            else add_vector(list, &n, name, parts[i].vector, c->dim);
        }
    }
    add_vector(list, &n, global[1], m->weights.final_norm, c->dim);
    if (!c->shared_classifier) add_matrix(list, &n, global[2], &m->weights.classifier);
    return n;
}

/* llama2.c's tokenizer.bin layout of t's vocabulary, then GPT-2's merges;
 * *n receives its size. */
static unsigned char *tokenizer_bytes(const Tokenizer *t, size_t *n) {
    size_t total = 4, merges = t->kind == TOKENIZER_GPT2_BPE ? 4 + 12 * (size_t)t->n_merges : 0;
    for (int i = 0; i < t->vocab_size; i++) total += 8 + (size_t)t->piece_lengths[i];
    total += merges;
    unsigned char *buf = malloc(total), *p = buf;
    if (!buf) return NULL;
    put_u32(p, (uint32_t)t->max_token_length);
    p += 4;
    for (int i = 0; i < t->vocab_size; i++) {
        put_f32(p, t->scores[i]);
        put_u32(p + 4, (uint32_t)t->piece_lengths[i]);
        memcpy(p + 8, t->vocab[i], (size_t)t->piece_lengths[i]);
        p += 8 + t->piece_lengths[i];
    }
    if (merges) {
        put_u32(p, (uint32_t)t->n_merges);
        memcpy(p + 4, t->merge_list, 12 * (size_t)t->n_merges);
    }
    *n = total;
    return buf;
}

static void write_header(unsigned char *h, const Config *c, WeightType type, int n_tensors, size_t tok_bytes,
                         size_t table_offset, size_t file_bytes) {
    memset(h, 0, QKV_HEADER_BYTES);
    memcpy(h, "QKVM", 4);
    put_u32(h + 4, 1);
    const int ints[] = { c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_size,
                         c->vocab_size, c->seq_len };
    for (int i = 0; i < 8; i++) put_u32(h + 8 + 4 * i, (uint32_t)ints[i]);
    put_f32(h + 40, c->norm_eps);
    put_f32(h + 44, c->rope_theta);
    put_u32(h + 48, (uint32_t)c->shared_classifier);
    put_u32(h + 52, (uint32_t)type);
    put_u32(h + 56, (uint32_t)c->bos_id);
    put_u32(h + 60, (uint32_t)c->eos_id);
    put_u32(h + 64, (uint32_t)n_tensors);
    put_u32(h + 68, QKV_ALIGNMENT);
    put_u64(h + 72, QKV_HEADER_BYTES);
    put_u64(h + 80, tok_bytes);
    put_u64(h + 88, table_offset);
    put_u64(h + 96, file_bytes);
    put_u32(h + 104, (uint32_t)c->arch);
    put_u32(h + 108, (uint32_t)c->activation);
    put_u32(h + 112, (uint32_t)c->tokenizer_kind);
}

static void write_entry(unsigned char *e, const TensorOut *t) {
    memset(e, 0, QKV_TENSOR_ENTRY_BYTES);
    memcpy(e, t->name, strlen(t->name));
    put_u32(e + 64, t->matrix ? (uint32_t)t->type : 0);
    put_u32(e + 68, t->matrix ? 2 : 1);
    put_u32(e + 72, (uint32_t)t->rows);
    put_u32(e + 76, t->matrix ? (uint32_t)t->cols : 0);
    put_u64(e + 88, t->offset);
}

/* One tensor's data, converted row by row. */
static int write_tensor(FILE *f, const TensorOut *t, float *row_f32, unsigned char *row_out) {
    if (!t->matrix) return fwrite(t->vector, sizeof(float), (size_t)t->rows, f) == (size_t)t->rows ? 0 : -1;
    const Matrix *w = t->matrix;
    size_t in_row = weight_row_bytes(w->type, w->cols), out_row = weight_row_bytes(t->type, w->cols);
    for (int r = 0; r < w->rows; r++) {
        weight_row_to_float(w->type, (const unsigned char *)w->data + (size_t)r * in_row, row_f32, w->cols);
        weight_row_from_float(t->type, row_f32, row_out, w->cols);
        if (fwrite(row_out, 1, out_row, f) != out_row) return -1;
    }
    return 0;
}

/* The tensors' data, the file being at offset at: zeros up to each one's
 * offset, and after the last up to file_bytes. */
static int write_tensors(FILE *f, const Model *m, const TensorOut *list, int n, size_t at, size_t file_bytes) {
    unsigned char zeros[QKV_ALIGNMENT] = { 0 };
    int widest = 1; /* the longest row: wo's (n_heads x head_size) may pass dim and hidden_dim */
    for (int i = 0; i < n; i++)
        if (list[i].matrix && list[i].matrix->cols > widest) widest = list[i].matrix->cols;
    float *row_f32 = malloc((size_t)widest * sizeof(float));
    unsigned char *row_out = malloc((size_t)widest * sizeof(float));
    int rc = row_f32 && row_out ? 0 : -1;
    for (int i = 0; i < n && rc == 0; i++) {
        if (fwrite(zeros, 1, list[i].offset - at, f) != list[i].offset - at) rc = -1;
        else rc = write_tensor(f, &list[i], row_f32, row_out);
        at = list[i].offset + list[i].bytes;
    }
    if (rc == 0 && fwrite(zeros, 1, file_bytes - at, f) != file_bytes - at) rc = -1;
    free(row_f32);
    free(row_out);
    return rc;
}

static int write_qkv(FILE *f, const Model *m, WeightType type, TensorOut *list, int n, const unsigned char *tok,
                     size_t tok_bytes, size_t table_offset, size_t file_bytes) {
    unsigned char header[QKV_HEADER_BYTES], entry[QKV_TENSOR_ENTRY_BYTES];
    write_header(header, &m->config, type, n, tok_bytes, table_offset, file_bytes);
    if (fwrite(header, 1, QKV_HEADER_BYTES, f) != QKV_HEADER_BYTES || fwrite(tok, 1, tok_bytes, f) != tok_bytes) return -1;
    for (int i = 0; i < n; i++) {
        write_entry(entry, &list[i]);
        if (fwrite(entry, 1, QKV_TENSOR_ENTRY_BYTES, f) != QKV_TENSOR_ENTRY_BYTES) return -1;
    }
    return write_tensors(f, m, list, n, table_offset + (size_t)n * QKV_TENSOR_ENTRY_BYTES, file_bytes);
}

/* ------------------------------------------------------------------------ */
/* GGUF                                                                      */

/* ggml's tensor type and llama.cpp's file type ("mostly ...") of each WeightType */
static const uint32_t GGML_TYPE[WEIGHT_TYPE_COUNT] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
static const uint32_t GGML_FILE_TYPE[WEIGHT_TYPE_COUNT] = { 0, 1, 7, 2 };

/* Bytes built in memory: the GGUF header, metadata and tensor infos. */
typedef struct {
    unsigned char *p;
    size_t n, cap;
    int failed;  /* out of memory: the rest is not written */
    uint64_t n_kv;
} Bytes;

static void bytes_put(Bytes *b, const void *data, size_t n) {
    if (b->failed) return;
    if (b->n + n > b->cap) {
        size_t cap = 2 * (b->n + n);
        unsigned char *p = realloc(b->p, cap);
        if (!p) { b->failed = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void bytes_u32(Bytes *b, uint32_t v) { unsigned char x[4]; put_u32(x, v); bytes_put(b, x, 4); }
static void bytes_u64(Bytes *b, uint64_t v) { unsigned char x[8]; put_u64(x, v); bytes_put(b, x, 8); }
static void bytes_string(Bytes *b, const char *s, size_t len) { bytes_u64(b, len); bytes_put(b, s, len); }

static void kv_key(Bytes *b, const char *key, uint32_t type) {
    bytes_string(b, key, strlen(key));
    bytes_u32(b, type);
    b->n_kv++;
}

static void kv_u32(Bytes *b, const char *key, uint32_t v) { kv_key(b, key, GGUF_U32); bytes_u32(b, v); }
static void kv_f32(Bytes *b, const char *key, float v) { unsigned char x[4]; put_f32(x, v); kv_key(b, key, GGUF_F32); bytes_put(b, x, 4); }
static void kv_text(Bytes *b, const char *key, const char *v) { kv_key(b, key, GGUF_STRING); bytes_string(b, v, strlen(v)); }
static void kv_bool(Bytes *b, const char *key, int v) { unsigned char x = v != 0; kv_key(b, key, GGUF_BOOL); bytes_put(b, &x, 1); }
static void kv_array(Bytes *b, const char *key, uint32_t elem, int count) {
    kv_key(b, key, GGUF_ARRAY);
    bytes_u32(b, elem);
    bytes_u64(b, (uint64_t)count);
}

/* llama.cpp's type of token i: <unk> (id 0), BOS and EOS are control
 * tokens, <0xNN> the byte tokens, the rest normal text (a llama2.c piece
 * is never empty: tokenizer.c). */
static int token_type(const Tokenizer *t, const Config *c, int i) {
    const char *p = t->vocab[i];
    int len = t->piece_lengths[i];
    if (i == 0) return GGUF_TOKEN_UNKNOWN;
    if (i == c->bos_id || i == c->eos_id) return GGUF_TOKEN_CONTROL;
    if (len == 6 && memcmp(p, "<0x", 3) == 0 && p[5] == '>') return GGUF_TOKEN_BYTE;
    return GGUF_TOKEN_NORMAL;
}

/* The vocabulary as tokenizer.ggml.tokens, scores and token_type: in normal
 * tokens a space is written as sentencepiece's ▁ (U+2581), as GGUF has it;
 * BOS and EOS without the newlines around them (llama2.c's export writes
 * "\n<s>\n"; sentencepiece, GGUF and llama.cpp's tokenizer have "<s>"). */
static void gguf_vocabulary(Bytes *b, const Tokenizer *t, const Config *c) {
    kv_array(b, "tokenizer.ggml.tokens", GGUF_STRING, t->vocab_size);
    for (int i = 0; i < t->vocab_size; i++) {
        const char *p = t->vocab[i];
        int len = t->piece_lengths[i], type = token_type(t, c, i), normal = type == GGUF_TOKEN_NORMAL, spaces = 0;
        if (type == GGUF_TOKEN_CONTROL)
            for (; len > 1 && (p[0] == '\n' || p[len - 1] == '\n'); len--) p += p[0] == '\n';
        for (int j = 0; j < len; j++) spaces += normal && p[j] == ' ';
        bytes_u64(b, (uint64_t)len + 2 * (uint64_t)spaces);
        for (int j = 0; j < len; j++) {
            if (normal && p[j] == ' ') bytes_put(b, "\xE2\x96\x81", 3);
            else bytes_put(b, p + j, 1);
        }
    }
    kv_array(b, "tokenizer.ggml.scores", GGUF_F32, t->vocab_size);
    for (int i = 0; i < t->vocab_size; i++) {
        unsigned char x[4];
        put_f32(x, t->scores[i]);
        bytes_put(b, x, 4);
    }
    kv_array(b, "tokenizer.ggml.token_type", GGUF_I32, t->vocab_size);
    for (int i = 0; i < t->vocab_size; i++) bytes_u32(b, (uint32_t)token_type(t, c, i));
}

/* The metadata: the llama architecture's config, then the tokenizer. */
static void gguf_metadata(Bytes *b, const Config *c, const Tokenizer *t, WeightType type) {
    kv_text(b, "general.architecture", "llama");
    kv_text(b, "general.name", "qkv");
    kv_u32(b, "general.alignment", GGUF_ALIGNMENT);
    kv_u32(b, "general.file_type", GGML_FILE_TYPE[type]);
    const struct { const char *key; int value; } ints[] = {
        { "llama.vocab_size", c->vocab_size }, { "llama.context_length", c->seq_len },
        { "llama.embedding_length", c->dim }, { "llama.block_count", c->n_layers },
        { "llama.feed_forward_length", c->hidden_dim }, { "llama.attention.head_count", c->n_heads },
        { "llama.attention.head_count_kv", c->n_kv_heads },
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) kv_u32(b, ints[i].key, (uint32_t)ints[i].value);
    if (c->head_size * c->n_heads != c->dim) { /* a head's size, when not embedding_length / head_count */
        kv_u32(b, "llama.attention.key_length", (uint32_t)c->head_size);
        kv_u32(b, "llama.attention.value_length", (uint32_t)c->head_size);
    }
    kv_f32(b, "llama.attention.layer_norm_rms_epsilon", c->norm_eps);
    kv_u32(b, "llama.rope.dimension_count", (uint32_t)c->head_size);
    kv_f32(b, "llama.rope.freq_base", c->rope_theta);
    kv_text(b, "tokenizer.ggml.model", "llama");
    gguf_vocabulary(b, t, c);
    kv_u32(b, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos_id);
    kv_u32(b, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos_id);
    kv_u32(b, "tokenizer.ggml.unknown_token_id", 0);
    kv_bool(b, "tokenizer.ggml.add_bos_token", 1);
    kv_bool(b, "tokenizer.ggml.add_eos_token", 0);
}

/* Header, metadata and tensor infos, with offsets from the data's start;
 * then each offset is moved to the file's, past the padding. */
static int gguf_header(Bytes *h, const Model *m, const Tokenizer *t, WeightType type, TensorOut *list, int n) {
    Bytes meta = { 0 };
    gguf_metadata(&meta, &m->config, t, type);
    bytes_put(h, "GGUF", 4);
    bytes_u32(h, 3);
    bytes_u64(h, (uint64_t)n);
    bytes_u64(h, meta.n_kv);
    bytes_put(h, meta.p, meta.n);
    for (int i = 0; i < n; i++) {
        bytes_string(h, list[i].name, strlen(list[i].name));
        bytes_u32(h, list[i].matrix ? 2 : 1);
        if (list[i].matrix) bytes_u64(h, (uint64_t)list[i].cols); /* ne[0]: the length of a row */
        bytes_u64(h, (uint64_t)list[i].rows);
        bytes_u32(h, list[i].matrix ? GGML_TYPE[list[i].type] : 0);
        bytes_u64(h, list[i].offset);
    }
    size_t data_start = align_up(h->n, GGUF_ALIGNMENT);
    for (int i = 0; i < n; i++) list[i].offset += data_start;
    free(meta.p);
    return meta.failed || h->failed ? -1 : 0;
}

/* Each matrix's type as written (float16 where rows are not whole blocks of
 * type), its bytes, and its offset from start, at multiples of alignment;
 * returns where the last one ends. */
static size_t lay_out(TensorOut *list, int n, WeightType type, size_t start, size_t alignment) {
    size_t at = start, end = start;
    for (int i = 0; i < n; i++) {
        list[i].type = type;
        if (list[i].matrix && weight_row_bytes(type, list[i].cols) == 0) {
            list[i].type = WEIGHT_F16;
            fprintf(stderr, "note: %s has %d columns, not a whole number of %s blocks of %d: kept in float16\n",
                    list[i].name, list[i].cols, weight_type_name(type), weight_traits(type)->block);
        }
        size_t row = list[i].matrix ? weight_row_bytes(list[i].type, list[i].cols) : sizeof(float);
        list[i].offset = at;
        list[i].bytes = row * (size_t)list[i].rows;
        end = at + list[i].bytes;
        at = align_up(end, alignment);
    }
    return end;
}

/* The whole file: qkv, or GGUF (with its tensor data padded to the end, as llama.cpp's writer pads it). */
static int write_checkpoint(FILE *f, const Model *m, const Tokenizer *t, WeightType type, TensorOut *list, int n,
                            int gguf) {
    if (gguf) {
        Bytes h = { 0 };
        size_t end = lay_out(list, n, type, 0, GGUF_ALIGNMENT);
        int rc = gguf_header(&h, m, t, type, list, n);
        size_t data_start = n > 0 ? list[0].offset : align_up(h.n, GGUF_ALIGNMENT);
        if (rc == 0 && fwrite(h.p, 1, h.n, f) != h.n) rc = -1;
        if (rc == 0) rc = write_tensors(f, m, list, n, h.n, data_start + align_up(end, GGUF_ALIGNMENT));
        free(h.p);
        return rc;
    }
    size_t tok_bytes = 0;
    unsigned char *tok = tokenizer_bytes(t, &tok_bytes);
    size_t table_offset = QKV_HEADER_BYTES + tok_bytes;
    size_t table_end = table_offset + (size_t)n * QKV_TENSOR_ENTRY_BYTES;
    size_t end = lay_out(list, n, type, align_up(table_end, QKV_ALIGNMENT), QKV_ALIGNMENT);
    int rc = tok ? write_qkv(f, m, type, list, n, tok, tok_bytes, table_offset, end) : -1;
    free(tok);
    return rc;
}

/* Whether s ends with suffix in any case (x.GGUF is a GGUF file too) */
static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

int quantize_checkpoint(const Model *m, const Tokenizer *t, WeightType type, const char *out_path, char *err,
                        size_t err_len) {
    const Config *c = &m->config;
    int max_tensors = 5 + 16 * c->n_layers, gguf = ends_with(out_path, ".gguf");
    if (gguf && (c->arch != ARCH_LLAMA || c->tokenizer_kind != TOKENIZER_LLAMA))
        return fail(err, err_len, "qkv writes GGUF files for the llama architecture with a llama2.c tokenizer; "
                                  "this model is %s: write a qkv file instead",
                    c->arch == ARCH_GPT2 ? "GPT-2" : c->tokenizer_kind == TOKENIZER_CHAR ? "a character-level one"
                                                                                          : "of another tokenizer");
    TensorOut *list = malloc((size_t)max_tensors * sizeof(TensorOut));
    if (!list) return fail(err, err_len, "out of memory");
    int n = list_tensors(m, list, gguf);
    WholeFile out; /* a new file renamed over the old, so -o may name the checkpoint being read */
    int rc = whole_file_open(&out, out_path, "-o", err, err_len);
    /* a failed write is whole_file_commit's to tell, with its reason */
    if (rc == 0 && write_checkpoint(out.f, m, t, type, list, n, gguf) && !ferror(out.f))
        rc = fail(err, err_len, "out of memory writing %s", out_path);
    if (rc == 0) rc = whole_file_commit(&out, err, err_len);
    whole_file_abandon(&out);
    free(list);
    return rc;
}
