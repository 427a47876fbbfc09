/* kernels.h — matrix products, one section per weight type, one table of
 * kernels per instruction set.
 *
 * stb-style: the interface everywhere, the implementation where
 * QKV_KERNELS_IMPLEMENTATION is defined (model.h's implementation does).
 *
 * Almost all of a decode step is y = W x for a weight matrix W that does not
 * fit in the core's caches: the time is the time to stream W's bytes from
 * memory. So the kernels (1) read every matrix as panels of 16 rows
 * regrouped at load (weight_pack, below), one row to a vector lane, so that
 * each row's sum builds up in its own lane with no sum across lanes, and
 * several panels stream side by side; (2) read fewer bytes per weight
 * (float16, int8, 4-bit); (3) for a prompt, use each panel's column, while
 * it is in a register, for a tile of positions (a register-blocked matrix
 * multiply).
 *
 * Every kernel computes each (row, position) sum with the same arithmetic
 * whatever the tile it is part of, so a prompt pushed through as a matrix
 * gives the same bits as one token at a time (tested).
 *
 * Float32 and float16 (kernels_float.c): column after column, one FMA per
 * weight into the row's lane.
 * Quantized files hold ggml's layouts: Q8_0 blocks of 32 weights (a float16
 * scale, then 32 int8: w = q * d) and Q4_0 blocks of 32 (a float16 scale,
 * then 16 bytes; low nibbles are elements 0-15, high nibbles 16-31: w = (q -
 * 8) * d). Their kernels (kernels_int8.h) take the activations quantized to
 * int8 per block of 32 (a float32 scale and the block's integer sum each),
 * made once per input and shared by the matrices that read it, and
 * multiply in integers: a block's integer dot product builds up in its
 * row's lane. Every instruction set adds each (row, position)'s blocks in
 * the same order with the same roundings, so int8 and 4-bit models give the
 * same bits on every CPU. */
#ifndef QKV_KERNELS_H
#define QKV_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "team.h"
#include "alloc.h"
#include "cpu.h"

typedef enum { WEIGHT_F32 = 0, WEIGHT_F16 = 1, WEIGHT_Q8_0 = 2, WEIGHT_Q4_0 = 3, WEIGHT_TYPE_COUNT } WeightType;

/* v rounded up to a multiple of alignment (a buffer's start, a panel's
 * size, a GGUF file's tensor offsets) */
static inline size_t align_up(size_t v, size_t alignment) { return (v + alignment - 1) / alignment * alignment; }

/* Elements per quantization block (Q8_0, Q4_0 and the int8 activations). */
#define QKV_QBLOCK 32

/* Work below this many multiply-adds is not worth waking other threads for. */
#ifndef QKV_PARALLEL_MIN_WORK
#define QKV_PARALLEL_MIN_WORK (1 << 15)
#endif

/* Bytes ahead of the KV cache's rows whose lines the kernels request
 * (kernels_rows.h, kv_cache.h, kv_int8.h), and the bench's in-order read
 * with them (roofline.c). A decode step reads a long context's keys from
 * memory, a run of up to QKV_DECODE_RUN blocks of 256 at a time
 * (attention.h), then the run's values. 8 rows ahead
 * (768 bytes of float16 keys of 48) left the core waiting: 2 KiB took the
 * 15M shape's float16 attention at 16,384 positions from 72-78% to 82-85%
 * of the bench's read probe (1 thread, Xeon, three runs interleaved);
 * float32 keys (8 rows were 1.5 KiB) level, 4 and 6 KiB slower. On AMD
 * EPYCs it depends on the host (kv_fetch_ahead; the same attention, 1
 * thread): without the requests, on a Zen 5 (fastest of 30 steps, 3 rounds
 * interleaved) float32 8.4-8.9 -> 7.7-8.2 ms, float16 4.0-4.3 -> 3.6-3.7,
 * int8 2.6-3.1 -> 2.3-2.7; on a Zen 4 (family 25) 8.7-11.4 -> 7.9-8.1,
 * 4.2 -> 3.6-3.7, 2.6-2.8 -> 2.3-2.5, requests into L2 no better for
 * float16 and int8 and faster for float32 rows with AVX-512; on a second
 * Zen 5 host (family 26 model 2, the bench's running median, 2 rounds)
 * float32 8.6-10.8 -> 14.2-14.4 ms, float16 4.3-6.4 -> 9.4-10.6, int8
 * 2.7 -> 2.5; paired with plain reads of their bytes there, int8 rows
 * streamed at 67-79% of the read with the requests against 60-67%
 * without (docs/speed-amd.md). */
#ifndef QKV_KV_AHEAD
#define QKV_KV_AHEAD 2048
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

/* Matrices as their kernels read them: panels of QKV_PANEL rows (the last
 * padded with zero rows), so that a vector lane is one row.
 * Float32 and float16: panel g holds column j of its rows as QKV_PANEL
 * values in a row (row order), column after column.
 * Q8_0 and Q4_0: in panel g, block b, the values of its rows come four
 * bytes at a time: chunk c (64 bytes) holds bytes 4c..4c+3 of the block's
 * values of rows 0..15, in row order; after the values of every block, the
 * rows' float16 scales, 16 a block. Q8_0 values are kept as q + 128
 * (unsigned bytes, as VNNI's vpdpbusd wants them); Q4_0 bytes as ggml has
 * them (byte j: element j low, element j + 16 high).
 * A panel takes QKV_PANEL rows' bytes as stored; weight_pack returns 0 for
 * a number that is not a type. */
#define QKV_PANEL 16
size_t weight_packed_bytes(WeightType type, int rows, int cols);
int weight_pack(WeightType type, const void *data, int rows, int cols, void *panels);
/* Row i of packed panels as float32: the same values weight_row_to_float
 * gives for the row as stored (an embedding looked up in the panels of
 * the classifier it is tied to). */
void weight_packed_row_to_float(WeightType type, const void *panels, int cols, int i, float *out);

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
    Team *team;       /* the threads that quantize a prompt's rows (NULL: OpenMP's) */
} Activations;

/* out[t * out_stride + i] = W[i, :] . x[t, :] for rows begin <= i < end and
 * every position t of a; w is the matrix's panels (weight_pack), cols wide
 * (rows_kernel_for's kernels take rows as stored instead). */
typedef void (*MatmulKernel)(float *out, int out_stride, const Activations *a, const void *w, int cols,
                             int begin, int end);


/* The elementwise passes with isa's vectors (elementwise.h): SwiGLU's
 * gate[i] <- silu(gate[i]) * up[i]; over logits, the index of the first
 * NaN or infinity (-1: none) and of the first largest value (x has no NaN). */
void silu_mul(Isa isa, float *gate, const float *up, int n);
int nonfinite_first(Isa isa, const float *x, int n);
int max_first(Isa isa, const float *x, int n);

/* Fills a->q, a->q_scale and a->q_sum from a->x (once), with isa's
 * vectors (the kernel's: a decode step calls this several times a layer,
 * so it does not look the CPU up again). */
void activations_quantize(Activations *a, Isa isa);


/* How a decode step's kernel requests its lines ahead of its reads: not
 * at all (the hardware prefetchers alone), into L1 (prefetcht0), or into
 * L2 only (prefetcht1). Which pays differs between CPU makers and
 * kernels (KERNELS, below). */
typedef enum { FETCH_NONE = 0, FETCH_L1 = 1, FETCH_L2 = 2 } Fetch;

typedef struct {
    WeightType type;
    Isa isa;        /* what the CPU needs for it */
    const char *name;
    MatmulKernel run;
    Vendor vendor;   /* VENDOR_ANY, or the maker whose CPUs it is chosen on */
    int family;      /* 0, or the only CPU family (cpu_family) of that maker it is chosen on */
    int from_memory; /* 1: chosen only for weights that come from memory (weights_from_memory) */
    Fetch fetch;     /* how its decode step requests the weights' lines (the bench's in-order read does the same) */
} KernelEntry;

int kernel_count(void);
const KernelEntry *kernel_at(int i);
/* The fastest kernel for a type within an instruction set, on this CPU's
 * maker and family (cpu_vendor, cpu_family), for a model whose weights come from memory
 * (from_memory) or stay in the caches; kernel_best asks isa_available()
 * for cached weights (the CPU is probed once a process; QKV_ISA,
 * QKV_VENDOR and QKV_FAMILY read each time). */
const KernelEntry *kernel_for(WeightType type, Isa isa, int from_memory);
const KernelEntry *kernel_best(WeightType type);
/* The environment's kernel choices above (QKV_ISA, QKV_VENDOR, QKV_FAMILY,
 * QKV_CACHE_BYTES and QKV_KV_FETCH: none, l1 or l2), checked: NULL when
 * each is unset or one the engine knows, else what is wrong with the first
 * that is not, in buf (a typo such as QKV_ISA=avx-2 measured the default
 * choice without a word). */
const char *kernel_env_error(char *buf, size_t len);
/* Float32 or float16 rows as stored, not panels (the KV cache's keys): the
 * kernel within an instruction set (kernels_rows.h). */
MatmulKernel rows_kernel_for(WeightType type, Isa isa, Fetch fetch);
/* How the KV cache's kernels request the rows QKV_KV_AHEAD bytes ahead on
 * this CPU (cpu_vendor, cpu_family), for rows of elem_bytes a value (4
 * float32, 2 float16, 1 int8), with the kernels of isa: into L1 on every
 * maker but AMD (and Hygon); on AMD's family 25 (Zen 4), whose hardware
 * prefetchers alone read a long context's float16 and int8 rows faster,
 * none, but float32 rows into L2 with AVX-512 (its AVX2 kernels were slower
 * with them); on other AMD families into L1 (measured on two Zen 5 hosts:
 * float rows 10% slower with them on one, 1.6 to 2.5 times faster on the
 * other; int8 rows faster on the other too). QKV_KV_FETCH (none, l1, l2) says
 * instead. kv_cache_init records it. */
Fetch kv_fetch_ahead(int elem_bytes, Isa isa);

#endif /* QKV_KERNELS_H */

/* ======================================================================== */
#ifdef QKV_KERNELS_IMPLEMENTATION
#ifndef QKV_KERNELS_IMPLEMENTED
#define QKV_KERNELS_IMPLEMENTED

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "kernels_isa.h" /* act_row, out_at; the x86 kernels' attributes (TARGET_*, INLINE) */
#define QKV_ALLOC_IMPLEMENTATION
#include "alloc.h"
#define QKV_CPU_IMPLEMENTATION
#include "cpu.h" /* after kernels_isa.h: QKV_HAVE_X86_KERNELS, QKV_HAVE_AMX */

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
float half_to_float(uint16_t h) { return half_bits_to_float(h); }

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

/* n / d, or 0 where that is not finite: d = 0 (a block of zeros), or d so
 * small that the quotient overflows (1 / d for a block whose largest
 * magnitude is below about 3.7e-37), where each x · (n / d) would be an
 * infinity or a NaN and its conversion to an integer undefined. Such a
 * block's levels are zeros: its values are far below float32's resolution
 * beside any ordinary block's (a crafted checkpoint's norm weights of
 * 1e-37 make them). */
static inline float inverse_scale(float n, float d) {
    float inverse = d != 0.0f ? n / d : 0.0f;
    return isinf(inverse) ? 0.0f : inverse;
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
    float d = amax / 127.0f, id = inverse_scale(1.0f, d);
    blk->d = float_to_half(d);
    for (int j = 0; j < QKV_QBLOCK; j++) blk->q[j] = (int8_t)quant_level(roundf(x[j] * id), -127, 127, 0);
}

/* ggml's quantize_row_q4_0_ref: the value of largest magnitude maps to -8,
 * d = max / -8, q = min(15, (int)(x / d + 8.5)) */
static void quantize_q4_block(const float *x, BlockQ4 *blk) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QKV_QBLOCK; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    float d = max / -8.0f, id = inverse_scale(1.0f, d);
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
    float d = amax / 127.0f, id = inverse_scale(1.0f, d);
    *scale = d;
    int32_t total = 0; /* a local: q's bytes may alias *sum, which would keep the loop scalar */
    for (int j = 0; j < QKV_QBLOCK; j++) {
        int level = round_half_away(x[j] * id);
        q[j] = (int8_t)level;
        total += level;
    }
    *sum = total;
}

/* A row's blocks, each as quantize_activation_block does it (with AVX-512
 * where isa has it: kernels_int8.h). */
static void quantize_activation_row(Isa isa, const float *x, int8_t *q, float *scale, int32_t *sum, int blocks);

static void activation_row(Activations *a, Isa isa, int t, int blocks, int row_blocks) {
    quantize_activation_row(isa, a->x + (size_t)t * a->stride, a->q + (size_t)t * a->stride,
                            a->q_scale + (size_t)t * row_blocks, a->q_sum + (size_t)t * row_blocks, blocks);
}

typedef struct {
    Activations *a;
    Isa isa;
} QuantizeTask;

static void quantize_rows(void *ctx, long first, long last) {
    QuantizeTask *task = ctx;
    Activations *a = task->a;
    for (long t = first; t < last; t++)
        activation_row(a, task->isa, (int)t, a->cols / QKV_QBLOCK, a->stride / QKV_QBLOCK);
}

/* The activations, per block of 32, scale kept in float32; a prompt's
 * positions split across threads. */
void activations_quantize(Activations *a, Isa isa) {
    if (a->quantized) return;
    QuantizeTask task = { a, isa };
    team_run_items(a->team, a->n, quantize_rows, &task, (long)a->n * a->cols >= QKV_PARALLEL_MIN_WORK); /* not a decode step's */
    a->quantized = 1;
}


#include "kernels_float.h" /* the float32 and float16 kernels (kernels_float.c) */
#include "kernels_rows.h"  /* float rows as stored: the KV cache's keys */
#include "kernels_int8.h"  /* the int8 and 4-bit kernels */

/* ------------------------------------------------------------------------ */
/* Packing: every type into panels of QKV_PANEL rows                         */

size_t weight_packed_bytes(WeightType type, int rows, int cols) {
    if (!weight_traits(type) || rows <= 0) return 0;
    size_t panels = ((size_t)rows + QKV_PANEL - 1) / QKV_PANEL;
    return panels * QKV_PANEL * weight_row_bytes(type, cols);
}

int weight_pack(WeightType type, const void *data, int rows, int cols, void *panels) {
    if (!weight_packed_bytes(type, rows, cols)) return 0;
    if (weight_traits(type)->quantized) pack_quantized(type, data, rows, cols, panels);
    else pack_float(data, rows, cols, weight_traits(type)->block_bytes, panels);
    return 1;
}

void weight_packed_row_to_float(WeightType type, const void *panels, int cols, int i, float *out) {
    const WeightTraits *t = weight_traits(type);
    if (!t || !weight_row_bytes(type, cols)) return;
    uint16_t part[(QKV_QBLOCK * 4) / 2]; /* a block's bytes as stored (2-byte aligned for the scale) */
    if (!t->quantized) {
        for (int j = 0; j < cols; j += QKV_QBLOCK) {
            int n = cols - j < QKV_QBLOCK ? cols - j : QKV_QBLOCK;
            unpack_float_values(panels, cols, t->block_bytes, i, j, n, (unsigned char *)part);
            weight_row_to_float(type, part, out + j, n);
        }
        return;
    }
    int q4 = type == WEIGHT_Q4_0, blocks = cols / QKV_QBLOCK;
    const unsigned char *panel = (const unsigned char *)panels + (size_t)(i / QKV_PANEL) * QKV_PANEL * weight_row_bytes(type, cols);
    for (int b = 0; b < blocks; b++) {
        unpack_block(panel, i % QKV_PANEL, blocks, q4, b, (unsigned char *)part);
        weight_row_to_float(type, part, out + (size_t)b * QKV_QBLOCK, QKV_QBLOCK);
    }
}

/* ------------------------------------------------------------------------ */
/* The table                                                                 */

/* The float decode's own requests for its lines (prefetch_column in
 * kernels_float.c) were added on an Intel Xeon, into L1. On AMD EPYCs
 * (docs/speed-amd.md, "The same on an AMD EPYC"):
 * - float32's AVX-512 kernel decodes faster without them (the hardware
 *   prefetchers keep its four streams fed): 5-17% on a Zen 5 (family
 *   26), 13-20% on a Zen 4 (family 25: 42M, 168 tok/s without, 135-146
 *   with), where requests into L2 fall
 *   between. Its entry without them is taken on every AMD.
 * - On the Zen 4 the other float kernels are fastest with requests into
 *   L2 only: 1 thread, 42M float16 298-322 tok/s against 235-241 into L1
 *   and 293-294 without; 15M float16 (31 MB) 1,489-1,502 against 633-840
 *   and 698-703. On the Zen 5 the same requests into L2 were 14-20%
 *   slower than into L1 (float16), so these entries are family 25's. With
 *   AVX2 (QKV_ISA=avx2) requests into L2 were ahead too, but an AVX2-only
 *   CPU of family 25 is a Zen 3, which was not measured: the AVX2 kernels
 *   keep their requests into L1.
 * - The int8 and 4-bit VNNI kernels, which make no requests, decode
 *   weights from memory 25-60% faster on the Zen 4 with requests into L2
 *   (42M Q8_0 and Q4_0), but cached ones 5-9% slower (15M Q8_0 and Q4_0,
 *   the stories model's): those entries are taken only for weights from
 *   memory (weights_from_memory). On the Zen 5, requests made no
 *   difference beyond the noise.
 */
static const KernelEntry KERNELS[] = {
    { WEIGHT_F32, ISA_PORTABLE, "f32 portable", matmul_f32_portable, VENDOR_ANY, 0, 0, FETCH_NONE },
    { WEIGHT_F16, ISA_PORTABLE, "f16 portable", matmul_f16_portable, VENDOR_ANY, 0, 0, FETCH_NONE },
    { WEIGHT_Q8_0, ISA_PORTABLE, "q8_0 portable", matmul_q8_portable, VENDOR_ANY, 0, 0, FETCH_NONE },
    { WEIGHT_Q4_0, ISA_PORTABLE, "q4_0 portable", matmul_q4_portable, VENDOR_ANY, 0, 0, FETCH_NONE },
#ifdef QKV_HAVE_X86_KERNELS
    { WEIGHT_F32, ISA_AVX2, "f32 avx2", matmul_f32_avx2, VENDOR_ANY, 0, 0, FETCH_L1 },
    { WEIGHT_F16, ISA_AVX2, "f16 avx2+f16c", matmul_f16_avx2, VENDOR_ANY, 0, 0, FETCH_L1 },
    { WEIGHT_Q8_0, ISA_AVX2, "q8_0 avx2", matmul_q8_avx2, VENDOR_ANY, 0, 0, FETCH_L1 },
    { WEIGHT_Q4_0, ISA_AVX2, "q4_0 avx2", matmul_q4_avx2, VENDOR_ANY, 0, 0, FETCH_L1 },
    { WEIGHT_Q8_0, ISA_AVX_VNNI, "q8_0 avxvnni", matmul_q8_avxvnni, VENDOR_ANY, 0, 0, FETCH_L1 },
    { WEIGHT_Q4_0, ISA_AVX_VNNI, "q4_0 avxvnni", matmul_q4_avxvnni, VENDOR_ANY, 0, 0, FETCH_L1 },
    { WEIGHT_F32, ISA_AVX512, "f32 avx512", matmul_f32_avx512, VENDOR_ANY, 0, 0, FETCH_L1 },
    { WEIGHT_F32, ISA_AVX512, "f32 avx512 hw-prefetch", matmul_f32_avx512_hw, VENDOR_AMD, 0, 0, FETCH_NONE },
    { WEIGHT_F16, ISA_AVX512, "f16 avx512", matmul_f16_avx512, VENDOR_ANY, 0, 0, FETCH_L1 },
    { WEIGHT_F16, ISA_AVX512, "f16 avx512 l2-prefetch", matmul_f16_avx512_l2, VENDOR_AMD, 25, 0, FETCH_L2 },
    { WEIGHT_Q8_0, ISA_AVX512, "q8_0 avx512bw", matmul_q8_avx512, VENDOR_ANY, 0, 0, FETCH_NONE },
    { WEIGHT_Q4_0, ISA_AVX512, "q4_0 avx512bw", matmul_q4_avx512, VENDOR_ANY, 0, 0, FETCH_NONE },
    { WEIGHT_Q8_0, ISA_AVX512_VNNI, "q8_0 avx512vnni", matmul_q8_vnni, VENDOR_ANY, 0, 0, FETCH_NONE },
    { WEIGHT_Q8_0, ISA_AVX512_VNNI, "q8_0 avx512vnni l2-prefetch", matmul_q8_vnni_l2, VENDOR_AMD, 25, 1, FETCH_L2 },
    { WEIGHT_Q4_0, ISA_AVX512_VNNI, "q4_0 avx512vnni", matmul_q4_vnni, VENDOR_ANY, 0, 0, FETCH_NONE },
    { WEIGHT_Q4_0, ISA_AVX512_VNNI, "q4_0 avx512vnni l2-prefetch", matmul_q4_vnni_l2, VENDOR_AMD, 25, 1, FETCH_L2 },
#endif
#ifdef QKV_HAVE_AMX
    { WEIGHT_Q8_0, ISA_AMX, "q8_0 amx-int8", matmul_q8_amx, VENDOR_ANY, 0, 0, FETCH_NONE },
    { WEIGHT_Q4_0, ISA_AMX, "q4_0 amx-int8", matmul_q4_amx, VENDOR_ANY, 0, 0, FETCH_NONE },
#endif
};


int kernel_count(void) { return (int)(sizeof KERNELS / sizeof KERNELS[0]); }

const KernelEntry *kernel_at(int i) { return i >= 0 && i < kernel_count() ? &KERNELS[i] : NULL; }

const KernelEntry *kernel_best(WeightType type) { return kernel_for(type, isa_available(), 0); }


/* A plain read of 58 MiB of large pages from memory, 1 thread, AMD EPYC:
 * 33-34 GB/s with the hardware prefetchers alone, 28-29 with requests 1 to
 * 8 KiB ahead into L1. Attention over float32 rows is another matter on a
 * Zen 4: its value sums are the lightest work a byte of any kernel (one
 * multiply-add a 64 bytes), and requests into L2 kept more lines in flight
 * than the prefetchers alone: the 42M shape (head size 64) at 8,192
 * positions, 1 thread, fastest of 60 steps, two rounds interleaved,
 * attention 10.4-11.3 -> 7.9-8.7 ms, the 15M shape (48) 3.7-4.0 -> 3.4-3.5;
 * float16 rows the same or 5-30% slower with them (more work a byte: the
 * requests take the load slots the conversions need), int8 slower, and
 * float32 with the AVX2 kernels slower too (the 15M shape at 16,384
 * positions, two rounds: 7.5-7.8 -> 7.8-9.1 ms). */
/* QKV_KV_FETCH's names, in Fetch's order */
static const char *const FETCH_NAMES[3] = { "none", "l1", "l2" };

Fetch kv_fetch_ahead(int elem_bytes, Isa isa) {
    const char *name = getenv("QKV_KV_FETCH"); /* to measure another choice */
    int asked = name ? name_index(name, FETCH_NAMES, 3) : -1;
    if (asked >= 0) return (Fetch)asked;
    if (cpu_vendor() != VENDOR_AMD) return FETCH_L1;
    /* family 25 with AVX-512: a Zen 4 (a Zen 3 has AVX2 only) */
    if (cpu_family() == 25) return elem_bytes == 4 && isa >= ISA_AVX512 ? FETCH_L2 : FETCH_NONE;
    /* Float rows cost 10% with the requests where the prefetchers keep up
     * and 1.6-2.5x without them where they do not (two Zen 5 hosts): the
     * requests bound the loss. int8 rows looked level in the bench's
     * medians on the second host, but paired with plain reads of their
     * bytes (bench.c: measure_paired) they streamed at 67-79% of the read
     * with the requests against 60-67% without on 1 thread, 73-96% against
     * 65-84% on 2 (three rounds each), and the scores alone ran 20-30%
     * faster with them. */
    return FETCH_L1;
}

/* How closely an entry is made for where it runs: for a maker, a family
 * of its CPUs, weights from memory */
static int entry_fit(const KernelEntry *e) { return (e->vendor != VENDOR_ANY) + (e->family != 0) + e->from_memory; }

/* The widest instruction set's kernel for type; between two of the same
 * set, the one made most closely for this CPU's maker and the weights. */
const KernelEntry *kernel_for(WeightType type, Isa isa, int from_memory) {
    const KernelEntry *best = NULL;
    Vendor vendor = cpu_vendor();
    int family = cpu_family();
    for (int i = 0; i < kernel_count(); i++) {
        const KernelEntry *e = &KERNELS[i];
        if (e->type != type || e->isa > isa || (e->vendor != VENDOR_ANY && e->vendor != vendor)) continue;
        if ((e->family && e->family != family) || (e->from_memory && !from_memory)) continue;
        if (!best || e->isa > best->isa || (e->isa == best->isa && entry_fit(e) > entry_fit(best))) best = e;
    }
    return best;
}


/* names[0..n-1] as "a, b or c", into list */
static void names_list(const char *const *names, int n, char *list, size_t len) {
    size_t at = 0;
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(list + at, at < len ? len - at : 0, "%s%s", i == 0 ? "" : i + 1 < n ? ", " : " or ",
                               names[i]);
}

const char *kernel_env_error(char *buf, size_t len) {
    const struct { const char *var, *const *names; int n; } choices[] = {
        { "QKV_ISA", ISA_NAMES, ISA_COUNT },
        { "QKV_VENDOR", VENDOR_NAMES, VENDOR_COUNT },
        { "QKV_KV_FETCH", FETCH_NAMES, 3 },
    };
    const char *v;
    char list[128];
    for (size_t i = 0; i < sizeof choices / sizeof choices[0]; i++)
        if ((v = getenv(choices[i].var)) && name_index(v, choices[i].names, choices[i].n) < 0) {
            names_list(choices[i].names, choices[i].n, list, sizeof list);
            snprintf(buf, len, "%s=%s: expected %s", choices[i].var, v, list);
            return buf;
        }
    if ((v = getenv("QKV_FAMILY")) && family_parse(v) < 0) {
        snprintf(buf, len, "QKV_FAMILY=%s: expected a CPU family number (25, or 0x19)", v);
        return buf;
    }
    if ((v = getenv("QKV_CACHE_BYTES")) && !cache_bytes_parse(v)) {
        snprintf(buf, len, "QKV_CACHE_BYTES=%s: expected a number of bytes, more than 0", v);
        return buf;
    }
    return NULL;
}

#endif /* QKV_KERNELS_IMPLEMENTED */
#endif /* QKV_KERNELS_IMPLEMENTATION */
