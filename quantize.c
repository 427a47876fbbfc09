/* quantize.c — a checkpoint of any format qkv reads, written as a qkv file
 * (README: Checkpoint format) with its matrices in another weight type. A
 * matrix whose width is not a whole number of the type's blocks is kept in
 * float16 (said on stderr), as llama.cpp keeps some tensors in a wider type.
 *
 * Layout written: the 256-byte header, the tokenizer section, the tensor
 * table, then the tensors in table order, each at a multiple of 64 bytes. */
#include "quantize.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGNMENT 64
#define HEADER_BYTES 256
#define ENTRY_BYTES 96

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

/* The tensors of the README's table, in its order. */
static int list_tensors(const Model *m, TensorOut *list) {
    const Config *c = &m->config;
    int n = 0;
    char name[64];
    add_matrix(list, &n, "tok_embeddings", &m->weights.token_embedding);
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *w = &m->weights.layers[l];
        const struct { const char *suffix; const Matrix *matrix; const float *vector; } parts[] = {
            { "attention_norm", NULL, w->attention_norm }, { "attention.wq", &w->wq, NULL },
            { "attention.wk", &w->wk, NULL }, { "attention.wv", &w->wv, NULL }, { "attention.wo", &w->wo, NULL },
            { "ffn_norm", NULL, w->ffn_norm }, { "feed_forward.w1", &w->w1, NULL },
            { "feed_forward.w2", &w->w2, NULL }, { "feed_forward.w3", &w->w3, NULL },
        };
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            snprintf(name, sizeof name, "layers.%d.%s", l, parts[i].suffix);
            if (parts[i].matrix) add_matrix(list, &n, name, parts[i].matrix);
            else add_vector(list, &n, name, parts[i].vector, c->dim);
        }
    }
    add_vector(list, &n, "norm", m->weights.final_norm, c->dim);
    if (!c->shared_classifier) add_matrix(list, &n, "output", &m->weights.classifier);
    return n;
}

/* llama2.c's tokenizer.bin layout of t's vocabulary; *n receives its size. */
static unsigned char *tokenizer_bytes(const Tokenizer *t, size_t *n) {
    size_t total = 4;
    for (int i = 0; i < t->vocab_size; i++) total += 8 + (size_t)t->piece_lengths[i];
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
    *n = total;
    return buf;
}

static size_t align_up(size_t v) { return (v + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT; }

static void write_header(unsigned char *h, const Config *c, WeightType type, int n_tensors, size_t tok_bytes,
                         size_t table_offset, size_t file_bytes) {
    memset(h, 0, HEADER_BYTES);
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
    put_u32(h + 68, ALIGNMENT);
    put_u64(h + 72, HEADER_BYTES);
    put_u64(h + 80, tok_bytes);
    put_u64(h + 88, table_offset);
    put_u64(h + 96, file_bytes);
}

static void write_entry(unsigned char *e, const TensorOut *t) {
    memset(e, 0, ENTRY_BYTES);
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

static int write_file(FILE *f, const Model *m, WeightType type, TensorOut *list, int n, const unsigned char *tok,
                      size_t tok_bytes, size_t table_offset, size_t file_bytes) {
    unsigned char header[HEADER_BYTES], entry[ENTRY_BYTES], zeros[ALIGNMENT] = { 0 };
    write_header(header, &m->config, type, n, tok_bytes, table_offset, file_bytes);
    if (fwrite(header, 1, HEADER_BYTES, f) != HEADER_BYTES || fwrite(tok, 1, tok_bytes, f) != tok_bytes) return -1;
    for (int i = 0; i < n; i++) {
        write_entry(entry, &list[i]);
        if (fwrite(entry, 1, ENTRY_BYTES, f) != ENTRY_BYTES) return -1;
    }
    int widest = m->config.dim > m->config.hidden_dim ? m->config.dim : m->config.hidden_dim;
    float *row_f32 = malloc((size_t)widest * sizeof(float));
    unsigned char *row_out = malloc((size_t)widest * sizeof(float));
    int rc = row_f32 && row_out ? 0 : -1;
    size_t at = table_offset + (size_t)n * ENTRY_BYTES;
    for (int i = 0; i < n && rc == 0; i++) {
        if (fwrite(zeros, 1, list[i].offset - at, f) != list[i].offset - at) rc = -1;
        else rc = write_tensor(f, &list[i], row_f32, row_out);
        at = list[i].offset + list[i].bytes;
    }
    free(row_f32);
    free(row_out);
    return rc;
}

int quantize_checkpoint(const Model *m, const Tokenizer *t, WeightType type, const char *out_path, char *err,
                        size_t err_len) {
    const Config *c = &m->config;
    int max_tensors = 3 + 9 * c->n_layers;
    TensorOut *list = malloc((size_t)max_tensors * sizeof(TensorOut));
    if (!list) return fail(err, err_len, "out of memory");
    int n = list_tensors(m, list);
    size_t tok_bytes = 0;
    unsigned char *tok = tokenizer_bytes(t, &tok_bytes);
    size_t table_offset = HEADER_BYTES + tok_bytes, at = align_up(table_offset + (size_t)n * ENTRY_BYTES);
    int rc = tok ? 0 : fail(err, err_len, "out of memory");
    for (int i = 0; i < n && rc == 0; i++) {
        list[i].type = type;
        if (list[i].matrix && weight_row_bytes(type, list[i].cols) == 0) {
            list[i].type = WEIGHT_F16;
            fprintf(stderr, "note: %s has %d columns, not a whole number of %s blocks of %d: kept in float16\n",
                    list[i].name, list[i].cols, weight_type_name(type), weight_traits(type)->block);
        }
        size_t row = list[i].matrix ? weight_row_bytes(list[i].type, list[i].cols) : sizeof(float);
        list[i].offset = at;
        list[i].bytes = row * (size_t)list[i].rows;
        at = align_up(at + list[i].bytes);
    }
    size_t file_bytes = n > 0 ? list[n - 1].offset + list[n - 1].bytes : at;
    char tmp[4096];
    if (rc == 0 && snprintf(tmp, sizeof tmp, "%s.tmp", out_path) >= (int)sizeof tmp)
        rc = fail(err, err_len, "output path too long");
    FILE *f = rc == 0 ? fopen(tmp, "wb") : NULL;
    if (rc == 0 && !f) rc = fail(err, err_len, "cannot write %s", tmp);
    if (rc == 0 && write_file(f, m, type, list, n, tok, tok_bytes, table_offset, file_bytes))
        rc = fail(err, err_len, "writing %s failed", tmp);
    if (f && fclose(f) != 0 && rc == 0) rc = fail(err, err_len, "writing %s failed", tmp);
    if (rc == 0 && rename(tmp, out_path) != 0) rc = fail(err, err_len, "cannot rename %s to %s", tmp, out_path);
    if (rc != 0 && f) remove(tmp);
    free(tok);
    free(list);
    return rc;
}
