/* kernels.h — matrix products, one section per weight type, one table of
 * kernels per instruction set.
 *
 * stb-style: the interface everywhere, the implementation where
 * QKV_KERNELS_IMPLEMENTATION is defined (model.h's implementation does).
 *
 * Almost all of a decode step is y = W x for a weight matrix W that does not
 * fit in the core's caches: the time is the time to stream W's bytes from
 * memory. So the kernels (1) keep several weight rows in flight at once,
 * each with its own accumulator, and reduce them together at the end of the
 * row instead of one horizontal sum per row; (2) read fewer bytes per weight
 * (float16, int8, 4-bit); (3) for a prompt, use each weight row, while it is
 * in L1, for a tile of positions (a register-blocked matrix multiply).
 *
 * Every kernel computes each (row, position) dot product with the same
 * arithmetic whatever the tile it is part of, so a prompt pushed through as
 * a matrix gives the same bits as one token at a time (tested).
 *
 * Quantized files hold ggml's layouts: Q8_0 blocks of 32 weights (a float16
 * scale, then 32 int8: w = q * d) and Q4_0 blocks of 32 (a float16 scale,
 * then 16 bytes; low nibbles are elements 0-15, high nibbles 16-31: w = (q -
 * 8) * d). At load they are regrouped into panels of 16 rows (weight_pack,
 * below), so that one vector lane is one row: a block's integer dot product
 * builds up in its row's lane and needs no sum across lanes. Their kernels
 * take the activations quantized to int8 per block of 32 (a float32 scale
 * and the block's integer sum each), made once per input and shared by the
 * matrices that read it, and multiply in integers. Every instruction set
 * adds each (row, position)'s blocks in the same order with the same
 * roundings, so int8 and 4-bit models give the same bits on every CPU. */
#ifndef QKV_KERNELS_H
#define QKV_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { WEIGHT_F32 = 0, WEIGHT_F16 = 1, WEIGHT_Q8_0 = 2, WEIGHT_Q4_0 = 3, WEIGHT_TYPE_COUNT } WeightType;

/* Elements per quantization block (Q8_0, Q4_0 and the int8 activations). */
#define QKV_QBLOCK 32

/* Work below this many multiply-adds is not worth waking other threads for. */
#ifndef QKV_PARALLEL_MIN_WORK
#define QKV_PARALLEL_MIN_WORK (1 << 15)
#endif

typedef struct {
    const char *name;  /* as -m info and --dtype say it */
    int block;         /* elements per block: a row is a whole number of blocks */
    int block_bytes;   /* bytes per block as stored */
    int quantized;     /* 1: the kernels read int8 activations */
} WeightTraits;

/* Traits of a type; NULL for a number that is not a type. */
const WeightTraits *weight_traits(int type);
const char *weight_type_name(WeightType type);
/* Parses "f32", "f16", "q8" ("q8_0"), "q4" ("q4_0"); -1 if none. */
int weight_type_parse(const char *name);
/* Bytes of one row of cols elements, or 0 if cols is not a whole number of
 * blocks of the type. */
size_t weight_row_bytes(WeightType type, int cols);
/* Row of cols elements as stored -> float32 (dequantized). */
void weight_row_to_float(WeightType type, const void *row, float *out, int cols);
/* float32 -> a row as stored, by ggml's reference quantizers for Q8_0/Q4_0
 * and round-to-nearest-even for float16. cols must suit the type. */
void weight_row_from_float(WeightType type, const float *in, void *row, int cols);

/* Quantized matrices as their kernels read them: panels of QKV_PANEL rows
 * (the last padded with zero rows). In panel g, block b, the values of its
 * rows come four bytes at a time: chunk c (64 bytes) holds bytes 4c..4c+3
 * of the block's values of rows 0..15, in row order; after the values of
 * every block, the rows' float16 scales, 16 a block. Q8_0 values are kept
 * as q + 128 (unsigned bytes, as VNNI's vpdpbusd wants them); Q4_0 bytes as
 * ggml has them (byte j: element j low, element j + 16 high). A panel takes
 * QKV_PANEL rows' bytes as stored; weight_pack returns 0 for a type that is
 * not packed (float32 and float16 are read as stored). */
#define QKV_PANEL 16
size_t weight_packed_bytes(WeightType type, int rows, int cols);
int weight_pack(WeightType type, const void *data, int rows, int cols, void *panels);

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);

/* The input of a matrix product: n rows of cols floats, stride floats apart,
 * and the same rows quantized to int8 per block of QKV_QBLOCK (q rows of
 * stride bytes, q_scale rows of stride / QKV_QBLOCK floats), made the first
 * time a quantized matrix reads them. */
typedef struct {
    const float *x;
    int n, stride, cols;
    int8_t *q;        /* [n, stride] scratch (NULL when no quantized matrix reads it) */
    float *q_scale;   /* [n, stride / QKV_QBLOCK] */
    int quantized;    /* q, q_scale and q_sum hold x */
    int32_t *q_sum;   /* [n, stride / QKV_QBLOCK] each block's sum of q */
} Activations;

/* Fills a->q, a->q_scale and a->q_sum from a->x (once). */
void activations_quantize(Activations *a);

/* out[t * out_stride + i] = W[i, :] . x[t, :] for rows begin <= i < end and
 * every position t of a; W is the matrix's data, cols wide (for Q8_0 and
 * Q4_0, its panels: weight_pack). */
typedef void (*MatmulKernel)(float *out, int out_stride, const Activations *a, const void *w, int cols,
                             int begin, int end);

/* Instruction sets, each a superset of the one before. */
typedef enum { ISA_PORTABLE = 0, ISA_AVX2 = 1, ISA_AVX512 = 2, ISA_AVX512_VNNI = 3, ISA_COUNT } Isa;

typedef struct {
    WeightType type;
    Isa isa;        /* what the CPU needs for it */
    const char *name;
    MatmulKernel run;
} KernelEntry;

const char *isa_name(Isa isa);
/* The best instruction set this CPU and OS support, capped by the
 * environment variable QKV_ISA (portable, avx2, avx512, avx512vnni) so tests
 * and CI can force each path. */
Isa isa_available(void);
int kernel_count(void);
const KernelEntry *kernel_at(int i);
/* The fastest kernel for a type within an instruction set; kernel_best
 * asks isa_available() (CPUID: slow in a virtual machine, so a loader asks
 * once and uses kernel_for). */
const KernelEntry *kernel_for(WeightType type, Isa isa);
const KernelEntry *kernel_best(WeightType type);

#endif /* QKV_KERNELS_H */

/* ======================================================================== */
#ifdef QKV_KERNELS_IMPLEMENTATION
#ifndef QKV_KERNELS_IMPLEMENTED
#define QKV_KERNELS_IMPLEMENTED

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Types                                                                     */

static const WeightTraits WEIGHT_TRAITS[WEIGHT_TYPE_COUNT] = {
    [WEIGHT_F32] = { "float32", 1, 4, 0 },
    [WEIGHT_F16] = { "float16", 1, 2, 0 },
    [WEIGHT_Q8_0] = { "q8_0", QKV_QBLOCK, 2 + QKV_QBLOCK, 1 },
    [WEIGHT_Q4_0] = { "q4_0", QKV_QBLOCK, 2 + QKV_QBLOCK / 2, 1 },
};

const WeightTraits *weight_traits(int type) {
    return type >= 0 && type < WEIGHT_TYPE_COUNT ? &WEIGHT_TRAITS[type] : NULL;
}

const char *weight_type_name(WeightType type) {
    const WeightTraits *t = weight_traits(type);
    return t ? t->name : "unknown";
}

int weight_type_parse(const char *name) {
    static const struct { const char *name; WeightType type; } names[] = {
        { "f32", WEIGHT_F32 }, { "float32", WEIGHT_F32 }, { "f16", WEIGHT_F16 }, { "float16", WEIGHT_F16 },
        { "q8", WEIGHT_Q8_0 }, { "q8_0", WEIGHT_Q8_0 }, { "q4", WEIGHT_Q4_0 }, { "q4_0", WEIGHT_Q4_0 },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) return (int)names[i].type;
    return -1;
}

size_t weight_row_bytes(WeightType type, int cols) {
    const WeightTraits *t = weight_traits(type);
    if (!t || cols <= 0 || cols % t->block != 0) return 0;
    return (size_t)(cols / t->block) * (size_t)t->block_bytes;
}

/* IEEE 754 binary16 -> float32, exact for every one of the 65536 values:
 * sign, 5-bit exponent (bias 15), 10-bit mantissa. */
float half_to_float(uint16_t h) {
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

/* float32 -> binary16, rounding to nearest even, overflow to infinity. */
uint16_t float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00u;           /* NaN */
    if (abs >= 0x477ff000u) return sign | 0x7c00u;          /* rounds past 65504: infinity */
    if (abs < 0x38800000u) {                                /* subnormal or zero in half */
        float a;
        memcpy(&a, &abs, 4);
        return sign | (uint16_t)lrintf(a * 0x1p24f);        /* multiple of 2^-24, ties to even */
    }
    uint32_t mantissa = abs + 0xfffu + ((abs >> 13) & 1u);  /* round to nearest even at bit 13 */
    return sign | (uint16_t)((mantissa - 0x38000000u) >> 13);
}

/* ggml's block layouts */
typedef struct { uint16_t d; int8_t q[QKV_QBLOCK]; } BlockQ8;
typedef struct { uint16_t d; uint8_t q[QKV_QBLOCK / 2]; } BlockQ4;
_Static_assert(sizeof(BlockQ8) == 34 && sizeof(BlockQ4) == 18, "ggml block sizes");

void weight_row_to_float(WeightType type, const void *row, float *out, int cols) {
    switch (type) {
    case WEIGHT_F32:
        memcpy(out, row, (size_t)cols * sizeof(float));
        break;
    case WEIGHT_F16:
        for (int i = 0; i < cols; i++) out[i] = half_to_float(((const uint16_t *)row)[i]);
        break;
    case WEIGHT_Q8_0:
        for (int b = 0; b < cols / QKV_QBLOCK; b++) {
            const BlockQ8 *blk = (const BlockQ8 *)row + b;
            float d = half_to_float(blk->d);
            for (int j = 0; j < QKV_QBLOCK; j++) out[b * QKV_QBLOCK + j] = blk->q[j] * d;
        }
        break;
    case WEIGHT_Q4_0:
        for (int b = 0; b < cols / QKV_QBLOCK; b++) {
            const BlockQ4 *blk = (const BlockQ4 *)row + b;
            float d = half_to_float(blk->d);
            for (int j = 0; j < QKV_QBLOCK / 2; j++) {
                out[b * QKV_QBLOCK + j] = ((blk->q[j] & 0x0f) - 8) * d;
                out[b * QKV_QBLOCK + j + QKV_QBLOCK / 2] = ((blk->q[j] >> 4) - 8) * d;
            }
        }
        break;
    default:
        break;
    }
}

/* (int)v within [lo, hi] (truncated, as C converts), and nan_level for a
 * NaN: a checkpoint with non-finite weights quantizes to something defined
 * instead of an undefined float -> int conversion. Finite weights never
 * leave the range, so for them this is the plain conversion. */
static inline int quant_level(float v, int lo, int hi, int nan_level) {
    if (v != v) return nan_level;
    return v < (float)lo ? lo : v > (float)hi ? hi : (int)v;
}

/* ggml's quantize_row_q8_0_ref: d = max|x| / 127, q = round(x / d) */
static void quantize_q8_block(const float *x, BlockQ8 *blk) {
    float amax = 0.0f;
    for (int j = 0; j < QKV_QBLOCK; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    blk->d = float_to_half(d);
    for (int j = 0; j < QKV_QBLOCK; j++) blk->q[j] = (int8_t)quant_level(roundf(x[j] * id), -127, 127, 0);
}

/* ggml's quantize_row_q4_0_ref: the value of largest magnitude maps to -8,
 * d = max / -8, q = min(15, (int)(x / d + 8.5)) */
static void quantize_q4_block(const float *x, BlockQ4 *blk) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QKV_QBLOCK; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    blk->d = float_to_half(d);
    for (int j = 0; j < QKV_QBLOCK / 2; j++) {
        int lo = quant_level(x[j] * id + 8.5f, 0, 15, 8), hi = quant_level(x[j + QKV_QBLOCK / 2] * id + 8.5f, 0, 15, 8);
        blk->q[j] = (uint8_t)(lo | (hi << 4));
    }
}

void weight_row_from_float(WeightType type, const float *in, void *row, int cols) {
    switch (type) {
    case WEIGHT_F32:
        memcpy(row, in, (size_t)cols * sizeof(float));
        break;
    case WEIGHT_F16:
        for (int i = 0; i < cols; i++) ((uint16_t *)row)[i] = float_to_half(in[i]);
        break;
    case WEIGHT_Q8_0:
        for (int b = 0; b < cols / QKV_QBLOCK; b++) quantize_q8_block(in + b * QKV_QBLOCK, (BlockQ8 *)row + b);
        break;
    case WEIGHT_Q4_0:
        for (int b = 0; b < cols / QKV_QBLOCK; b++) quantize_q4_block(in + b * QKV_QBLOCK, (BlockQ4 *)row + b);
        break;
    default:
        break;
    }
}

/* Bytes of a row's values in one block, as packed: 32 (Q8_0), 16 (Q4_0). */
static int packed_value_bytes(int q4) { return q4 ? QKV_QBLOCK / 2 : QKV_QBLOCK; }

size_t weight_packed_bytes(WeightType type, int rows, int cols) {
    if (type != WEIGHT_Q8_0 && type != WEIGHT_Q4_0) return 0;
    size_t panels = ((size_t)rows + QKV_PANEL - 1) / QKV_PANEL;
    return panels * QKV_PANEL * weight_row_bytes(type, cols);
}

/* Row r (of QKV_PANEL) of a panel: its blocks' values and scales moved from
 * ggml's row into the panel's places. */
static void pack_row(const unsigned char *row, int r, int blocks, int q4, unsigned char *panel) {
    int value_bytes = packed_value_bytes(q4), block_bytes = value_bytes + 2;
    unsigned char *scales = panel + (size_t)blocks * QKV_PANEL * value_bytes;
    uint32_t flip = q4 ? 0 : 0x80808080u; /* Q8_0: q + 128 in each byte */
    for (int b = 0; b < blocks; b++) {
        const unsigned char *blk = row + (size_t)b * block_bytes;
        unsigned char *values = panel + (size_t)b * QKV_PANEL * value_bytes + r * 4;
        for (int c = 0; c < value_bytes / 4; c++) {
            uint32_t word;
            memcpy(&word, blk + 2 + 4 * c, 4);
            word ^= flip;
            memcpy(values + (size_t)c * 4 * QKV_PANEL, &word, 4);
        }
        memcpy(scales + (size_t)b * QKV_PANEL * 2 + r * 2, blk, 2);
    }
}

int weight_pack(WeightType type, const void *data, int rows, int cols, void *panels) {
    if (type != WEIGHT_Q8_0 && type != WEIGHT_Q4_0) return 0;
    int q4 = type == WEIGHT_Q4_0, blocks = cols / QKV_QBLOCK;
    size_t row_bytes = weight_row_bytes(type, cols), panel_bytes = QKV_PANEL * row_bytes;
    if (rows % QKV_PANEL) /* the last panel's padding rows are zeros */
        memset((unsigned char *)panels + (size_t)(rows / QKV_PANEL) * panel_bytes, 0, panel_bytes);
    for (int i = 0; i < rows; i++)
        pack_row((const unsigned char *)data + (size_t)i * row_bytes, i % QKV_PANEL, blocks, q4,
                 (unsigned char *)panels + (size_t)(i / QKV_PANEL) * panel_bytes);
    return 1;
}

/* roundf (halves away from zero) for |v| < 2^31, exactly, in plain
 * arithmetic a compiler vectorizes: the truncation, plus one if the
 * fraction (exact) is half or more. */
static inline int round_half_away(float v) {
    int t = (int)v;
    float fraction = v - (float)t;
    return t + (fraction >= 0.5f) - (fraction <= -0.5f);
}

/* max |x[j]| over a block, as the bits of a float: the magnitudes' bit
 * patterns order as their values do, and an integer maximum (unlike a
 * float one) vectorizes without changing the answer. A NaN or infinity
 * gives bits above FLT_MAX's. */
static inline uint32_t block_max_bits(const float *x) {
    uint32_t top = 0;
    for (int j = 0; j < QKV_QBLOCK; j++) {
        uint32_t bits;
        memcpy(&bits, x + j, 4);
        bits &= 0x7fffffffu;
        top = bits > top ? bits : top;
    }
    return top;
}

/* One block: d = max|x| / 127, q = round(x / d), and the sum of q. */
static void quantize_activation_block(const float *x, int8_t *q, float *scale, int32_t *sum) {
    uint32_t top = block_max_bits(x);
    *sum = 0;
    if (top > 0x7f7fffffu) { /* NaN or infinity: NaN out, and no undefined float -> int */
        *scale = NAN;
        memset(q, 0, QKV_QBLOCK);
        return;
    }
    float amax;
    memcpy(&amax, &top, 4);
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    *scale = d;
    for (int j = 0; j < QKV_QBLOCK; j++) q[j] = (int8_t)round_half_away(x[j] * id);
    for (int j = 0; j < QKV_QBLOCK; j++) *sum += q[j];
}

/* The activations, per block of 32, scale kept in float32; a prompt's
 * positions split across threads. */
void activations_quantize(Activations *a) {
    if (a->quantized) return;
    int blocks = a->cols / QKV_QBLOCK, row_blocks = a->stride / QKV_QBLOCK, t;
    long work = (long)a->n * a->cols;
    (void)work; /* read only by OpenMP's if clause */
#pragma omp parallel for schedule(static) if (work >= QKV_PARALLEL_MIN_WORK)
    for (t = 0; t < a->n; t++)
        for (int b = 0; b < blocks; b++)
            quantize_activation_block(a->x + (size_t)t * a->stride + b * QKV_QBLOCK,
                                      a->q + (size_t)t * a->stride + b * QKV_QBLOCK,
                                      a->q_scale + (size_t)t * row_blocks + b, a->q_sum + (size_t)t * row_blocks + b);
    a->quantized = 1;
}

/* Row t of the float input, of its int8 copy, of its scales. */
static inline const float *act_row(const Activations *a, int t) { return a->x + (size_t)t * a->stride; }
static inline const int8_t *act_q(const Activations *a, int t) { return a->q + (size_t)t * a->stride; }
static inline const float *act_scale(const Activations *a, int t) {
    return a->q_scale + (size_t)t * (a->stride / QKV_QBLOCK);
}
static inline const int32_t *act_sum(const Activations *a, int t) {
    return a->q_sum + (size_t)t * (a->stride / QKV_QBLOCK);
}
static inline float *out_at(float *out, int stride, int t, int i) { return out + (size_t)t * stride + i; }

/* ------------------------------------------------------------------------ */
/* Portable kernels: plain C, one (row, position) at a time                  */

/* Sixteen independent partial sums let a compiler keep them in vector
 * registers; the same function for every position keeps the bits equal. */
static inline float dot_f32(const float *w, const float *x, int n) {
    float acc[16] = { 0 };
    int j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) acc[l] += w[j + l] * x[j + l];
    float sum = 0.0f;
    for (int l = 0; l < 16; l++) sum += acc[l];
    for (; j < n; j++) sum += w[j] * x[j];
    return sum;
}

static float dot_f16(const uint16_t *w, const float *x, int n) {
    float sum = 0.0f;
    for (int j = 0; j < n; j++) sum += half_to_float(w[j]) * x[j];
    return sum;
}

static void matmul_f32_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                int end) {
    for (int i = begin; i < end; i++)
        for (int t = 0; t < a->n; t++)
            *out_at(out, os, t, i) = dot_f32((const float *)w + (size_t)i * cols, act_row(a, t), cols);
}

static void matmul_f16_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                int end) {
    for (int i = begin; i < end; i++)
        for (int t = 0; t < a->n; t++)
            *out_at(out, os, t, i) = dot_f16((const uint16_t *)w + (size_t)i * cols, act_row(a, t), cols);
}

/* Row r of a panel times position t of a, the order every int8 kernel
 * keeps: per block, the integer dot product (exact), then
 *   sum = fma((float)dot, d_w * d_x, sum)
 * block after block. fmaf is one rounding, as the vector kernels' FMA. */
static float panel_row_dot(const unsigned char *panel, int r, int blocks, int q4, const Activations *a, int t) {
    int value_bytes = packed_value_bytes(q4);
    const unsigned char *scales = panel + (size_t)blocks * QKV_PANEL * value_bytes;
    float sum = 0.0f;
    for (int b = 0; b < blocks; b++) {
        const unsigned char *v = panel + (size_t)b * QKV_PANEL * value_bytes + r * 4;
        const int8_t *x = act_q(a, t) + b * QKV_QBLOCK;
        int32_t dot = 0;
        for (int j = 0; j < value_bytes; j++) {
            int byte = v[(j / 4) * 4 * QKV_PANEL + j % 4];
            if (q4) dot += ((byte & 0x0f) - 8) * x[j] + ((byte >> 4) - 8) * x[j + QKV_QBLOCK / 2];
            else dot += (byte - 128) * x[j];
        }
        uint16_t d;
        memcpy(&d, scales + (size_t)b * QKV_PANEL * 2 + r * 2, 2);
        sum = fmaf((float)dot, half_to_float(d) * act_scale(a, t)[b], sum);
    }
    return sum;
}

static void matmul_panels_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                   int end, int q4) {
    size_t panel_bytes = QKV_PANEL * weight_row_bytes(q4 ? WEIGHT_Q4_0 : WEIGHT_Q8_0, cols);
    for (int i = begin; i < end; i++) {
        const unsigned char *panel = (const unsigned char *)w + (size_t)(i / QKV_PANEL) * panel_bytes;
        for (int t = 0; t < a->n; t++)
            *out_at(out, os, t, i) = panel_row_dot(panel, i % QKV_PANEL, cols / QKV_QBLOCK, q4, a, t);
    }
}

static void matmul_q8_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                               int end) {
    matmul_panels_portable(out, os, a, w, cols, begin, end, 0);
}

static void matmul_q4_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                               int end) {
    matmul_panels_portable(out, os, a, w, cols, begin, end, 1);
}

/* ------------------------------------------------------------------------ */
/* x86-64 kernels: AVX2 and AVX-512, chosen at run time                      */

/* Tiles: R weight rows at a time (each row's bytes stream in parallel,
 * which is what keeps the memory system busy in a decode step), times up to
 * P positions (each weight vector loaded once for all of them: the prompt's
 * matrix multiply). One accumulator per (row, position); four rows'
 * accumulators are summed across lanes together at the end. TILE_ROWS is
 * the AVX2 kernels' R; the AVX-512 ones choose theirs per shape. */
#define TILE_ROWS 4
/* Software prefetch: while a tile streams its rows, the same bytes of the
 * rows QKV_PF further on are requested, so the memory system always
 * has several rows in flight (measured: 2.3x on Q8_0 decode of a 44 MB
 * model, where the hardware prefetchers alone left the core waiting). A
 * prefetch never faults, so past the matrix's end it is harmless. */
#ifndef QKV_PF
#define QKV_PF 8
#endif
#define PREFETCH(row, row_bytes, offset) \
    _mm_prefetch((const char *)(row) + (size_t)QKV_PF * (row_bytes) + (offset), _MM_HINT_T0)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(QKV_PORTABLE)
#define QKV_HAVE_X86_KERNELS 1
#include <cpuid.h>
#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))
#define TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TARGET_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define TARGET_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

/* The R rows of a tile: past the matrix's end, repeat the first row
 * (computed and thrown away, so the loops have no special case). */
INLINE void tile_rows(const unsigned char **rows, int R, const void *w, size_t row_bytes, int i, int end) {
    for (int r = 0; r < R; r++)
        rows[r] = (const unsigned char *)w + (size_t)(i + r < end ? i + r : i) * row_bytes;
}

/* Rows i..i+3 of position t's output, those before end. */
INLINE void store_tile(float *out, int os, int t, int i, int end, __m128 sums) {
    float s[4];
    _mm_storeu_ps(s, sums);
    for (int r = 0; r < 4 && i + r < end; r++) *out_at(out, os, t, i + r) = s[r];
}

/* ---- AVX2 (8 floats a vector) ---- */

/* lanes of a, b, c, d summed: {sum a, sum b, sum c, sum d} */
TARGET_AVX2 INLINE __m128 reduce4_256(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* Eight weights as floats; the last, partial vector of a row is read
 * through a zero-padded copy, so the sum is the same as if it were longer. */
TARGET_AVX2 INLINE __m256 load8_w(const unsigned char *row, int j, int n, int half) {
    if (j + 8 <= n) {
        if (half) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * (size_t)j)));
        return _mm256_loadu_ps((const float *)row + j);
    }
    uint16_t h[8] = { 0 };
    float f[8] = { 0 };
    if (half) {
        memcpy(h, row + 2 * (size_t)j, (size_t)(n - j) * 2);
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
    }
    memcpy(f, (const float *)row + j, (size_t)(n - j) * 4);
    return _mm256_loadu_ps(f);
}

TARGET_AVX2 INLINE __m256 load8_x(const float *x, int j, int n) {
    if (j + 8 <= n) return _mm256_loadu_ps(x + j);
    float f[8] = { 0 };
    memcpy(f, x + j, (size_t)(n - j) * 4);
    return _mm256_loadu_ps(f);
}

/* W[i..i+3] . x[t..t+P-1] for float32 or float16 rows */
TARGET_AVX2 INLINE void tile_float_avx2(float *out, int os, const Activations *a, const void *w, size_t row_bytes,
                                        int cols, int i, int end, int t, int P, int half) {
    const unsigned char *rows[TILE_ROWS];
    tile_rows(rows, TILE_ROWS, w, row_bytes, i, end);
    __m256 acc[TILE_ROWS][2];
    for (int r = 0; r < TILE_ROWS; r++)
        for (int p = 0; p < P; p++) acc[r][p] = _mm256_setzero_ps();
    for (int j = 0; j < cols; j += 8) {
        __m256 x[2];
        for (int p = 0; p < P; p++) x[p] = load8_x(act_row(a, t + p), j, cols);
        for (int r = 0; r < TILE_ROWS; r++) {
            if (j % 16 == 0) PREFETCH(rows[r], row_bytes, (size_t)j * (half ? 2 : 4));
            __m256 wv = load8_w(rows[r], j, cols, half);
            for (int p = 0; p < P; p++) acc[r][p] = _mm256_fmadd_ps(wv, x[p], acc[r][p]);
        }
    }
    for (int p = 0; p < P; p++)
        store_tile(out, os, t + p, i, end, reduce4_256(acc[0][p], acc[1][p], acc[2][p], acc[3][p]));
}

/* An AVX2 kernel: four rows a tile, positions two at a time then one. */
#define AVX2_MATMUL(NAME, TILE, TYPE, FLAG)                                                                    \
    TARGET_AVX2 static void NAME(float *out, int os, const Activations *a, const void *w, int cols, int begin,  \
                                 int end) {                                                                    \
        size_t row_bytes = weight_row_bytes(TYPE, cols);                                                       \
        for (int i = begin; i < end; i += TILE_ROWS) {                                                         \
            int t = 0;                                                                                         \
            for (; t + 2 <= a->n; t += 2) TILE(out, os, a, w, row_bytes, cols, i, end, t, 2, FLAG);             \
            for (; t < a->n; t++) TILE(out, os, a, w, row_bytes, cols, i, end, t, 1, FLAG);                     \
        }                                                                                                      \
    }

AVX2_MATMUL(matmul_f32_avx2, tile_float_avx2, WEIGHT_F32, 0)
AVX2_MATMUL(matmul_f16_avx2, tile_float_avx2, WEIGHT_F16, 1)

/* Four int8 activations x[j..j+3] as one 32-bit word (to broadcast). */
INLINE int32_t X4(const int8_t *x, int j) {
    int32_t word;
    memcpy(&word, x + j, 4);
    return word;
}

/* One block of rows 0-7 (half 0) or 8-15 (half 1) of a panel against P
 * positions: each lane's exact integer dot product. maddubs multiplies
 * unsigned by signed bytes and adds pairs into 16 bits. Q8_0: q + 128 back
 * to q, then |q| times x with q's sign (127 * 127 * 2 fits). Q4_0: the
 * nibbles (0..15) times x, kept in 16 bits over the whole block (eight
 * pairs of at most 15 * 127: 30480 fits), then minus 8 * sum x. */
TARGET_AVX2 INLINE void block_dots_avx2(__m256i dots[2], const unsigned char *values, int half,
                                        const Activations *a, int t, int b, int P, int q4) {
    const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0f);
    const int8_t *x[2];
    for (int p = 0; p < P; p++) x[p] = act_q(a, t + p) + b * QKV_QBLOCK;
    if (!q4) {
        for (int p = 0; p < P; p++) dots[p] = _mm256_setzero_si256();
        for (int c = 0; c < 8; c++) {
            __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(values + c * 64 + half * 32)),
                                         _mm256_set1_epi8((char)0x80));
            __m256i magnitude = _mm256_sign_epi8(w, w);
            for (int p = 0; p < P; p++) {
                __m256i signed_x = _mm256_sign_epi8(_mm256_set1_epi32(X4(x[p], 4 * c)), w);
                dots[p] = _mm256_add_epi32(dots[p], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, signed_x), ones));
            }
        }
        return;
    }
    __m256i pairs[2];
    for (int p = 0; p < P; p++) pairs[p] = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        __m256i raw = _mm256_loadu_si256((const __m256i *)(values + c * 64 + half * 32));
        __m256i lo = _mm256_and_si256(raw, low4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
        for (int p = 0; p < P; p++) {
            __m256i both = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(X4(x[p], 4 * c))),
                                            _mm256_maddubs_epi16(hi, _mm256_set1_epi32(X4(x[p], 16 + 4 * c))));
            pairs[p] = _mm256_add_epi16(pairs[p], both);
        }
    }
    for (int p = 0; p < P; p++)
        dots[p] = _mm256_sub_epi32(_mm256_madd_epi16(pairs[p], ones), _mm256_set1_epi32(8 * act_sum(a, t + p)[b]));
}

/* Lanes of v for rows row0..row0+count-1 into position t's output, those
 * within [begin, end). */
TARGET_AVX2 INLINE void store_rows_avx2(float *out, int os, int t, int row0, int begin, int end, __m256 v) {
    float lane[8];
    _mm256_storeu_ps(lane, v);
    for (int l = 0; l < 8; l++)
        if (row0 + l >= begin && row0 + l < end) *out_at(out, os, t, row0 + l) = lane[l];
}

/* A panel (rows row0..row0+15) times positions t..t+P-1, eight rows (one
 * half) at a time: per block, the integer dots, then the scales. */
TARGET_AVX2 INLINE void panel_avx2(float *out, int os, const Activations *a, const unsigned char *panel, int blocks,
                                   int row0, int begin, int end, int t, int P, int q4) {
    int value_bytes = packed_value_bytes(q4);
    const unsigned char *scales = panel + (size_t)blocks * QKV_PANEL * value_bytes;
    for (int half = 0; half < 2; half++) {
        __m256 acc[2];
        for (int p = 0; p < P; p++) acc[p] = _mm256_setzero_ps();
        for (int b = 0; b < blocks; b++) {
            __m256i dots[2];
            block_dots_avx2(dots, panel + (size_t)b * QKV_PANEL * value_bytes, half, a, t, b, P, q4);
            __m256 ws = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + (size_t)b * QKV_PANEL * 2 + half * 16)));
            for (int p = 0; p < P; p++)
                acc[p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[p]),
                                         _mm256_mul_ps(ws, _mm256_set1_ps(act_scale(a, t + p)[b])), acc[p]);
        }
        for (int p = 0; p < P; p++) store_rows_avx2(out, os, t + p, row0 + half * 8, begin, end, acc[p]);
    }
}

/* A kernel over panels: every panel that holds a row of [begin, end), its
 * positions PMAX at a time, then one at a time. */
#define PANEL_MATMUL(NAME, TARGET, TILE, Q4, PMAX)                                                             \
    TARGET static void NAME(float *out, int os, const Activations *a, const void *w, int cols, int begin,     \
                            int end) {                                                                         \
        int blocks = cols / QKV_QBLOCK;                                                                        \
        size_t panel_bytes = QKV_PANEL * weight_row_bytes(Q4 ? WEIGHT_Q4_0 : WEIGHT_Q8_0, cols);                \
        for (int row0 = begin - begin % QKV_PANEL; row0 < end; row0 += QKV_PANEL) {                            \
            const unsigned char *panel = (const unsigned char *)w + (size_t)(row0 / QKV_PANEL) * panel_bytes;  \
            int t = 0;                                                                                         \
            for (; t + PMAX <= a->n; t += PMAX) TILE(out, os, a, panel, blocks, row0, begin, end, t, PMAX, Q4);  \
            for (; t < a->n; t++) TILE(out, os, a, panel, blocks, row0, begin, end, t, 1, Q4);                  \
        }                                                                                                      \
    }

PANEL_MATMUL(matmul_q8_avx2, TARGET_AVX2, panel_avx2, 0, 2)
PANEL_MATMUL(matmul_q4_avx2, TARGET_AVX2, panel_avx2, 1, 2)

/* ---- AVX-512 (16 floats a vector) ---- */

TARGET_AVX512 INLINE __m128 reduce4_512(__m512 a, __m512 b, __m512 c, __m512 d) {
#define HALVES(v) _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1))
    return reduce4_256(HALVES(a), HALVES(b), HALVES(c), HALVES(d));
#undef HALVES
}

/* Sixteen weights as floats; a row's last, partial vector by a masked load
 * (the lanes past its end are zero). */
TARGET_AVX512 INLINE __m512 load16_w(const unsigned char *row, int j, __mmask16 m, int half) {
    if (half) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * (size_t)j));
    return _mm512_maskz_loadu_ps(m, (const float *)row + j);
}

TARGET_AVX512 INLINE __mmask16 tail_mask(int j, int n) {
    return n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
}

/* One step of a float tile: 16 columns from j (masked: the row's last,
 * partial vector) of R rows times P positions. */
TARGET_AVX512 INLINE void step_float_512(__m512 acc[4][6], const unsigned char **rows, const Activations *a, int t,
                                         int R, int P, int j, __mmask16 m, size_t row_bytes, int half, int fetch) {
    __m512 x[6];
    for (int p = 0; p < P; p++) x[p] = _mm512_maskz_loadu_ps(m, act_row(a, t + p) + j);
    for (int r = 0; r < R; r++) {
        if (fetch) PREFETCH(rows[r], row_bytes, (size_t)j * (half ? 2 : 4));
        __m512 wv = load16_w(rows[r], j, m, half);
        for (int p = 0; p < P; p++) acc[r][p] = _mm512_fmadd_ps(wv, x[p], acc[r][p]);
    }
}

/* Rows i..i+R-1 times positions t..t+P-1: 8 x 3 for a prompt (24
 * accumulators, each weight vector used three times, each input vector
 * eight), 4 x 1 for a decode step. fetch: prefetch the rows ahead (the
 * first position tile of a row tile reads them from memory). */
TARGET_AVX512 INLINE void tile_float_512(float *out, int os, const Activations *a, const void *w, size_t row_bytes,
                                         int cols, int i, int end, int t, int R, int P, int half, int fetch) {
    const unsigned char *rows[8];
    tile_rows(rows, R, w, row_bytes, i, end);
    __m512 acc[4][6];
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) acc[r][p] = _mm512_setzero_ps();
    int j = 0;
    for (; j + 16 <= cols; j += 16) step_float_512(acc, rows, a, t, R, P, j, 0xffff, row_bytes, half, fetch);
    if (j < cols) step_float_512(acc, rows, a, t, R, P, j, tail_mask(j, cols), row_bytes, half, fetch);
    for (int r = 0; r < R; r += 4)
        for (int p = 0; p < P; p++)
            store_tile(out, os, t + p, i + r, end, reduce4_512(acc[r][p], acc[r + 1][p], acc[r + 2][p], acc[r + 3][p]));
}

/* Every (row, position) is one accumulator summed over the columns in the
 * same order, and reduced by the same tree, whatever its tile: the bits of
 * a prompt are those of its tokens one at a time. */
TARGET_AVX512 INLINE void matmul_float_512(float *out, int os, const Activations *a, const void *w, int cols,
                                           int begin, int end, int half) {
    size_t row_bytes = (size_t)cols * (half ? 2 : 4);
    if (a->n == 1) {
        for (int i = begin; i < end; i += 4) tile_float_512(out, os, a, w, row_bytes, cols, i, end, 0, 4, 1, half, 1);
        return;
    }
    for (int i = begin; i < end; i += 4) {
        int t = 0;
        for (; t + 6 <= a->n; t += 6) tile_float_512(out, os, a, w, row_bytes, cols, i, end, t, 4, 6, half, t == 0);
        for (; t < a->n; t++) tile_float_512(out, os, a, w, row_bytes, cols, i, end, t, 4, 1, half, 0);
    }
}

TARGET_AVX512 static void matmul_f32_avx512(float *out, int os, const Activations *a, const void *w, int cols,
                                            int begin, int end) {
    matmul_float_512(out, os, a, w, cols, begin, end, 0);
}

TARGET_AVX512 static void matmul_f16_avx512(float *out, int os, const Activations *a, const void *w, int cols,
                                            int begin, int end) {
    matmul_float_512(out, os, a, w, cols, begin, end, 1);
}

/* Int8 and 4-bit weights: a 512-bit vector is one four-byte chunk of a
 * panel's 16 rows, so each int32 lane adds up one row's block.
 *
 * AVX-512BW: as AVX2's block_dots_avx2, sixteen rows at once. */
TARGET_AVX512 INLINE void block_dots_bw(__m512i dots[8], const unsigned char *values, const Activations *a, int t,
                                        int b, int P, int q4) {
    const __m512i ones = _mm512_set1_epi16(1), low4 = _mm512_set1_epi8(0x0f);
    const int8_t *x[8];
    for (int p = 0; p < P; p++) x[p] = act_q(a, t + p) + b * QKV_QBLOCK;
    if (!q4) {
        for (int p = 0; p < P; p++) dots[p] = _mm512_setzero_si512();
        for (int c = 0; c < 8; c++) {
            __m512i w = _mm512_xor_si512(_mm512_loadu_si512(values + c * 64), _mm512_set1_epi8((char)0x80));
            __m512i magnitude = _mm512_abs_epi8(w);
            __mmask64 negative = _mm512_movepi8_mask(w);
            for (int p = 0; p < P; p++) {
                __m512i xv = _mm512_set1_epi32(X4(x[p], 4 * c));
                __m512i signed_x = _mm512_mask_sub_epi8(xv, negative, _mm512_setzero_si512(), xv);
                dots[p] = _mm512_add_epi32(dots[p], _mm512_madd_epi16(_mm512_maddubs_epi16(magnitude, signed_x), ones));
            }
        }
        return;
    }
    __m512i pairs[8];
    for (int p = 0; p < P; p++) pairs[p] = _mm512_setzero_si512();
    for (int c = 0; c < 4; c++) {
        __m512i raw = _mm512_loadu_si512(values + c * 64);
        __m512i lo = _mm512_and_si512(raw, low4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
        for (int p = 0; p < P; p++) {
            __m512i both = _mm512_add_epi16(_mm512_maddubs_epi16(lo, _mm512_set1_epi32(X4(x[p], 4 * c))),
                                            _mm512_maddubs_epi16(hi, _mm512_set1_epi32(X4(x[p], 16 + 4 * c))));
            pairs[p] = _mm512_add_epi16(pairs[p], both);
        }
    }
    for (int p = 0; p < P; p++)
        dots[p] = _mm512_sub_epi32(_mm512_madd_epi16(pairs[p], ones), _mm512_set1_epi32(8 * act_sum(a, t + p)[b]));
}

/* AVX-512 VNNI: vpdpbusd multiplies unsigned by signed bytes and adds four
 * products into a 32-bit lane, so the stored q + 128 (Q8_0) and the nibbles
 * (Q4_0) go in as they are, each lane starting from the offset's share:
 * -128 sum x, or -8 sum x. */
TARGET_VNNI INLINE void block_dots_vnni(__m512i dots[8], const unsigned char *values, const Activations *a, int t,
                                        int b, int P, int q4) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const int8_t *x[8];
    for (int p = 0; p < P; p++) {
        x[p] = act_q(a, t + p) + b * QKV_QBLOCK;
        dots[p] = _mm512_set1_epi32(-(q4 ? 8 : 128) * act_sum(a, t + p)[b]);
    }
    if (!q4) {
        for (int c = 0; c < 8; c++) {
            __m512i w = _mm512_loadu_si512(values + c * 64);
            for (int p = 0; p < P; p++) dots[p] = _mm512_dpbusd_epi32(dots[p], w, _mm512_set1_epi32(X4(x[p], 4 * c)));
        }
        return;
    }
    for (int c = 0; c < 4; c++) {
        __m512i raw = _mm512_loadu_si512(values + c * 64);
        __m512i lo = _mm512_and_si512(raw, low4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
        for (int p = 0; p < P; p++) {
            dots[p] = _mm512_dpbusd_epi32(dots[p], lo, _mm512_set1_epi32(X4(x[p], 4 * c)));
            dots[p] = _mm512_dpbusd_epi32(dots[p], hi, _mm512_set1_epi32(X4(x[p], 16 + 4 * c)));
        }
    }
}

/* The lanes of rows row0..row0+15 that lie within [begin, end). */
TARGET_AVX512 INLINE __mmask16 panel_rows_mask(int row0, int begin, int end) {
    int first = begin > row0 ? begin - row0 : 0, last = end - row0 < QKV_PANEL ? end - row0 : QKV_PANEL;
    return last <= first ? 0 : (__mmask16)(((1u << last) - 1) & ~((1u << first) - 1));
}

/* A panel (rows row0..row0+15) times positions t..t+P-1: per block, the
 * integer dots, then one FMA per position with the rows' scales times the
 * position's. No sums across lanes: lane l is row row0 + l. */
#define PANEL_TILE_512(NAME, TARGET, DOTS)                                                                     \
    TARGET INLINE void NAME(float *out, int os, const Activations *a, const unsigned char *panel, int blocks,   \
                            int row0, int begin, int end, int t, int P, int q4) {                               \
        int value_bytes = packed_value_bytes(q4);                                                              \
        const unsigned char *scales = panel + (size_t)blocks * QKV_PANEL * value_bytes;                        \
        __m512 acc[8];                                                                                         \
        for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();                                              \
        for (int b = 0; b < blocks; b++) {                                                                     \
            __m512i dots[8];                                                                                   \
            DOTS(dots, panel + (size_t)b * QKV_PANEL * value_bytes, a, t, b, P, q4);                           \
            __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(scales + (size_t)b * QKV_PANEL * 2))); \
            for (int p = 0; p < P; p++)                                                                        \
                acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[p]),                                         \
                                         _mm512_mul_ps(ws, _mm512_set1_ps(act_scale(a, t + p)[b])), acc[p]);  \
        }                                                                                                      \
        __mmask16 rows = panel_rows_mask(row0, begin, end);                                                    \
        for (int p = 0; p < P; p++) _mm512_mask_storeu_ps(out_at(out, os, t + p, row0), rows, acc[p]);        \
    }

PANEL_TILE_512(panel_bw, TARGET_AVX512, block_dots_bw)
PANEL_TILE_512(panel_vnni, TARGET_VNNI, block_dots_vnni)

PANEL_MATMUL(matmul_q8_avx512, TARGET_AVX512, panel_bw, 0, 4)
PANEL_MATMUL(matmul_q4_avx512, TARGET_AVX512, panel_bw, 1, 4)
/* A prompt with VNNI: two panels (32 rows) times six positions a tile,
 * each broadcast of four activations serving both panels (the broadcasts,
 * not the weights, are most of a tile's loads). Each (row, position) has
 * panel_vnni's arithmetic in panel_vnni's order. */
TARGET_VNNI INLINE void panel_pair_vnni(float *out, int os, const Activations *a, const unsigned char *panel,
                                        size_t panel_bytes, int blocks, int row0, int begin, int end, int t, int P,
                                        int q4) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    int value_bytes = packed_value_bytes(q4);
    const unsigned char *scales[2] = { panel + (size_t)blocks * QKV_PANEL * value_bytes,
                                       panel + panel_bytes + (size_t)blocks * QKV_PANEL * value_bytes };
    __m512 acc[2][6];
    for (int p = 0; p < P; p++) acc[0][p] = acc[1][p] = _mm512_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        const unsigned char *values = panel + (size_t)b * QKV_PANEL * value_bytes;
        const int8_t *x[6];
        __m512i dots[2][6];
        for (int p = 0; p < P; p++) {
            x[p] = act_q(a, t + p) + b * QKV_QBLOCK;
            dots[0][p] = dots[1][p] = _mm512_set1_epi32(-(q4 ? 8 : 128) * act_sum(a, t + p)[b]);
        }
        for (int c = 0; c < value_bytes / 4; c++) {
            __m512i w0 = _mm512_loadu_si512(values + c * 64), w1 = _mm512_loadu_si512(values + panel_bytes + c * 64);
            if (!q4) {
                for (int p = 0; p < P; p++) {
                    __m512i bx = _mm512_set1_epi32(X4(x[p], 4 * c));
                    dots[0][p] = _mm512_dpbusd_epi32(dots[0][p], w0, bx);
                    dots[1][p] = _mm512_dpbusd_epi32(dots[1][p], w1, bx);
                }
                continue;
            }
            __m512i lo0 = _mm512_and_si512(w0, low4), hi0 = _mm512_and_si512(_mm512_srli_epi16(w0, 4), low4);
            __m512i lo1 = _mm512_and_si512(w1, low4), hi1 = _mm512_and_si512(_mm512_srli_epi16(w1, 4), low4);
            for (int p = 0; p < P; p++) {
                __m512i bx = _mm512_set1_epi32(X4(x[p], 4 * c)), bx16 = _mm512_set1_epi32(X4(x[p], 16 + 4 * c));
                dots[0][p] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(dots[0][p], lo0, bx), hi0, bx16);
                dots[1][p] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(dots[1][p], lo1, bx), hi1, bx16);
            }
        }
        for (int g = 0; g < 2; g++) {
            __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(scales[g] + (size_t)b * QKV_PANEL * 2)));
            for (int p = 0; p < P; p++)
                acc[g][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[g][p]),
                                            _mm512_mul_ps(ws, _mm512_set1_ps(act_scale(a, t + p)[b])), acc[g][p]);
        }
    }
    for (int g = 0; g < 2; g++) {
        __mmask16 rows = panel_rows_mask(row0 + g * QKV_PANEL, begin, end);
        for (int p = 0; p < P; p++) _mm512_mask_storeu_ps(out_at(out, os, t + p, row0 + g * QKV_PANEL), rows, acc[g][p]);
    }
}

/* VNNI: a decode step (or a last lone panel) one panel at a time, a
 * prompt two panels at a time. */
#define VNNI_MATMUL(NAME, Q4)                                                                                  \
    TARGET_VNNI static void NAME(float *out, int os, const Activations *a, const void *w, int cols, int begin, \
                                 int end) {                                                                    \
        int blocks = cols / QKV_QBLOCK;                                                                        \
        size_t panel_bytes = QKV_PANEL * weight_row_bytes(Q4 ? WEIGHT_Q4_0 : WEIGHT_Q8_0, cols);                \
        int row0 = begin - begin % QKV_PANEL;                                                                  \
        for (; a->n > 1 && row0 + QKV_PANEL < end; row0 += 2 * QKV_PANEL) {                                    \
            const unsigned char *panel = (const unsigned char *)w + (size_t)(row0 / QKV_PANEL) * panel_bytes;  \
            int t = 0;                                                                                         \
            for (; t + 6 <= a->n; t += 6) panel_pair_vnni(out, os, a, panel, panel_bytes, blocks, row0, begin, end, t, 6, Q4); \
            for (; t < a->n; t++) panel_pair_vnni(out, os, a, panel, panel_bytes, blocks, row0, begin, end, t, 1, Q4); \
        }                                                                                                      \
        for (; row0 < end; row0 += QKV_PANEL) {                                                                \
            const unsigned char *panel = (const unsigned char *)w + (size_t)(row0 / QKV_PANEL) * panel_bytes;  \
            int t = 0;                                                                                         \
            for (; t + 8 <= a->n; t += 8) panel_vnni(out, os, a, panel, blocks, row0, begin, end, t, 8, Q4);   \
            for (; t < a->n; t++) panel_vnni(out, os, a, panel, blocks, row0, begin, end, t, 1, Q4);           \
        }                                                                                                      \
    }

VNNI_MATMUL(matmul_q8_vnni, 0)
VNNI_MATMUL(matmul_q4_vnni, 1)

/* CPUID and XGETBV: the CPU has the instructions and the OS saves their
 * registers. */
static Isa isa_of_cpu(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return ISA_PORTABLE;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!(fma && osxsave && avx && f16c)) return ISA_PORTABLE;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 0x6) != 0x6) return ISA_PORTABLE;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((b >> 5) & 1)) return ISA_PORTABLE;
    int avx512 = ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1) &&
                 (xcr0_lo & 0xe6) == 0xe6; /* F, DQ, BW, VL; opmask and upper ZMM state */
    if (!avx512) return ISA_AVX2;
    return ((c >> 11) & 1) ? ISA_AVX512_VNNI : ISA_AVX512;
}
#else
static Isa isa_of_cpu(void) { return ISA_PORTABLE; }
#endif

/* ------------------------------------------------------------------------ */
/* The table                                                                 */

static const KernelEntry KERNELS[] = {
    { WEIGHT_F32, ISA_PORTABLE, "f32 portable", matmul_f32_portable },
    { WEIGHT_F16, ISA_PORTABLE, "f16 portable", matmul_f16_portable },
    { WEIGHT_Q8_0, ISA_PORTABLE, "q8_0 portable", matmul_q8_portable },
    { WEIGHT_Q4_0, ISA_PORTABLE, "q4_0 portable", matmul_q4_portable },
#ifdef QKV_HAVE_X86_KERNELS
    { WEIGHT_F32, ISA_AVX2, "f32 avx2", matmul_f32_avx2 },
    { WEIGHT_F16, ISA_AVX2, "f16 avx2+f16c", matmul_f16_avx2 },
    { WEIGHT_Q8_0, ISA_AVX2, "q8_0 avx2", matmul_q8_avx2 },
    { WEIGHT_Q4_0, ISA_AVX2, "q4_0 avx2", matmul_q4_avx2 },
    { WEIGHT_F32, ISA_AVX512, "f32 avx512", matmul_f32_avx512 },
    { WEIGHT_F16, ISA_AVX512, "f16 avx512", matmul_f16_avx512 },
    { WEIGHT_Q8_0, ISA_AVX512, "q8_0 avx512bw", matmul_q8_avx512 },
    { WEIGHT_Q4_0, ISA_AVX512, "q4_0 avx512bw", matmul_q4_avx512 },
    { WEIGHT_Q8_0, ISA_AVX512_VNNI, "q8_0 avx512vnni", matmul_q8_vnni },
    { WEIGHT_Q4_0, ISA_AVX512_VNNI, "q4_0 avx512vnni", matmul_q4_vnni },
#endif
};

const char *isa_name(Isa isa) {
    static const char *names[ISA_COUNT] = { "portable", "avx2", "avx512", "avx512vnni" };
    return isa >= 0 && isa < ISA_COUNT ? names[isa] : "?";
}

Isa isa_available(void) {
    Isa isa = isa_of_cpu();
    const char *cap = getenv("QKV_ISA");
    if (cap)
        for (int i = 0; i < ISA_COUNT; i++)
            if (strcmp(cap, isa_name((Isa)i)) == 0 && (Isa)i < isa) isa = (Isa)i;
    return isa;
}

int kernel_count(void) { return (int)(sizeof KERNELS / sizeof KERNELS[0]); }

const KernelEntry *kernel_at(int i) { return i >= 0 && i < kernel_count() ? &KERNELS[i] : NULL; }

const KernelEntry *kernel_best(WeightType type) { return kernel_for(type, isa_available()); }

const KernelEntry *kernel_for(WeightType type, Isa isa) {
    const KernelEntry *best = NULL;
    for (int i = 0; i < kernel_count(); i++)
        if (KERNELS[i].type == type && KERNELS[i].isa <= isa && (!best || KERNELS[i].isa > best->isa))
            best = &KERNELS[i];
    return best;
}

#endif /* QKV_KERNELS_IMPLEMENTED */
#endif /* QKV_KERNELS_IMPLEMENTATION */
