/* make_hostile.c — writes the hostile-file battery that tests/test_hostile.sh
 * runs the engine on, generated from the fixtures at test time (fast, no
 * Python): every header field of every format set to 0, -1, 1, INT_MAX and
 * INT_MIN; files cut at every section boundary and one byte before it, and
 * files with bytes added; qkv tensors that overlap the header, the tokenizer,
 * the tensor table or each other; non-zero reserved bytes; NaN and infinite
 * weights; tokenizers of 0, 1 and 2 entries; GPT-2 files with broken
 * merges or character pieces; a llama2.c version-2 (int8) file, written
 * here from the Q8_0 fixture, with every header field changed, cut at every
 * tensor and padded; qkv header values just past each check's edge.
 *
 *     build/make_hostile OUTDIR >OUTDIR/cases.tsv
 *
 * Each line of cases.tsv is one run: the check it belongs to, name, what it must do ("1": one error
 * line and exit 1; "01": that, or a normal run, for a value that may happen
 * to be valid), a regular expression its error must match, then the
 * arguments of ./run, all separated by tabs. The fixtures' layout comes from
 * the engine's own loader, so the boundaries are where it reads. */
#include "../model.h" /* linked with build/engine.o */

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENIZER "tests/data/tiny-tokenizer.bin"
#define RUN_ARGS "-n\t4\t-t\t0\t-i\tthe cat"

/* the qkv format's little-endian fields and its tensor table's entry size
 * (README: Checkpoint format) */
#define TENSOR_ENTRY_BYTES 96
static uint32_t read_u32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static int32_t read_i32(const unsigned char *p) { return (int32_t)read_u32(p); }
static uint64_t read_u64(const unsigned char *p) { return read_u32(p) | (uint64_t)read_u32(p + 4) << 32; }

static const char *out_dir;
static const char *group; /* the check these cases make up, for the ok line */

typedef struct {
    unsigned char *data;
    size_t size;
} Bytes;

static Bytes read_all(const char *path) {
    Bytes b = { NULL, 0 };
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "make_hostile: cannot open %s\n", path); exit(1); }
    fseek(f, 0, SEEK_END);
    b.size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    b.data = malloc(b.size + 64);
    if (!b.data || fread(b.data, 1, b.size, f) != b.size) { fprintf(stderr, "make_hostile: cannot read %s\n", path); exit(1); }
    fclose(f);
    return b;
}

/* Writes size bytes as OUTDIR/name and prints its line of cases.tsv; args
 * are the tab-separated arguments after the checkpoint. */
static void emit(const char *name, const unsigned char *data, size_t size, const char *expect,
                 const char *pattern, const char *args) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) { fprintf(stderr, "make_hostile: cannot write %s\n", path); exit(1); }
    printf("%s\t%s\t%s\t%s\t%s\t%s\n", group, name, expect, pattern, path, args);
}

/* The arguments a checkpoint of this fixture runs with: llama2.c files need -z. */
static const char *model_args(const char *fixture) {
    return strstr(fixture, ".qkv") ? RUN_ARGS : "-z\t" TOKENIZER "\t" RUN_ARGS;
}

static void put32(unsigned char *p, int32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, int64_t v) { memcpy(p, &v, 8); }

typedef struct { const char *name; int offset, width; } Field;

static const Field QKV_FIELDS[] = {
    { "magic", 0, 4 }, { "version", 4, 4 }, { "dim", 8, 4 }, { "hidden_dim", 12, 4 }, { "n_layers", 16, 4 },
    { "n_heads", 20, 4 }, { "n_kv_heads", 24, 4 }, { "head_size", 28, 4 }, { "vocab_size", 32, 4 },
    { "seq_len", 36, 4 }, { "norm_eps", 40, 4 }, { "rope_theta", 44, 4 }, { "shared_classifier", 48, 4 },
    { "weight_type", 52, 4 }, { "bos_id", 56, 4 }, { "eos_id", 60, 4 }, { "n_tensors", 64, 4 },
    { "alignment", 68, 4 }, { "tokenizer_offset", 72, 8 }, { "tokenizer_bytes", 80, 8 },
    { "tensor_table_offset", 88, 8 }, { "file_bytes", 96, 8 }, { "arch", 104, 4 }, { "activation", 108, 4 },
    { "tokenizer_kind", 112, 4 }, { NULL, 0, 0 },
};
static const Field LEGACY_FIELDS[] = {
    { "dim", 0, 4 }, { "hidden_dim", 4, 4 }, { "n_layers", 8, 4 }, { "n_heads", 12, 4 }, { "n_kv_heads", 16, 4 },
    { "vocab_size", 20, 4 }, { "seq_len", 24, 4 }, { NULL, 0, 0 },
};
static const Field V1_FIELDS[] = {
    { "magic", 0, 4 }, { "version", 4, 4 }, { "dim", 8, 4 }, { "hidden_dim", 12, 4 }, { "n_layers", 16, 4 },
    { "n_heads", 20, 4 }, { "n_kv_heads", 24, 4 }, { "vocab_size", 28, 4 }, { "seq_len", 32, 4 },
    { "shared_classifier", 36, 1 }, { NULL, 0, 0 },
};
static const Field V2_FIELDS[] = {
    { "magic", 0, 4 }, { "version", 4, 4 }, { "dim", 8, 4 }, { "hidden_dim", 12, 4 }, { "n_layers", 16, 4 },
    { "n_heads", 20, 4 }, { "n_kv_heads", 24, 4 }, { "vocab_size", 28, 4 }, { "seq_len", 32, 4 },
    { "shared_classifier", 36, 1 }, { "group_size", 37, 4 }, { NULL, 0, 0 },
};

/* Every field set to each of the five values (a u64 field gets the value
 * sign-extended; the one-byte flag its low byte). */
static void header_fields(const char *fixture, const char *tag, const Field *fields) {
    static const struct { const char *name; int64_t v; } values[] = {
        { "0", 0 }, { "-1", -1 }, { "1", 1 }, { "INT_MAX", INT_MAX }, { "INT_MIN", INT_MIN },
    };
    Bytes b = read_all(fixture);
    unsigned char *copy = malloc(b.size);
    char name[128];
    for (const Field *f = fields; f->name; f++)
        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
            memcpy(copy, b.data, b.size);
            if (f->width == 8) put64(copy + f->offset, values[i].v);
            else if (f->width == 4) put32(copy + f->offset, (int32_t)values[i].v);
            else copy[f->offset] = (unsigned char)values[i].v;
            if (memcmp(copy, b.data, b.size) == 0) continue; /* the fixture's own value */
            snprintf(name, sizeof name, "%s-%s-%s", tag, f->name, values[i].name);
            emit(name, copy, b.size, "01", ".", model_args(fixture));
        }
    free(copy);
    free(b.data);
}

/* ---- section boundaries, from the engine's own reading of the fixture ---- */

typedef struct {
    size_t at[4096];
    int n;
} Boundaries;

static void add_boundary(Boundaries *b, size_t at) {
    for (int i = 0; i < b->n; i++) if (b->at[i] == at) return;
    if (b->n < (int)(sizeof b->at / sizeof b->at[0])) b->at[b->n++] = at;
}

static void add_span(Boundaries *b, const Model *m, const void *p, size_t bytes) {
    size_t begin = (size_t)((const unsigned char *)p - (const unsigned char *)m->file);
    add_boundary(b, begin);
    add_boundary(b, begin + bytes);
}

static Boundaries section_boundaries(const Model *m) {
    Boundaries b = { { 0 }, 0 };
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    size_t norm = (size_t)c->dim * sizeof(float);
    add_boundary(&b, m->format == FORMAT_LLAMA2C_LEGACY ? 28 : 256);
    if (m->tokenizer_data) add_span(&b, m, m->tokenizer_data, m->tokenizer_bytes);
    if (m->format == FORMAT_QKV) {
        const unsigned char *h = m->file;
        uint64_t table = read_u64(h + 88);
        add_boundary(&b, (size_t)table);
        add_boundary(&b, (size_t)table + read_u32(h + 64) * (size_t)TENSOR_ENTRY_BYTES);
    }
    add_span(&b, m, w->token_embedding.data, matrix_bytes(&w->token_embedding));
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *lw = &w->layers[l];
        const Matrix *mats[] = { &lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w1, &lw->w2, &lw->w3 };
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) add_span(&b, m, mats[i]->data, matrix_bytes(mats[i]));
        add_span(&b, m, lw->attention_norm, norm);
        add_span(&b, m, lw->ffn_norm, norm);
        const float *biases[] = { lw->attention_norm_bias, lw->ffn_norm_bias, lw->bq, lw->bk, lw->bv, lw->bo, lw->b1, lw->b2 };
        const int lengths[] = { c->dim, c->dim, c->n_heads * c->head_size, c->n_kv_heads * c->head_size,
                                c->n_kv_heads * c->head_size, c->dim, c->hidden_dim, c->dim };
        for (size_t i = 0; i < sizeof biases / sizeof biases[0]; i++)
            if (biases[i]) add_span(&b, m, biases[i], (size_t)lengths[i] * sizeof(float));
    }
    add_span(&b, m, w->final_norm, norm);
    if (w->final_norm_bias) add_span(&b, m, w->final_norm_bias, norm);
    if (w->position_embedding.data) add_span(&b, m, w->position_embedding.data, matrix_bytes(&w->position_embedding));
    if (m->format == FORMAT_LLAMA2C_LEGACY) /* the RoPE tables after the final norm */
        add_span(&b, m, w->final_norm + c->dim, (size_t)c->seq_len * c->head_size * sizeof(float));
    add_span(&b, m, w->classifier.data, matrix_bytes(&w->classifier));
    return b;
}

/* Cut at every boundary and one byte before it; then one, four and 64 bytes
 * too many: neither is the file the header describes. bytes->data has room
 * for 64 more. */
static void emit_cuts(const Bytes *bytes, const Boundaries *b, const char *tag, const char *args) {
    char name[128];
    for (int i = 0; i < b->n; i++)
        for (size_t back = 0; back <= 1; back++) {
            size_t at = b->at[i] - back;
            if (b->at[i] < back || at >= bytes->size) continue;
            snprintf(name, sizeof name, "%s-cut-at-%zu", tag, at);
            emit(name, bytes->data, at, "1", "truncated|not a checkpoint|runs past|shorter|bytes", args);
        }
    static const size_t extra[] = { 1, 4, 64 };
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        memset(bytes->data + bytes->size, 0, extra[i]);
        snprintf(name, sizeof name, "%s-plus-%zu-bytes", tag, extra[i]);
        emit(name, bytes->data, bytes->size + extra[i], "1", "does not match|padded|size", args);
    }
}

static void truncations(const char *fixture, const char *tag) {
    Model m;
    char err[256];
    if (model_load(&m, fixture, err, sizeof err)) { fprintf(stderr, "make_hostile: %s\n", err); exit(1); }
    Boundaries b = section_boundaries(&m);
    Bytes bytes = read_all(fixture);
    emit_cuts(&bytes, &b, tag, model_args(fixture));
    free(bytes.data);
    model_free(&m);
}

/* ---- llama2.c version 2 (runq.c's int8), written from a Q8_0 fixture ---- */

/* Appends n bytes to *out (grown as needed). */
static void append(Bytes *out, size_t *cap, const void *data, size_t n) {
    if (out->size + n + 64 > *cap) {
        while (out->size + n + 64 > *cap) *cap = *cap ? 2 * *cap : 4096;
        if (!(out->data = realloc(out->data, *cap))) { fprintf(stderr, "make_hostile: out of memory\n"); exit(1); }
    }
    memcpy(out->data + out->size, data, n);
    out->size += n;
}

/* A Q8_0 matrix as version 2 stores it: its int8 values, then a float32
 * scale per group of 32 (the block's float16 scale, exactly); the
 * boundaries between the two and after them noted. */
static void append_v2_matrix(Bytes *out, size_t *cap, Boundaries *b, const Matrix *w) {
    size_t blocks = (size_t)w->rows * w->cols / 32;
    const unsigned char *p = w->data;
    for (size_t i = 0; i < blocks; i++) append(out, cap, p + 34 * i + 2, 32);
    add_boundary(b, out->size);
    for (size_t i = 0; i < blocks; i++) {
        uint16_t h;
        memcpy(&h, p + 34 * i, 2);
        float scale = half_to_float(h);
        append(out, cap, &scale, 4);
    }
    add_boundary(b, out->size);
}

/* fixture (Q8_0, tied, dim and hidden_dim whole blocks) rewritten as
 * OUTDIR/name in llama2.c's version 2, group size 32; its boundaries into *b */
static void write_v2(const char *fixture, const char *name, char *path, size_t path_len, Boundaries *b) {
    Model m;
    char err[256];
    if (model_load(&m, fixture, err, sizeof err)) { fprintf(stderr, "make_hostile: %s\n", err); exit(1); }
    const Config *c = &m.config;
    Bytes out = { NULL, 0 };
    size_t cap = 0;
    unsigned char header[256] = { 0 };
    const int32_t fields[] = { 0x616b3432, 2, c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
                               c->vocab_size, c->seq_len };
    memcpy(header, fields, sizeof fields);
    header[36] = (unsigned char)c->shared_classifier;
    put32(header + 37, 32);
    append(&out, &cap, header, sizeof header);
    b->n = 0;
    add_boundary(b, out.size);
    for (int l = 0; l < c->n_layers; l++) append(&out, &cap, m.weights.layers[l].attention_norm, 4 * (size_t)c->dim);
    add_boundary(b, out.size);
    for (int l = 0; l < c->n_layers; l++) append(&out, &cap, m.weights.layers[l].ffn_norm, 4 * (size_t)c->dim);
    add_boundary(b, out.size);
    append(&out, &cap, m.weights.final_norm, 4 * (size_t)c->dim);
    add_boundary(b, out.size);
    append_v2_matrix(&out, &cap, b, &m.weights.token_embedding);
    for (int k = 0; k < 7; k++) /* wq, wk, wv, wo, w1, w2, w3: each for every layer */
        for (int l = 0; l < c->n_layers; l++) {
            const LayerWeights *lw = &m.weights.layers[l];
            const Matrix *mats[] = { &lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w1, &lw->w2, &lw->w3 };
            if (mats[k]->type != WEIGHT_Q8_0) { fprintf(stderr, "make_hostile: %s is not all Q8_0\n", fixture); exit(1); }
            append_v2_matrix(&out, &cap, b, mats[k]);
        }
    if (!c->shared_classifier) append_v2_matrix(&out, &cap, b, &m.weights.classifier);
    snprintf(path, path_len, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(out.data, 1, out.size, f) != out.size || fclose(f)) { fprintf(stderr, "make_hostile: cannot write %s\n", path); exit(1); }
    free(out.data);
    model_free(&m);
}

/* The version-2 file: loads as is (one normal run, the control), then every
 * header field changed, then cut at every tensor and padded. */
static void llama2c_v2(void) {
    char path[512];
    Boundaries v2_bounds;
    write_v2("tests/data/q8.qkv", "q8.v2.bin", path, sizeof path, &v2_bounds);
    printf("%s\t%s\t%s\t%s\t%s\t%s\n", group, "v2-as-written", "0", ".", path, "-z\t" TOKENIZER "\t" RUN_ARGS);
    header_fields(path, "v2", V2_FIELDS);
    Bytes bytes = read_all(path);
    emit_cuts(&bytes, &v2_bounds, "v2", "-z\t" TOKENIZER "\t" RUN_ARGS);
    free(bytes.data);
}

/* ---- qkv: overlapping sections, reserved bytes ---- */

static unsigned char *table_entry(unsigned char *file, const char *tensor) {
    uint64_t table = read_u64(file + 88);
    uint32_t n = read_u32(file + 64);
    for (uint32_t i = 0; i < n; i++) {
        unsigned char *e = file + table + (size_t)i * TENSOR_ENTRY_BYTES;
        if (!strcmp((const char *)e, tensor)) return e;
    }
    fprintf(stderr, "make_hostile: no tensor %s\n", tensor);
    exit(1);
}

/* A tensor's data moved to offset (kept aligned, so only the overlap is wrong). */
static void moved_tensor(const Bytes *b, const char *name, const char *tensor, uint64_t offset) {
    unsigned char *copy = malloc(b->size);
    memcpy(copy, b->data, b->size);
    uint64_t alignment = read_u32(copy + 68);
    offset = (offset + alignment - 1) / alignment * alignment;
    put64(table_entry(copy, tensor) + 88, (int64_t)offset);
    emit(name, copy, b->size, "1", "overlaps", RUN_ARGS);
    free(copy);
}

static void qkv_layout(const char *fixture) {
    Bytes b = read_all(fixture);
    moved_tensor(&b, "overlap-header.qkv", "layers.0.attention_norm", 0);
    moved_tensor(&b, "overlap-tokenizer.qkv", "norm", read_u64(b.data + 72));
    moved_tensor(&b, "overlap-table.qkv", "norm", read_u64(b.data + 88));
    moved_tensor(&b, "overlap-tensor.qkv", "layers.0.attention.wk", read_u64(table_entry(b.data, "layers.0.attention.wq") + 88));
    moved_tensor(&b, "overlap-inside-tensor.qkv", "norm", read_u64(table_entry(b.data, "tok_embeddings") + 88) + 64);
    unsigned char *copy = malloc(b.size);
    static const int reserved[] = { 116, 200, 255 };
    char name[64];
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        memcpy(copy, b.data, b.size);
        copy[reserved[i]] = 1;
        snprintf(name, sizeof name, "reserved-byte-%d.qkv", reserved[i]);
        emit(name, copy, b.size, "1", "reserved", RUN_ARGS);
    }
    free(copy);
    free(b.data);
}

/* ---- qkv header values just past a check's edge (the battery's 0, -1, 1,
 * INT_MAX and INT_MIN never reach them), each with the error it must give ---- */

/* fixture with the 4 bytes at offset set to value (and, if tensor, that
 * entry's type set to entry_type); must give one error matching pattern */
static void edge_case(const char *fixture, const char *name, int offset, uint32_t value, const char *tensor,
                      uint32_t entry_type, const char *pattern) {
    Bytes b = read_all(fixture);
    memcpy(b.data + offset, &value, 4);
    if (tensor) memcpy(table_entry(b.data, tensor) + 64, &entry_type, 4);
    emit(name, b.data, b.size, "1", pattern, RUN_ARGS);
    free(b.data);
}

static uint32_t float_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* A tensor the file must have, renamed (its last letter replaced): missing. */
static void renamed_tensor(const char *fixture, const char *name, const char *tensor, const char *pattern) {
    Bytes b = read_all(fixture);
    unsigned char *e = table_entry(b.data, tensor);
    e[strlen(tensor) - 1] = 'X';
    emit(name, b.data, b.size, "1", pattern, RUN_ARGS);
    free(b.data);
}

static void header_edges(void) {
    const char *gqa = "tests/data/gqa.qkv"; /* 4 heads */
    edge_case(gqa, "edge-head-size-65536.qkv", 28, 1 << 16, NULL, 0,
              "^error: n_heads\\*head_size 262144 too large$");
    edge_case(gqa, "edge-norm-eps-2.qkv", 40, float_bits(2.0f), NULL, 0, "^error: bad norm_eps 2$");
    edge_case(gqa, "edge-norm-eps-inf.qkv", 40, float_bits(INFINITY), NULL, 0, "^error: bad norm_eps inf$");
    edge_case(gqa, "edge-rope-theta-1.qkv", 44, float_bits(1.0f), NULL, 0, "^error: bad rope_theta 1$");
    edge_case(gqa, "edge-rope-theta-inf.qkv", 44, float_bits(INFINITY), NULL, 0, "^error: bad rope_theta inf$");
    edge_case(gqa, "edge-alignment-48.qkv", 68, 48, NULL, 0,
              "^error: bad tensor alignment 48 \\(a power of two from 4 to 4096\\)$");
    /* a q8_0 header and a q8_0 embedding of 45 columns: no whole blocks (the
     * type agrees with the header, so the width is what is wrong) */
    edge_case("tests/data/gpt2.qkv", "edge-q8-embedding-45-columns.qkv", 52, WEIGHT_Q8_0, "tok_embeddings",
              WEIGHT_Q8_0, "^error: tensor tok_embeddings: 45 columns are not a whole number of q8_0 blocks$");
    renamed_tensor("tests/data/gpt2.qkv", "gpt2-no-norm-bias.qkv", "norm.bias", "^error: tensor norm.bias missing$");
    renamed_tensor("tests/data/gpt2.qkv", "gpt2-no-pos-embeddings.qkv", "pos_embeddings",
                   "^error: tensor pos_embeddings missing$");
}

/* ---- GPT-2's tokenizers: merges that break the rules, pieces that are not characters ---- */

/* The byte offset of the merge list in a GPT-2 BPE file's tokenizer section. */
static size_t merges_offset(const Bytes *b) {
    size_t at = (size_t)read_u64(b->data + 72) + 4;
    for (int i = 0; i < read_i32(b->data + 32); i++) at += 8 + (size_t)read_i32(b->data + at + 4);
    return at;
}

/* The first merge's three ids (left, right, merged) replaced; or the count. */
static void bad_merge(const char *name, int field, int32_t value, const char *pattern) {
    Bytes b = read_all("tests/data/gpt2-bpe.qkv");
    size_t at = merges_offset(&b);
    if (field < 0) put32(b.data + at, value);                 /* the count */
    else if (field < 3) put32(b.data + at + 4 + 4 * field, value); /* merge 0 */
    else memcpy(b.data + at + 4 + 12, b.data + at + 4, 12);   /* merge 1 = merge 0 */
    emit(name, b.data, b.size, "1", pattern, RUN_ARGS);
    free(b.data);
}

static void gpt2_tokenizers(void) {
    bad_merge("gpt2-merge-count-huge.qkv", -1, INT32_MAX, "truncated or longer");
    bad_merge("gpt2-merge-left-outside.qkv", 0, 100000, "outside the vocabulary");
    bad_merge("gpt2-merge-right-negative.qkv", 1, -1, "outside the vocabulary");
    bad_merge("gpt2-merge-not-concatenation.qkv", 2, 3, "not left \\+ right|made twice");
    bad_merge("gpt2-merge-repeated.qkv", 3, 0, "listed twice|made twice");
    Bytes b = read_all("tests/data/gpt2.qkv"); /* a character piece that is not UTF-8 */
    size_t first_piece = (size_t)read_u64(b.data + 72) + 4 + 8;
    b.data[first_piece] = 0xFF;
    emit("gpt2-char-not-utf8.qkv", b.data, b.size, "1", "not one UTF-8 character", RUN_ARGS);
    free(b.data);
    b = read_all("tests/data/gpt2-bpe.qkv"); /* piece 0, the byte 0x00, made a second 0x01: no 0x00 left */
    first_piece = (size_t)read_u64(b.data + 72) + 4 + 8;
    if (read_i32(b.data + first_piece - 4) != 1 || b.data[first_piece] != 0) {
        fprintf(stderr, "make_hostile: gpt2-bpe.qkv's piece 0 is not the byte 0x00\n");
        exit(1);
    }
    b.data[first_piece] = 1;
    emit("gpt2-bpe-no-byte-00.qkv", b.data, b.size, "1",
         "^error: GPT-2 tokenizer: byte 0x00 has no token \\(byte-level BPE needs all 256\\)$", RUN_ARGS);
    free(b.data);
}

/* ---- NaN and infinite weights: the logits say so, with their position ---- */

/* position: the pattern of the position the error must name (a traced
 * prompt's first: every position is computed and checked) */
static void poisoned(const char *fixture, const char *name, const char *what, const char *mode_args,
                     const char *position) {
    Model m;
    char err[256];
    if (model_load(&m, fixture, err, sizeof err)) { fprintf(stderr, "make_hostile: %s\n", err); exit(1); }
    Bytes b = read_all(fixture);
    const Weights *w = &m.weights;
    const Config *c = &m.config;
    size_t at;
    if (!strcmp(what, "nan-norm")) { /* every logit NaN */
        at = (size_t)((const unsigned char *)w->final_norm - (const unsigned char *)m.file);
        for (int i = 0; i < c->dim; i++) put32(b.data + at + 4 * i, 0x7fc00000);
    } else if (!strcmp(what, "inf-wq")) { /* one weight: q = inf, scores inf - inf */
        at = (size_t)((const unsigned char *)w->layers[0].wq.data - (const unsigned char *)m.file);
        put32(b.data + at, 0x7f800000);
    } else if (!strcmp(what, "huge-wv")) { /* float32 values x 1e6: past float16's 65504, finite in float32 */
        at = (size_t)((const unsigned char *)w->layers[0].wv.data - (const unsigned char *)m.file);
        for (size_t i = 0; i < (size_t)w->layers[0].wv.rows * w->layers[0].wv.cols; i++) {
            float v;
            memcpy(&v, b.data + at + 4 * i, 4);
            v *= 1e6f;
            memcpy(b.data + at + 4 * i, &v, 4);
        }
    } else { /* inf-embedding: BOS's row, so position 0 */
        const Matrix *e = &w->token_embedding;
        at = (size_t)((const unsigned char *)e->data - (const unsigned char *)m.file) +
             (size_t)c->bos_id * weight_row_bytes(e->type, e->cols);
        if (e->type == WEIGHT_F16) { b.data[at] = 0x00; b.data[at + 1] = 0xFC; } /* -inf in binary16 */
        else put32(b.data + at, (int32_t)0xff800000u);
    }
    char args[256];
    snprintf(args, sizeof args, "%s%s", strstr(fixture, ".qkv") ? "" : "-z\t" TOKENIZER "\t", mode_args);
    char pattern[160];
    snprintf(pattern, sizeof pattern, "(NaN|infinite) logits at position %s%s$", position,
             strcmp(what, "huge-wv") ? "" : " \\(with --kv-type f16 perhaps keys or values past float16's 65504.*\\)");
    emit(name, b.data, b.size, "1", pattern, args);
    free(b.data);
    model_free(&m);
}

/* ---- tokenizers with too few entries ---- */

static void tokenizer_file(const char *name, int entries, int bad_length, const char *expect, const char *pattern,
                           const char *args_fmt) {
    unsigned char buf[256];
    size_t n = 0;
    put32(buf, 8); /* max_token_length */
    n = 4;
    for (int i = 0; i < entries; i++) {
        float score = 0;
        memcpy(buf + n, &score, 4);
        int32_t len = (i == entries - 1 && bad_length) ? -1 : 1;
        put32(buf + n + 4, len);
        n += 8;
        if (len > 0) buf[n++] = (unsigned char)('a' + i);
    }
    char path[512], args[768];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    snprintf(args, sizeof args, args_fmt, path);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f)) exit(1);
    printf("%s\t%s\t%s\t%s\t%s\n", group, name, expect, pattern, args);
}

static void tokenizers(void) {
    const char *alone = "-m\ttokenize\t-z\t%s\t-i\tab";
    const char *with_model = "tests/data/gqa.legacy.bin\t-z\t%s\t" RUN_ARGS;
    const char *few = "at least 3|empty|malformed";
    tokenizer_file("tok-0.bin", 0, 0, "1", few, alone);
    tokenizer_file("tok-1.bin", 1, 0, "1", few, alone);
    tokenizer_file("tok-2.bin", 2, 0, "1", few, alone);
    tokenizer_file("tok-0-model.bin", 0, 0, "1", "fewer", with_model);
    tokenizer_file("tok-2-model.bin", 2, 0, "1", "fewer", with_model);
    tokenizer_file("tok-3-model.bin", 3, 0, "1", "more tokens|fewer|wrong tokenizer|truncated", with_model);
    tokenizer_file("tok-negative-length.bin", 4, 1, "1", "negative length", alone);
    tokenizer_file("tok-3.bin", 3, 0, "0", ".", alone); /* the smallest usable: a and b are pieces */
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: make_hostile OUTDIR >OUTDIR/cases.tsv\n"); return 2; }
    out_dir = argv[1];
    group = "every header field of each format set to 0, -1, 1, INT_MAX, INT_MIN";
    header_fields("tests/data/gqa.qkv", "qkv", QKV_FIELDS);
    header_fields("tests/data/sepcls.legacy.bin", "legacy", LEGACY_FIELDS);
    header_fields("tests/data/gqa.legacy.bin", "legacy-tied", LEGACY_FIELDS);
    header_fields("tests/data/mqa.v1.bin", "v1", V1_FIELDS);
    group = "files cut at every section boundary (and one byte before), or with bytes added";
    truncations("tests/data/sepcls.qkv", "qkv");
    truncations("tests/data/f16.qkv", "qkv-f16");
    truncations("tests/data/sepcls.legacy.bin", "legacy");
    truncations("tests/data/gqa.legacy.bin", "legacy-tied");
    truncations("tests/data/sepcls.v1.bin", "v1");
    truncations("tests/data/mqa.v1.bin", "v1-tied");
    group = "qkv tensors overlapping the header, tokenizer, table or each other; reserved bytes not zero";
    qkv_layout("tests/data/gqa.qkv");
    group = "GPT-2 files: every header field, cuts at every section, broken merges and characters";
    header_fields("tests/data/gpt2.qkv", "gpt2", QKV_FIELDS);
    truncations("tests/data/gpt2-bpe.qkv", "gpt2-bpe"); /* the one with a merge list */
    gpt2_tokenizers();
    group = "NaN and infinite weights: an error naming the position";
    poisoned("tests/data/gqa.qkv", "nan-norm.qkv", "nan-norm", RUN_ARGS, "[0-9]+");
    poisoned("tests/data/gqa.qkv", "nan-norm-ppl.qkv", "nan-norm", "-m\tppl\t-f\ttests/data/grammar-sample.txt", "[0-9]+");
    poisoned("tests/data/gqa.qkv", "nan-norm-trace.qkv", "nan-norm", RUN_ARGS "\t--trace-prompt\t--trace-json\t/dev/null", "0");
    poisoned("tests/data/gqa.qkv", "nan-norm-bench.qkv", "nan-norm", "-m\tbench\t--ctx\t4\t--repeats\t1", "0");
    poisoned("tests/data/f16.qkv", "inf-embedding-bench.f16.qkv", "inf-embedding", "-m\tbench\t--ctx\t4\t--repeats\t1", "0");
    poisoned("tests/data/gqa.qkv", "huge-wv-bench.qkv", "huge-wv", "-m\tbench\t--ctx\t4\t--repeats\t1\t--kv-type\tf16", "0");
    poisoned("tests/data/gqa.qkv", "inf-wq.qkv", "inf-wq", RUN_ARGS, "[0-9]+");
    poisoned("tests/data/gqa.qkv", "huge-wv.qkv", "huge-wv", RUN_ARGS "\t--kv-type\tf16", "[0-9]+");
    poisoned("tests/data/f16.qkv", "inf-embedding.f16.qkv", "inf-embedding", RUN_ARGS, "[0-9]+");
    poisoned("tests/data/sepcls.legacy.bin", "nan-norm.legacy.bin", "nan-norm", RUN_ARGS, "[0-9]+");
    poisoned("tests/data/mqa.v1.bin", "inf-embedding.v1.bin", "inf-embedding", RUN_ARGS, "[0-9]+");
    group = "llama2.c version 2 (int8): every header field, cuts at every tensor, bytes added";
    llama2c_v2();
    group = "qkv header values past each check's edge, and GPT-2 files missing a tensor: the error named";
    header_edges();
    group = "tokenizers of 0, 1, 2 entries and a negative piece length";
    tokenizers();
    return 0;
}
