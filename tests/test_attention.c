/* test_attention.c — attention over blocks of keys (attention.h) against
 * independent oracles: float64 attention over the rows the KV cache stores,
 * the plain one-row softmax, position-by-position decoding, and the resident
 * memory of a long prefill measured by the kernel (/proc/self/status, read
 * by the bench's bench_prefill_growth_kb); the bench's in-order read of a
 * step's bytes against the byte counts of the shapes and a plain byte sum.
 * Prints "ok NAME" / "FAIL NAME: why" / "skip NAME: why" per check. */
#include "../model.h"
#include "../bench_internal.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* clang says AddressSanitizer by __has_feature, gcc by __SANITIZE_ADDRESS__ */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QKV_CLANG_ASAN 1
#endif
#endif
#ifndef QKV_CLANG_ASAN
#define QKV_CLANG_ASAN 0
#endif

static int failures = 0;

static void report(int ok, const char *name, const char *fmt, ...) {
    if (ok) {
        printf("ok %s\n", name);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s: ", name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failures++;
}

static uint32_t lcg = 2024;
static float uniform(float lo, float hi) {
    lcg = lcg * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(lcg >> 8) / 16777216.0f;
}

/* The shape of the attention under test: GQA (two query heads a kv head),
 * a head size that is not a whole number of vectors, keys over several
 * blocks with the last one partial. */
enum { HEADS = 4, KV_HEADS = 2, HS = 40, KEYS = 3 * QKV_KEY_BLOCK + 77, ROWS = 32 };

typedef struct {
    KVCache kv;
    float *q;        /* [ROWS, HEADS * HS] */
    float *keys;     /* [KEYS, KV_HEADS * HS] as given to the cache */
    float *values;
    float *partials, *states;
} Fixture;

static void fixture_init(Fixture *f, KVType type, Isa isa) {
    kv_cache_init(&f->kv, type, 1, KV_HEADS, KEYS, HS);
    f->kv.isa = isa;
    f->q = malloc(sizeof(float) * ROWS * HEADS * HS);
    f->keys = malloc(sizeof(float) * KEYS * KV_HEADS * HS);
    f->values = malloc(sizeof(float) * KEYS * KV_HEADS * HS);
    lcg = 2024;
    for (int i = 0; i < ROWS * HEADS * HS; i++) f->q[i] = uniform(-1, 1);
    for (int i = 0; i < KEYS * KV_HEADS * HS; i++) {
        f->keys[i] = uniform(-1, 1);
        f->values[i] = uniform(-1, 1);
    }
    for (int t = 0; t < KEYS; t++)
        kv_cache_store(&f->kv, 0, t, f->keys + (size_t)t * KV_HEADS * HS, f->values + (size_t)t * KV_HEADS * HS);
    f->partials = malloc(sizeof(float) * attention_partials_floats(HEADS, KEYS, HS));
    f->states = malloc(sizeof(float) * attention_states_floats(ROWS, HEADS, HS));
}

static void fixture_free(Fixture *f) {
    kv_cache_free(&f->kv);
    free(f->q); free(f->keys); free(f->values); free(f->partials); free(f->states);
}

/* Rows n at positions pos.. of the fixture's queries (from row first) into
 * out [n, HEADS * HS]; observer rows when scores is not NULL. */
static void run_rows(Fixture *f, int first, int n, int pos, float *out, float *scores, float *weights) {
    AttentionRows a = { .n_heads = HEADS, .n = n, .pos = pos, .q = f->q + (size_t)first * HEADS * HS,
                        .q_stride = HEADS * HS, .out = out, .out_stride = HEADS * HS, .scores = scores,
                        .weights = weights, .observed_stride = HEADS * KEYS, .partials = f->partials,
                        .states = f->states };
    attention_layer(&f->kv, 0, &a);
}

/* float64 attention of query q (head h) over keys 0..n-1; rows from the
 * cache as stored (stored = 1) or as given (stored = 0). Returns the scale
 * of the sums, max_i Σ_t p_t |v_t,i|: what float32 rounding is relative to
 * (random values cancel, so |out| itself can be far smaller).
 *
 * allowance (if not NULL; stored rows): how far rounding int8 values'
 * weights to int16 (kv_int8.h) can move each element of the output, else
 * 0. A block of keys (a weighted sum's chunk: the same 256 from key 0)
 * rounds its weights w_t · scale_t to a step of their max / 32767, which
 * moves element i by at most half the step times Σ_t |v_t,i| / scale_t;
 * over the blocks, each weighted by its share of the softmax,
 * exp(m_b - M) / l. (1% on top for the float exp the kernel uses.) */
static double reference(const Fixture *f, const float *q, int h, int n, int stored, double *out, double *allowance) {
    enum { BLOCKS = (KEYS + QKV_KEY_BLOCK - 1) / QKV_KEY_BLOCK };
    int kvh = h / (HEADS / KV_HEADS), q8 = allowance && f->kv.type == KV_Q8;
    const float *scales = q8 ? f->kv.value_scales + (size_t)kvh * f->kv.stride : NULL; /* int8 rows have them */
    double *x = malloc(sizeof(double) * n), max = -INFINITY, sum = 0, magnitude[HS], scale = 0;
    double block_max[BLOCKS], step[BLOCKS];
    float key[HS], value[HS];
    for (int i = 0; i < HS; i++) out[i] = magnitude[i] = 0;
    for (int i = 0; i < HS && allowance; i++) allowance[i] = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < n; t++) {
            if (stored) {
                kv_key_to_float(&f->kv, kv_keys(&f->kv, 0, kvh), t, key);
                kv_value_to_float(&f->kv, kv_values(&f->kv, 0, kvh), t, value);
            } else {
                memcpy(key, f->keys + ((size_t)t * KV_HEADS + kvh) * HS, sizeof key);
                memcpy(value, f->values + ((size_t)t * KV_HEADS + kvh) * HS, sizeof value);
            }
            if (pass == 0) {
                x[t] = 0;
                for (int i = 0; i < HS; i++) x[t] += (double)q[i] * key[i];
                x[t] /= sqrt(HS);
                max = fmax(max, x[t]);
                continue;
            }
            if (q8 && t == 0) /* each block's max score and step, once pass 0 has every score */
                for (int b = 0; b * QKV_KEY_BLOCK < n; b++) {
                    int first = b * QKV_KEY_BLOCK, last = first + QKV_KEY_BLOCK < n ? first + QKV_KEY_BLOCK : n;
                    block_max[b] = -INFINITY;
                    step[b] = 0;
                    for (int k = first; k < last; k++) block_max[b] = fmax(block_max[b], x[k]);
                    for (int k = first; k < last; k++) step[b] = fmax(step[b], exp(x[k] - block_max[b]) * scales[k] / 32767);
                }
            double e = exp(x[t] - max);
            sum += e;
            for (int i = 0; i < HS; i++) {
                out[i] += e * value[i];
                magnitude[i] += e * fabs(value[i]);
            }
            int b = t / QKV_KEY_BLOCK;
            for (int i = 0; i < HS && q8; i++) allowance[i] += exp(block_max[b] - max) * step[b] / 2 * fabs(value[i]) / scales[t];
        }
    for (int i = 0; i < HS; i++) {
        out[i] /= sum;
        scale = fmax(scale, magnitude[i] / sum);
        if (q8) allowance[i] *= 1.01 / sum;
    }
    free(x);
    return scale;
}

/* The plain form: the whole row of scores, softmax (libm's expf), the
 * weighted sum — model.h's attention_head, through a KV cache of any type. */
static void one_block(const Fixture *f, const float *q, int h, int n, float *out) {
    int kvh = h / (HEADS / KV_HEADS);
    float *w = malloc(sizeof(float) * n);
    kv_scores(&f->kv, kv_keys(&f->kv, 0, kvh), q, 1, HS, n, w, n);
    for (int t = 0; t < n; t++) w[t] *= 1.0f / sqrtf((float)HS);
    softmax(w, n);
    kv_weighted_sum(&f->kv, kv_values(&f->kv, 0, kvh), w, n, out, kvh % 2);
    free(w);
}

/* max |a - b| over n, relative to scale */
static double relative_error(const float *a, const double *b, int n, double scale) {
    double worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(a[i] - b[i]));
    return worst / scale;
}

/* The scale of head h's sums for the query q over n keys, and the int8
 * weights' allowance (see reference) */
static double sum_scale(const Fixture *f, const float *q, int h, int n, double *allowance) {
    double out[HS];
    return reference(f, q, h, n, 1, out, allowance);
}

/* max over i of (|a_i - b_i| - allowance_i), relative to scale */
static double error_beyond(const float *a, const double *b, const double *allowance, double scale) {
    double worst = 0;
    for (int i = 0; i < HS; i++) worst = fmax(worst, fabs(a[i] - b[i]) - allowance[i]);
    return worst / scale;
}

/* Errors are relative to the scale of the sums (see reference). Against
 * float64 over the rows as stored only float32 arithmetic is left: 1e-6
 * (for int8, beyond the integer sums' rounding of q and of the weights).
 * Against the rows as given, the storage's rounding moves scores and values
 * by up to one step: float16's 2^-11 relative (5e-4), int8's 1/127 of the
 * row's largest element, whose half-step is 4e-3 of it (5e-3 with margin). */
static const double GIVEN_TOLERANCE[KV_TYPE_COUNT] = { 1e-6, 5e-4, 5e-3 };
#define STORED_TOLERANCE 1e-6
#define SAME_TOLERANCE 1e-6
#define BEYOND_WEIGHTS(type) ((type) == KV_Q8 ? " (beyond the weights' rounding to int16, both sides)" : "")

/* Decode (one row, split over blocks) of every head against float64. */
static void test_against_float64(KVType type, Isa isa) {
    Fixture f;
    fixture_init(&f, type, isa);
    float out[HEADS * HS];
    double ref[HS], allowance[HS], stored = 0, given = 0;
    run_rows(&f, 0, 1, KEYS - 1, out, NULL, NULL);
    for (int h = 0; h < HEADS; h++) {
        double scale = reference(&f, f.q + h * HS, h, KEYS, 1, ref, allowance);
        stored = fmax(stored, error_beyond(out + h * HS, ref, allowance, scale));
        scale = reference(&f, f.q + h * HS, h, KEYS, 0, ref, NULL);
        given = fmax(given, relative_error(out + h * HS, ref, HS, scale));
    }
    char name[256];
    snprintf(name, sizeof name, "attention, %s KV cache, %s: %d keys in blocks of %d within %g of float64 over the "
             "stored rows, %g over the rows given", kv_type_name(type), isa_name(isa), KEYS, QKV_KEY_BLOCK,
             STORED_TOLERANCE, GIVEN_TOLERANCE[type]);
    report(stored <= STORED_TOLERANCE && given <= GIVEN_TOLERANCE[type], name, "errors %.3g (stored), %.3g (given)",
           stored, given);
    fixture_free(&f);
}

/* A build without OpenMP (make test OPENMP=) runs one thread: no second
 * to compare with */
#ifdef _OPENMP
#define TWO_THREADS 1
#else
#define TWO_THREADS 0
#define omp_get_max_threads() 1
#define omp_set_num_threads(n) ((void)(n))
#endif

/* Split-key decode equals one-block attention; two threads give one's bits. */
static void test_split_equals_one_block(KVType type, Isa isa) {
    Fixture f;
    fixture_init(&f, type, isa);
    float one[HEADS * HS], two[HEADS * HS], whole[HEADS * HS];
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    run_rows(&f, 0, 1, KEYS - 1, one, NULL, NULL);
    omp_set_num_threads(2);
    run_rows(&f, 0, 1, KEYS - 1, two, NULL, NULL);
    omp_set_num_threads(threads);
    double err = 0, allowance[HS], theirs[HS];
    for (int h = 0; h < HEADS; h++) {
        one_block(&f, f.q + h * HS, h, KEYS, whole + h * HS);
        double scale = sum_scale(&f, f.q + h * HS, h, KEYS, allowance);
        for (int i = 0; i < HS; i++) {
            theirs[i] = whole[h * HS + i];
            allowance[i] *= 2; /* each side rounds its weights */
        }
        err = fmax(err, error_beyond(one + h * HS, theirs, allowance, scale));
    }
    char name[256];
    snprintf(name, sizeof name, "attention, %s KV cache, %s: split over %d blocks within %g of one block (a whole "
             "row's softmax%s)%s", kv_type_name(type), isa_name(isa), (KEYS + QKV_KEY_BLOCK - 1) / QKV_KEY_BLOCK,
             SAME_TOLERANCE, BEYOND_WEIGHTS(type), TWO_THREADS ? "; 2 threads give 1 thread's bits" : "");
    int threads_agree = !TWO_THREADS || memcmp(one, two, sizeof one) == 0;
    report(err <= SAME_TOLERANCE && threads_agree, name, "error %.3g; threads %s", err, threads_agree ? "agree" : "differ");
    fixture_free(&f);
}

/* The kernels with and without their requests for the rows ahead, into
 * L1 or L2 (kv_fetch_ahead: the CPU's choice), give the same bits: a
 * decode row, and a prompt of 8 rows. */
static void test_fetch_ahead(KVType type, Isa isa) {
    Fixture f;
    fixture_init(&f, type, isa);
    float out[3][8 * HEADS * HS];
    int same = 1;
    for (int n = 1; n <= 8; n += 7) {
        for (int fetch = FETCH_NONE; fetch <= FETCH_L2; fetch++) {
            f.kv.fetch_ahead = (Fetch)fetch;
            run_rows(&f, 0, n, KEYS - n, out[fetch], NULL, NULL);
        }
        for (int fetch = FETCH_L1; fetch <= FETCH_L2; fetch++)
            same = same && memcmp(out[FETCH_NONE], out[fetch], sizeof(float) * n * HEADS * HS) == 0;
    }
    char name[160];
    snprintf(name, sizeof name, "attention, %s KV cache, %s: the same bits with and without requests for the rows "
             "ahead, into L1 or L2 (decode row, 8-row prompt)", kv_type_name(type), isa_name(isa));
    report(same, name, "outputs differ");
    fixture_free(&f);
}

/* int8 rows with VNNI: a decode row makes each block's softmax inside the
 * last block's sums (kv_decode_partials); AVX-512 without VNNI goes block
 * by block with the same integers and the same exps. So the two give the
 * same bits, for ordinary blocks and for blocks whose weights are summed
 * in float (their values times 1e-32: the weights' max is below
 * KV_Q8_TINY), and so do a prompt's last row and the same row decoded.
 * Keys from..to-1 get the tiny values: one block, where the float sum's
 * bits hardly reach the output, or every key, where they are the output. */
static void test_q8_decode_blocks(int from, int to, const char *which) {
    char name[400];
    snprintf(name, sizeof name,
             "attention, q8 KV cache, avx512vnni: a decode row's blocks made together (each one's softmax inside "
             "the last's sums) give the bits of AVX-512's block by block and of a prompt's last row, with %s "
             "summed in float", which);
    if (isa_available() < ISA_AVX512_VNNI) {
        printf("skip %s: this CPU has no AVX-512 VNNI\n", name);
        return;
    }
    Fixture f;
    fixture_init(&f, KV_Q8, ISA_AVX512_VNNI);
    float tiny[KV_HEADS * HS];
    for (int t = from; t < to; t++) {
        for (int i = 0; i < KV_HEADS * HS; i++) tiny[i] = f.values[(size_t)t * KV_HEADS * HS + i] * 1e-32f;
        kv_cache_store(&f.kv, 0, t, f.keys + (size_t)t * KV_HEADS * HS, tiny);
    }
    static float decoded[HEADS * HS], widened[HEADS * HS], prompt[ROWS * HEADS * HS];
    run_rows(&f, ROWS - 1, 1, KEYS - 1, decoded, NULL, NULL);
    run_rows(&f, 0, ROWS, KEYS - ROWS, prompt, NULL, NULL);
    f.kv.isa = ISA_AVX512;
    run_rows(&f, ROWS - 1, 1, KEYS - 1, widened, NULL, NULL);
    int finite = 1;
    for (int i = 0; i < HEADS * HS; i++) finite &= isfinite(decoded[i]) != 0;
    int as_widened = memcmp(decoded, widened, sizeof decoded) == 0;
    int as_prompt = memcmp(decoded, prompt + (size_t)(ROWS - 1) * HEADS * HS, sizeof decoded) == 0;
    report(finite && as_widened && as_prompt, name, "finite %d, as AVX-512 %d, as the prompt's row %d", finite,
           as_widened, as_prompt);
    fixture_free(&f);
}

/* A prompt's rows folded block by block against the same rows one position
 * at a time: the same bits, within 1e-6 of the whole-row softmax, and an
 * observer changes nothing but receives every score and the true softmax. */
static void test_prompt_rows(KVType type, Isa isa) {
    Fixture f;
    fixture_init(&f, type, isa);
    int pos = QKV_KEY_BLOCK - ROWS / 2; /* the rows' last keys cross a block boundary */
    static float tiled[ROWS * HEADS * HS], stepped[ROWS * HEADS * HS], observed[ROWS * HEADS * HS];
    float whole[HS];
    float *scores = calloc((size_t)ROWS * HEADS * KEYS, sizeof(float));
    float *weights = calloc((size_t)ROWS * HEADS * KEYS, sizeof(float));
    run_rows(&f, 0, ROWS, pos, tiled, NULL, NULL);
    for (int t = 0; t < ROWS; t++) run_rows(&f, t, 1, pos + t, stepped + t * HEADS * HS, NULL, NULL);
    run_rows(&f, 0, ROWS, pos, observed, scores, weights);
    double err = 0, score_err = 0, weight_err = 0, allowance[HS], theirs[HS];
    for (int t = 0; t < ROWS; t++)
        for (int h = 0; h < HEADS; h++) {
            const float *q = f.q + ((size_t)t * HEADS + h) * HS;
            int n = pos + t + 1, kvh = h / (HEADS / KV_HEADS);
            one_block(&f, q, h, n, whole);
            double scale = sum_scale(&f, q, h, n, allowance);
            for (int i = 0; i < HS; i++) {
                theirs[i] = whole[i];
                allowance[i] *= 2;
            }
            err = fmax(err, error_beyond(tiled + (t * HEADS + h) * HS, theirs, allowance, scale));
            const float *s = scores + ((size_t)t * HEADS + h) * KEYS, *w = weights + ((size_t)t * HEADS + h) * KEYS;
            float *want = malloc(sizeof(float) * n);
            kv_scores(&f.kv, kv_keys(&f.kv, 0, kvh), q, 1, HS, n, want, n);
            double max = -INFINITY, sum = 0;
            for (int k = 0; k < n; k++) {
                score_err = fmax(score_err, fabs(s[k] - want[k]));
                max = fmax(max, want[k] / sqrt(HS));
            }
            for (int k = 0; k < n; k++) sum += exp(want[k] / sqrt(HS) - max);
            for (int k = 0; k < n; k++) weight_err = fmax(weight_err, fabs(w[k] - exp(want[k] / sqrt(HS) - max) / sum));
            free(want);
        }
    char name[256];
    snprintf(name, sizeof name, "attention, %s KV cache, %s: %d prompt rows folded block by block give the bits "
             "of one position at a time, within %g of the whole-row softmax%s", kv_type_name(type), isa_name(isa),
             ROWS, SAME_TOLERANCE, BEYOND_WEIGHTS(type));
    report(memcmp(tiled, stepped, sizeof tiled) == 0 && err <= SAME_TOLERANCE, name, "bits %s, error %.3g",
           memcmp(tiled, stepped, sizeof tiled) ? "differ" : "agree", err);
    snprintf(name, sizeof name, "attention, %s KV cache, %s: observed, the same output; the observer gets every "
             "score (exact) and weight (within %g of float64's softmax of them)", kv_type_name(type), isa_name(isa),
             SAME_TOLERANCE);
    report(memcmp(tiled, observed, sizeof tiled) == 0 && score_err == 0 && weight_err <= SAME_TOLERANCE, name,
           "output %s, score error %.3g, weight error %.3g", memcmp(tiled, observed, sizeof tiled) ? "differs" : "same",
           score_err, weight_err);
    free(scores);
    free(weights);
    fixture_free(&f);
}

/* ------------------------------------------------------------------------ */
/* The int8 kernels alone                                                    */

/* The int8 kernels work on panels of 16 keys and quads of value rows, on
 * quads of columns, vectors of 32 or 16 columns and chunks of 256 value
 * rows, so head sizes with partial quads and vectors (37, 42, 258: a second
 * chunk of q's columns with a partial quad), a row count not a multiple of
 * 4 and partial panels and chunks (531 rows: two chunks and 19 rows).
 * Attention's weights are never negative, but kv_weighted_sum takes any:
 * every third head size has weights of both signs (VNNI multiplies
 * unsigned bytes of the weights; it widens the rows for those). Each score within 1e-6 of float64
 * over the stored rows beyond what q's rounding to int16 can move it (half
 * a step of max|q| / 16383 times Σ|k_i|: kv_int8.h), each weighted sum
 * beyond what the weights' rounding can (half a step of each chunk's max
 * w_t · scale_t / 32767 times Σ_t |v_t,i| / scale_t); relative to
 * Σ|products|. Both are exact integers times scales, so they have the same
 * bits on every instruction set (the portable path's), and a key's score
 * is the same computed alone, first in a call, or wherever a call from row
 * 0 puts it (the prompt's blocks and a decode step's may place it
 * differently). A chunk of zero weights (summed in float) adds nothing, a
 * NaN weight makes the sums NaN, and a q with a NaN gives NaN scores. */
enum { Q8_MAX_HS = 300 };

/* How far int8 values' weighted sum out[] of rows 0..n-1 is from float64's
 * over the rows as stored, beyond what rounding the weights can move it:
 * each chunk of 256 rows (from row 0) rounds w_t · scale_t to a step of
 * their max |w_t · scale_t| / 32767, which moves element i by at most half
 * the step times Σ_t |v_t,i| / scale_t; relative to Σ_t |w_t v_t,i|. */
static double q8_sum_error(const KVCache *kv, const float *w, int n, const float *out) {
    int hs = kv->head_size;
    double ref[Q8_MAX_HS] = { 0 }, magnitude[Q8_MAX_HS] = { 0 }, rounding[Q8_MAX_HS] = { 0 }, chunk[Q8_MAX_HS] = { 0 };
    double step = 0, worst = 0;
    float v[Q8_MAX_HS];
    for (int t = 0; t < n; t++) {
        double scale = kv->value_scales[t];
        kv_value_to_float(kv, kv_values(kv, 0, 0), t, v);
        step = fmax(step, fabs(w[t]) * scale / 32767);
        for (int i = 0; i < hs; i++) {
            ref[i] += (double)w[t] * v[i];
            magnitude[i] += fabs((double)w[t] * v[i]);
            chunk[i] += fabs(v[i]) / scale;
        }
        if (t % 256 == 255 || t == n - 1) { /* a chunk's end: its rounding */
            for (int i = 0; i < hs; i++) {
                rounding[i] += step / 2 * 1.0001 * chunk[i];
                chunk[i] = 0;
            }
            step = 0;
        }
    }
    for (int i = 0; i < hs; i++) worst = fmax(worst, (fabs(out[i] - ref[i]) - rounding[i]) / magnitude[i]);
    return worst;
}

static void test_q8_kernels(Isa isa) {
    enum { ROWS_Q8 = 531, MAX_HS = Q8_MAX_HS };
    static const int sizes[] = { 8, 20, 37, 40, 42, 48, 64, 72, 136, 258, 300 };
    double worst_score = 0, worst_sum = 0;
    int placed = 1, same_bits = 1, nan_scores = 1, nan_sums = 1, padding_ignored = 1;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int hs = sizes[s];
        KVCache kv;
        kv_cache_init(&kv, KV_Q8, 1, 1, ROWS_Q8, hs);
        kv.isa = isa;
        static float w[ROWS_Q8], all[ROWS_Q8], from[ROWS_Q8], portable[ROWS_Q8];
        float q[MAX_HS], k[MAX_HS], v[MAX_HS], out[MAX_HS], portable_out[MAX_HS];
        for (int t = 0; t < ROWS_Q8; t++) {
            float range = 1.0f + (float)(t % 5); /* rows of different scales */
            for (int i = 0; i < hs; i++) {
                k[i] = uniform(-range, range);
                v[i] = uniform(-range, range);
            }
            kv_cache_store(&kv, 0, t, k, v);
            w[t] = t >= 256 && t < 512 && s % 2 ? 0.0f : uniform(s % 3 == 2 ? -1 : 0, 1); /* a chunk of zeros, every other size */
        }
        for (int i = 0; i < hs; i++) q[i] = uniform(-1, 1);
        const unsigned char *keys = kv_keys(&kv, 0, 0), *values = kv_values(&kv, 0, 0);
        kv.isa = ISA_PORTABLE;
        kv_scores(&kv, keys, q, 1, hs, ROWS_Q8, portable, ROWS_Q8);
        kv_weighted_sum(&kv, values, w, ROWS_Q8, portable_out, 0);
        kv.isa = isa;
        kv_scores(&kv, keys, q, 1, hs, ROWS_Q8, all, ROWS_Q8);
        kv_weighted_sum(&kv, values, w, ROWS_Q8, out, 1);
        same_bits &= memcmp(portable, all, sizeof all) == 0 && memcmp(portable_out, out, sizeof(float) * hs) == 0;
        worst_sum = fmax(worst_sum, q8_sum_error(&kv, w, ROWS_Q8, out));
        /* sums that end inside a quad of written rows (the rows past n weigh 0) */
        for (int end = ROWS_Q8 - 2; end < ROWS_Q8; end++) {
            kv.isa = ISA_PORTABLE;
            kv_weighted_sum(&kv, values, w, end, portable_out, 0);
            kv.isa = isa;
            kv_weighted_sum(&kv, values, w, end, out, 1);
            same_bits &= memcmp(portable_out, out, sizeof(float) * hs) == 0;
            worst_sum = fmax(worst_sum, q8_sum_error(&kv, w, end, out));
        }
        /* a key's padding to a quad of elements (never written) does not count */
        if (hs % 4) {
            unsigned char *stored = (unsigned char *)keys;
            for (int t = 0; t < ROWS_Q8; t++)
                for (int i = hs; i % 4; i++)
                    stored[(size_t)(t - t % 16) * kv.row_bytes + (size_t)(i / 4) * 64 + (size_t)(t % 16) * 4 + i % 4] = 0xff;
            kv_scores(&kv, keys, q, 1, hs, ROWS_Q8, from, ROWS_Q8);
            padding_ignored &= memcmp(from, all, sizeof all) == 0;
        }
        double q_max = 0;
        for (int i = 0; i < hs; i++) q_max = fmax(q_max, fabs(q[i]));
        for (int t = 0; t < ROWS_Q8; t++) {
            double dot = 0, size = 0, k_sum = 0;
            kv_key_to_float(&kv, keys, t, k);
            for (int i = 0; i < hs; i++) {
                dot += (double)q[i] * k[i];
                size += fabs((double)q[i] * k[i]);
                k_sum += fabs(k[i]);
            }
            worst_score = fmax(worst_score, (fabs(all[t] - dot) - q_max / 16383 / 2 * 1.0001 * k_sum) / size);
            if (t % 7 && t > 40) continue; /* the places: the first 41 and every 7th */
            kv_scores(&kv, keys + t * kv.row_bytes, q, 1, hs, ROWS_Q8 - t, from, ROWS_Q8);
            placed &= memcmp(&from[0], &all[t], sizeof(float)) == 0;
            kv_scores(&kv, keys + t * kv.row_bytes, q, 1, hs, 1, from, ROWS_Q8);
            placed &= memcmp(&from[0], &all[t], sizeof(float)) == 0;
        }
        w[300] = NAN;
        kv_weighted_sum(&kv, values, w, ROWS_Q8, out, 1);
        for (int i = 0; i < hs; i++) nan_sums &= isnan(out[i]);
        q[hs / 2] = NAN;
        kv_scores(&kv, keys, q, 1, hs, ROWS_Q8, all, ROWS_Q8);
        for (int t = 0; t < ROWS_Q8; t++) nan_scores &= isnan(all[t]);
        kv_cache_free(&kv);
    }
    char name[400];
    snprintf(name, sizeof name, "int8 KV rows, %s: scores and weighted sums of %d rows (and sums of %d and %d: "
             "ending inside a quad; beyond q's and the weights' rounding to int16; weights of both signs), head "
             "sizes 8 to 300, within %g of float64; the portable path's bits; a key's score the same alone, first in a "
             "call or anywhere in one; keys' padding bytes ignored; NaN from a NaN in q or in the weights",
             isa_name(isa), ROWS_Q8, ROWS_Q8 - 2, ROWS_Q8 - 1, STORED_TOLERANCE);
    report(worst_score <= STORED_TOLERANCE && worst_sum <= STORED_TOLERANCE && placed && same_bits && nan_scores &&
               nan_sums && padding_ignored,
           name, "score error %.3g, sum error %.3g, scores %s, %s the portable path's, padding %s, scores %s, sums %s",
           worst_score, worst_sum, placed ? "agree" : "depend on place", same_bits ? "equal to" : "differ from",
           padding_ignored ? "ignored" : "counted", nan_scores ? "NaN from NaN" : "a NaN lost", nan_sums ? "NaN from NaN" : "a NaN lost");
}

/* ------------------------------------------------------------------------ */
/* Resident memory of a long prefill                                         */

/* A llama2.c legacy checkpoint in memory: random weights, the given shape. */
static unsigned char *legacy_checkpoint(int dim, int hidden, int layers, int heads, int kv_heads, int vocab, int seq,
                                        size_t *size) {
    int hs = dim / heads, kv_dim = kv_heads * hs;
    size_t floats = (size_t)vocab * dim +
                    (size_t)layers * (2 * dim + 2 * (size_t)dim * dim + 2 * (size_t)dim * kv_dim + 3 * (size_t)dim * hidden) +
                    dim + (size_t)seq * hs;
    *size = 28 + floats * sizeof(float);
    unsigned char *buf = malloc(*size);
    int32_t header[7] = { dim, hidden, layers, heads, kv_heads, vocab, seq };
    memcpy(buf, header, sizeof header);
    float *w = (float *)(buf + 28);
    lcg = 7;
    for (size_t i = 0; i < floats; i++) w[i] = uniform(-0.1f, 0.1f);
    return buf;
}

/* ------------------------------------------------------------------------ */
/* The bench's in-order read of what a decode step reads                     */

/* Σ of the bytes of every span, a byte at a time */
static unsigned long long spans_byte_sum(const ReadPhase *phases, int n_phases) {
    unsigned long long sum = 0;
    for (int k = 0; k < n_phases; k++)
        for (int i = 0; i < phases[k].n_spans; i++)
            for (size_t j = 0; j < phases[k].spans[i].bytes; j++) sum += ((const unsigned char *)phases[k].spans[i].data)[j];
    return sum;
}

/* A span of part in phases before phase k's span i with the same start and
 * length: the same rows read again (a kv head's, by another query head) */
static int span_seen(const ReadPhase *phases, int k, int i, int part) {
    const ReadSpan *s = &phases[k].spans[i];
    for (int k2 = 0; k2 <= k; k2++)
        for (int i2 = 0; phases[k2].part == part && i2 < (k2 < k ? phases[k2].n_spans : i); i2++)
            if (phases[k2].spans[i2].data == s->data && phases[k2].spans[i2].bytes == s->bytes) return 1;
    return 0;
}

/* 1 when one pass (bench_one_pass) over each part holds the bytes of that
 * part's spans of phases, each span read twice (two query heads a kv head)
 * once, in ascending memory order with no overlap, the same bytes (byte
 * sums, a byte at a time; the step's spans do not partly overlap), and no
 * requests ahead */
static int one_pass_same_bytes(const ReadPhase *phases, int n_phases) {
    int n_spans = 0, ok = 1;
    for (int k = 0; k < n_phases; k++) n_spans += phases[k].n_spans;
    ReadSpan *out = malloc((size_t)n_spans * sizeof *out + 1);
    if (!out) return 0;
    for (int part = 0; part < 2; part++) {
        ReadPhase pass = bench_one_pass(phases, n_phases, part, out);
        size_t bytes = 0, got_bytes = 0;
        unsigned long long want = 0, got = spans_byte_sum(&pass, 1);
        for (int k = 0; k < n_phases; k++)
            for (int i = 0; phases[k].part == part && i < phases[k].n_spans; i++)
                if (!span_seen(phases, k, i, part)) {
                    bytes += phases[k].spans[i].bytes;
                    want += spans_byte_sum(&(ReadPhase){ &phases[k].spans[i], 1, part, FETCH_NONE }, 1);
                }
        for (int i = 0; i < pass.n_spans; i++) got_bytes += pass.spans[i].bytes;
        ok &= pass.part == part && pass.fetch == FETCH_NONE && got_bytes == bytes && got == want && bytes > 0;
        for (int i = 1; i < pass.n_spans; i++)
            ok &= (const unsigned char *)pass.spans[i - 1].data + pass.spans[i - 1].bytes <=
                  (const unsigned char *)pass.spans[i].data;
    }
    free(out);
    return ok;
}

/* 1 when the spans of the keys and values part cover, in the cache's keys,
 * values and (int8) scales, exactly the rows of slots 0..n_keys-1 of every
 * layer and kv head (int8 keys: 0..key_slots-1, whole panels), each byte
 * once for each query head that reads it (reads: query heads per kv head),
 * and no other byte */
static int spans_cover(const KVCache *kv, const ReadPhase *phases, int n_phases, int n_keys, int key_slots, int reads) {
    size_t rows = (size_t)kv->n_layers * kv->n_kv_heads * kv->stride;
    struct { const unsigned char *base; size_t bytes, row; unsigned char *count; } areas[4] = {
        { kv->keys, rows * kv->row_bytes, kv->row_bytes, NULL },
        { kv->values, rows * kv->value_bytes, kv->value_bytes, NULL },
        { (const unsigned char *)kv->key_scales, kv->key_scales ? rows * sizeof(float) : 0, sizeof(float), NULL },
        { (const unsigned char *)kv->value_scales, kv->value_scales ? rows * sizeof(float) : 0, sizeof(float), NULL },
    };
    int ok = 1;
    for (int a = 0; a < 4; a++) ok &= (areas[a].count = calloc(areas[a].bytes + 1, 1)) != NULL;
    for (int k = 0; ok && k < n_phases; k++)
        for (int i = 0; phases[k].part == 1 && i < phases[k].n_spans; i++) {
            const unsigned char *p = phases[k].spans[i].data;
            size_t bytes = phases[k].spans[i].bytes;
            int found = 0;
            for (int a = 0; a < 4 && !found; a++)
                if (areas[a].base && p >= areas[a].base && p + bytes <= areas[a].base + areas[a].bytes) {
                    found = 1;
                    for (size_t j = 0; j < bytes; j++) areas[a].count[p - areas[a].base + j]++;
                }
            ok &= found;
        }
    for (int a = 0; ok && a < 4; a++)
        for (size_t j = 0; j < areas[a].bytes; j++) {
            size_t row = j / areas[a].row, slot = row % (size_t)kv->stride;
            size_t slots = a == 0 || a == 2 ? (size_t)key_slots : (size_t)n_keys;
            ok &= areas[a].count[j] == (slot < slots ? reads : 0);
        }
    for (int a = 0; a < 4; a++) free(areas[a].count);
    return ok;
}

/* 1 when the weights' phases request their lines as their kernel does
 * (every matrix of the test model has one type, so one kernel) and the
 * keys' and values' into L1 where the cache's kernels request theirs
 * (kv_fetch_ahead) */
static int fetch_as_kernels(const Model *m, const KVCache *kv, const ReadPhase *phases, int n_phases) {
    int ok = 1;
    Fetch weights = m->weights.layers[0].wq.kernel->fetch;
    for (int k = 0; k < n_phases; k++) ok &= phases[k].fetch == (phases[k].part == 1 ? kv->fetch_ahead : weights);
    return ok;
}

/* roofline_read_in_order on a team of threads, as the bench reads */
typedef struct {
    InOrderRead *r;
    const ReadPhase *phases;
    int n_phases;
} InOrderJob;

static int read_in_order_on_team(Team *team, void *ctx) {
    InOrderJob *job = ctx;
    roofline_read_in_order(job->r, team, job->phases, job->n_phases);
    return 0;
}

/* 1 when each layer's attention phase (the second of its five) reads
 * query head h's keys and values in turn from h = 0 on, each starting at
 * the first key of kv head h / (n_heads / n_kv_heads) (attention.h's
 * order): a run of blocks' keys (int8: and their scales), then each
 * block's values (int8: their scales, then the rows) */
static int heads_in_order(const KVCache *kv, const ReadPhase *phases, int n_heads, int n_keys) {
    int blocks = (n_keys + QKV_KEY_BLOCK - 1) / QKV_KEY_BLOCK, runs = (blocks + QKV_DECODE_RUN - 1) / QKV_DECODE_RUN;
    int spans = kv->type == KV_Q8 ? 2 : 1, per_head = spans * (runs + blocks), ok = 1;
    for (int l = 0; l < kv->n_layers; l++) {
        const ReadPhase *attention = &phases[5 * l + 1];
        ok &= attention->part == 1 && attention->n_spans == n_heads * per_head;
        for (int h = 0; ok && h < n_heads; h++)
            ok &= attention->spans[h * per_head].data == kv_keys(kv, l, h / (n_heads / kv->n_kv_heads));
    }
    return ok;
}

/* A model with two query heads to each kv head (dim 64, head size 16) and
 * a cache of 600 positions (two whole blocks of keys and a part): the
 * weights part is every matrix's bytes (4 × the shapes' parameters: every
 * row count a multiple of the panels' 16); the keys and values part is, for
 * every layer and query head, 600 key rows and 600 value rows (float32
 * 2 × 64 bytes, float16 2 × 32, int8 16 + 16 + two 4-byte scales, the
 * keys in whole panels of 16); the read, with 1, 2 and 3 threads, sums every
 * byte once. */
static void test_step_reads(void) {
    enum { DIM = 64, HIDDEN = 128, LAYERS = 2, HEADS = 4, KV_HEADS = 2, VOCAB = 256, KEYS = 600 };
    size_t size;
    unsigned char *buf = legacy_checkpoint(DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, KEYS, &size);
    Model m;
    char err[256], name[256];
    if (model_load_memory(&m, buf, size, err, sizeof err)) {
        report(0, "step reads: the checkpoint loads", "%s", err);
        free(buf);
        return;
    }
    const size_t row_bytes[KV_TYPE_COUNT] = { 2 * 64, 2 * 32, 16 + 16 + 2 * 4 }; /* a key's and a value's */
    size_t kv_dim = DIM / HEADS * KV_HEADS;
    size_t weights = 4 * ((size_t)LAYERS * (2 * DIM * DIM + 2 * DIM * kv_dim + 3 * DIM * HIDDEN) + (size_t)VOCAB * DIM);
    for (int type = 0; type < KV_TYPE_COUNT; type++) {
        RunState s;
        if (run_state_init_kv(&s, &m.config, KEYS, (KVType)type)) {
            report(0, "step reads: a run state", "out of memory");
            break;
        }
        float k[DIM], v[DIM];
        for (int layer = 0; layer < LAYERS; layer++)
            for (int pos = 0; pos < KEYS; pos++) {
                for (size_t i = 0; i < kv_dim; i++) k[i] = uniform(-2, 2), v[i] = uniform(-2, 2);
                kv_cache_store(&s.kv_cache, layer, pos, k, v);
            }
        ReadSpan *spans;
        int n_phases;
        ReadPhase *phases = bench_step_reads(&m, &s.kv_cache, KEYS, &spans, &n_phases);
        /* int8 keys are read in whole panels: 608 rows of keys (16 + 4 bytes) for 600 */
        size_t kv_bytes = (size_t)LAYERS * HEADS * (KEYS * row_bytes[type] + (type == KV_Q8 ? 8 * (16 + 4) : 0));
        unsigned long long want = phases ? spans_byte_sum(phases, n_phases) : 0;
        for (int threads = 1; phases && threads <= 3; threads++) {
            InOrderRead r;
            InOrderJob job = { &r, phases, n_phases };
            team_main(threads, read_in_order_on_team, &job);
            snprintf(name, sizeof name, "step reads, %s cache, %d thread%s: %zu weight bytes and %zu of keys and values, "
                     "each byte read once a pass", kv_type_name((KVType)type), threads, threads > 1 ? "s" : "", weights,
                     kv_bytes);
            report(r.bytes[0] == weights && r.bytes[1] == kv_bytes && r.byte_sum == want && r.passes >= 3 &&
                       r.seconds[0] > 0 && r.seconds[1] > 0, name, "%zu and %zu bytes, sum %llu (bytes one by one %llu), "
                       "%d passes", r.bytes[0], r.bytes[1], r.byte_sum, want, r.passes);
        }
        snprintf(name, sizeof name, "step reads, %s cache: the spans cover slots 0..%d of every layer's and kv head's "
                 "rows (and scales), twice (two query heads each), nothing else; each query head's in turn, from its kv "
                 "head's first key; requested ahead as by the kernels", kv_type_name((KVType)type),
                 KEYS - 1);
        int key_slots = type == KV_Q8 ? (KEYS + 15) / 16 * 16 : KEYS; /* int8 keys: panels of 16 */
        report(phases && spans_cover(&s.kv_cache, phases, n_phases, KEYS, key_slots, HEADS / KV_HEADS) &&
                   heads_in_order(&s.kv_cache, phases, HEADS, KEYS) &&
                   fetch_as_kernels(&m, &s.kv_cache, phases, n_phases),
               name, "a span outside, or out of order, or requested otherwise, or out of memory");
        snprintf(name, sizeof name, "step reads, %s cache: the paired reads' one pass over the weights, and over the "
                 "keys and values (two query heads a kv head), holds each part's bytes once, in memory order", kv_type_name((KVType)type));
        report(phases && one_pass_same_bytes(phases, n_phases), name, "other spans, bytes or order, or out of memory");
        free(phases);
        free(spans);
        run_state_free(&s);
    }
    model_free(&m);
    free(buf);
}

/* The number of threads this process has (/proc/self/status), or -1. */
static long thread_count(void) {
    char line[256];
    long n = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) n = atol(line + 8);
    if (f) fclose(f);
    return n;
}

/* An 8k-token prefill without an observer keeps no row of scores: its
 * resident memory grows by the KV cache it fills and less than 2 MiB more.
 * The same prefill observed (it keeps each chunk's score and weight rows)
 * grows by at least 3/4 of those rows more: the measure sees them.
 * bench_prefill_growth_kb forks, and a child forked while OpenMP's worker
 * threads exist hangs at its first parallel region (libgomp's pool is not
 * copied): so this runs in a fresh process (main's PREFILL_MEMORY_ARG),
 * which must still have one thread when it forks. */
static void test_prefill_memory(void) {
    enum { N = 8192 };
#if defined(__SANITIZE_ADDRESS__) || QKV_CLANG_ASAN
    printf("skip prefill memory: AddressSanitizer's shadow memory and quarantine are resident too\n");
    return;
#endif
    size_t size;
    unsigned char *buf = legacy_checkpoint(64, 128, 2, 4, 4, 256, N, &size);
    Model m;
    char err[256];
    if (model_load_memory(&m, buf, size, err, sizeof err)) {
        report(0, "prefill memory: the checkpoint loads", "%s", err);
        free(buf);
        return;
    }
    long threads = thread_count();
    if (threads != 1) {
        report(0, "prefill memory: one thread before the measure forks", "%ld threads", threads);
        model_free(&m);
        free(buf);
        return;
    }
    const Config *c = &m.config;
    long kv_kb = (long)(kv_cache_bytes_per_token(c) * N / 1024);
    long rows_kb = (long)((size_t)QKV_OBSERVED_ROWS * c->n_heads * N * 2 * sizeof(float) / 1024);
    long tiled = bench_prefill_growth_kb(&m, N, KV_F32, 0), observed = bench_prefill_growth_kb(&m, N, KV_F32, 1);
    char name[256];
    if (tiled < 0 || observed < 0) {
        printf("skip prefill memory: /proc/self/clear_refs or /proc/self/status unavailable\n");
    } else {
        snprintf(name, sizeof name, "prefill of %d tokens without an observer: resident memory grows %ld kB, within "
                 "the KV cache (%ld kB) + 2048 kB", N, tiled, kv_kb);
        report(tiled <= kv_kb + 2048, name, "grew %ld kB", tiled);
        snprintf(name, sizeof name, "the same prefill observed grows %ld kB: at least the KV cache + 3/4 of the "
                 "score and weight rows (%ld kB)", observed, rows_kb);
        report(observed >= kv_kb + rows_kb * 3 / 4, name, "grew %ld kB", observed);
    }
    model_free(&m);
    free(buf);
}

#define PREFILL_MEMORY_ARG "--prefill-memory"

/* test_prefill_memory in a new process of this program (posix_spawn, which
 * execs at once: nothing of this process's OpenMP pool comes along); the
 * program is /proc/self/exe, else the path it was started by. */
static void spawn_prefill_memory(const char *argv0) {
    char *args[] = { "/proc/self/exe", PREFILL_MEMORY_ARG, NULL };
    extern char **environ;
    pid_t pid;
    int status = 0;
    fflush(stdout);
    int rc = posix_spawn(&pid, args[0], NULL, NULL, args, environ);
    if (rc == ENOENT) rc = posix_spawn(&pid, args[0] = (char *)argv0, NULL, NULL, args, environ);
    if (rc != 0) {
        report(0, "prefill memory: a new process measures it", "posix_spawn %s: %s", args[0], strerror(rc));
        return;
    }
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        report(0, "prefill memory: a new process measures it", "the process did not exit (status %#x)", status);
        return;
    }
    if (WEXITSTATUS(status) != 0) failures++; /* its FAIL lines are printed */
}

/* The bench's running median past 2048, where the log-spaced positions are
 * 9% apart: a spike at one position gives way to its neighbours' (the
 * window of n +- n/16 held the position alone), and the last position is
 * its own value. */
static void test_running_median(void) {
    Model m;
    memset(&m, 0, sizeof m);
    m.config = (Config){ .dim = 64, .hidden_dim = 128, .n_layers = 1, .n_heads = 2, .n_kv_heads = 2,
                         .head_size = 32, .vocab_size = 100, .seq_len = 4096 };
    BenchOptions options = { 0 };
    int positions[5] = { 2048, 2233, 2435, 2656, 2896 };
    double total[5] = { 1, 1, 1, 1, 1 }, attention[5] = { 0.20, 0.21, 0.90, 0.23, 0.24 };
    Bench b = { .model = &m, .options = &options };
    b.cached = (Curve){ .n = 5, .positions = positions, .total_ms = total, .attention_ms = attention };
    Derived d;
    if (derive(&b, &d)) { report(0, "bench running median", "out of memory"); return; }
    report(d.attention_smooth[2] == 0.23 && d.attention_smooth[1] == 0.21 && d.attention_smooth[3] == 0.24 &&
           d.attention_smooth[0] == 0.20 && d.attention_smooth[4] == 0.24,
           "bench: the running median past 2048 takes the neighbours (a spike of 0.90 at 2435 -> 0.23), "
           "the ends their own", "smoothed %g %g %g %g %g", d.attention_smooth[0], d.attention_smooth[1],
           d.attention_smooth[2], d.attention_smooth[3], d.attention_smooth[4]);
    free(d.block);
}

/* A decode row over more keys than one run of QKV_DECODE_RUN blocks (a
 * context past 16,384 keys), on one thread: that thread's blocks of a head
 * come in runs, each within its scratch. Against float64 attention over the
 * same float32 rows (one head, head size 8), within 1e-5 of the sums'
 * scale. */
static void test_long_decode(void) {
    enum { LONG_HS = 8, LONG_KEYS = (QKV_DECODE_RUN + 1) * QKV_KEY_BLOCK + 77 };
    KVCache kv;
    if (kv_cache_init(&kv, KV_F32, 1, 1, LONG_KEYS, LONG_HS)) {
        report(0, "attention: a decode row over more than one run of blocks", "out of memory");
        return;
    }
    float *keys = malloc(sizeof(float) * LONG_KEYS * LONG_HS), *values = malloc(sizeof(float) * LONG_KEYS * LONG_HS);
    float *partials = malloc(sizeof(float) * attention_partials_floats(1, LONG_KEYS, LONG_HS));
    float *states = malloc(sizeof(float) * attention_states_floats(1, 1, LONG_HS));
    double *x = malloc(sizeof(double) * LONG_KEYS);
    float q[LONG_HS], out[LONG_HS];
    lcg = 77;
    for (int i = 0; i < LONG_HS; i++) q[i] = uniform(-2, 2);
    for (int i = 0; i < LONG_KEYS * LONG_HS; i++) {
        keys[i] = uniform(-1, 1);
        values[i] = uniform(-1, 1);
    }
    for (int t = 0; t < LONG_KEYS; t++) kv_cache_store(&kv, 0, t, keys + (size_t)t * LONG_HS, values + (size_t)t * LONG_HS);
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    AttentionRows a = { .n_heads = 1, .n = 1, .pos = LONG_KEYS - 1, .q = q, .q_stride = LONG_HS, .out = out,
                        .out_stride = LONG_HS, .partials = partials, .states = states };
    attention_layer(&kv, 0, &a);
    omp_set_num_threads(threads);
    double max = -INFINITY, sum = 0, want[LONG_HS] = { 0 }, magnitude[LONG_HS] = { 0 }, scale = 0, err = 0;
    for (int t = 0; t < LONG_KEYS; t++) {
        x[t] = 0;
        for (int i = 0; i < LONG_HS; i++) x[t] += (double)q[i] * keys[(size_t)t * LONG_HS + i];
        x[t] /= sqrt(LONG_HS);
        max = fmax(max, x[t]);
    }
    for (int t = 0; t < LONG_KEYS; t++) {
        double e = exp(x[t] - max);
        sum += e;
        for (int i = 0; i < LONG_HS; i++) {
            want[i] += e * values[(size_t)t * LONG_HS + i];
            magnitude[i] += e * fabs(values[(size_t)t * LONG_HS + i]);
        }
    }
    for (int i = 0; i < LONG_HS; i++) scale = fmax(scale, magnitude[i] / sum);
    for (int i = 0; i < LONG_HS; i++) err = fmax(err, fabs(out[i] - want[i] / sum) / scale);
    char name[200];
    snprintf(name, sizeof name, "attention: a decode row over %d keys (%d blocks, past one run of %d) on one thread "
             "within 1e-5 of float64", LONG_KEYS, (LONG_KEYS + QKV_KEY_BLOCK - 1) / QKV_KEY_BLOCK, QKV_DECODE_RUN);
    report(err <= 1e-5, name, "error %.3g", err);
    kv_cache_free(&kv);
    free(keys); free(values); free(partials); free(states); free(x);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], PREFILL_MEMORY_ARG) == 0) {
        test_prefill_memory();
        return failures ? 1 : 0;
    }
    /* VNNI, on 256-bit vectors or 512-bit ones, has kernels of int8 rows
     * only (their products, and with AVX-512 a decode row's blocks made
     * together: kv_decode_partials); float rows there are AVX2's or AVX-512's */
    Isa widest = isa_available() < ISA_AVX512_VNNI ? isa_available() : ISA_AVX512_VNNI;
    for (int isa = 0; isa <= (int)widest; isa++)
        for (int type = 0; type < KV_TYPE_COUNT; type++) {
            if (!isa_runs((Isa)isa)) continue; /* 256-bit VNNI on an AVX-512 CPU without VNNI */
            if ((isa == ISA_AVX_VNNI || isa == ISA_AVX512_VNNI) && type != KV_Q8) continue;
            test_against_float64((KVType)type, (Isa)isa);
            test_split_equals_one_block((KVType)type, (Isa)isa);
            test_prompt_rows((KVType)type, (Isa)isa);
            test_fetch_ahead((KVType)type, (Isa)isa);
        }
    Isa vnni = isa_available() < ISA_AVX512_VNNI ? isa_available() : ISA_AVX512_VNNI; /* int8 keys' scores use it */
    for (int isa = 0; isa <= (int)vnni; isa++)
        if (isa_runs((Isa)isa)) test_q8_kernels((Isa)isa);
    test_q8_decode_blocks(QKV_KEY_BLOCK, 2 * QKV_KEY_BLOCK, "one block");
    test_q8_decode_blocks(0, KEYS, "every block");
    test_long_decode();
    test_step_reads();
    test_running_median();
    spawn_prefill_memory(argv[0]);
    return failures ? 1 : 0;
}
