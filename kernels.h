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

#include "team.h"

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

/* count * size zeroed bytes starting on a 64-byte boundary (a cache line:
 * no vector load from a row that starts there splits across two lines,
 * which costs a prompt's tiles a quarter of their speed); NULL if the size
 * overflows or the memory cannot be had. calloc underneath, so a large
 * buffer's pages stay untouched (not resident) until used. A buffer of
 * QKV_LARGE_PAGE_BYTES or more asks Linux for 2 MiB pages (below). Freed
 * with free_aligned. */
void *zalloc_aligned(size_t count, size_t size);
void free_aligned(void *p);

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
 * every position t of a; W is the matrix's data, cols wide (for Q8_0 and
 * Q4_0, its panels: weight_pack). */
typedef void (*MatmulKernel)(float *out, int out_stride, const Activations *a, const void *w, int cols,
                             int begin, int end);

/* Instruction sets, each a superset of the one before. ISA_AMX is AVX-512
 * VNNI plus AMX's int8 tiles, which the int8 and 4-bit kernels use for a
 * prompt (a decode step stays on VNNI). */
typedef enum { ISA_PORTABLE = 0, ISA_AVX2 = 1, ISA_AVX512 = 2, ISA_AVX512_VNNI = 3, ISA_AMX = 4, ISA_COUNT } Isa;

/* Fills a->q, a->q_scale and a->q_sum from a->x (once), with isa's
 * vectors (the kernel's: a decode step calls this several times a layer,
 * so it does not look the CPU up again). */
void activations_quantize(Activations *a, Isa isa);

typedef struct {
    WeightType type;
    Isa isa;        /* what the CPU needs for it */
    const char *name;
    MatmulKernel run;
} KernelEntry;

const char *isa_name(Isa isa);
/* The best instruction set this CPU and OS support, capped by the
 * environment variable QKV_ISA (portable, avx2, avx512, avx512vnni, amx) so
 * tests and CI can force each path. */
Isa isa_available(void);
int kernel_count(void);
const KernelEntry *kernel_at(int i);
/* The fastest kernel for a type within an instruction set; kernel_best
 * asks isa_available() (the CPU is probed once a process; QKV_ISA read each
 * time). */
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

/* madvise is Linux's (and the BSDs'), outside the POSIX names the build
 * asks for; POSIX's posix_madvise(POSIX_MADV_DONTNEED) does nothing on
 * Linux. */
#ifdef __linux__
#include <sys/mman.h>
#ifndef MADV_DONTNEED
#define MADV_DONTNEED 4
#define MADV_HUGEPAGE 14
int madvise(void *addr, size_t length, int advice);
#endif
#endif

/* Large pages. A decode step streams every weight, and at long contexts
 * every key and value, once: with 4 KiB pages that is a new page, a TLB
 * miss and a halt of the hardware prefetcher (which stops at a page's end)
 * every 4 KiB. Linux gives a buffer 2 MiB pages when it is asked to
 * (transparent huge pages in "madvise" mode, Debian's default). Measured,
 * Intel Xeon, 1 thread: the int8 KV attention of the 15M shape at 16,384
 * positions read 10.3 -> 12.9 GB/s, a plain read of its 58 MiB 19 -> 23;
 * decode 5-15% faster for the Q8_0, Q4_0 and llama2.c float32 anchors. */
#define QKV_LARGE_PAGE_BYTES ((size_t)2 << 20)

static void advise_large_pages(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes < QKV_LARGE_PAGE_BYTES) return;
    uintptr_t first = ((uintptr_t)p + 4095) / 4096 * 4096, last = ((uintptr_t)p + bytes) / 4096 * 4096;
    if (last > first) madvise((void *)first, last - first, MADV_HUGEPAGE); /* advice: failure changes nothing */
#else
    (void)p, (void)bytes;
#endif
}

/* calloc's pointer is kept just below the aligned one. */
void *zalloc_aligned(size_t count, size_t size) {
    size_t slack = 64 + sizeof(void *);
    if (size && count > (SIZE_MAX - slack) / size) return NULL;
    unsigned char *raw = calloc(count * size + slack, 1);
    if (!raw) return NULL;
    uintptr_t at = ((uintptr_t)raw + sizeof(void *) + 63) / 64 * 64;
    memcpy((unsigned char *)at - sizeof(void *), &raw, sizeof raw);
    advise_large_pages((void *)at, count * size);
    return (void *)at;
}

void free_aligned(void *p) {
    if (!p) return;
    void *raw;
    memcpy(&raw, (unsigned char *)p - sizeof raw, sizeof raw);
    free(raw);
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

static void quantize_rows(void *ctx, int id, int n) {
    QuantizeTask *task = ctx;
    Activations *a = task->a;
    long first, last;
    team_share(a->n, id, n, &first, &last);
    for (long t = first; t < last; t++)
        activation_row(a, task->isa, (int)t, a->cols / QKV_QBLOCK, a->stride / QKV_QBLOCK);
}

/* The activations, per block of 32, scale kept in float32; a prompt's
 * positions split across threads. */
void activations_quantize(Activations *a, Isa isa) {
    if (a->quantized) return;
    QuantizeTask task = { a, isa };
    team_run(a->team, quantize_rows, &task, (long)a->n * a->cols >= QKV_PARALLEL_MIN_WORK); /* not a decode step's */
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

/* ------------------------------------------------------------------------ */
/* x86-64 kernels: AVX2 and AVX-512, chosen at run time                      */

/* Tiles: R weight rows at a time (each row's bytes stream in parallel,
 * which is what keeps the memory system busy in a decode step), times up to
 * P positions (each weight vector loaded once for all of them: the prompt's
 * matrix multiply). One accumulator per (row, position); four rows'
 * accumulators are summed across lanes together at the end. TILE_ROWS is
 * the AVX2 kernels' R; the AVX-512 ones choose theirs per shape. */
#define TILE_ROWS 4
/* Software prefetch (the float kernels, which read rows as stored): while
 * a tile streams its rows, the same bytes of the rows QKV_PF further on are
 * requested, so the memory system always has several rows in flight
 * (measured: 2.3x on the row-wise Q8_0 kernel that the panels replaced, on
 * a 44 MB model, where the hardware prefetchers alone left the core
 * waiting; a panel is one contiguous stream, and prefetching it measured no
 * faster). A prefetch never faults, so past the matrix's end it is
 * harmless. */
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
/* AMX: compilers that know its intrinsics (GCC 11, clang 12), on Linux,
 * where a process asks the kernel before it uses the tiles (probe_cpu). */
#if defined(__linux__) && ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))
#define QKV_HAVE_AMX 1
#define TARGET_AMX \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8")))
#include <sys/syscall.h>
long syscall(long number, ...); /* unistd.h declares it only for _DEFAULT_SOURCE */
#endif

/* The R rows of a tile: past the matrix's end, repeat the first row
 * (computed and thrown away, so the loops have no special case). */
INLINE void tile_rows(const unsigned char **rows, int R, const void *w, size_t row_bytes, int i, int end) {
    for (int r = 0; r < R; r++)
        rows[r] = (const unsigned char *)w + (size_t)(i + r < end ? i + r : i) * row_bytes;
}

/* Rows i..i+3 of position t's output, those before end. */
INLINE void store_tile(float *out, int os, int t, int i, int end, __m128 sums) {
    if (i + 4 <= end) {
        _mm_storeu_ps(out_at(out, os, t, i), sums);
        return;
    }
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

/* -1 in the lanes below count: AVX2's masked loads and gathers */
TARGET_AVX2 INLINE __m256i lanes_below(int count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
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

/* One step of a float tile: 8 columns from j of R rows times P positions;
 * whole: a full vector (else the row's last, partial one, through the
 * zero-padded copies). */
TARGET_AVX2 INLINE void step_float_256(__m256 acc[8][3], const unsigned char **rows, const Activations *a, int t,
                                       int R, int P, int j, int cols, size_t row_bytes, int half, int whole) {
    __m256 x[3];
#pragma GCC unroll 3
    for (int p = 0; p < P; p++) x[p] = whole ? _mm256_loadu_ps(act_row(a, t + p) + j) : load8_x(act_row(a, t + p), j, cols);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        if (j % 16 == 0) PREFETCH(rows[r], row_bytes, (size_t)j * (half ? 2 : 4));
        __m256 wv;
        if (!whole) wv = load8_w(rows[r], j, cols, half);
        else if (half) wv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(rows[r] + 2 * (size_t)j)));
        else wv = _mm256_loadu_ps((const float *)rows[r] + j);
#pragma GCC unroll 3
        for (int p = 0; p < P; p++) acc[r][p] = _mm256_fmadd_ps(wv, x[p], acc[r][p]);
    }
}

/* W[i..i+R-1] . x[t..t+P-1] for float32 or float16 rows: R = 8 rows for a
 * float16 decode step (more rows' bytes in flight: measured 4-6% faster on
 * the 15M and 42M shapes, and float32 4% slower), else 4; a prompt 4 x 3
 * (12 accumulators of the 16 registers). Every loop over the tile unrolled
 * whole, and the partial last vector out of the loop: with the tail's
 * branch and copies inside it GCC kept the accumulators in memory (see
 * tile_float_512). */
TARGET_AVX2 INLINE void tile_float_avx2(float *out, int os, const Activations *a, const void *w, size_t row_bytes,
                                        int cols, int i, int end, int t, int R, int P, int half) {
    const unsigned char *rows[8];
    tile_rows(rows, R, w, row_bytes, i, end);
    __m256 acc[8][3];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int p = 0; p < P; p++) acc[r][p] = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= cols; j += 8) step_float_256(acc, rows, a, t, R, P, j, cols, row_bytes, half, 1);
    if (j < cols) step_float_256(acc, rows, a, t, R, P, j, cols, row_bytes, half, 0);
#pragma GCC unroll 2
    for (int r = 0; r < R; r += 4)
#pragma GCC unroll 3
        for (int p = 0; p < P; p++)
            store_tile(out, os, t + p, i + r, end, reduce4_256(acc[r][p], acc[r + 1][p], acc[r + 2][p], acc[r + 3][p]));
}

/* An AVX2 kernel: a float16 decode step eight rows a tile; otherwise four
 * rows, positions three at a time, then the last one or two. */
#define AVX2_MATMUL(NAME, TILE, TYPE, FLAG)                                                                    \
    TARGET_AVX2 static void NAME(float *out, int os, const Activations *a, const void *w, int cols, int begin,  \
                                 int end) {                                                                    \
        size_t row_bytes = weight_row_bytes(TYPE, cols);                                                       \
        if (a->n == 1 && FLAG) {                                                                               \
            for (int i = begin; i < end; i += 8) TILE(out, os, a, w, row_bytes, cols, i, end, 0, 8, 1, FLAG);   \
            return;                                                                                            \
        }                                                                                                      \
        for (int i = begin; i < end; i += TILE_ROWS) {                                                         \
            int t = 0;                                                                                         \
            for (; t + 3 <= a->n; t += 3) TILE(out, os, a, w, row_bytes, cols, i, end, t, TILE_ROWS, 3, FLAG);  \
            if (a->n - t == 2) TILE(out, os, a, w, row_bytes, cols, i, end, t, TILE_ROWS, 2, FLAG);             \
            if (a->n - t == 1) TILE(out, os, a, w, row_bytes, cols, i, end, t, TILE_ROWS, 1, FLAG);             \
        }                                                                                                      \
    }

AVX2_MATMUL(matmul_f32_avx2, tile_float_avx2, WEIGHT_F32, 0)
AVX2_MATMUL(matmul_f16_avx2, tile_float_avx2, WEIGHT_F16, 1)

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
 * partial vector) of R rows times P positions (their inputs at x[p]). */
TARGET_AVX512 INLINE void step_float_512(__m512 acc[4][6], const unsigned char **rows, const float **x_rows, int R,
                                         int P, int j, __mmask16 m, size_t row_bytes, int half, int fetch) {
    __m512 x[6];
#pragma GCC unroll 6
    for (int p = 0; p < P; p++) x[p] = _mm512_maskz_loadu_ps(m, x_rows[p] + j);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        if (fetch) PREFETCH(rows[r], row_bytes, (size_t)j * (half ? 2 : 4));
        __m512 wv = load16_w(rows[r], j, m, half);
#pragma GCC unroll 6
        for (int p = 0; p < P; p++) acc[r][p] = _mm512_fmadd_ps(wv, x[p], acc[r][p]);
    }
}

/* Rows i..i+R-1 times positions t..t+P-1: 4 x 6 for a prompt (24
 * accumulators, each weight vector used six times, each input vector four;
 * 8 x 3 measured 30% slower), 4 x 1 for a decode step. fetch: prefetch the
 * rows ahead (the first position tile of a row tile reads them from
 * memory), in a loop of its own, so the other has no branch. The input
 * rows' addresses are taken once, before the loop, and every loop over
 * the tile is unrolled whole: the accumulators stay in registers (GCC built
 * with -march=native kept acc[][] in memory when the reduction's loop was
 * not unrolled: half the tile's speed). */
TARGET_AVX512 INLINE void tile_float_512(float *out, int os, const Activations *a, const void *w, size_t row_bytes,
                                         int cols, int i, int end, int t, int R, int P, int half, int fetch) {
    const unsigned char *rows[8];
    const float *x_rows[6];
    tile_rows(rows, R, w, row_bytes, i, end);
#pragma GCC unroll 6
    for (int p = 0; p < P; p++) x_rows[p] = act_row(a, t + p);
    __m512 acc[4][6];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 6
        for (int p = 0; p < P; p++) acc[r][p] = _mm512_setzero_ps();
    int j = 0;
    if (fetch)
        for (; j + 16 <= cols; j += 16) step_float_512(acc, rows, x_rows, R, P, j, 0xffff, row_bytes, half, 1);
    else
        for (; j + 16 <= cols; j += 16) step_float_512(acc, rows, x_rows, R, P, j, 0xffff, row_bytes, half, 0);
    if (j < cols) step_float_512(acc, rows, x_rows, R, P, j, tail_mask(j, cols), row_bytes, half, fetch);
#pragma GCC unroll 2
    for (int r = 0; r < R; r += 4)
#pragma GCC unroll 6
        for (int p = 0; p < P; p++)
            store_tile(out, os, t + p, i + r, end, reduce4_512(acc[r][p], acc[r + 1][p], acc[r + 2][p], acc[r + 3][p]));
}

/* A prompt's rows go in blocks of about this many bytes: each tile of six
 * positions runs over the whole block, whose rows stay in L2 meanwhile (the
 * inputs of six positions stay in L1). Rows outer instead (every position
 * tile of four rows, then the next four) read every position's input from
 * L2 for each four rows: the 15M shape's float32 and float16 products, a
 * 200-token prompt, 1 thread, Xeon, 7-9% slower; the 42M shape and two
 * threads level. */
#define QKV_ROW_BLOCK_BYTES (256 * 1024)

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
    int whole = a->n / 6 * 6, block = (int)(QKV_ROW_BLOCK_BYTES / row_bytes) / 4 * 4;
    if (block < 4) block = 4;
    for (int first = begin; first < end; first += block) {
        int last = first + block < end ? first + block : end;
        for (int t = 0; t < whole; t += 6)
            for (int i = first; i < last; i += 4)
                tile_float_512(out, os, a, w, row_bytes, cols, i, end, t, 4, 6, half, t == 0);
        /* the last 1-5 positions in one tile (a chunk of 128 is 21 x 6 + 2) */
        for (int i = first; i < last; i += 4) switch (a->n - whole) {
            case 5: tile_float_512(out, os, a, w, row_bytes, cols, i, end, whole, 4, 5, half, whole == 0); break;
            case 4: tile_float_512(out, os, a, w, row_bytes, cols, i, end, whole, 4, 4, half, whole == 0); break;
            case 3: tile_float_512(out, os, a, w, row_bytes, cols, i, end, whole, 4, 3, half, whole == 0); break;
            case 2: tile_float_512(out, os, a, w, row_bytes, cols, i, end, whole, 4, 2, half, whole == 0); break;
            case 1: tile_float_512(out, os, a, w, row_bytes, cols, i, end, whole, 4, 1, half, whole == 0); break;
            }
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

/* AMX's int8 tiles: CPUID.(7,0):EDX has AMX-TILE (bit 24) and AMX-INT8
 * (25), the OS saves the tile state (XCR0 bits 17, 18), and Linux lets
 * this process use it: the 8 KiB of tile data a thread saves on a context
 * switch are granted on request (arch_prctl ARCH_REQ_XCOMP_PERM for
 * XFEATURE_XTILEDATA, once for the process and its threads; asking again
 * is harmless). Without that grant the first tile instruction kills the
 * process. */
static int amx_usable(unsigned cpuid7_edx, unsigned xcr0) {
#ifdef QKV_HAVE_AMX
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    int cpu = ((cpuid7_edx >> 24) & 1) && ((cpuid7_edx >> 25) & 1), os = (xcr0 & 0x60000u) == 0x60000u;
    return cpu && os && syscall(SYS_arch_prctl, (long)ARCH_REQ_XCOMP_PERM, (long)XFEATURE_XTILEDATA) == 0;
#else
    (void)cpuid7_edx, (void)xcr0;
    return 0;
#endif
}

/* CPUID and XGETBV: the CPU has the instructions and the OS saves their
 * registers. */
static Isa probe_cpu(void) {
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
    if (!((c >> 11) & 1)) return ISA_AVX512;
    return amx_usable(d, xcr0_lo) ? ISA_AMX : ISA_AVX512_VNNI;
}
#else
static Isa probe_cpu(void) { return ISA_PORTABLE; }
#endif

/* probe_cpu, asked once: CPUID is slow in a virtual machine (a trap to the
 * host), and a prompt quantizes its activations hundreds of times. Two
 * threads that both ask store the same answer. */
static Isa isa_of_cpu(void) {
    static _Atomic int known = -1;
    int isa = known;
    if (isa < 0) known = isa = (int)probe_cpu();
    return (Isa)isa;
}

#include "kernels_int8.h" /* the int8 and 4-bit kernels */

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
#ifdef QKV_HAVE_AMX
    { WEIGHT_Q8_0, ISA_AMX, "q8_0 amx-int8", matmul_q8_amx },
    { WEIGHT_Q4_0, ISA_AMX, "q4_0 amx-int8", matmul_q4_amx },
#endif
};

const char *isa_name(Isa isa) {
    static const char *names[ISA_COUNT] = { "portable", "avx2", "avx512", "avx512vnni", "amx" };
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
