/* gguf.h — loading llama.cpp's GGUF files (versions 2 and 3) of the "llama"
 * architecture. The config and the tokenizer come from the metadata; the
 * tensors (F32, F16, Q8_0, Q4_0: ggml's block layouts are qkv's own) are read
 * from the mapped file, the matrices packed into panels at load as any
 * file's are. Every string, array, count and offset is
 * checked against the file before it is used: a bad file gets one line in err
 * and -1, never a read past the end, and no count is trusted for an
 * allocation or a loop before the file is known to be long enough for it.
 *
 * The layout, little-endian: "GGUF", u32 version, u64 tensor count, u64
 * metadata count; the metadata as key (string), u32 value type, value; the
 * tensor infos as name (string), u32 n_dims, u64 ne[n_dims] (ne[0] is the
 * length of a row), u32 ggml type, u64 offset; padding to the alignment
 * (general.alignment, default 32); then the tensor data, each offset counted
 * from its start. A string is a u64 length and that many bytes (no NUL); an
 * array is a u32 element type, a u64 count and the elements.
 *
 * Implementation only, included by model.h's implementation section after
 * checkpoint.h, whose FileView, Cursor and validate_config it uses. */
#ifndef QKV_GGUF_IMPLEMENTED
#define QKV_GGUF_IMPLEMENTED

#include <limits.h>

#include "gguf_format.h"

/* Bytes of a value of each fixed-size type; 0 for strings and arrays. */
static const size_t GGUF_VALUE_BYTES[GGUF_VALUE_TYPES] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

#define GGUF_HEADER_BYTES 24
#define GGUF_MAX_NESTING 4   /* arrays of arrays followed (the format allows them; llama files have none) */
#define GGUF_MAX_NAME 64     /* bytes of a tensor name, as the format specifies */
#define GGUF_MAX_DIMS 4

/* The metadata qkv reads; other keys are skipped, after their bounds are checked. */
enum { KEY_ARCHITECTURE, KEY_NAME, KEY_ALIGNMENT, KEY_CONTEXT, KEY_EMBEDDING, KEY_BLOCKS, KEY_FFN,
       KEY_HEADS, KEY_KV_HEADS, KEY_RMS_EPS, KEY_ROPE_BASE, KEY_ROPE_DIMS, KEY_ROPE_SCALING, KEY_VOCAB,
       KEY_TOKENIZER, KEY_TOKENS, KEY_SCORES, KEY_TOKEN_TYPES, KEY_BOS, KEY_EOS, KEY_KEY_LENGTH, KEY_VALUE_LENGTH,
       KEY_ROPE_FACTOR, KEY_ROPE_LINEAR, KEY_ADD_BOS, KEY_ADD_EOS, KEY_SPACE_PREFIX, KEY_UNKNOWN, KEY_COUNT };
static const char *const GGUF_KEYS[KEY_COUNT] = {
    "general.architecture", "general.name", "general.alignment", "llama.context_length",
    "llama.embedding_length", "llama.block_count", "llama.feed_forward_length",
    "llama.attention.head_count", "llama.attention.head_count_kv",
    "llama.attention.layer_norm_rms_epsilon", "llama.rope.freq_base", "llama.rope.dimension_count",
    "llama.rope.scaling.type", "llama.vocab_size", "tokenizer.ggml.model", "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id", "llama.attention.key_length", "llama.attention.value_length",
    "llama.rope.scaling.factor", "llama.rope.scale_linear", "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token", "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.unknown_token_id",
};

/* A tensor's slot: the three global ones (gguf_format.h's order), then
 * block l's GGUF_LAYER_TENSORS from SLOT_LAYERS + l * GGUF_PER_LAYER */
enum { SLOT_TOKEN_EMBD, SLOT_OUTPUT_NORM, SLOT_OUTPUT, SLOT_LAYERS };

typedef struct { const char *s; size_t len; } GgufString;

/* Where a key's value starts (bounds already checked) and its type; type -1: absent. */
typedef struct { int type; const unsigned char *at; } GgufValue;

/* One tensor info, in the slot its name gives it. */
typedef struct {
    int present;
    uint32_t type, n_dims;
    uint64_t ne[GGUF_MAX_DIMS], offset;
} GgufTensor;

typedef struct {
    FileView *f;
    Cursor cur;
    uint32_t version, alignment;
    uint64_t n_tensors, n_kv;
    GgufValue keys[KEY_COUNT];
    GgufTensor *slots; /* [SLOT_LAYERS + GGUF_PER_LAYER * n_layers] */
    size_t n_slots, data_start;
    TensorTable owners; /* the bytes each tensor read owns (its sections only) */
} GgufFile;

/* ------------------------------------------------------------------------ */
/* Reading, bounds-checked                                                   */

/* n bytes at the cursor, which moves past them; NULL (and err) if the file ends first. */
static const unsigned char *gguf_take(Cursor *c, uint64_t n, const char *what) {
    if (c->offset > c->f->size || n > c->f->size - c->offset) {
        load_error(c->f, "truncated GGUF file: %s at byte %zu runs past the end (%zu bytes)", what, c->offset,
                   c->f->size);
        return NULL;
    }
    const unsigned char *p = c->f->base + c->offset;
    c->offset += (size_t)n;
    return p;
}

static int gguf_u32(Cursor *c, uint32_t *v, const char *what) {
    const unsigned char *p = gguf_take(c, 4, what);
    if (p) *v = read_u32(p);
    return p ? 0 : -1;
}

static int gguf_u64(Cursor *c, uint64_t *v, const char *what) {
    const unsigned char *p = gguf_take(c, 8, what);
    if (p) *v = read_u64(p);
    return p ? 0 : -1;
}

static int gguf_string(Cursor *c, GgufString *s, const char *what) {
    uint64_t len;
    if (gguf_u64(c, &len, what)) return -1;
    const unsigned char *p = gguf_take(c, len, what);
    if (!p) return -1;
    s->s = (const char *)p;
    s->len = (size_t)len;
    return 0;
}

static int gguf_string_is(const GgufString *s, const char *text) {
    return s->len == strlen(text) && memcmp(s->s, text, s->len) == 0;
}

/* s as printable ASCII for a message (other bytes as '?'), cut to fit out. */
static const char *gguf_printable(char *out, size_t n, const GgufString *s) {
    size_t len = s->len < n - 1 ? s->len : n - 1;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s->s[i];
        out[i] = ch >= 0x20 && ch < 0x7F ? (char)ch : '?';
    }
    out[len] = '\0';
    return out;
}

/* Moves the cursor past a value of a type, checking it lies in the file.
 * Each element of an array of strings or arrays takes 8 or more bytes, so a
 * count the rest of the file cannot hold is refused before the loop. */
static int gguf_skip_value(Cursor *c, uint32_t type, int depth) {
    if (type >= GGUF_VALUE_TYPES) return load_error(c->f, "unknown GGUF metadata value type %u", type);
    if (type == GGUF_STRING) {
        GgufString s;
        return gguf_string(c, &s, "a metadata string");
    }
    if (type != GGUF_ARRAY) return gguf_take(c, GGUF_VALUE_BYTES[type], "a metadata value") ? 0 : -1;
    uint32_t elem;
    uint64_t count;
    if (depth >= GGUF_MAX_NESTING) return load_error(c->f, "GGUF arrays nested deeper than %d", GGUF_MAX_NESTING);
    if (gguf_u32(c, &elem, "an array's type") || gguf_u64(c, &count, "an array's count")) return -1;
    if (elem >= GGUF_VALUE_TYPES) return load_error(c->f, "unknown GGUF array element type %u", elem);
    uint64_t least = GGUF_VALUE_BYTES[elem] ? GGUF_VALUE_BYTES[elem] : elem == GGUF_STRING ? 8 : 12;
    if (count > (c->f->size - c->offset) / least)
        return load_error(c->f, "truncated GGUF file: an array of %llu elements at byte %zu is longer than the file",
                          (unsigned long long)count, c->offset);
    if (GGUF_VALUE_BYTES[elem]) return gguf_take(c, count * least, "an array") ? 0 : -1;
    for (uint64_t i = 0; i < count; i++)
        if (gguf_skip_value(c, elem, depth + 1)) return -1;
    return 0;
}

/* Walks every key/value pair, noting where the values of GGUF_KEYS are. */
static int gguf_read_metadata(GgufFile *g) {
    /* the smallest pair: an empty key (8 bytes), a type (4), a one-byte value */
    if (g->n_kv > (g->f->size - g->cur.offset) / 13)
        return load_error(g->f, "truncated GGUF file: %llu metadata pairs cannot fit in %zu bytes",
                          (unsigned long long)g->n_kv, g->f->size);
    for (int k = 0; k < KEY_COUNT; k++) g->keys[k].type = -1;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        GgufString key;
        uint32_t type;
        if (gguf_string(&g->cur, &key, "a metadata key") || gguf_u32(&g->cur, &type, "a metadata type")) return -1;
        for (int k = 0; k < KEY_COUNT; k++) {
            if (!gguf_string_is(&key, GGUF_KEYS[k])) continue;
            if (g->keys[k].type >= 0) return load_error(g->f, "GGUF metadata %s appears twice", GGUF_KEYS[k]);
            g->keys[k] = (GgufValue){ (int)type, g->f->base + g->cur.offset };
        }
        if (gguf_skip_value(&g->cur, type, 0)) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Typed metadata                                                            */

#define GGUF_REQUIRED LLONG_MIN /* as the default of gguf_int: the key must be there */

/* Key k as an integer of any integer type, in [lo, hi]; def if absent. */
static int gguf_int(GgufFile *g, int k, long long lo, long long hi, long long def, long long *out) {
    const GgufValue *v = &g->keys[k];
    long long x;
    uint64_t u;
    int64_t i64;
    if (v->type < 0) {
        if (def == GGUF_REQUIRED) return load_error(g->f, "GGUF metadata %s is missing", GGUF_KEYS[k]);
        *out = def;
        return 0;
    }
    switch (v->type) {
    case GGUF_U8: x = v->at[0]; break;
    case GGUF_I8: x = (int8_t)v->at[0]; break;
    case GGUF_U16: x = (uint16_t)(v->at[0] | v->at[1] << 8); break;
    case GGUF_I16: x = (int16_t)(v->at[0] | v->at[1] << 8); break;
    case GGUF_U32: x = read_u32(v->at); break;
    case GGUF_I32: x = read_i32(v->at); break;
    case GGUF_U64: /* past LLONG_MAX: past every range, and said as the file has it */
        u = read_u64(v->at);
        if (u > LLONG_MAX)
            return load_error(g->f, "GGUF metadata %s = %llu is outside %lld..%lld", GGUF_KEYS[k],
                              (unsigned long long)u, lo, hi);
        x = (long long)u;
        break;
    case GGUF_I64: memcpy(&i64, v->at, 8); x = i64; break;
    default: return load_error(g->f, "GGUF metadata %s has type %d, not an integer", GGUF_KEYS[k], v->type);
    }
    if (x < lo || x > hi)
        return load_error(g->f, "GGUF metadata %s = %lld is outside %lld..%lld", GGUF_KEYS[k], x, lo, hi);
    *out = x;
    return 0;
}

/* Key k as a float (stored as f32 or f64); def if absent (NAN: required). */
static int gguf_float(GgufFile *g, int k, float def, float *out) {
    const GgufValue *v = &g->keys[k];
    double d;
    if (v->type < 0 && isnan(def)) return load_error(g->f, "GGUF metadata %s is missing", GGUF_KEYS[k]);
    if (v->type < 0) *out = def;
    else if (v->type == GGUF_F32) *out = read_f32(v->at);
    else if (v->type == GGUF_F64) { memcpy(&d, v->at, 8); *out = (float)d; }
    else return load_error(g->f, "GGUF metadata %s has type %d, not a float", GGUF_KEYS[k], v->type);
    return 0;
}

/* Key k as a bool (0 or 1); def if absent. */
static int gguf_bool(GgufFile *g, int k, int def, int *out) {
    const GgufValue *v = &g->keys[k];
    if (v->type < 0) *out = def;
    else if (v->type != GGUF_BOOL || v->at[0] > 1)
        return load_error(g->f, "GGUF metadata %s is not a bool (type %d)", GGUF_KEYS[k], v->type);
    else *out = v->at[0];
    return 0;
}

/* Key k as a string; s->s NULL if absent. */
static int gguf_text(GgufFile *g, int k, GgufString *s) {
    const GgufValue *v = &g->keys[k];
    s->s = NULL;
    s->len = 0;
    if (v->type < 0) return 0;
    if (v->type != GGUF_STRING) return load_error(g->f, "GGUF metadata %s has type %d, not a string", GGUF_KEYS[k], v->type);
    s->len = (size_t)read_u64(v->at);
    s->s = (const char *)v->at + 8;
    return 0;
}

/* Key k as an array of n elements of type elem (n is the vocabulary's);
 * *elems NULL if absent. */
static int gguf_array(GgufFile *g, int k, uint32_t elem, uint64_t n, const unsigned char **elems) {
    const GgufValue *v = &g->keys[k];
    *elems = NULL;
    if (v->type < 0) return 0;
    if (v->type != GGUF_ARRAY || read_u32(v->at) != elem)
        return load_error(g->f, "GGUF metadata %s is not an array of type %u", GGUF_KEYS[k], elem);
    uint64_t count = read_u64(v->at + 4);
    if (count != n)
        return load_error(g->f, "GGUF metadata %s has %llu entries for a vocabulary of %llu", GGUF_KEYS[k],
                          (unsigned long long)count, (unsigned long long)n);
    *elems = v->at + 12;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Config                                                                    */

/* The config from the llama.* keys; vocab_size, the classifier and the
 * weight type come from the tensors. */
static int gguf_config(GgufFile *g, Config *c) {
    GgufString arch, scaling, name;
    char text[64];
    if (gguf_text(g, KEY_ARCHITECTURE, &arch) || gguf_text(g, KEY_NAME, &name)) return -1;
    if (!arch.s) return load_error(g->f, "GGUF metadata general.architecture is missing");
    if (!gguf_string_is(&arch, "llama"))
        return load_error(g->f, "GGUF architecture \"%s\" is not supported (qkv reads \"llama\")",
                          gguf_printable(text, sizeof text, &arch));
    if (gguf_text(g, KEY_ROPE_SCALING, &scaling)) return -1;
    if (scaling.s && !gguf_string_is(&scaling, "none"))
        return load_error(g->f, "GGUF RoPE scaling \"%s\" is not supported", gguf_printable(text, sizeof text, &scaling));
    /* a factor (0 and 1: none; scaling.factor, or the older scale_linear)
     * rescales positions unless the type says none, as llama.cpp reads them */
    float factor = 1.0f, linear = 1.0f;
    if (gguf_float(g, KEY_ROPE_FACTOR, 1.0f, &factor) || gguf_float(g, KEY_ROPE_LINEAR, 1.0f, &linear)) return -1;
    if (!scaling.s && ((factor != 0.0f && factor != 1.0f) || (linear != 0.0f && linear != 1.0f)))
        return load_error(g->f, "GGUF RoPE scaling by %g (llama.rope.%s) is not supported",
                          linear != 0.0f && linear != 1.0f ? linear : factor,
                          linear != 0.0f && linear != 1.0f ? "scale_linear" : "scaling.factor");
    long long seq, dim, layers, hidden, heads, kv_heads, rope_dims;
    if (gguf_int(g, KEY_CONTEXT, 1, INT_MAX, GGUF_REQUIRED, &seq) ||
        gguf_int(g, KEY_EMBEDDING, 1, INT_MAX, GGUF_REQUIRED, &dim) ||
        gguf_int(g, KEY_BLOCKS, 1, QKV_MAX_LAYERS, GGUF_REQUIRED, &layers) ||
        gguf_int(g, KEY_FFN, 1, INT_MAX, GGUF_REQUIRED, &hidden) ||
        gguf_int(g, KEY_HEADS, 1, QKV_MAX_HEADS, GGUF_REQUIRED, &heads) ||
        gguf_int(g, KEY_KV_HEADS, 1, QKV_MAX_HEADS, heads, &kv_heads) ||
        gguf_float(g, KEY_RMS_EPS, NAN, &c->norm_eps) || gguf_float(g, KEY_ROPE_BASE, 10000.0f, &c->rope_theta))
        return -1;
    c->seq_len = (int)seq; c->dim = (int)dim; c->n_layers = (int)layers; c->hidden_dim = (int)hidden;
    c->n_heads = (int)heads; c->n_kv_heads = (int)kv_heads;
    /* a head's size: attention.key_length and value_length, each by default
     * embedding_length / head_count (llama.cpp's rule); qkv's keys and
     * values share one size, so the two must agree */
    long long key_length, value_length, even = c->dim % c->n_heads == 0 ? c->dim / c->n_heads : 0;
    if (gguf_int(g, KEY_KEY_LENGTH, 1, QKV_MAX_DIM, even, &key_length) ||
        gguf_int(g, KEY_VALUE_LENGTH, 1, QKV_MAX_DIM, even, &value_length))
        return -1;
    if (!key_length || !value_length)
        return load_error(g->f, "GGUF embedding_length %d is not divisible by head_count %d, and attention.%s "
                                "is missing", c->dim, c->n_heads, key_length ? "value_length" : "key_length");
    if (key_length != value_length) {
        int key_given = g->keys[KEY_KEY_LENGTH].type >= 0, value_given = g->keys[KEY_VALUE_LENGTH].type >= 0;
        return load_error(g->f, "GGUF attention.key_length %lld%s differs from value_length %lld%s (qkv's keys and "
                                "values have one head size)", key_length, key_given ? "" : " (embedding / heads)",
                          value_length, value_given ? "" : " (embedding / heads)");
    }
    c->head_size = (int)key_length;
    if (gguf_int(g, KEY_ROPE_DIMS, 0, INT_MAX, c->head_size, &rope_dims)) return -1;
    if (rope_dims != c->head_size)
        return load_error(g->f, "GGUF rope.dimension_count %lld differs from the head size %d (qkv rotates whole heads)",
                          rope_dims, c->head_size);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Tensor infos                                                              */

/* The slot of a tensor name, or -1 if it is none of a llama model of n_layers. */
static int gguf_slot(const GgufString *name, int n_layers) {
    for (int s = 0; s < SLOT_LAYERS; s++)
        if (gguf_string_is(name, GGUF_GLOBAL_TENSORS[s])) return s;
    if (name->len < 6 || memcmp(name->s, "blk.", 4) != 0) return -1;
    size_t i = 4;
    long layer = 0;
    for (; i < name->len && i < 9 && name->s[i] >= '0' && name->s[i] <= '9'; i++) layer = layer * 10 + (name->s[i] - '0');
    if (i == 4 || i >= name->len || name->s[i] != '.' || layer >= n_layers || (name->s[4] == '0' && i > 5)) return -1;
    char expected[GGUF_MAX_NAME + 1];
    for (int k = 0; k < GGUF_PER_LAYER; k++) {
        snprintf(expected, sizeof expected, "blk.%ld.%s.weight", layer, GGUF_LAYER_TENSORS[k]);
        if (gguf_string_is(name, expected)) return SLOT_LAYERS + GGUF_PER_LAYER * (int)layer + k;
    }
    return -1;
}

/* Reads every tensor info into its slot; then the data starts at the next
 * multiple of the alignment. */
static int gguf_read_tensor_infos(GgufFile *g, int n_layers) {
    char text[GGUF_MAX_NAME + 1];
    /* the smallest info: an empty name (8 bytes), n_dims (4), one dimension (8), type (4), offset (8) */
    if (g->n_tensors > (g->f->size - g->cur.offset) / 32)
        return load_error(g->f, "truncated GGUF file: %llu tensor infos cannot fit in %zu bytes",
                          (unsigned long long)g->n_tensors, g->f->size);
    g->n_slots = SLOT_LAYERS + GGUF_PER_LAYER * (size_t)n_layers;
    g->slots = calloc(g->n_slots, sizeof(GgufTensor));
    g->owners = (TensorTable){ .f = g->f, .sections = calloc(g->n_slots, sizeof(Section)), .max_sections = (int)g->n_slots };
    if (!g->slots || !g->owners.sections) return load_error(g->f, "out of memory");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        GgufString name;
        uint32_t n_dims;
        GgufTensor t = { 1, 0, 0, { 0 }, 0 };
        if (gguf_string(&g->cur, &name, "a tensor name")) return -1;
        if (name.len > GGUF_MAX_NAME)
            return load_error(g->f, "GGUF tensor name of %zu bytes (at most %d)", name.len, GGUF_MAX_NAME);
        gguf_printable(text, sizeof text, &name);
        if (gguf_u32(&g->cur, &n_dims, "a tensor's dimension count")) return -1;
        if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
            return load_error(g->f, "GGUF tensor %s has %u dimensions (1 to %d)", text, n_dims, GGUF_MAX_DIMS);
        t.n_dims = n_dims;
        for (uint32_t d = 0; d < n_dims; d++)
            if (gguf_u64(&g->cur, &t.ne[d], "a tensor's shape")) return -1;
        if (gguf_u32(&g->cur, &t.type, "a tensor's type") || gguf_u64(&g->cur, &t.offset, "a tensor's offset"))
            return -1;
        int s = gguf_slot(&name, n_layers);
        if (s < 0) return load_error(g->f, "GGUF tensor %s is not one of a %d-layer llama model's", text, n_layers);
        if (g->slots[s].present) return load_error(g->f, "GGUF tensor %s is listed twice", text);
        g->slots[s] = t;
    }
    size_t at = g->cur.offset, pad = (g->alignment - at % g->alignment) % g->alignment;
    if (pad > g->f->size - at)
        return load_error(g->f, "truncated GGUF file: it ends before the tensor data (%zu bytes)", g->f->size);
    g->data_start = at + pad;
    return 0;
}

/* The WeightType of a ggml tensor type, or -1 if qkv has no kernel for it. */
static int gguf_weight_type(uint32_t ggml_type) {
    switch (ggml_type) {
    case GGML_TYPE_F32: return WEIGHT_F32;
    case GGML_TYPE_F16: return WEIGHT_F16;
    case GGML_TYPE_Q4_0: return WEIGHT_Q4_0;
    case GGML_TYPE_Q8_0: return WEIGHT_Q8_0;
    }
    return -1;
}

static const char *ggml_type_name(uint32_t type) {
    static const char *const names[] = { "F32", "F16", "Q4_0", "Q4_1", "?", "?", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
                                         "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS",
                                         "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16",
                                         "I32", "I64", "F64", "IQ1_M", "BF16" };
    return type < sizeof names / sizeof names[0] ? names[type] : "?";
}

/* The data of the tensor in a slot, checked against the shape the config
 * gives it (a matrix [rows, cols] is ne = {cols, rows}, a vector [rows] is
 * ne = {rows}), its type (norm vectors must be F32: the engine reads them as
 * floats) and the file; *type receives its WeightType. NULL (and err) if not. */
static const void *gguf_tensor(GgufFile *g, int slot, int rows, int cols, WeightType *type) {
    const GgufTensor *t = &g->slots[slot];
    char name[GGUF_MAX_NAME + 1];
    if (slot < SLOT_LAYERS) snprintf(name, sizeof name, "%s", GGUF_GLOBAL_TENSORS[slot]);
    else snprintf(name, sizeof name, "blk.%d.%s.weight", (slot - SLOT_LAYERS) / GGUF_PER_LAYER,
                  GGUF_LAYER_TENSORS[(slot - SLOT_LAYERS) % GGUF_PER_LAYER]);
    int wt = gguf_weight_type(t->type), matrix = cols > 0;
    size_t row_bytes, bytes, room = g->f->size - g->data_start;
    if (!t->present) { load_error(g->f, "GGUF tensor %s is missing", name); return NULL; }
    if (wt < 0) {
        load_error(g->f, "GGUF tensor %s has ggml type %u (%s): qkv reads F32, F16, Q8_0 and Q4_0 "
                   "(llama-quantize --pure writes every matrix in the one type asked for)", name, t->type,
                   ggml_type_name(t->type));
        return NULL;
    }
    if (!matrix && wt != WEIGHT_F32) {
        load_error(g->f, "GGUF tensor %s is %s: norm vectors must be F32 (as llama.cpp writes them)", name,
                   ggml_type_name(t->type));
        return NULL;
    }
    if (t->n_dims != (uint32_t)(matrix ? 2 : 1) || t->ne[0] != (uint64_t)(matrix ? cols : rows) ||
        (matrix && t->ne[1] != (uint64_t)rows)) {
        load_error(g->f, "GGUF tensor %s: shape does not match the metadata (expected ne [%d, %d])", name,
                   matrix ? cols : rows, matrix ? rows : 1);
        return NULL;
    }
    row_bytes = matrix ? weight_row_bytes((WeightType)wt, cols) : sizeof(float);
    if (row_bytes == 0) {
        load_error(g->f, "GGUF tensor %s: rows of %d are not a whole number of %s blocks", name, cols,
                   ggml_type_name(t->type));
        return NULL;
    }
    if (!mul_sizes(&bytes, (size_t)rows, row_bytes)) { load_error(g->f, "GGUF tensor %s: size overflows", name); return NULL; }
    if (t->offset % g->alignment != 0) {
        load_error(g->f, "GGUF tensor %s: data offset %llu is not a multiple of the alignment %u", name,
                   (unsigned long long)t->offset, g->alignment);
        return NULL;
    }
    if (t->offset > room || bytes > room - t->offset) {
        load_error(g->f, "truncated GGUF file: tensor %s runs past the end", name);
        return NULL;
    }
    add_section(&g->owners, name, g->data_start + t->offset, bytes);
    *type = (WeightType)wt;
    return g->f->base + g->data_start + t->offset;
}

/* The matrix in a slot: each has its own type (a file may mix them). */
static int gguf_matrix(GgufFile *g, int slot, int rows, int cols, Matrix *out) {
    WeightType type;
    const void *p = gguf_tensor(g, slot, rows, cols, &type);
    if (p) *out = matrix_make(type, rows, cols, p);
    return p ? 0 : -1;
}

static int gguf_layer(GgufFile *g, Model *m, int l) {
    const Config *c = &m->config;
    int q_dim = c->n_heads * c->head_size, kv_dim = c->n_kv_heads * c->head_size;
    /* in GGUF_LAYER_TENSORS' order; cols 0: a norm vector */
    const struct { size_t field; int rows, cols; } specs[GGUF_PER_LAYER] = {
        { LAYER_FIELD(attention_norm), c->dim, 0 }, { LAYER_FIELD(wq), q_dim, c->dim },
        { LAYER_FIELD(wk), kv_dim, c->dim }, { LAYER_FIELD(wv), kv_dim, c->dim },
        { LAYER_FIELD(wo), c->dim, q_dim }, { LAYER_FIELD(ffn_norm), c->dim, 0 },
        { LAYER_FIELD(w1), c->hidden_dim, c->dim }, { LAYER_FIELD(w2), c->dim, c->hidden_dim },
        { LAYER_FIELD(w3), c->hidden_dim, c->dim },
    };
    for (int k = 0; k < GGUF_PER_LAYER; k++) {
        int slot = SLOT_LAYERS + GGUF_PER_LAYER * l + k;
        char *field = (char *)&m->weights.layers[l] + specs[k].field;
        WeightType type;
        if (specs[k].cols > 0) {
            if (gguf_matrix(g, slot, specs[k].rows, specs[k].cols, (Matrix *)field)) return -1;
        } else if (!(*(const float **)field = gguf_tensor(g, slot, specs[k].rows, 0, &type))) {
            return -1;
        }
    }
    return 0;
}

/* The WeightType most matrices have (Config.weight_type, for -m info); F32 if none is known. */
static int gguf_common_type(const GgufFile *g) {
    int counts[WEIGHT_TYPE_COUNT] = { 0 }, best = WEIGHT_F32;
    for (size_t s = 0; s < g->n_slots; s++) {
        int wt = gguf_weight_type(g->slots[s].type);
        if (g->slots[s].present && g->slots[s].n_dims == 2 && wt >= 0) counts[wt]++;
    }
    for (int t = 0; t < WEIGHT_TYPE_COUNT; t++)
        if (counts[t] > counts[best]) best = t;
    return best;
}

/* ------------------------------------------------------------------------ */
/* Tokenizer                                                                 */

/* The bytes tokenizer.c wants for a token's text: in a normal token each ▁
 * (U+2581, sentencepiece's space) is a space; control, byte and other
 * tokens keep their text (byte tokens are "<0xNN>", which tokenizer.c
 * decodes). Writes them to out unless it is NULL; returns their count. */
static size_t gguf_piece(const GgufString *s, int normal, unsigned char *out) {
    size_t n = 0;
    for (size_t i = 0; i < s->len; i++, n++) {
        int space = normal && s->len - i >= 3 && memcmp(s->s + i, "\xE2\x96\x81", 3) == 0;
        if (out) out[n] = space ? ' ' : (unsigned char)s->s[i];
        if (space) i += 2;
    }
    return n;
}

/* Writes the vocabulary in llama2.c's tokenizer.bin layout (tokenizer.h):
 * i32 max_token_length, then per token f32 score, i32 length, bytes. With
 * out NULL it only measures: *bytes and *max_len. */
static int gguf_write_vocabulary(GgufFile *g, const unsigned char *tokens, const unsigned char *scores,
                                 const unsigned char *types, int n, unsigned char *out, size_t *bytes,
                                 int32_t *max_len) {
    Cursor cur = { g->f, (size_t)(tokens - g->f->base) };
    size_t at = 4;
    for (int i = 0; i < n; i++) {
        GgufString s;
        if (gguf_string(&cur, &s, "a token")) return -1;
        int normal = !types || read_i32(types + 4 * (size_t)i) == GGUF_TOKEN_NORMAL;
        size_t len = gguf_piece(&s, normal, NULL);
        if (len > (1 << 16)) return load_error(g->f, "GGUF token %d is %zu bytes long (at most 65536)", i, len);
        if ((int32_t)len > *max_len) *max_len = (int32_t)len;
        if (out) {
            int32_t len32 = (int32_t)len;
            memcpy(out + at, scores + 4 * (size_t)i, 4);
            memcpy(out + at + 4, &len32, 4);
            gguf_piece(&s, normal, out + at + 8);
        }
        at += 8 + len;
    }
    if (out) memcpy(out, max_len, 4);
    *bytes = at;
    return 0;
}

/* The tokenizer in the metadata (tokenizer.ggml.model "llama": tokens,
 * scores, token types), built as the section model_free frees. No
 * tokenizer.ggml.model: none inside, and -z gives one. */
static int gguf_tokenizer(GgufFile *g, Model *m) {
    GgufString model;
    char text[64];
    const unsigned char *tokens, *scores, *types;
    uint64_t vocab = (uint64_t)m->config.vocab_size;
    if (gguf_text(g, KEY_TOKENIZER, &model)) return -1;
    if (!model.s) return 0;
    if (!gguf_string_is(&model, "llama"))
        return load_error(g->f, "GGUF tokenizer model \"%s\" is not supported (qkv reads \"llama\", sentencepiece BPE)",
                          gguf_printable(text, sizeof text, &model));
    if (gguf_array(g, KEY_TOKENS, GGUF_STRING, vocab, &tokens) || gguf_array(g, KEY_SCORES, GGUF_F32, vocab, &scores) ||
        gguf_array(g, KEY_TOKEN_TYPES, GGUF_I32, vocab, &types)) return -1;
    if (!tokens || !scores) return load_error(g->f, "GGUF tokenizer without tokenizer.ggml.tokens and .scores");
    /* what a prompt becomes in llama.cpp, which qkv's llama tokenizer must match: BOS, the space prefix,
     * no EOS, unknown text <unk> at id 0 */
    int add_bos = 1, add_eos = 0, space_prefix = 1;
    long long unknown = 0;
    if (gguf_bool(g, KEY_ADD_BOS, 1, &add_bos) || gguf_bool(g, KEY_ADD_EOS, 0, &add_eos) ||
        gguf_bool(g, KEY_SPACE_PREFIX, 1, &space_prefix) || gguf_int(g, KEY_UNKNOWN, 0, LLONG_MAX, 0, &unknown))
        return -1;
    if (!add_bos || add_eos || !space_prefix || unknown != 0)
        return load_error(g->f, "GGUF tokenizer with %s is not supported (qkv's llama tokenizer starts a prompt with "
                                "BOS and a space, adds no EOS, and has <unk> at id 0)",
                          !add_bos ? "add_bos_token false" : add_eos ? "add_eos_token true"
                          : !space_prefix ? "add_space_prefix false" : "unknown_token_id other than 0");
    size_t bytes;
    int32_t max_len = 1; /* tokenizer.c wants at least 1 */
    if (gguf_write_vocabulary(g, tokens, scores, types, (int)vocab, NULL, &bytes, &max_len)) return -1;
    if (!(m->tokenizer_owned = malloc(bytes))) return load_error(g->f, "out of memory");
    gguf_write_vocabulary(g, tokens, scores, types, (int)vocab, m->tokenizer_owned, &bytes, &max_len); /* as measured: no error */
    m->tokenizer_data = m->tokenizer_owned;
    m->tokenizer_bytes = bytes;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* What -m info shows                                                        */

static void text_append(char *buf, size_t cap, const char *fmt, ...) {
    size_t used = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
}

/* The metadata the loader used, as lines for -m info, into m->metadata
 * (the string keys read here have been checked to be strings). */
static int gguf_describe(GgufFile *g, Model *m) {
    const Config *c = &m->config;
    char text[2048] = "", name[80];
    GgufString s;
    text_append(text, sizeof text, "gguf              version %u, %llu tensors, %llu metadata pairs, alignment %u\n",
                g->version, (unsigned long long)g->n_tensors, (unsigned long long)g->n_kv, g->alignment);
    gguf_text(g, KEY_NAME, &s);
    text_append(text, sizeof text, "architecture      llama%s%s%s\n", s.s ? ", name \"" : "",
                s.s ? gguf_printable(name, sizeof name, &s) : "", s.s ? "\"" : "");
    text_append(text, sizeof text,
                "llama.*           context_length %d  embedding_length %d  block_count %d  feed_forward_length %d\n"
                "                  attention.head_count %d  head_count_kv %d  layer_norm_rms_epsilon %g\n"
                "                  rope.freq_base %g  rope.dimension_count %d%s\n",
                c->seq_len, c->dim, c->n_layers, c->hidden_dim, c->n_heads, c->n_kv_heads, c->norm_eps,
                c->rope_theta, c->head_size, g->keys[KEY_ROPE_DIMS].type < 0 ? " (absent: the head size)" : "");
    int counts[WEIGHT_TYPE_COUNT] = { 0 };
    for (size_t i = 0; i < g->n_slots; i++) {
        int wt = gguf_weight_type(g->slots[i].type);
        if (g->slots[i].present && wt >= 0) counts[wt]++;
    }
    text_append(text, sizeof text, "tensor types      ");
    for (int t = 0, first = 1; t < WEIGHT_TYPE_COUNT; t++) {
        if (!counts[t]) continue;
        text_append(text, sizeof text, "%s%s %d", first ? "" : ", ", weight_type_name((WeightType)t), counts[t]);
        first = 0;
    }
    gguf_text(g, KEY_TOKENIZER, &s);
    if (s.s) text_append(text, sizeof text, "\ntokenizer         llama (in the file): %d tokens, bos %d, eos %d\n",
                         c->vocab_size, c->bos_id, c->eos_id);
    else text_append(text, sizeof text, "\ntokenizer         none in the file (give -z tokenizer.bin)\n");
    if (!(m->metadata = malloc(strlen(text) + 1))) return load_error(g->f, "out of memory");
    memcpy(m->metadata, text, strlen(text) + 1);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                   */

/* The vocabulary size is token_embd's rows; the tokens and llama.vocab_size,
 * where present, must agree. Then the rest of the config. */
static int gguf_vocabulary_and_ids(GgufFile *g, Config *c) {
    const GgufTensor *e = &g->slots[SLOT_TOKEN_EMBD];
    long long vocab, bos, eos;
    if (!e->present || e->n_dims != 2 || e->ne[1] < 1 || e->ne[1] > QKV_MAX_VOCAB)
        return load_error(g->f, "GGUF tensor token_embd.weight is missing or not [dim, vocab] with vocab <= %d",
                          QKV_MAX_VOCAB);
    c->vocab_size = (int)e->ne[1];
    if (gguf_int(g, KEY_VOCAB, 0, INT_MAX, c->vocab_size, &vocab) ||
        gguf_int(g, KEY_BOS, 0, c->vocab_size - 1, 1, &bos) || gguf_int(g, KEY_EOS, 0, c->vocab_size - 1, 2, &eos))
        return -1;
    if (vocab != c->vocab_size)
        return load_error(g->f, "GGUF llama.vocab_size %lld differs from token_embd.weight's %d rows", vocab, c->vocab_size);
    c->bos_id = (int)bos;
    c->eos_id = (int)eos;
    c->shared_classifier = !g->slots[SLOT_OUTPUT].present;
    c->weight_type = gguf_common_type(g);
    return validate_config(g->f, c);
}

static int gguf_header(GgufFile *g) {
    const unsigned char *h = gguf_take(&g->cur, GGUF_HEADER_BYTES, "the header");
    long long alignment;
    if (!h) return -1;
    if (memcmp(h, "GGUF", 4) != 0) return load_error(g->f, "not a GGUF file (bad magic)");
    g->version = read_u32(h + 4);
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return load_error(g->f, "big-endian GGUF files are not supported (qkv reads little-endian ones)");
    if (g->version != 2 && g->version != 3)
        return load_error(g->f, "GGUF version %u is not supported (qkv reads 2 and 3)", g->version);
    g->n_tensors = read_u64(h + 8);
    g->n_kv = read_u64(h + 16);
    if (gguf_read_metadata(g) || gguf_int(g, KEY_ALIGNMENT, 8, 1 << 16, 32, &alignment)) return -1;
    if ((alignment & (alignment - 1)) != 0)
        return load_error(g->f, "GGUF general.alignment %lld is not a power of two", alignment);
    g->alignment = (uint32_t)alignment;
    return 0;
}

static int load_gguf(FileView *f, Model *m) {
    GgufFile g;
    memset(&g, 0, sizeof g);
    g.f = f;
    g.cur.f = f;
    Config *c = &m->config;
    int rc = gguf_header(&g) || gguf_config(&g, c) || gguf_read_tensor_infos(&g, c->n_layers) ||
             gguf_vocabulary_and_ids(&g, c) ? -1 : 0;
    if (rc == 0 && !(m->weights.layers = calloc((size_t)c->n_layers, sizeof(LayerWeights))))
        rc = load_error(f, "out of memory");
    if (rc == 0) rc = gguf_matrix(&g, SLOT_TOKEN_EMBD, c->vocab_size, c->dim, &m->weights.token_embedding);
    for (int l = 0; rc == 0 && l < c->n_layers; l++) rc = gguf_layer(&g, m, l);
    WeightType type;
    if (rc == 0 && !(m->weights.final_norm = gguf_tensor(&g, SLOT_OUTPUT_NORM, c->dim, 0, &type))) rc = -1;
    if (rc == 0 && c->shared_classifier) m->weights.classifier = m->weights.token_embedding;
    else if (rc == 0) rc = gguf_matrix(&g, SLOT_OUTPUT, c->vocab_size, c->dim, &m->weights.classifier);
    if (rc == 0) rc = check_sections_disjoint(&g.owners); /* two tensors read from one span: a hostile file */
    if (rc == 0) rc = gguf_tokenizer(&g, m);
    if (rc == 0) rc = gguf_describe(&g, m);
    free(g.slots);
    free(g.owners.sections);
    return rc;
}

int gguf_load_memory(Model *m, const void *data, size_t size, char *err, size_t err_len) {
    memset(m, 0, sizeof *m);
    FileView f = { data, size, err, err_len };
    m->format = FORMAT_GGUF;
    if (load_gguf(&f, m) == 0) return 0;
    model_free(m);
    return -1;
}

#endif /* QKV_GGUF_IMPLEMENTED */
