/* test_engine.c — the engine's kernels, forward pass and tokenizer against
 * independent oracles: the seeds' worked example, hand-computed values,
 * golden logits from export/reference.py (NumPy, float64) and Llama 2's
 * reference token ids.
 *
 * Prints one line per check: "ok NAME", "FAIL NAME: why" or "skip NAME: why";
 * tests/run_tests.sh counts them. Run from the repository root. */
#include "../model.h" /* linked with build/engine.o */
#include "../tokenizer.h"
#include "../sampler.h"
#include "../threads.h"
#include "../rope.h" /* static inline: rope_angles_exact */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;

static void report(int ok, const char *name, const char *fmt, ...) {
    if (ok) { printf("ok %s\n", name); return; }
    failures++;
    printf("FAIL %s: ", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static void skip(const char *name, const char *why) { printf("skip %s: %s\n", name, why); }

static int close_to(float a, float b, float tol) { return fabsf(a - b) <= tol; }

static int vector_close(const float *a, const float *b, int n, float tol, char *why, size_t why_len) {
    for (int i = 0; i < n; i++)
        if (!close_to(a[i], b[i], tol)) {
            snprintf(why, why_len, "element %d: %.6f, expected %.6f", i, a[i], b[i]);
            return 0;
        }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* The seeds' worked example: "The river bank flooded"                       */

/* X, W_Q, W_K, W_V from the article (rows = tokens / input features). The
 * engine's matmul takes W as [out, in], so the matrices are given
 * transposed: row j is output j. */
static const float X[4][3] = { { 0, 0, 1 }, { 1, 0, 0 }, { 0, 1, 0 }, { 1, 0, 1 } };
static const float WQ_T[2 * 3] = { 1, 2, 0, 0, 0, 1 };
static const float WK_T[2 * 3] = { 2, 0, 0, 0, 1, 1 };
static const float WV_T[2 * 3] = { 1, 0, 0, 0, 1, 0 };

static void project_tokens(float q[4][2], float k[4][2], float v[4][2]) {
    Matrix wq = { WEIGHT_F32, 2, 3, WQ_T }, wk = { WEIGHT_F32, 2, 3, WK_T }, wv = { WEIGHT_F32, 2, 3, WV_T };
    for (int i = 0; i < 4; i++) {
        matmul(q[i], X[i], &wq);
        matmul(k[i], X[i], &wk);
        matmul(v[i], X[i], &wv);
    }
}

static void test_worked_example(void) {
    float q[4][2], k[4][2], v[4][2], out[2], scores[4], weights[4];
    char why[128] = "";
    project_tokens(q, k, v);
    const float q_bank[2] = { 2, 0 }, q_flooded[2] = { 1, 1 };
    report(vector_close(q[2], q_bank, 2, 0, why, sizeof why) && vector_close(q[3], q_flooded, 2, 0, why, sizeof why),
           "worked example: queries ('bank' [2,0], 'flooded' [1,1])", "%s", why);
    /* "river" and "flooded" advertise water with a 2 (their keys' first
     * number); the values: river and flooded [1,0], bank [0,1], The nothing */
    report(k[1][0] == 2 && k[3][0] == 2 && k[0][0] == 0 && k[2][0] == 0,
           "worked example: keys' first number (river and flooded 2, The and bank 0)", "keys [%g,%g,%g,%g]",
           k[0][0], k[1][0], k[2][0], k[3][0]);
    const float v_all[8] = { 0, 0, 1, 0, 0, 1, 1, 0 };
    report(vector_close(&v[0][0], v_all, 8, 0, why, sizeof why),
           "worked example: values (The [0,0], river [1,0], bank [0,1], flooded [1,0])", "%s", why);

    /* without the mask "bank" sees all four tokens */
    attention_head(out, scores, weights, q[2], &k[0][0], &v[0][0], 4, 2);
    const float bank_scores[4] = { 0, 4, 0, 4 }, bank_weights[4] = { 0.028f, 0.472f, 0.028f, 0.472f };
    const float bank_out[2] = { 0.944f, 0.028f };
    report(vector_close(scores, bank_scores, 4, 1e-6f, why, sizeof why), "worked example: bank's raw scores [0,4,0,4]", "%s", why);
    report(vector_close(weights, bank_weights, 4, 0.0006f, why, sizeof why),
           "worked example: bank's weights [0.028,0.472,0.028,0.472]", "%s", why);
    report(vector_close(out, bank_out, 2, 0.0006f, why, sizeof why), "worked example: bank's output [0.944,0.028]", "%s", why);
    /* the softmax spelled out: e^0 = 1 and e^2.83 = 16.92, the row's total
     * 35.84, so river's weight is 16.92 / 35.84 = 0.472; and 94% of bank's
     * attention is on the two water words */
    report(close_to(weights[1] / weights[0], 16.92f, 0.005f), "worked example: e^2.83 = 16.92 (river's weight / The's)",
           "%.4f", weights[1] / weights[0]);
    report(close_to(1.0f / weights[0], 35.84f, 0.005f), "worked example: the row's total 35.84 (1 / The's weight)",
           "%.4f", 1.0f / weights[0]);
    report(close_to(weights[1] + weights[3], 0.94f, 0.005f), "worked example: 94% on the two water words",
           "%.4f", weights[1] + weights[3]);

    /* with the causal mask "bank" sees The, river, bank */
    attention_head(out, scores, weights, q[2], &k[0][0], &v[0][0], 3, 2);
    const float causal_weights[3] = { 0.053f, 0.894f, 0.053f }, causal_out[2] = { 0.894f, 0.053f };
    report(vector_close(weights, causal_weights, 3, 0.0006f, why, sizeof why),
           "worked example: causal weights of bank [0.053,0.894,0.053]", "%s", why);
    report(vector_close(out, causal_out, 2, 0.0006f, why, sizeof why), "worked example: causal output [0.894,0.053]", "%s", why);

    /* "The" sees only itself; "flooded", the last token, sees every key with
     * the mask or without (the seeds: its row is unchanged), and sums to 1 */
    attention_head(out, scores, weights, q[0], &k[0][0], &v[0][0], 1, 2);
    report(weights[0] == 1.0f, "worked example: 'The' under the mask attends only to itself", "weight %f", weights[0]);
    float full[4];
    attention_head(out, scores, full, q[3], &k[0][0], &v[0][0], 4, 2);
    float sum = full[0] + full[1] + full[2] + full[3];
    report(close_to(sum, 1.0f, 1e-6f), "worked example: a weights row sums to 1", "sum %f", sum);
}

/* ------------------------------------------------------------------------ */
/* Kernels against hand-computed values                                      */

static void test_kernels(void) {
    char why[128] = "";
    float x[3] = { 1, 2, 3 };
    softmax(x, 3);
    const float expect[3] = { 0.09003057f, 0.24472847f, 0.66524096f };
    report(vector_close(x, expect, 3, 1e-6f, why, sizeof why), "softmax [1,2,3]", "%s", why);

    float big[2] = { 1000, 999 };
    softmax(big, 2);
    const float big_expect[2] = { 0.73105858f, 0.26894142f }; /* 1/(1+e^-1) */
    report(vector_close(big, big_expect, 2, 1e-6f, why, sizeof why), "softmax is stable at 1000", "%s", why);

    float v[4] = { 1, 2, 3, 4 }, w[4] = { 1, 1, 1, 1 }, out[4];
    rmsnorm(out, v, w, 4, 1e-5f);
    /* mean square 7.5, 1/sqrt(7.50001) = 0.36514813 */
    const float norm_expect[4] = { 0.36514813f, 0.73029626f, 1.09544439f, 1.46059252f };
    report(vector_close(out, norm_expect, 4, 1e-6f, why, sizeof why), "rmsnorm [1,2,3,4]", "%s", why);
    float w2[4] = { 2, 0, 1, -1 };
    rmsnorm(out, v, w2, 4, 1e-5f);
    const float norm2_expect[4] = { 0.73029626f, 0, 1.09544439f, -1.46059252f };
    report(vector_close(out, norm2_expect, 4, 1e-6f, why, sizeof why), "rmsnorm applies its weight", "%s", why);
    /* squares past FLT_MAX: the same direction, 1/sqrt(7.5) = 0.36514837
     * (eps is nothing beside 7.5e40); it was 0 (1/sqrt(inf)) */
    float huge[4] = { 1e20f, 2e20f, 3e20f, 4e20f };
    rmsnorm(out, huge, w, 4, 1e-5f);
    const float huge_expect[4] = { 0.36514837f, 0.73029674f, 1.09544512f, 1.46059349f };
    report(vector_close(out, huge_expect, 4, 1e-6f, why, sizeof why), "rmsnorm of [1,2,3,4] x 1e20", "%s", why);
    /* LayerNorm of [1,2,3,4]: mean 2.5, variance 1.25, (x - 2.5)/sqrt(1.25 + 1e-5)
     * = ∓1.3416354, ∓0.4472118; the weights, then the biases */
    float lb[4] = { 0.5f, 0, 0, 0 };
    layernorm(out, v, w2, lb, 4, 1e-5f);
    const float layer_expect[4] = { -2.6832708f + 0.5f, 0, 0.4472118f, -1.3416354f };
    report(vector_close(out, layer_expect, 4, 1e-6f, why, sizeof why), "layernorm [1,2,3,4]", "%s", why);
    /* x 1e20: variance 1.25e40 past FLT_MAX (it was 0: the output the biases) */
    layernorm(out, huge, w, lb, 4, 1e-5f);
    const float layer_huge[4] = { -1.3416408f + 0.5f, -0.4472136f, 0.4472136f, 1.3416408f };
    report(vector_close(out, layer_huge, 4, 1e-6f, why, sizeof why), "layernorm of [1,2,3,4] x 1e20", "%s", why);

    /* two heads of size 4: pair 0 turns by pos rad, pair 1 by pos/100 rad */
    float r[8] = { 1, 0, 1, 0, 0, 1, 0, 2 };
    rope(r, 2, 4, 1, 10000.0f);
    const float rope_expect[8] = { 0.54030231f, 0.84147098f, 0.99995000f, 0.00999983f,
                                   -0.84147098f, 0.54030231f, -0.01999967f, 1.99990000f };
    report(vector_close(r, rope_expect, 8, 1e-6f, why, sizeof why), "rope at pos 1, theta 10000", "%s", why);
    float r0[4] = { 0.3f, -0.7f, 1.5f, 2.0f }, r0_copy[4] = { 0.3f, -0.7f, 1.5f, 2.0f };
    rope(r0, 1, 4, 0, 10000.0f);
    report(vector_close(r0, r0_copy, 4, 0, why, sizeof why), "rope at pos 0 is the identity", "%s", why);
    /* past the context (a window's positions): rope_angles_exact's turns at
     * 2^24 + 1 (not a float) and 10^9 + 7 against pos · f reduced mod 2π in
     * long double (f = 1 and 0.01f, head size 4: their product is exact
     * there), within 1e-6; a float product is off by a radian or more */
    const long long far[] = { (1LL << 24) + 1, 1000000007LL };
    const float freq[2] = { 1.0f, 0.01f };
    double rope_far = 0;
    for (int k = 0; k < 2; k++) {
        float cos_far[2], sin_far[2];
        rope_angles_exact(cos_far, sin_far, 4, far[k], 10000.0f);
        for (int i = 0; i < 2; i++) {
            long double angle = fmodl((long double)far[k] * freq[i], 6.283185307179586476925286766559L);
            rope_far = fmax(rope_far, fabs((double)cos_far[i] - (double)cosl(angle)));
            rope_far = fmax(rope_far, fabs((double)sin_far[i] - (double)sinl(angle)));
        }
    }
    report(rope_far <= 1e-6, "rope past the context: the turns at positions 2^24 + 1 and 10^9 + 7 within 1e-6 of "
           "long double's", "worst error %.3g", rope_far);

    float m[6] = { 1, 2, 3, 4, 5, 6 }, xin[3] = { 1, 0, -1 }, y[2];
    Matrix mat = { WEIGHT_F32, 2, 3, m };
    matmul(y, xin, &mat);
    report(y[0] == -2 && y[1] == -2, "matmul [2,3] x [3]", "got %f %f", y[0], y[1]);
    /* lengths that are not multiples of the vector width */
    float a[37], b[37], expect_dot = 0;
    for (int i = 0; i < 37; i++) { a[i] = (float)(i % 7) - 3; b[i] = (float)(i % 5) * 0.5f; expect_dot += a[i] * b[i]; }
    Matrix row = { WEIGHT_F32, 1, 37, a };
    matmul(y, b, &row);
    report(close_to(y[0], expect_dot, 1e-4f), "matmul of odd length 37", "got %f expected %f", y[0], expect_dot);
}

/* IEEE binary16 by its definition: (-1)^s 2^(e-15) (1 + m/1024), subnormals
 * 2^-14 (m/1024), e = 31 infinity or NaN. */
static double half_by_definition(unsigned h) {
    unsigned s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m / 1024.0, -14) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1 + m / 1024.0, (int)e - 15);
    return s ? -v : v;
}

static int same_value(float got, double want) {
    if (isnan(want)) return isnan(got);
    return (double)got == want && !signbit(got) == !signbit(want);
}

static void test_float16(void) {
    int bad_portable = 0;
    for (unsigned h = 0; h < 65536; h++)
        bad_portable += !same_value(half_to_float((uint16_t)h), half_by_definition(h));
    report(bad_portable == 0, "float16 -> float32, portable: all 65536 values", "%d wrong", bad_portable);
    /* float32 -> float16 by the definition of rounding to nearest, ties to
     * even: every half comes back as itself, and a value halfway between two
     * neighbouring halves goes to the one with an even mantissa. */
    int bad_round = 0;
    for (unsigned h = 0; h < 0x7c00; h++) {
        bad_round += float_to_half(half_to_float((uint16_t)h)) != h;
        bad_round += float_to_half(-half_to_float((uint16_t)h)) != (h | 0x8000u);
        if (h + 1 < 0x7c00) {
            double mid = (half_by_definition(h) + half_by_definition(h + 1)) / 2;
            unsigned even = (h & 1) ? h + 1 : h;
            bad_round += float_to_half((float)mid) != even;
        }
    }
    bad_round += float_to_half(65520.0f) != 0x7c00 || float_to_half(65519.0f) != 0x7bff;
    report(bad_round == 0, "float32 -> float16: round trip and ties to even over all finite halves", "%d wrong", bad_round);

    /* each float16 kernel's own conversion, through its dot product:
     * [h, 0 x15] . [1, 0 x15] (equal as numbers: a sum cannot keep the sign
     * of a zero) */
    for (int k = 0; k < kernel_count(); k++) {
        const KernelEntry *e = kernel_at(k);
        if (e->type != WEIGHT_F16 || !isa_runs(e->isa)) continue;
        int bad_kernel = 0;
        uint16_t lane[16] = { 0 }, panel[16 * QKV_PANEL];
        float one[16] = { 1 };
        for (unsigned h = 0; h < 65536; h++) {
            lane[0] = (uint16_t)h;
            weight_pack(WEIGHT_F16, lane, 1, 16, panel);
            double want = half_by_definition(h);
            float got;
            Activations a = { one, 1, 16, 16, NULL, NULL, 0 };
            e->run(&got, 1, &a, panel, 16, 0, 1);
            bad_kernel += isnan(want) ? !isnan(got) : (double)got != want;
        }
        char name[128];
        snprintf(name, sizeof name, "float16 -> float32, kernel %s: all 65536 values", e->name);
        report(bad_kernel == 0, name, "%d wrong", bad_kernel);
    }

    /* a [3, 37] float16 matrix against the same product in float32: equal up
     * to summation order. Bit patterns worked out by hand from the format. */
    static const struct { uint16_t bits; float value; } halves[] = {
        { 0x3C00, 1.0f }, { 0xC000, -2.0f }, { 0x3800, 0.5f }, { 0xB400, -0.25f },
        { 0x4200, 3.0f }, { 0x3E00, 1.5f }, { 0x0000, 0.0f }, { 0xBC00, -1.0f }, { 0x4500, 5.0f },
    };
    enum { ROWS = 3, COLS = 37, N_HALVES = sizeof halves / sizeof halves[0] };
    float w32[ROWS * COLS], x[COLS], y32[ROWS], y16[ROWS], row[COLS];
    uint16_t w16[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++) {
        w16[i] = halves[(i * 7) % N_HALVES].bits;
        w32[i] = halves[(i * 7) % N_HALVES].value;
    }
    for (int j = 0; j < COLS; j++) x[j] = (float)((j % 5) - 2) * 0.75f;
    Matrix m32 = { WEIGHT_F32, ROWS, COLS, w32 }, m16 = { WEIGHT_F16, ROWS, COLS, w16 };
    matmul(y32, x, &m32);
    matmul(y16, x, &m16);
    char why[256];
    report(vector_close(y16, y32, ROWS, 1e-5f, why, sizeof why), "matmul with float16 weights equals float32", "%s", why);
    matrix_row(row, &m16, 2);
    report(vector_close(row, w32 + 2 * COLS, COLS, 0, why, sizeof why), "matrix_row of a float16 matrix", "%s", why);
}

/* ggml's reference quantizer for the int8 activations, written here from
 * its definition: per block of 32, d = max|x| / 127, q = round(x / d);
 * where 1 / d overflows float32 (a block under about 3.7e-37, whose
 * x · (1 / d) would be infinite), q = 0: the engine's rule. */
static void quantize_reference(const float *x, int n, int8_t *q, float *d) {
    for (int b = 0; b < n / 32; b++) {
        double amax = 0;
        for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(x[b * 32 + j]));
        d[b] = (float)amax / 127.0f;
        int levels = d[b] != 0 && !isinf(1.0f / d[b]);
        for (int j = 0; j < 32; j++) { /* a NaN input is level 0 (a float NaN made an int is undefined) */
            float level = levels ? roundf(x[b * 32 + j] * (1.0f / d[b])) : 0.0f;
            q[b * 32 + j] = (int8_t)(isnan(level) ? 0.0f : level);
        }
    }
}

/* Every kernel this CPU can run, on a [ROWS, n] matrix of each type and
 * POS positions (as panels, as they are multiplied):
 *  - against float64 sums of the dequantized weights times the input (for
 *    int8 and 4-bit, the input as quantized by the reference above), within
 *    1e-6 of the sum of magnitudes;
 *  - all positions in one call give the bits of each position alone (the
 *    prompt path against the decode path), and a block of rows the bits of
 *    the whole matrix (the thread split);
 *  - int8 and 4-bit: the bits of the portable kernel (one order of sums on
 *    every instruction set); float32 and float16 with AVX-512: the bits of
 *    AVX2's;
 * at lengths that exercise every loop and tail: 120 rows are seven panels
 * and a part (float decode tiles of four panels; of three and two over
 * rows 13-66, of one over 40-49; float prompt tiles of three panels, then
 * two), 41 positions every tile of positions (AMX's 16, then 8, 6, 4, 2,
 * 1). */
enum { KT_ROWS = 120, KT_POS = 41, KT_MAX = 288, KT_PANEL_ROWS = 128 };
typedef struct {
    float wf[KT_ROWS * KT_MAX], x[KT_POS * KT_MAX], deq[KT_ROWS * KT_MAX], xq_f[KT_POS * KT_MAX];
    unsigned char w[KT_ROWS * KT_MAX * 4], panels[KT_PANEL_ROWS * KT_MAX * 4];
    int8_t xq[KT_POS * KT_MAX];
    float xd[KT_POS * KT_MAX / 32];
    int32_t xs[KT_POS * KT_MAX / 32];
} KernelTestData;

/* The weights and inputs of length n for a type: w (rows as stored), its
 * panels, the dequantized weights, and the input as the kernels see it. */
static void kernel_test_inputs(KernelTestData *d, WeightType type, int n) {
    size_t row_bytes = weight_row_bytes(type, n);
    for (int r = 0; r < KT_ROWS; r++) {
        weight_row_from_float(type, d->wf + r * KT_MAX, d->w + r * row_bytes, n);
        weight_row_to_float(type, d->w + r * row_bytes, d->deq + r * KT_MAX, n);
    }
    weight_pack(type, d->w, KT_ROWS, n, d->panels);
    for (int t = 0; t < KT_POS; t++) {
        if (!weight_traits(type)->quantized) {
            memcpy(d->xq_f + t * KT_MAX, d->x + t * KT_MAX, (size_t)n * sizeof(float));
            continue;
        }
        quantize_reference(d->x + t * KT_MAX, n, d->xq + t * KT_MAX, d->xd + t * (KT_MAX / 32));
        for (int b = 0; b < n / 32; b++) {
            int32_t *sum = &d->xs[t * (KT_MAX / 32) + b];
            *sum = 0;
            for (int j = 0; j < 32; j++) *sum += d->xq[t * KT_MAX + b * 32 + j];
        }
        for (int j = 0; j < n; j++) d->xq_f[t * KT_MAX + j] = d->xq[t * KT_MAX + j] * d->xd[t * (KT_MAX / 32) + j / 32];
    }
}

/* One kernel at length n: the worst relative error, and whether one
 * position at a time, a block of rows and the portable kernel (if given)
 * gave the same bits. */
static void kernel_test_run(const KernelTestData *d, MatmulKernel run, MatmulKernel portable, const void *data, int n,
                            double *worst, int *same, int *as_portable) {
    static float all[KT_POS * KT_ROWS], one[KT_POS * KT_ROWS], part[KT_POS * KT_ROWS], plain[KT_POS * KT_ROWS];
    /* blocks of rows across panels, partial at both ends (five panels), and
     * within one panel */
    static const int blocks[][2] = { { 13, 67 }, { 40, 50 } };
    Activations a = { d->x, KT_POS, KT_MAX, n, (int8_t *)d->xq, (float *)d->xd, 1, (int32_t *)d->xs };
    run(all, KT_ROWS, &a, data, n, 0, KT_ROWS);
    for (int b = -1; b < 2; b++) {
        int begin = b < 0 ? 0 : blocks[b][0], end = b < 0 ? KT_ROWS : blocks[b][1];
        memset(one, 0xff, sizeof one); /* NaNs: a row not written differs */
        memset(part, 0xff, sizeof part);
        if (b >= 0) run(part, KT_ROWS, &a, data, n, begin, end);
        for (int t = 0; t < KT_POS; t++) {
            Activations a1 = { d->x + t * KT_MAX, 1, KT_MAX, n, (int8_t *)d->xq + t * KT_MAX,
                               (float *)d->xd + t * (KT_MAX / 32), 1, (int32_t *)d->xs + t * (KT_MAX / 32) };
            run(one + t * KT_ROWS, KT_ROWS, &a1, data, n, begin, end);
        }
        for (int t = 0; t < KT_POS; t++)
            for (int r = begin; r < end; r++) {
                *same &= memcmp(&all[t * KT_ROWS + r], &one[t * KT_ROWS + r], sizeof(float)) == 0;
                if (b >= 0) *same &= memcmp(&all[t * KT_ROWS + r], &part[t * KT_ROWS + r], sizeof(float)) == 0;
            }
    }
    if (portable) {
        portable(plain, KT_ROWS, &a, data, n, 0, KT_ROWS);
        *as_portable &= memcmp(plain, all, sizeof all) == 0;
    }
    for (int t = 0; t < KT_POS; t++)
        for (int r = 0; r < KT_ROWS; r++) {
            double want = 0, scale = 0;
            for (int j = 0; j < n; j++) {
                want += (double)d->deq[r * KT_MAX + j] * d->xq_f[t * KT_MAX + j];
                scale += fabs((double)d->deq[r * KT_MAX + j] * d->xq_f[t * KT_MAX + j]);
            }
            double err = fabs(all[t * KT_ROWS + r] - want) / (scale + 1e-30);
            if (!(err <= *worst)) *worst = err; /* a NaN is the worst */
        }
}

/* The engine's activation quantizer against the reference above (values,
 * scales) and its block sums against sums of those values, on inputs with
 * exact ties (k + 0.5 steps), a zero block and a NaN block. */
static void test_activations_quantize(void) {
    enum { N = 3, COLS = 128, STRIDE = 160 };
    static float x[N * STRIDE], want_d[N * STRIDE / 32], got_d[N * STRIDE / 32];
    static int8_t want_q[N * STRIDE], got_q[N * STRIDE];
    static int32_t got_sum[N * STRIDE / 32];
    uint32_t lcg = 11;
    for (int i = 0; i < N * STRIDE; i++) {
        lcg = lcg * 1664525u + 1013904223u;
        x[i] = ((float)(lcg >> 8) / 16777216.0f - 0.5f) * 8;
    }
    for (int j = 0; j < 32; j++) x[j] = (j % 2 ? 127.0f : (float)(j - 16) + 0.5f); /* d = 1: ties */
    for (int j = 32; j < 64; j++) x[STRIDE + j] = 0.0f;
    for (int j = 96; j < 128; j++) x[STRIDE + j] = (j % 3 - 1) * 1e-37f; /* 1 / d overflows: zeros */
    x[2 * STRIDE + 70] = NAN;
    Activations a = { x, N, STRIDE, COLS, got_q, got_d, 0, got_sum };
    activations_quantize(&a, isa_available());
    int bad = 0;
    for (int t = 0; t < N; t++) {
        quantize_reference(x + t * STRIDE, COLS, want_q + t * STRIDE, want_d + t * (STRIDE / 32));
        for (int b = 0; b < COLS / 32; b++) {
            int nan_block = t == 2 && b == 2, sum = 0;
            for (int j = 0; j < 32; j++) {
                sum += got_q[t * STRIDE + b * 32 + j];
                if (!nan_block) bad += got_q[t * STRIDE + b * 32 + j] != want_q[t * STRIDE + b * 32 + j];
            }
            float d = got_d[t * (STRIDE / 32) + b];
            bad += nan_block ? !(isnan(d) && sum == 0) : d != want_d[t * (STRIDE / 32) + b];
            bad += sum != got_sum[t * (STRIDE / 32) + b];
        }
    }
    report(bad == 0 && a.quantized, "activations_quantize: the reference's values and scales, the blocks' sums, NaN blocks "
           "zeroed, a block whose 1 / d overflows zeros",
           "%d wrong", bad);
}

static void test_matmul_kernels(void) {
    static const int float_lengths[] = { 1, 7, 8, 9, 15, 16, 17, 31, 32, 37, 100, 257 };
    static const int quant_lengths[] = { 32, 64, 96, 288 };
    static KernelTestData d;
    uint32_t lcg = 7;
    for (int j = 0; j < KT_ROWS * KT_MAX; j++) {
        lcg = lcg * 1664525u + 1013904223u;
        d.wf[j] = (float)(lcg >> 8) / 16777216.0f * 2 - 1;
    }
    for (int j = 0; j < KT_POS * KT_MAX; j++) {
        lcg = lcg * 1664525u + 1013904223u;
        d.x[j] = (float)(lcg >> 8) / 16777216.0f - 0.5f;
    }
    for (int k = 0; k < kernel_count(); k++) {
        const KernelEntry *e = kernel_at(k);
        char name[200];
        if (!isa_runs(e->isa)) {
            snprintf(name, sizeof name, "matmul kernel %s", e->name);
            skip(name, "this CPU lacks its instructions (or QKV_ISA caps them)");
            continue;
        }
        int quant = weight_traits(e->type)->quantized;
        const int *lengths = quant ? quant_lengths : float_lengths;
        int n_lengths = quant ? 4 : (int)(sizeof float_lengths / sizeof float_lengths[0]);
        /* the int8 kernels against the portable one (which is itself the
         * reference's order); the float AVX-512 kernels against AVX2's (both
         * one FMA a column, in column order; the portable C has no FMA) */
        Isa same_as = quant ? ISA_PORTABLE : ISA_AVX2;
        MatmulKernel portable = e->isa > same_as ? kernel_for(e->type, same_as, 0)->run : NULL;
        int same = 1, as_portable = 1;
        double worst = 0;
        for (int li = 0; li < n_lengths; li++) {
            kernel_test_inputs(&d, e->type, lengths[li]);
            kernel_test_run(&d, e->run, portable, d.panels, lengths[li],
                            &worst, &same, &as_portable);
        }
        snprintf(name, sizeof name, "matmul kernel %s: equals float64 sums within 1e-6 (120 rows, 41 positions, every tail)",
                 e->name);
        report(worst <= 1e-6, name, "worst relative error %.3g", worst);
        snprintf(name, sizeof name, "matmul kernel %s: a prompt in one call gives the bits of one position at a time",
                 e->name);
        report(same, name, "a result differs");
        if (portable) {
            snprintf(name, sizeof name, "matmul kernel %s: the bits of the %s kernel", e->name, isa_name(same_as));
            report(as_portable, name, "a result differs");
        }
    }
}

/* The instruction set a CPU runs under QKV_ISA's cap (cpu.h's isa_within),
 * for CPUs of each kind, by hand: 256-bit VNNI where the CPU has either
 * form of it, else AVX2 in its place (an AVX-512 CPU without VNNI asked
 * for avxvnni must not get kernels it cannot run). */
static void test_isa_within(void) {
    static const struct { const char *cpu; Isa best; int avx_vnni, cap; Isa want; } cases[] = {
        { "Haswell", ISA_AVX2, 0, -1, ISA_AVX2 },
        { "Haswell", ISA_AVX2, 0, ISA_AVX_VNNI, ISA_AVX2 },
        { "Haswell", ISA_AVX2, 0, ISA_PORTABLE, ISA_PORTABLE },
        { "Alder Lake", ISA_AVX_VNNI, 1, -1, ISA_AVX_VNNI },
        { "Alder Lake", ISA_AVX_VNNI, 1, ISA_AMX, ISA_AVX_VNNI },
        { "Alder Lake", ISA_AVX_VNNI, 1, ISA_AVX2, ISA_AVX2 },
        { "Skylake-X", ISA_AVX512, 0, -1, ISA_AVX512 },
        { "Skylake-X", ISA_AVX512, 0, ISA_AVX_VNNI, ISA_AVX2 },
        { "Skylake-X", ISA_AVX512, 0, ISA_AVX512_VNNI, ISA_AVX512 },
        { "Zen 4", ISA_AVX512_VNNI, 0, ISA_AVX_VNNI, ISA_AVX_VNNI },
        { "Zen 4", ISA_AVX512_VNNI, 0, ISA_AVX512, ISA_AVX512 },
        { "Zen 5", ISA_AVX512_VNNI, 1, -1, ISA_AVX512_VNNI },
        { "Sapphire Rapids", ISA_AMX, 1, ISA_AVX_VNNI, ISA_AVX_VNNI },
        { "no AVX2", ISA_PORTABLE, 0, ISA_AVX_VNNI, ISA_PORTABLE },
    };
    int n = (int)(sizeof cases / sizeof cases[0]), bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (isa_within(cases[i].best, cases[i].avx_vnni, cases[i].cap) != cases[i].want) bad = i;
    report(bad < 0, "QKV_ISA's cap: each CPU kind's set (avxvnni on an AVX-512 CPU without VNNI is avx2), 14 cases",
           "%s capped at %d: %s, expected %s", bad < 0 ? "" : cases[bad].cpu, bad < 0 ? 0 : cases[bad].cap,
           bad < 0 ? "" : isa_name(isa_within(cases[bad].best, cases[bad].avx_vnni, cases[bad].cap)),
           bad < 0 ? "" : isa_name(cases[bad].want));
    report(isa_runs(isa_available()) && !isa_runs(ISA_COUNT), "isa_runs: this CPU runs its own set, none past AMX",
           "isa_runs(%s) %d", isa_name(isa_available()), isa_runs(isa_available()));
}

/* An environment variable's value, to put back after a test sets it */
typedef struct {
    const char *name;
    char value[64];
    int set;
} SavedEnv;

static SavedEnv env_save(const char *name) {
    SavedEnv e = { name, "", getenv(name) != NULL };
    if (e.set) snprintf(e.value, sizeof e.value, "%s", getenv(name));
    return e;
}

static void env_restore(const SavedEnv *e) {
    if (e->set) setenv(e->name, e->value, 1);
    else unsetenv(e->name);
}

/* What the kernel table was built with: the x86 kernels (it lists AVX2
 * ones), AMX's */
static void table_builds(int *x86, int *amx) {
    *x86 = *amx = 0;
    for (int k = 0; k < kernel_count(); k++) {
        *x86 |= kernel_at(k)->isa == ISA_AVX2;
        *amx |= kernel_at(k)->isa == ISA_AMX;
    }
}

/* The AMD entry kernel_for should give for a type, set, CPU family and
 * the weights' place (see KERNELS), or NULL where the entry for all makers
 * stands: float32 with AVX-512 makes no requests on every family; on
 * family 25 float16 with AVX-512 requests lines into L2, and int8 and
 * 4-bit with VNNI (not AMX's tiles) too, for weights from memory only. */
static const char *amd_entry(WeightType type, Isa isa, int family, int from_memory, int amx_built) {
    if (type == WEIGHT_F32 && isa >= ISA_AVX512) return "f32 avx512 hw-prefetch";
    if (family != 25) return NULL;
    if (type == WEIGHT_F16 && isa >= ISA_AVX512) return "f16 avx512 l2-prefetch";
    int int8_l2 = from_memory && (isa == ISA_AVX512_VNNI || (isa == ISA_AMX && !amx_built));
    if (type == WEIGHT_Q8_0 && int8_l2) return "q8_0 avx512vnni l2-prefetch";
    if (type == WEIGHT_Q4_0 && int8_l2) return "q4_0 avx512vnni l2-prefetch";
    return NULL;
}

/* Every type's, set's and place's kernel under maker v and a family (set
 * in QKV_VENDOR and QKV_FAMILY) is the one amd_entry names on AMD, the
 * entry for all makers elsewhere. */
static int kernel_choice_ok(Vendor v, int family, int x86, int amx) {
    char number[16];
    snprintf(number, sizeof number, "%d", family);
    setenv("QKV_VENDOR", vendor_name(v), 1);
    setenv("QKV_FAMILY", number, 1);
    int ok = cpu_vendor() == v && cpu_family() == family;
    for (int type = 0; type < WEIGHT_TYPE_COUNT; type++)
        for (int isa = 0; isa < ISA_COUNT; isa++)
            for (int from_memory = 0; from_memory < 2; from_memory++) {
                const KernelEntry *e = kernel_for((WeightType)type, (Isa)isa, from_memory);
                const char *amd =
                    x86 && v == VENDOR_AMD ? amd_entry((WeightType)type, (Isa)isa, family, from_memory, amx) : NULL;
                if (!e || e->vendor != (amd ? VENDOR_AMD : VENDOR_ANY) || e->type != type || e->isa > isa) ok = 0;
                if (e && amd && strcmp(e->name, amd) != 0) ok = 0;
                if (e && e->from_memory && !from_memory) ok = 0;
            }
    return ok;
}

/* The KV cache's requests for rows ahead, as measured (kernels.h): into
 * L1 on any maker but AMD; on AMD into L2 for float32 rows with AVX-512
 * on family 25, else none */
static Fetch expected_fetch(Vendor v, int family, KVType type, Isa isa) {
    if (v != VENDOR_AMD) return FETCH_L1;
    if (family == 25) return type == KV_F32 && isa >= ISA_AVX512 ? FETCH_L2 : FETCH_NONE;
    return FETCH_L1;
}

/* The kernel chosen per CPU maker and family (QKV_VENDOR and QKV_FAMILY
 * stand in for CPUID) and for weights from memory or cached: on AMD the
 * entries amd_entry names;
 * on Intel, and for every other type and set, the one entry for all. The
 * KV cache's kernels request rows ahead into L1 on every maker but AMD,
 * into L2 for float32 rows with AVX-512 on AMD family 25, else none there;
 * on other AMD families into L1; and
 * a cache made under each maker says so; with x86 kernels the float keys'
 * row kernels with no requests, into L1 and into L2 are three. */
static void test_kernel_vendor(void) {
    int ok = 1, fetch_ok = 1, x86, amx;
    table_builds(&x86, &amx);
    SavedEnv saved[3] = { env_save("QKV_VENDOR"), env_save("QKV_FAMILY"), env_save("QKV_KV_FETCH") }; /* CI's runs set them */
    unsetenv("QKV_KV_FETCH"); /* the override, checked last */
    static const int families[] = { 6, 25, 26 };
    for (int v = VENDOR_ANY; v < VENDOR_COUNT; v++)
        for (int f = 0; f < 3; f++) ok &= kernel_choice_ok((Vendor)v, families[f], x86, amx);
    for (int v = VENDOR_ANY; v < VENDOR_COUNT; v++)
        for (int f = 0; f < 3; f++) {
            setenv("QKV_VENDOR", vendor_name((Vendor)v), 1);
            char family[8];
            snprintf(family, sizeof family, "%d", families[f]);
            setenv("QKV_FAMILY", family, 1);
            for (int type = 0; type < KV_TYPE_COUNT; type++) {
                for (int isa = ISA_PORTABLE; isa < ISA_COUNT; isa++)
                    fetch_ok &= kv_fetch_ahead(kv_element_bytes((KVType)type), (Isa)isa) ==
                                expected_fetch((Vendor)v, families[f], (KVType)type, (Isa)isa);
                KVCache kv;
                if (kv_cache_init(&kv, (KVType)type, 1, 1, 16, 8) == 0) {
                    fetch_ok &= kv.fetch_ahead == expected_fetch((Vendor)v, families[f], (KVType)type, kv.isa);
                    kv_cache_free(&kv);
                } else {
                    fetch_ok = 0;
                }
            }
        }
    for (int isa = ISA_AVX2; x86 && isa <= ISA_AVX512; isa++)
        for (int half = 0; half < 2; half++) {
            WeightType type = half ? WEIGHT_F16 : WEIGHT_F32;
            MatmulKernel none = rows_kernel_for(type, (Isa)isa, FETCH_NONE), l1 = rows_kernel_for(type, (Isa)isa, FETCH_L1);
            MatmulKernel l2 = rows_kernel_for(type, (Isa)isa, FETCH_L2);
            if (none == l1 || none == l2 || l1 == l2) fetch_ok = 0;
        }
    static const struct { const char *name; Fetch fetch; } asked[] = {
        { "none", FETCH_NONE }, { "l1", FETCH_L1 }, { "l2", FETCH_L2 } };
    for (int a = 0; a < 3; a++) { /* QKV_KV_FETCH over every maker's choice */
        setenv("QKV_KV_FETCH", asked[a].name, 1);
        for (int v = VENDOR_ANY; v < VENDOR_COUNT; v++) {
            setenv("QKV_VENDOR", vendor_name((Vendor)v), 1);
            for (int bytes = 1; bytes <= 4; bytes *= 2) fetch_ok &= kv_fetch_ahead(bytes, ISA_AVX512) == asked[a].fetch;
        }
    }
    for (int i = 0; i < 3; i++) env_restore(&saved[i]);
    report(ok, "kernel choice per CPU maker, family and weights' place: AMD's entries on AMD only, its family 25 "
           "ones there only, its int8 ones for weights from memory only (QKV_VENDOR any, intel, amd; QKV_FAMILY "
           "6, 25, 26)",
           "a kernel chosen for the wrong maker or place");
    report(fetch_ok, "KV cache's requests for rows ahead per CPU maker, family, KV type and instruction set: into "
           "L1 on any maker but AMD; on AMD family 25 into L2 for float32 rows with AVX-512, else none; on other "
           "AMD families into L1 (QKV_VENDOR any, intel, amd; QKV_FAMILY 6, 25, 26; "
           "f32, f16, q8; every instruction set); QKV_KV_FETCH none, l1, l2 obeyed on every maker; the cache "
           "records its own; the float keys' row kernels: three, one per choice",
           "the wrong choice, or one kernel for two");
}

/* Where a decode step finds its weights: from memory past half the
 * last-level cache, whose size QKV_CACHE_BYTES sets here. The stories
 * model (Q8_0, 7.6 MB) loaded as on an AMD of family 25 with a 4 MiB cache
 * and with a 64 MiB one: every matrix has the kernel amd_entry names for
 * that place (with VNNI the widest set, the requests into L2 from memory
 * only), so the place is known before the kernels are chosen. */
static void test_weights_place(void) {
    SavedEnv saved[3] = { env_save("QKV_CACHE_BYTES"), env_save("QKV_VENDOR"), env_save("QKV_FAMILY") };
    int x86, amx;
    table_builds(&x86, &amx);
    setenv("QKV_CACHE_BYTES", "1000000", 1);
    report(last_level_cache_bytes() == 1000000 && !weights_from_memory(500000) && weights_from_memory(500001),
           "weights from memory past half the last-level cache (QKV_CACHE_BYTES=1000000)",
           "cache %zu bytes", last_level_cache_bytes());
    setenv("QKV_VENDOR", "amd", 1);
    setenv("QKV_FAMILY", "0x19", 1);
    int same = cpu_family() == 25;
    for (int small = 0; small < 2; small++) {
        setenv("QKV_CACHE_BYTES", small ? "4194304" : "67108864", 1);
        Model m;
        char err[256];
        if (model_load(&m, "models/stories.bin", err, sizeof err)) { same = 0; break; }
        const Matrix *mats[8] = { &m.weights.classifier };
        for (int l = 0; l < m.config.n_layers; l++) {
            const LayerWeights *w = &m.weights.layers[l];
            const Matrix *layer[] = { &w->wq, &w->wk, &w->wv, &w->wo, &w->w1, &w->w2, &w->w3 };
            memcpy(mats + 1, layer, sizeof layer);
            for (int i = 0; i < 8; i++) {
                Isa isa = isa_available();
                const char *amd = x86 ? amd_entry(mats[i]->type, isa, 25, small, amx) : NULL;
                same &= strcmp(mats[i]->kernel->name, amd ? amd : kernel_for(mats[i]->type, isa, 0)->name) == 0;
            }
        }
        model_free(&m);
    }
    for (int i = 0; i < 3; i++) env_restore(&saved[i]);
    report(same, "models/stories.bin as on AMD family 25 (QKV_FAMILY=0x19): every matrix's kernel is the one for "
           "its weights' place (a 4 MiB cache: from memory; 64 MiB: cached)", "a kernel differs, or no model");
}

/* alloc.h's buffers, of each size class (calloc's, mapped, on large
 * pages; the panels' on large pages whatever their size): each starts on
 * a cache line, reads as zeros to its end, takes writes to its last byte
 * and is given back; a size that overflows is refused. */
static void test_buffers(void) {
    static const size_t sizes[] = { 1, 100, 16383, 16384, 100000, (size_t)2 << 20, ((size_t)3 << 20) + 5 };
    int wrong = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int whole = 0; whole < 2; whole++) {
            size_t n = sizes[i];
            unsigned char *p = whole ? zalloc_written_whole(n) : zalloc_aligned(n, 1);
            if (!p || (uintptr_t)p % 64) {
                wrong++;
                continue;
            }
            size_t nonzero = 0;
            for (size_t j = 0; j < n; j++) nonzero += p[j] != 0;
            memset(p, 0xA5, n);
            wrong += nonzero != 0 || p[n - 1] != 0xA5;
            free_aligned(p);
        }
    wrong += zalloc_aligned(SIZE_MAX / 2, 4) != NULL;
    report(wrong == 0, "buffers of 1 B to 3 MiB (calloc'd, mapped, large pages; the panels'): aligned to 64, zeroed, "
           "writable to the end, freed; an overflowing size refused", "%d wrong", wrong);
}

/* A row read back from the panels (a tied embedding's lookup) is the row
 * as stored, dequantized: every row of 120 (the last panel's part
 * included), every type, the lengths of the kernels' tests. */
static void test_packed_rows(void) {
    static const int float_lengths[] = { 1, 7, 16, 17, 257 }, quant_lengths[] = { 32, 96, 288 };
    static KernelTestData d;
    uint32_t lcg = 11;
    for (int j = 0; j < KT_ROWS * KT_MAX; j++) {
        lcg = lcg * 1664525u + 1013904223u;
        d.wf[j] = (float)(lcg >> 8) / 16777216.0f * 2 - 1;
    }
    for (int type = 0; type < WEIGHT_TYPE_COUNT; type++) {
        int quant = weight_traits(type)->quantized, n_lengths = quant ? 3 : 5, rows = 0, wrong = 0;
        for (int li = 0; li < n_lengths; li++) {
            int n = quant ? quant_lengths[li] : float_lengths[li];
            kernel_test_inputs(&d, (WeightType)type, n);
            for (int r = 0; r < KT_ROWS; r++, rows++) {
                float row[KT_MAX];
                weight_packed_row_to_float((WeightType)type, d.panels, n, r, row);
                wrong += memcmp(row, d.deq + r * KT_MAX, (size_t)n * sizeof(float)) != 0;
            }
        }
        char name[160];
        snprintf(name, sizeof name, "%s: each row read from its panels has the bits of the row as stored (%d rows)",
                 weight_traits(type)->name, rows);
        report(wrong == 0, name, "%d rows differ", wrong);
    }
}

/* The quantizers against their definitions on hand-checked blocks. */
static void test_quantizers(void) {
    float x[32], back[32];
    unsigned char q8[34], q4[18];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16) / 4; /* -4 .. 3.75 */
    weight_row_from_float(WEIGHT_Q8_0, x, q8, 32);
    /* d = 4/127; -4 -> -127; 3.75 -> round(3.75*127/4) = round(119.06) = 119 */
    uint16_t d;
    memcpy(&d, q8, 2);
    report(d == float_to_half(4.0f / 127.0f) && (int8_t)q8[2] == -127 && (int8_t)q8[33] == 119 && q8[18] == 0,
           "q8_0 quantizer: scale max/127, values round(x/d)", "d %04x q[0] %d q[31] %d", d, (int8_t)q8[2],
           (int8_t)q8[33]);
    weight_row_to_float(WEIGHT_Q8_0, q8, back, 32);
    double worst = 0;
    for (int j = 0; j < 32; j++) worst = fmax(worst, fabs(back[j] - x[j]));
    report(worst <= 0.5 * 4.0 / 127 * 1.001, "q8_0 round trip within half a step", "worst %g", worst);
    weight_row_from_float(WEIGHT_Q4_0, x, q4, 32);
    /* the largest magnitude is -4: d = -4 / -8 = 0.5; x = -4 -> q 0; x = 0 (j=16) -> q 8 (high nibble of byte 0);
     * x = 3.75 (j=31) -> (int)(7.5 + 8.5) = 16 -> clamped to 15 */
    memcpy(&d, q4, 2);
    report(d == float_to_half(0.5f) && (q4[2] & 15) == 0 && (q4[2] >> 4) == 8 && (q4[17] >> 4) == 15,
           "q4_0 quantizer: scale max/-8, nibbles low 0-15 high 16-31, clamped at 15", "d %04x byte0 %02x byte15 %02x",
           d, q4[2], q4[17]);
    weight_row_to_float(WEIGHT_Q4_0, q4, back, 32);
    report(back[0] == -4.0f && back[16] == 0.0f && back[31] == 3.5f, "q4_0 dequantized: (q - 8) * d",
           "%g %g %g", back[0], back[16], back[31]);
}

/* ------------------------------------------------------------------------ */
/* Golden logits and attention from export/reference.py                      */

typedef struct {
    char name[64];
    int config[8]; /* dim hidden_dim n_layers n_heads n_kv_heads head_size vocab_size seq_len */
    int n_tokens, tokens[1024];
    double tolerance; /* of the logits, relative to the largest; 0: 1e-4 (a "tolerance" line) */
    int n_checks, check_pos[64];
    float *logits[64];
    int n_attn;
    struct { int pos, layer, head; float *scores, *weights; } attn[4096];
} Golden;

static float *read_floats(char **cursor, int n) {
    float *v = malloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) v[i] = strtof(*cursor, cursor);
    return v;
}

static int load_golden(Golden *g, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    memset(g, 0, sizeof *g);
    static char line[1 << 20];
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        if (!strncmp(p, "model ", 6)) sscanf(p + 6, "%63s", g->name);
        else if (!strncmp(p, "tolerance ", 10)) g->tolerance = strtod(p + 10, NULL);
        else if (!strncmp(p, "config ", 7))
            sscanf(p, "config dim %d hidden_dim %d n_layers %d n_heads %d n_kv_heads %d head_size %d vocab_size %d seq_len %d",
                   &g->config[0], &g->config[1], &g->config[2], &g->config[3], &g->config[4], &g->config[5],
                   &g->config[6], &g->config[7]);
        else if (!strncmp(p, "tokens ", 7)) {
            p += 7;
            g->n_tokens = (int)strtol(p, &p, 10);
            for (int i = 0; i < g->n_tokens && i < 1024; i++) g->tokens[i] = (int)strtol(p, &p, 10);
        } else if (!strncmp(p, "logits ", 7) && g->n_checks < 64) {
            p += 7;
            g->check_pos[g->n_checks] = (int)strtol(p, &p, 10);
            g->logits[g->n_checks++] = read_floats(&p, g->config[6]);
        } else if ((!strncmp(p, "scores ", 7) || !strncmp(p, "weights ", 8)) && g->n_attn < 4096) {
            int is_scores = p[0] == 's';
            p += is_scores ? 7 : 8;
            int pos = (int)strtol(p, &p, 10), layer = (int)strtol(p, &p, 10), head = (int)strtol(p, &p, 10);
            int i;
            for (i = 0; i < g->n_attn; i++)
                if (g->attn[i].pos == pos && g->attn[i].layer == layer && g->attn[i].head == head) break;
            if (i == g->n_attn) { g->attn[i].pos = pos; g->attn[i].layer = layer; g->attn[i].head = head; g->n_attn++; }
            float *v = read_floats(&p, pos + 1);
            if (is_scores) g->attn[i].scores = v; else g->attn[i].weights = v;
        }
    }
    fclose(f);
    return 0;
}

/* Records the attention the forward pass computed, through the observer. */
typedef struct {
    const Golden *golden;
    double worst_weight, worst_score, worst_row_sum;
    int compared;
} AttentionCheck;

static void check_attention(void *ctx, int layer, int pos, int n_visible, const RunState *s) {
    AttentionCheck *ac = ctx;
    const Golden *g = ac->golden;
    for (int i = 0; i < g->n_attn; i++) {
        if (g->attn[i].pos != pos || g->attn[i].layer != layer) continue;
        const float *w = s->attention_weights + (size_t)g->attn[i].head * s->kv_cache.capacity;
        const float *sc = s->attention_scores + (size_t)g->attn[i].head * s->kv_cache.capacity;
        double sum = 0;
        for (int t = 0; t < n_visible; t++) {
            double dw = fabs(w[t] - g->attn[i].weights[t]);
            double ds = fabs(sc[t] - g->attn[i].scores[t]) / (1.0 + fabs(g->attn[i].scores[t]));
            if (dw > ac->worst_weight) ac->worst_weight = dw;
            if (ds > ac->worst_score) ac->worst_score = ds;
            sum += w[t];
        }
        if (fabs(sum - 1) > ac->worst_row_sum) ac->worst_row_sum = fabs(sum - 1);
        ac->compared++;
    }
}

/* max |engine - golden| relative to the largest golden logit */
static double logits_error(const float *logits, const float *golden, int n) {
    double worst = 0, scale = 0;
    for (int i = 0; i < n; i++) {
        if (fabs(golden[i]) > scale) scale = fabs(golden[i]);
        if (fabs(logits[i] - golden[i]) > worst) worst = fabs(logits[i] - golden[i]);
    }
    return worst / (scale > 0 ? scale : 1);
}

static int config_matches(const Config *c, const Golden *g) {
    int mine[8] = { c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_size, c->vocab_size, c->seq_len };
    return memcmp(mine, g->config, sizeof mine) == 0;
}

static void test_golden_checkpoint(const Golden *g, const char *path) {
    char name[512], err[256];
    Model m;
    snprintf(name, sizeof name, "load %s", path);
    if (model_load(&m, path, err, sizeof err)) { report(0, name, "%s", err); return; }
    report(config_matches(&m.config, g), name, "config differs from the golden file");
    RunState s;
    run_state_init(&s, &m.config, 0);
    AttentionCheck ac = { g, 0, 0, 0, 0 };
    ForwardObserver obs = { &ac, check_attention, NULL };
    double worst = 0;
    int last = g->check_pos[g->n_checks - 1];
    float *stepped = malloc((size_t)m.config.vocab_size * sizeof(float));
    for (int pos = 0, c = 0; pos <= last; pos++) {
        float *logits = forward(&m, &s, g->tokens[pos], pos, &obs);
        if (pos == g->check_pos[c]) {
            double e = logits_error(logits, g->logits[c], m.config.vocab_size);
            if (e > worst) worst = e;
            c++;
        }
        if (pos == last) memcpy(stepped, logits, (size_t)m.config.vocab_size * sizeof(float));
    }
    double tolerance = g->tolerance > 0 ? g->tolerance : 1e-4;
    snprintf(name, sizeof name, "%s: logits match the golden %s within %g at %d positions", path, g->name, tolerance,
             g->n_checks);
    report(worst <= tolerance, name, "worst relative error %.3g", worst);
    if (g->n_attn > 0) {
        snprintf(name, sizeof name, "%s: attention weights match reference.py within 1e-5 (%d rows)", path, ac.compared);
        report(ac.compared > 0 && ac.worst_weight <= 1e-5 && ac.worst_score <= 1e-4, name,
               "worst weight error %.3g, score error %.3g", ac.worst_weight, ac.worst_score);
        snprintf(name, sizeof name, "%s: attention rows sum to 1 within 1e-6", path);
        report(ac.worst_row_sum <= 1e-6, name, "worst |sum-1| %.3g", ac.worst_row_sum);
    }

    /* the prompt path (many positions in one call) gives the same logits */
    run_state_free(&s);
    run_state_init(&s, &m.config, 0);
    float *batched = forward_tokens(&m, &s, g->tokens, last + 1, 0, NULL);
    snprintf(name, sizeof name, "%s: forward_tokens equals step-by-step forward", path);
    report(memcmp(batched, stepped, (size_t)m.config.vocab_size * sizeof(float)) == 0, name, "logits differ");
    free(stepped);
    run_state_free(&s);
    model_free(&m);
}

/* Decoding with the cache equals recomputing the prefix from scratch: the
 * logits at the last position, computed incrementally, equal those of a
 * fresh state that is given the whole prefix again, position by position. */
static void test_cache_equals_recompute(const Golden *g, const char *path) {
    Model m;
    char err[256], name[512];
    if (model_load(&m, path, err, sizeof err)) return;
    int V = m.config.vocab_size, n = g->n_tokens < m.config.seq_len ? g->n_tokens : m.config.seq_len;
    RunState cached;
    run_state_init(&cached, &m.config, 0);
    float *incremental = malloc((size_t)V * sizeof(float));
    double worst = 0;
    for (int pos = 0; pos < n; pos++) {
        memcpy(incremental, forward(&m, &cached, g->tokens[pos], pos, NULL), (size_t)V * sizeof(float));
        RunState fresh;
        run_state_init(&fresh, &m.config, 0);
        float *recomputed = forward_tokens(&m, &fresh, g->tokens, pos + 1, 0, NULL);
        double e = logits_error(incremental, recomputed, V);
        if (e > worst) worst = e;
        run_state_free(&fresh);
    }
    snprintf(name, sizeof name, "%s: KV-cache decoding equals recomputing the prefix (%d positions)", path, n);
    report(worst == 0, name, "worst relative difference %.3g", worst);
    free(incremental);
    run_state_free(&cached);
    model_free(&m);
}

/* The heads' outputs an observer is given, by position and layer */
typedef struct {
    float *outputs; /* [positions, n_layers, q_dim] */
    int n_layers, q_dim, told;
} OutputRecord;

static void record_outputs(void *ctx, int layer, int pos, int n_visible, const RunState *s) {
    OutputRecord *r = ctx;
    (void)n_visible;
    memcpy(r->outputs + ((size_t)pos * r->n_layers + layer) * r->q_dim, s->attention_output,
           (size_t)r->q_dim * sizeof(float));
    r->told++;
}

/* forward_logits in chunks, observed or not, against the logits forward()
 * gave (stepped); returns whether every row is the same */
static int chunks_equal(const Model *m, RunState *s, const int *tokens, int n, const float *stepped,
                        const ForwardObserver *o) {
    int V = m->config.vocab_size, rows_equal = 1;
    for (int pos = 0; pos < n; pos += QKV_CHUNK) {
        int len = n - pos < QKV_CHUNK ? n - pos : QKV_CHUNK;
        float *logits = forward_logits(m, s, tokens + pos, len, pos, o);
        rows_equal &= memcmp(logits, stepped + (size_t)pos * V, (size_t)len * V * sizeof(float)) == 0;
    }
    return rows_equal;
}

/* The prompt path takes QKV_CHUNK positions at a time as one matrix; its
 * numbers must be those of one forward() per position, bit for bit, across
 * chunk boundaries, with each KV cache type: every row of forward_logits,
 * the last logits of forward_tokens, and the KV cache both leave behind;
 * observed, each position's heads' outputs. */
static void test_chunks_equal_steps_kv(const Model *m, const char *path, KVType kv_type) {
    char name[512];
    int V = m->config.vocab_size, n = m->config.seq_len < 3 * QKV_CHUNK + 5 ? m->config.seq_len : 3 * QKV_CHUNK + 5;
    int *tokens = malloc((size_t)n * sizeof(int));
    uint32_t lcg = 12345;
    for (int i = 0; i < n; i++) { lcg = lcg * 1664525u + 1013904223u; tokens[i] = (int)((lcg >> 8) % (uint32_t)V); }
    float *stepped = malloc((size_t)n * V * sizeof(float));
    int q_dim = m->config.n_heads * m->config.head_size, n_layers = m->config.n_layers;
    size_t outputs = (size_t)n * n_layers * q_dim;
    OutputRecord by_step = { calloc(outputs, sizeof(float)), n_layers, q_dim, 0 };
    OutputRecord by_chunk = { calloc(outputs, sizeof(float)), n_layers, q_dim, 0 };
    ForwardObserver step_observer = { &by_step, record_outputs, NULL }, chunk_observer = { &by_chunk, record_outputs, NULL };
    RunState one, many;
    run_state_init_kv(&one, &m->config, 0, kv_type);
    run_state_init_kv(&many, &m->config, 0, kv_type);
    for (int pos = 0; pos < n; pos++)
        memcpy(stepped + (size_t)pos * V, forward(m, &one, tokens[pos], pos, &step_observer), (size_t)V * sizeof(float));
    snprintf(name, sizeof name, "%s, %s KV cache: forward_logits equals forward() at all %d positions (chunks of %d)",
             path, kv_type_name(kv_type), n, QKV_CHUNK);
    report(chunks_equal(m, &many, tokens, n, stepped, NULL), name, "logits differ");
    /* observed, a chunk's attention goes attention_rows positions at a time:
     * each position's outputs are still its own row's */
    run_state_free(&many);
    run_state_init_kv(&many, &m->config, 0, kv_type);
    int observed = chunks_equal(m, &many, tokens, n, stepped, &chunk_observer) && by_step.told == n * n_layers &&
                   by_chunk.told == n * n_layers && memcmp(by_step.outputs, by_chunk.outputs, outputs * sizeof(float)) == 0;
    snprintf(name, sizeof name, "%s, %s KV cache: observed in chunks (%d positions' attention together), the same "
             "logits, and each position's heads' outputs those forward() shows", path, kv_type_name(kv_type),
             many.attention_rows);
    report(observed, name, "logits or outputs differ, or not every position was told");
    free(by_step.outputs);
    free(by_chunk.outputs);
    run_state_free(&many);
    run_state_init_kv(&many, &m->config, 0, kv_type);
    float *last = forward_tokens(m, &many, tokens, n, 0, NULL);
    int same = memcmp(last, stepped + (size_t)(n - 1) * V, (size_t)V * sizeof(float)) == 0 &&
               kv_cache_same(&many.kv_cache, &one.kv_cache);
    snprintf(name, sizeof name, "%s, %s KV cache: forward_tokens over %d positions leaves forward()'s logits and cache",
             path, kv_type_name(kv_type), n);
    report(same, name, "last logits or cache differ");
    run_state_free(&one);
    run_state_free(&many);
    free(stepped);
    free(tokens);
}

static void test_chunks_equal_steps(const char *path) {
    Model m;
    char err[256];
    if (model_load(&m, path, err, sizeof err)) { report(0, path, "%s", err); return; }
    for (int kv = 0; kv < KV_TYPE_COUNT; kv++) test_chunks_equal_steps_kv(&m, path, (KVType)kv);
    model_free(&m);
}

/* Attention through a KV cache of each type against float64 attention over
 * the rows as stored: each stored row within half a step of the float it
 * came from (float16: 2^-11 relative; int8: scale / 2), and the scores and
 * output within 1e-5 of float64 sums over the stored rows. An int8 key's
 * score also rounds q to int16 (kv_int8.h), q_i to within half a step of
 * max|q| / 16383: that moves the score by at most the half-step times
 * Σ|k_i|, and the output by at most 2 · that / √HS · max|v| (a softmax
 * weight's change is w_t (Δx_t − Σ w Δx)). The int8 values' sum rounds each
 * w_t · scale_t to int16, to within half a step of their max / 32767: that
 * moves output i by at most the half-step times Σ_t |v_t,i| / scale_t.
 * Beyond those, 1e-5. */
/* int8 rows at float32's ends: a largest value just under FLT_MAX (finite:
 * 3.3e38 to 3.4e38 had been taken for an infinity, the row stored as NaN)
 * comes back within half a step; a row under about 3.7e-37, whose inverse
 * scale overflows, comes back as zeros (inverse_scale). */
static void test_kv_q8_extremes(void) {
    enum { HS = 8 };
    float big[HS] = { 3.401e38f, -1e38f, 2e37f, 0, 1, -3e38f, 5e36f, -7 }, tiny[HS], back[HS];
    for (int i = 0; i < HS; i++) tiny[i] = (float)(i - 3) * 1e-38f;
    KVCache kv;
    int ok = kv_cache_init(&kv, KV_Q8, 1, 1, 2, HS) == 0;
    if (ok) {
        kv_cache_store(&kv, 0, 0, big, big);
        kv_cache_store(&kv, 0, 1, tiny, tiny);
        for (int which = 0; which < 2; which++) {
            for (int t = 0; t < 2; t++) {
                if (which) kv_value_to_float(&kv, kv_values(&kv, 0, 0), t, back);
                else kv_key_to_float(&kv, kv_keys(&kv, 0, 0), t, back);
                for (int i = 0; i < HS; i++)
                    ok &= t == 0 ? isfinite(back[i]) && fabs((double)back[i] - big[i]) <= 3.401e38 / 127 / 2 * 1.0001
                                 : back[i] == 0.0f;
            }
        }
        kv_cache_free(&kv);
    }
    report(ok, "q8 KV cache: a row whose largest value is 3.401e38 (finite) stored within half a step; a row of "
           "1e-38s (its inverse scale overflows) stored as zeros", "a NaN, a value off, or out of memory");
}

/* int8 rows' halves go away from zero, as C's roundf (round_half_away;
 * reference.py's kv_stored models them so): a row of largest value 127 has
 * scale 1, so x / scale is x exactly and 0.5, 2.5, 126.5 are ties, which
 * rounding to even would store as 0, 2, 126. */
static void test_kv_q8_halves(void) {
    enum { HS = 8 };
    const float row[HS] = { 127, 0.5f, -0.5f, 2.5f, -2.5f, 126.5f, -1.5f, 0 };
    float back[HS];
    KVCache kv;
    int ok = kv_cache_init(&kv, KV_Q8, 1, 1, 1, HS) == 0;
    if (ok) {
        kv_cache_store(&kv, 0, 0, row, row);
        for (int which = 0; which < 2; which++) {
            if (which) kv_value_to_float(&kv, kv_values(&kv, 0, 0), 0, back);
            else kv_key_to_float(&kv, kv_keys(&kv, 0, 0), 0, back);
            for (int i = 0; i < HS; i++) ok &= back[i] == roundf(row[i]);
        }
        kv_cache_free(&kv);
    }
    report(ok, "q8 KV cache: halves stored away from zero (0.5 -> 1, 2.5 -> 3, -2.5 -> -3), as roundf",
           "a half rounded another way, or out of memory");
}

static void test_kv_types(void) {
    enum { HS = 40, N = 37 };
    static float q[HS], keys[N][HS], values[N][HS], back[HS], scores[N], weights[N], out[HS];
    uint32_t lcg = 99;
    for (int i = 0; i < HS; i++) { lcg = lcg * 1664525u + 1013904223u; q[i] = (float)(lcg >> 8) / 16777216.0f - 0.5f; }
    for (int t = 0; t < N; t++)
        for (int i = 0; i < HS; i++) {
            lcg = lcg * 1664525u + 1013904223u;
            keys[t][i] = (float)(lcg >> 8) / 16777216.0f * 4 - 2;
            lcg = lcg * 1664525u + 1013904223u;
            values[t][i] = (float)(lcg >> 8) / 16777216.0f * 2 - 1;
        }
    for (int type = 0; type < KV_TYPE_COUNT; type++) {
        KVCache kv;
        char name[160];
        kv_cache_init(&kv, (KVType)type, 1, 1, N, HS);
        for (int t = 0; t < N; t++) kv_cache_store(&kv, 0, t, keys[t], values[t]);
        static double k64[N][HS], v64[N][HS];
        int rows_ok = 1;
        for (int t = 0; t < N; t++)
            for (int which = 0; which < 2; which++) {
                const float *orig = which ? values[t] : keys[t];
                if (which)
                    kv_value_to_float(&kv, kv_values(&kv, 0, 0), t, back);
                else
                    kv_key_to_float(&kv, kv_keys(&kv, 0, 0), t, back);
                double amax = 0;
                for (int i = 0; i < HS; i++) amax = fmax(amax, fabs(orig[i]));
                for (int i = 0; i < HS; i++) {
                    double step = type == KV_F32 ? 0 : type == KV_F16 ? fabs(orig[i]) * 0x1p-11 : amax / 127 / 2 * 1.0001;
                    rows_ok &= fabs(back[i] - orig[i]) <= step + 1e-30;
                    (which ? v64 : k64)[t][i] = back[i];
                }
            }
        snprintf(name, sizeof name, "%s KV cache: rows stored within half a step", kv_type_name((KVType)type));
        report(rows_ok, name, "a row is further off");
        kv_scores(&kv, kv_keys(&kv, 0, 0), q, 1, HS, N, scores, N);
        float scale = 1.0f / sqrtf((float)HS);
        for (int t = 0; t < N; t++) weights[t] = scores[t] * scale;
        softmax(weights, N);
        kv_weighted_sum(&kv, kv_values(&kv, 0, 0), weights, N, out, 1);
        double s64[N], m = -1e300, sum = 0, worst = 0, q_max = 0, v_max = 0, moved = 0;
        for (int i = 0; i < HS; i++) q_max = fmax(q_max, fabs(q[i]));
        double q_half_step = type == KV_Q8 ? q_max / 16383 / 2 * 1.0001 : 0;
        for (int t = 0; t < N; t++) {
            double k_sum = 0;
            s64[t] = 0;
            for (int i = 0; i < HS; i++) {
                s64[t] += (double)q[i] * k64[t][i];
                k_sum += fabs(k64[t][i]);
                v_max = fmax(v_max, fabs(v64[t][i]));
            }
            moved = fmax(moved, q_half_step * k_sum);
            worst = fmax(worst, (fabs(scores[t] - s64[t]) - q_half_step * k_sum) / (1 + fabs(s64[t])));
            m = fmax(m, s64[t] / sqrt(HS));
        }
        for (int t = 0; t < N; t++) sum += exp(s64[t] / sqrt(HS) - m);
        double step = 0; /* int8 values: the weights' int16 step, max_t w_t · scale_t / 32767 */
        for (int t = 0; t < N && type == KV_Q8; t++) step = fmax(step, weights[t] * (double)kv.value_scales[t] / 32767);
        for (int i = 0; i < HS; i++) {
            double o = 0, rounding = 0;
            for (int t = 0; t < N; t++) {
                o += exp(s64[t] / sqrt(HS) - m) / sum * v64[t][i];
                if (type == KV_Q8) rounding += step / 2 * 1.0001 * fabs(v64[t][i]) / kv.value_scales[t];
            }
            worst = fmax(worst, fabs(out[i] - o) - 2 * moved / sqrt(HS) * v_max - rounding);
        }
        snprintf(name, sizeof name, "%s KV cache: scores and output within 1e-5 of float64 over the stored rows%s",
                 kv_type_name((KVType)type),
                 type == KV_Q8 ? ", beyond what q's and the weights' rounding to int16 can move" : "");
        report(worst <= 1e-5, name, "worst error %.3g", worst);
        kv_cache_free(&kv);
    }
}

static void free_golden(Golden *g) {
    for (int c = 0; c < g->n_checks; c++) free(g->logits[c]);
    for (int a = 0; a < g->n_attn; a++) { free(g->attn[a].scores); free(g->attn[a].weights); }
    free(g);
}

/* The random test checkpoints: every format of each against reference.py.
 * f16, q8 and q4 (float16, Q8_0, Q4_0 matrices) and the GPT-2 ones exist
 * only as qkv files. */
static void test_golden_fixtures(void) {
    const char *models[] = { "gqa", "mqa", "sepcls", "f16", "q8", "q4", "gpt2", "gpt2-bpe" };
    const int min_formats[] = { 2, 2, 2, 1, 1, 1, 1, 1 };
    const char *formats[] = { "qkv", "legacy.bin", "v1.bin" };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/golden/%s.txt", models[i]);
        Golden *g = malloc(sizeof *g);
        if (load_golden(g, path)) { report(0, path, "missing golden file"); free(g); continue; }
        int found = 0;
        for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
            snprintf(path, sizeof path, "tests/data/%s.%s", models[i], formats[f]);
            if (access(path, R_OK) != 0) continue;
            found++;
            test_golden_checkpoint(g, path);
            if (f == 0) test_cache_equals_recompute(g, path);
            if (f == 0) test_chunks_equal_steps(path);
        }
        report(found >= min_formats[i], models[i], "fewer than %d formats of this model", min_formats[i]);
        free_golden(g);
    }
}

/* The shipped models against PyTorch's logits (tests/golden/models/NAME.txt
 * goes with models/NAME.bin), and the GPT-2 fixtures against PyTorch's
 * (export/model.py's GPT, nanoGPT's modules). */
static void test_golden_models(void) {
    const char *models[][2] = { { "grammar", "models/grammar.bin" }, { "grammar-random", "models/grammar-random.bin" },
                                { "stories", "models/stories.bin" }, { "shakespeare", "models/shakespeare.bin" },
                                { "gpt2-torch", "tests/data/gpt2.qkv" }, { "gpt2-bpe-torch", "tests/data/gpt2-bpe.qkv" },
                                { "gpt2-nobias-torch", "tests/data/gpt2-nobias.qkv" } };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char golden_path[256], model_path[256];
        snprintf(golden_path, sizeof golden_path, "tests/golden/models/%s.txt", models[i][0]);
        snprintf(model_path, sizeof model_path, "%s", models[i][1]);
        Golden *g = malloc(sizeof *g);
        if (load_golden(g, golden_path) || access(model_path, R_OK) != 0) {
            report(0, model_path, "missing model or golden file %s", golden_path);
            free(g);
            continue;
        }
        test_golden_checkpoint(g, model_path);
        test_chunks_equal_steps(model_path);
        free_golden(g);
    }
}

/* ------------------------------------------------------------------------ */
/* Tokenizer                                                                 */

static int decode_all(const Tokenizer *t, const int *tokens, int n, char *out, size_t cap) {
    size_t len = 0;
    for (int i = 1; i < n; i++) {
        int piece_len;
        const char *piece = tokenizer_decode(t, tokens[i - 1], tokens[i], &piece_len);
        if (len + (size_t)piece_len >= cap) return -1;
        memcpy(out + len, piece, (size_t)piece_len);
        len += (size_t)piece_len;
    }
    out[len] = '\0';
    return 0;
}

static void test_round_trip(const Tokenizer *t, const char *label) {
    const char *texts[] = { "the cat sat on the mat", "héllo wörld — naïve café", "你好，世界 🙂 ok", "a b  c   d", "" };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int tokens[256];
        int n = tokenizer_encode(t, texts[i], 1, 0, tokens);
        char back[512], name[512];
        decode_all(t, tokens, n, back, sizeof back);
        snprintf(name, sizeof name, "%s: round trip \"%s\" (%d tokens)", label, texts[i], n);
        report(strcmp(back, texts[i]) == 0, name, "decoded \"%s\"", back);
    }
}

/* llama2.c's encoder, written the slow obvious way: rescan every adjacent
 * pair, merge the best-scoring (leftmost on ties), repeat. The engine's
 * heap-based encoder must give exactly the same ids. */
static int naive_encode(const Tokenizer *t, const char *text, int *ids) {
    int n = 0;
    char buf[64];
    if (text[0]) {
        for (int i = 0; i < t->vocab_size; i++)
            if (!strcmp(t->vocab[i], " ")) { ids[n++] = i; break; }
    }
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        int len = 1;
        while (len < 4 && (s[len] & 0xC0) == 0x80) len++;
        int id = -1;
        for (int i = 0; i < t->vocab_size && id < 0; i++)
            if (t->piece_lengths[i] == len && !memcmp(t->vocab[i], s, (size_t)len)) id = i;
        if (id >= 0) ids[n++] = id;
        else for (int b = 0; b < len; b++) ids[n++] = t->byte_tokens[s[b]];
        s += len;
    }
    for (;;) {
        float best = -1e10f; /* llama2.c's start: no merge into a piece scored at or below it */
        int best_i = -1, best_id = -1;
        for (int i = 0; i + 1 < n; i++) {
            snprintf(buf, sizeof buf, "%s%s", t->vocab[ids[i]], t->vocab[ids[i + 1]]);
            for (int v = 0; v < t->vocab_size; v++)
                if (!strcmp(t->vocab[v], buf) && t->scores[v] > best) { best = t->scores[v]; best_i = i; best_id = v; }
        }
        if (best_i < 0) break;
        ids[best_i] = best_id;
        memmove(ids + best_i + 1, ids + best_i + 2, (size_t)(n - best_i - 2) * sizeof(int));
        n--;
    }
    return n;
}

static void test_encoder_matches_naive(const Tokenizer *t, const char *label) {
    const char *alphabet[] = { "a", "b", "e", "t", "h", " ", "  ", "the", "cat", "é", "ü", "中", "🙂", "\n", ",", "." };
    unsigned rng = 12345;
    int mismatches = 0, cases = 60;
    for (int c = 0; c < cases; c++) {
        char text[256] = "";
        int pieces = 1 + c % 20;
        for (int p = 0; p < pieces; p++) {
            rng = rng * 1103515245u + 12345u;
            strcat(text, alphabet[(rng >> 16) % (sizeof alphabet / sizeof alphabet[0])]);
        }
        int fast[512], slow[512];
        int nf = tokenizer_encode(t, text, 0, 0, fast), ns = naive_encode(t, text, slow);
        if (nf != ns || memcmp(fast, slow, (size_t)nf * sizeof(int)) != 0) mismatches++;
    }
    char name[128];
    snprintf(name, sizeof name, "%s: heap encoder equals the naive rescan on %d random texts", label, cases);
    report(mismatches == 0, name, "%d mismatches", mismatches);
}

static void test_llama2_ids(const Tokenizer *t) {
    struct { const char *text; int n; int ids[64]; } cases[] = {
        { "", 1, { 1 } },
        { "I believe the meaning of life is", 8, { 1, 306, 4658, 278, 6593, 310, 2834, 338 } },
        { "Simply put, the theory of relativity states that ", 13,
          { 1, 3439, 17632, 1925, 29892, 278, 6368, 310, 14215, 537, 5922, 393, 29871 } },
        { "A brief message congratulating the team on the launch:\n\n        Hi everyone,\n\n        I just ", 26,
          { 1, 319, 11473, 2643, 378, 629, 271, 18099, 278, 3815, 373, 278, 6826, 29901, 13, 13, 4706, 6324, 14332,
            29892, 13, 13, 4706, 306, 925, 29871 } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int tokens[256];
        int n = tokenizer_encode(t, cases[i].text, 1, 0, tokens);
        char name[160];
        snprintf(name, sizeof name, "llama2 tokenizer: reference ids of case %zu", i);
        int same = n == cases[i].n && memcmp(tokens, cases[i].ids, (size_t)n * sizeof(int)) == 0;
        report(same, name, "got %d tokens, expected %d", n, cases[i].n);
    }
}

static void test_tokenizer(void) {
    Tokenizer t;
    char err[256];
    if (tokenizer_load_file(&t, "tests/data/tiny-tokenizer.bin", -1, err, sizeof err) == 0) {
        test_round_trip(&t, "tiny tokenizer");
        test_encoder_matches_naive(&t, "tiny tokenizer");
        tokenizer_free(&t);
    } else report(0, "tiny tokenizer", "%s", err);

    const char *llama = "../shared/data/llama2-tokenizer.bin";
    if (access(llama, R_OK) != 0) {
        skip("llama2 tokenizer", "../shared/data is absent");
        return;
    }
    if (tokenizer_load_file(&t, llama, 32000, err, sizeof err)) { report(0, "llama2 tokenizer", "%s", err); return; }
    test_llama2_ids(&t);
    test_round_trip(&t, "llama2 tokenizer");
    test_encoder_matches_naive(&t, "llama2 tokenizer");
    const char *utf8_bad[] = { "\xC3\x28", "\xE2\x82", "\xF0\x9F\x98", "\xED\xA0\x80", "\xC0\xAF" };
    int all_found = 1;
    for (size_t i = 0; i < sizeof utf8_bad / sizeof utf8_bad[0]; i++) all_found &= utf8_invalid_at(utf8_bad[i]) != 0;
    report(all_found && utf8_invalid_at("ok é 🙂") == 0, "utf8 validation", "a bad sequence passed or a good one failed");
    tokenizer_free(&t);
}

/* ------------------------------------------------------------------------ */
/* Hostile input (issue 10): the sampler, small tokenizers, the loader       */

/* A sampler whose candidates array has a sentinel slot in front of it: a
 * read of candidates[-1] returns the sentinel's id, which no vocabulary has. */
static ProbIndex sentinel_candidates[1 + 1024];

static void sampler_with_sentinel(Sampler *s, int vocab, float temperature, float topp, int topk) {
    sampler_init(s, vocab, temperature, topp, topk, 42);
    free(s->candidates);
    sentinel_candidates[0] = (ProbIndex){ 1.0f, -12345 };
    s->candidates = sentinel_candidates + 1;
}

/* SwiGLU's silu(g) * u (elementwise.h) against float64, every element of a
 * row whatever its length and where it starts (the vector paths mask the
 * last partial vector, so a prompt's rows give a token's bits), and NaN in
 * gives NaN out. Bound: 4 ulp of the float64 value (the exp's 2, a divide
 * and a multiply), or 1e-35 absolute where g < -80 (elementwise.h's
 * clamp: silu is then below 1e-33 either way). Gates far below the exp's
 * range (-1e3, -1e6, -3e38) are in the row too: silu is 0 there, where
 * e^-g clamped to e^88.38 had made it g / 2.4e38 (-1.25 at -3e38). */
static void test_silu_mul(Isa isa) {
    enum { N = 203 };
    float g[N], u[N], got[N], shifted[N + 5];
    uint32_t lcg = 7;
    for (int i = 0; i < N; i++) {
        lcg = lcg * 1664525u + 1013904223u;
        g[i] = i < 100 ? (float)(i - 50) * 2.1f : ((float)(lcg >> 8) / 16777216.0f - 0.5f) * 24;
        u[i] = (float)((lcg >> 4) % 1000) / 250.0f - 2.0f;
    }
    g[7] = 0.0f, g[8] = -0.0f, g[9] = 1e-30f, g[10] = 88.5f, g[11] = -88.2f;
    g[12] = -1e3f, g[13] = -1e6f, g[14] = -3e38f;
    double worst = 0; /* in ulps */
    int same = 1;
    for (int n = 1; n <= N; n += n < 40 ? 1 : 37) {
        memcpy(got, g, sizeof g);
        silu_mul(isa, got, u, n);
        memcpy(shifted + 5, g, sizeof g);
        silu_mul(isa, shifted + 5 + 3, u + 3, n > 3 ? n - 3 : 0); /* the same elements from 3 on */
        for (int i = 0; i < n; i++) {
            double want = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
            /* the error in units of the bound's ulp (a float's 2^-24 of |want|) */
            double unit = 5.96e-8 * fabs(want), err = fabs(got[i] - want);
            if (g[i] < -80 && unit < 1e-35 / 4) unit = 1e-35 / 4;
            if (err / unit > worst || isnan(got[i])) worst = isnan(got[i]) ? INFINITY : err / unit;
            if (i >= 3 && memcmp(&got[i], &shifted[5 + i], sizeof(float))) same = 0;
        }
    }
    float nan_in[3] = { 1.0f, NAN, 2.0f }, one[3] = { 1, 1, 1 };
    silu_mul(isa, nan_in, one, 3);
    char name[128];
    snprintf(name, sizeof name, "SwiGLU (%s): within 4 ulp of float64, the same bits at any offset, NaN kept",
             isa_name(isa));
    report(worst <= 4 && same && isnan(nan_in[1]) && !isnan(nan_in[0]) && !isnan(nan_in[2]), name,
           "worst %.2f ulp, same bits %d, NaN %d", worst, same, isnan(nan_in[1]));
}

/* The sampler's passes over the logits (elementwise.h), on every
 * instruction set this CPU has, against a plain loop: the first largest
 * value (ties, -inf and +inf, the maximum in a row's last, partial
 * vector) and the first value that is not finite, for lengths 1..70. */
static void test_logit_passes(void) {
    enum { N = 70 };
    float x[N];
    uint32_t lcg = 3;
    int bad_max = 0, bad_check = 0, cases = 0;
    for (int isa = 0; isa <= (int)isa_available(); isa++)
        for (int n = 1; n <= N; n++)
            for (int kind = 0; kind < 6; kind++) {
                for (int i = 0; i < n; i++) {
                    lcg = lcg * 1664525u + 1013904223u;
                    x[i] = (float)(lcg >> 28) - 8.0f; /* few values: many ties */
                }
                int at = (int)(lcg % (unsigned)n);
                if (kind == 1) x[at] = INFINITY;
                if (kind == 2) x[n - 1] = 100.0f;
                if (kind == 3)
                    for (int i = 0; i < n; i++) x[i] = -INFINITY;
                int want = 0;
                for (int i = 1; i < n; i++)
                    if (x[i] > x[want]) want = i;
                bad_max += max_first((Isa)isa, x, n) != want;
                /* the check: one NaN or infinity at at (kinds 4, 5), or none */
                if (kind == 4) x[at] = NAN;
                if (kind == 5) x[at] = -INFINITY;
                int first = -1;
                for (int i = 0; i < n && first < 0; i++)
                    if (!isfinite(x[i])) first = i;
                bad_check += nonfinite_first((Isa)isa, x, n) != first;
                cases++;
            }
    report(!bad_max && !bad_check,
           "the logits' passes on every instruction set: the first largest and the first non-finite value",
           "%d and %d of %d cases wrong", bad_max, bad_check, cases);
}

/* random bits for the sampler's random inputs (Knuth's 64-bit LCG, high half) */
static uint32_t next_random(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*state >> 32);
}

/* -k then -p, worked by hand: probabilities 0.4 0.2 0.15 0.1 0.05 0.05 0.03
 * 0.02. k = 3, p = 0.7: the top 3 hold 0.75, p takes 0.7 of that (0.525):
 * 0.4, then 0.6 > 0.525, so 2 candidates (top-p over the whole
 * distribution would keep 3: 0.75 > 0.7). k = 5, p = 0.9: 0.9 of 0.9 is
 * 0.81, reached at 0.85: 4 (not 5). k = 3, p = 1: the 3. Every draw is one
 * of the kept, and over 2,000 draws each kept token turns up. */
static void test_sampler_top_k_top_p(void) {
    enum { V = 8 };
    const float probs[V] = { 0.4f, 0.2f, 0.15f, 0.1f, 0.05f, 0.05f, 0.03f, 0.02f };
    const struct { int k; float p; int want; } cases[] = { { 3, 0.7f, 2 }, { 5, 0.9f, 4 }, { 3, 1.0f, 3 }, { 1, 0.5f, 1 } };
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Sampler s;
        sampler_init(&s, V, 1.0f, cases[c].p, cases[c].k, 7);
        int seen[V] = { 0 }, wrong = 0;
        for (int draw = 0; draw < 2000; draw++) {
            float logits[V];
            for (int i = 0; i < V; i++) logits[i] = logf(probs[i]);
            SampleInfo info;
            int next = sample(&s, logits, &info);
            wrong += info.n_candidates != cases[c].want || next < 0 || next >= cases[c].want;
            if (next >= 0 && next < V) seen[next]++;
        }
        for (int i = 0; i < cases[c].want; i++) wrong += seen[i] == 0;
        if (wrong) fprintf(stderr, "  k %d p %g: %d wrong\n", cases[c].k, cases[c].p, wrong);
        bad += wrong != 0;
        sampler_free(&s);
    }
    report(!bad, "sampler: top-k, then top-p over the top k's renormalised mass (hand-worked cases)",
           "%d of 4 cases wrong", bad);
    /* ties at the k-th place go to the lower id (the sort's order before the
     * heap): logits 0 0 1 -5 and k = 2 keep ids 2 and 0, never 1; and k at
     * or past the vocabulary draws as k = 0 does (the same coins, tokens) */
    Sampler tie, all, none;
    sampler_init(&tie, 4, 1.0f, 1.0f, 2, 7);
    sampler_init(&all, 4, 1.0f, 1.0f, 4, 9);
    sampler_init(&none, 4, 1.0f, 1.0f, 0, 9);
    int drawn[4] = { 0 }, differ = 0, all_method = 0;
    for (int draw = 0; draw < 4000; draw++) {
        float a[4] = { 0, 0, 1, -5 }, b[4] = { 0.3f, -1, 2, 0 }, c[4] = { 0.3f, -1, 2, 0 };
        SampleInfo info;
        int next = sample(&tie, a, NULL);
        if (next >= 0 && next < 4) drawn[next]++;
        differ += sample(&all, b, &info) != sample(&none, c, NULL);
        all_method += info.method != SAMPLE_TEMPERATURE;
    }
    report(drawn[1] == 0 && drawn[0] > 0 && drawn[2] > 0 && !differ && !all_method,
           "sampler: a tie at the k-th place keeps the lower id; -k at the vocabulary's size draws as -k 0",
           "drawn %d %d %d %d, %d draws differ, %d methods not temperature", drawn[0], drawn[1], drawn[2], drawn[3],
           differ, all_method);
    sampler_free(&tie);
    sampler_free(&all);
    sampler_free(&none);
}

/* The sampled distribution against its closed form: the share of each token
 * over 40,000 seeded draws within 0.01 of the probability it should have
 * (the draws' standard deviation is at most 0.0025). At T = 0.5 the
 * probabilities are softmax(logits / 0.5), in double here; with -k 3 (p 1)
 * on 0.4 0.2 0.15 0.1 ... they are the top three renormalised, 0.4/0.75,
 * 0.2/0.75, 0.15/0.75. Top-p alone (llama2.c's path, with its pre-filter
 * (1-p)/(n-1)), worked by hand: 0.985 and six of 0.0025, p = 0.989: 0.985,
 * 0.9875, then 0.99 > 0.989, so 3 candidates (the pre-filter, 0.011/6 =
 * 0.0018, keeps every 0.0025). */
static void test_sampler_distribution(void) {
    enum { DRAWS = 40000 };
    struct { float t, p; int k, v; float logits[8]; } cases[] = {
        { 0.5f, 1.0f, 0, 4, { 1.0f, 0.5f, 0.0f, -1.0f } },
        { 1.0f, 1.0f, 3, 8, { 0 } },
    };
    const float probs[8] = { 0.4f, 0.2f, 0.15f, 0.1f, 0.05f, 0.05f, 0.03f, 0.02f };
    for (int i = 0; i < 8; i++) cases[1].logits[i] = logf(probs[i]);
    double worst[2] = { 0, 0 };
    for (int c = 0; c < 2; c++) {
        int v = cases[c].v, seen[8] = { 0 };
        double want[8], max = -INFINITY;
        for (int i = 0; i < v; i++) max = fmax(max, cases[c].logits[i] / (double)cases[c].t);
        for (int i = 0; i < v; i++) want[i] = exp(cases[c].logits[i] / (double)cases[c].t - max);
        int kept = cases[c].k ? cases[c].k : v;
        double kept_sum = 0;
        for (int i = 0; i < kept; i++) kept_sum += want[i]; /* the logits are in descending order */
        for (int i = 0; i < v; i++) want[i] = i < kept ? want[i] / kept_sum : 0;
        Sampler s;
        sampler_init(&s, v, cases[c].t, cases[c].p, cases[c].k, 11 + (uint64_t)c);
        for (int draw = 0; draw < DRAWS; draw++) {
            float logits[8];
            memcpy(logits, cases[c].logits, sizeof logits);
            int next = sample(&s, logits, NULL);
            if (next >= 0 && next < v) seen[next]++;
        }
        sampler_free(&s);
        for (int i = 0; i < v; i++) worst[c] = fmax(worst[c], fabs((double)seen[i] / DRAWS - want[i]));
    }
    report(worst[0] <= 0.01 && worst[1] <= 0.01,
           "sampler: draws follow softmax(logits / T) at T = 0.5, and the top k's renormalised shares with -k 3 "
           "(40000 draws each, within 0.01)", "worst share error %.4f (T), %.4f (-k)", worst[0], worst[1]);

    enum { V = 7 };
    Sampler s;
    sampler_init(&s, V, 1.0f, 0.989f, 0, 5);
    int wrong = 0, seen[V] = { 0 };
    for (int draw = 0; draw < 2000; draw++) {
        float logits[V];
        for (int i = 0; i < V; i++) logits[i] = logf(i == 0 ? 0.985f : 0.0025f);
        SampleInfo info;
        int next = sample(&s, logits, &info);
        wrong += info.n_candidates != 3 || info.method != SAMPLE_TOP_P || next < 0 || next > 2;
        if (next >= 0 && next < V) seen[next]++;
    }
    sampler_free(&s);
    report(!wrong && seen[0] > 0, "sampler: top-p alone keeps the shortest prefix past p (hand-worked: 3 of 7 at p = 0.989)",
           "%d draws wrong", wrong);
}

static void test_sampler_hostile(void) {
    enum { V = 582 };
    float logits[V];
    Sampler s;
    /* top-p below 1/V on a flat distribution: every token under the cutoff */
    for (int i = 0; i < V; i++) logits[i] = 1e-30f * (float)(i % 3);
    sampler_with_sentinel(&s, V, 1e30f, 1e-6f, 0);
    int id = sample(&s, logits, NULL);
    report(id >= 0 && id < V, "sampler: top-p that keeps no candidate still returns a token",
           "got id %d (candidates[-1]?)", id);
    /* a temperature whose 1/T overflows the largest logit: the greedy limit */
    for (int i = 0; i < V; i++) logits[i] = (float)(i % 7) + (i == 300 ? 10.0f : 0.0f);
    sampler_with_sentinel(&s, V, 2e-38f, 0.9f, 0);
    SampleInfo info;
    id = sample(&s, logits, &info);
    report(id == 300, "sampler: a temperature of 2e-38 takes the largest logit", "got id %d", id);
    /* ... also where it overflows more than the largest (every logit above
     * 0 is +inf after the division), or every logit is negative (-inf) */
    int greedy_limit = 0;
    for (int sign = 1; sign >= -1; sign -= 2) {
        for (int i = 0; i < V; i++) logits[i] = i == 300 ? 4.0f * (float)sign + 26.0f * (sign > 0) : (float)sign * (5.0f + (float)(i % 7));
        sampler_with_sentinel(&s, V, 1e-38f, 0.9f, 0);
        greedy_limit += sample(&s, logits, &info) == 300 && info.method == SAMPLE_GREEDY;
    }
    report(greedy_limit == 2, "sampler: at 1e-38 many logits overflow (or all, negative): still the largest",
           "%d of 2", greedy_limit);
    /* non-finite logits: no distribution, an error */
    int errors = 0;
    const float bad[] = { NAN, INFINITY, -INFINITY };
    for (size_t b = 0; b < 3; b++)
        for (float t = 0.0f; t <= 1.0f; t += 1.0f) {
            for (int i = 0; i < V; i++) logits[i] = (float)i;
            logits[17] = bad[b];
            sampler_with_sentinel(&s, V, t, 0.9f, 0);
            errors += sample(&s, logits, NULL) == -1 && logits_check(logits, V) >= 0;
        }
    report(errors == 6, "sampler: NaN or infinite logits return -1 (greedy and sampled)", "%d of 6", errors);
    for (int i = 0; i < V; i++) logits[i] = 0.0f;
    logits[5] = NAN;
    report(logits_check(logits, V) == 5, "logits_check finds the first non-finite logit", "got %d", logits_check(logits, V));
    /* random extremes: always a token in range */
    uint64_t rng = 7;
    int in_range = 1;
    for (int round = 0; round < 2000 && in_range; round++) {
        int n = 1 + (int)(next_random(&rng) % 1024);
        for (int i = 0; i < n; i++) {
            uint32_t bits = next_random(&rng);
            float x;
            memcpy(&x, &bits, 4);
            logits[i % V] = isfinite(x) ? x : 0.0f;
        }
        if (n > V) n = V;
        float t = (float)(next_random(&rng) % 5) * 0.5f, p = (float)(next_random(&rng) % 11) / 10.0f;
        if (next_random(&rng) % 4 == 0) t = 1e-38f;
        if (p == 0.0f) p = 1e-7f;
        sampler_with_sentinel(&s, n, t, p, (int)(next_random(&rng) % 4));
        id = sample(&s, logits, NULL);
        in_range = id >= 0 && id < n;
    }
    report(in_range, "sampler: 2000 random logit vectors, temperatures and cutoffs give a token in range",
           "got id %d", id);
    Sampler bad_s;
    report(sampler_init(&bad_s, 0, 1.0f, 0.9f, 0, 1) != 0 && sampler_init(&bad_s, 10, -1.0f, 0.9f, 0, 1) != 0 &&
           sampler_init(&bad_s, 10, INFINITY, 0.9f, 0, 1) != 0 && sampler_init(&bad_s, 10, NAN, 0.9f, 0, 1) != 0,
           "sampler_init refuses vocab 0 and negative, infinite or NaN temperatures", "one was accepted");
}

/* tokenizer.bin bytes of n one-byte pieces */
static size_t small_tokenizer(unsigned char *buf, int n) {
    int32_t max_len = 4, len = 1;
    float score = 0;
    memcpy(buf, &max_len, 4);
    size_t at = 4;
    for (int i = 0; i < n; i++) {
        memcpy(buf + at, &score, 4);
        memcpy(buf + at + 4, &len, 4);
        buf[at + 8] = (unsigned char)('a' + i);
        at += 9;
    }
    return at;
}

static void test_small_tokenizers(void) {
    unsigned char buf[64];
    char err[256];
    Tokenizer t;
    int refused = 0;
    for (int n = 0; n < 3; n++) {
        size_t bytes = small_tokenizer(buf, n);
        refused += tokenizer_load_bytes(&t, buf, bytes, -1, err, sizeof err) != 0;
        refused += tokenizer_load_bytes(&t, buf, bytes, n, err, sizeof err) != 0;
    }
    report(refused == 6, "tokenizers of 0, 1, 2 entries are refused (ids 0, 1, 2 are used)", "%d of 6", refused);
    size_t bytes = small_tokenizer(buf, 3);
    int ok3 = tokenizer_load_bytes(&t, buf, bytes, -1, err, sizeof err) == 0;
    int ids[16], n = ok3 ? tokenizer_encode(&t, "abz", 1, 1, ids) : -1;
    int in_range = n > 0;
    for (int i = 0; i < n; i++) in_range &= ids[i] >= 0 && ids[i] < 3;
    report(in_range, "a 3-entry tokenizer encodes any text to ids in its vocabulary", "%s", ok3 ? "id out of range" : err);
    if (ok3) tokenizer_free(&t);
    /* 2^20 + 1 empty pieces (8 MiB): more than a checkpoint may have */
    size_t n_big = ((size_t)1 << 20) + 1, big_bytes = 4 + 8 * n_big;
    unsigned char *big = calloc(big_bytes, 1);
    int32_t max_len = 8;
    if (big) memcpy(big, &max_len, 4);
    int big_refused = big && tokenizer_load_bytes(&t, big, big_bytes, -1, err, sizeof err) != 0;
    report(big_refused && strstr(err, "1048577 entries"), "a tokenizer.bin of 2^20 + 1 pieces is refused (-z alone: no checkpoint bounds it)",
           "%s", big_refused ? err : "loaded, or out of memory");
    free(big);
}

/* A piece of a crafted vocabulary: its bytes (a NUL among them), its score */
typedef struct {
    const char *bytes;
    int len;
    float score;
} Piece;

/* tokenizer.bin bytes of the pieces (max_token_length 8) */
static size_t pieces_tokenizer(unsigned char *buf, const Piece *pieces, int n) {
    int32_t max_len = 8;
    memcpy(buf, &max_len, 4);
    size_t at = 4;
    for (int i = 0; i < n; i++) {
        int32_t len = pieces[i].len;
        memcpy(buf + at, &pieces[i].score, 4);
        memcpy(buf + at + 4, &len, 4);
        memcpy(buf + at + 8, pieces[i].bytes, (size_t)len);
        at += 8 + (size_t)len;
    }
    return at;
}

/* Pieces compared as bytes with their lengths, not as C strings: "a\0" is
 * not "a" and a pair "a" + "b" does not become "a\0"; a piece held twice
 * is its lowest id; as llama2.c, no merge into a piece scored NaN or at or
 * below -1e10 (its rescan's start). The ids are worked by hand (ids 0-2:
 * <unk>, <s>, </s>; 3: " ", which the prompt starts with). */
static void test_tokenizer_pieces(void) {
    const float nan = NAN;
    struct {
        const char *name, *text;
        Piece pieces[6];
        int n_pieces, n_ids, ids[6];
    } cases[] = {
        { "a piece \"a\\0\" is not \"a\" (a is unknown), and b stays after it", "ab",
          { { "a\0", 2, 0 }, { "b", 1, 0 }, { "c", 1, 0 } }, 3, 4, { 1, 3, 0, 5 } },
        { "\"a\" + \"b\" is \"ab\", not \"ab\\0zz\"", "ab",
          { { "a", 1, 0 }, { "b", 1, 0 }, { "ab", 2, 1 }, { "ab\0zz", 5, 5 } }, 4, 3, { 1, 3, 6 } },
        { "a piece held twice is its lowest id", "ab",
          { { "a", 1, 0 }, { "b", 1, 0 }, { "ab", 2, 1 }, { "ab", 2, 1 } }, 4, 3, { 1, 3, 6 } },
        { "no merge into a piece scored NaN (the pair after it merges)", "abc",
          { { "a", 1, 0 }, { "b", 1, 0 }, { "c", 1, 0 }, { "ab", 2, nan }, { "bc", 2, 10 } }, 5, 4, { 1, 3, 4, 8 } },
        { "no merge into a piece scored -1e30 (at or below llama2.c's -1e10)", "ab",
          { { "a", 1, 0 }, { "b", 1, 0 }, { "ab", 2, -1e30f } }, 3, 4, { 1, 3, 4, 5 } },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Piece all[9] = { { "<unk>", 5, 0 }, { "<s>", 3, 0 }, { "</s>", 4, 0 }, { " ", 1, 0 } };
        memcpy(all + 4, cases[c].pieces, (size_t)cases[c].n_pieces * sizeof(Piece));
        unsigned char buf[256];
        char err[256], name[160];
        Tokenizer t;
        int ids[16], n = -1;
        size_t bytes = pieces_tokenizer(buf, all, 4 + cases[c].n_pieces);
        int loaded = tokenizer_load_bytes(&t, buf, bytes, -1, err, sizeof err) == 0;
        if (loaded) n = tokenizer_encode(&t, cases[c].text, 1, 0, ids);
        snprintf(name, sizeof name, "tokenizer: %s", cases[c].name);
        report(n == cases[c].n_ids && !memcmp(ids, cases[c].ids, (size_t)n * sizeof(int)), name, "%d ids: %d %d %d %d%s",
               n, ids[0], n > 1 ? ids[1] : -1, n > 2 ? ids[2] : -1, n > 3 ? ids[3] : -1, loaded ? "" : err);
        if (loaded) tokenizer_free(&t);
    }
    /* a character vocabulary: "\0" is one character, "\0<sc" four */
    Piece chars[2] = { { "\0", 1, 0 }, { "\0<sc", 4, 0 } };
    unsigned char buf[64];
    char err[256];
    Tokenizer t;
    int one = tokenizer_load_kind(&t, buf, pieces_tokenizer(buf, chars, 1), 1, TOKENIZER_CHAR, err, sizeof err) == 0;
    if (one) tokenizer_free(&t);
    int two = tokenizer_load_kind(&t, buf, pieces_tokenizer(buf, chars, 2), 2, TOKENIZER_CHAR, err, sizeof err) == 0;
    if (two) tokenizer_free(&t);
    report(one && !two, "character tokenizer: a piece \"\\0\" loads, a piece \"\\0<sc\" (four bytes) is refused",
           "\"\\0\" %s, \"\\0<sc\" %s", one ? "loaded" : "refused", two ? "loaded" : "refused");
}

/* Loads path from memory, with extra bytes appended: only 0 may load. */
static int load_with_extra(const char *path, size_t extra, char *err, size_t err_len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -2;
    fseek(f, 0, SEEK_END);
    size_t size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = calloc(size + extra, 1);
    int rc = -2;
    if (data && fread(data, 1, size, f) == size) {
        Model m;
        rc = model_load_memory(&m, data, size + extra, err, err_len);
        if (rc == 0) model_free(&m);
    }
    fclose(f);
    free(data);
    return rc;
}

static void test_loader_hostile(void) {
    const char *files[] = { "tests/data/gqa.qkv", "tests/data/sepcls.legacy.bin", "tests/data/gqa.legacy.bin",
                            "tests/data/mqa.v1.bin", "tests/data/sepcls.v1.bin" };
    char err[256], name[160];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        int whole = load_with_extra(files[i], 0, err, sizeof err);
        int longer = load_with_extra(files[i], 4, err, sizeof err);
        snprintf(name, sizeof name, "model_load_memory: %s loads, and 4 bytes more are refused", files[i]);
        report(whole == 0 && longer == -1, name, "whole %d, longer %d", whole, longer);
    }
    /* a legacy header whose vocab_size is INT_MIN: refused without negating it */
    int32_t header[7] = { 8, 16, 1, 2, 2, INT32_MIN, 8 };
    unsigned char file[28 + 64] = { 0 };
    memcpy(file, header, sizeof header);
    Model m;
    int rc = model_load_memory(&m, file, sizeof file, err, sizeof err);
    report(rc == -1 && strstr(err, "vocab_size"), "legacy vocab_size INT_MIN is refused", "rc %d: %s", rc, err);
}

/* ------------------------------------------------------------------------ */
/* The start token, recorded at load (Config.start_id)                       */

/* The piece of model m's start token, from its own tokenizer, or "" */
static const char *start_piece(const Model *m, Tokenizer *t) {
    char err[256];
    const Config *c = &m->config;
    if (!m->tokenizer_data || c->start_id < 0 ||
        tokenizer_load_kind(t, m->tokenizer_data, m->tokenizer_bytes, c->vocab_size, c->tokenizer_kind, err, sizeof err))
        return "";
    return t->vocab[c->start_id];
}

/* Loads path (from memory, so a test can change its bytes first) and checks
 * its start token's id and, where the file has a tokenizer, its piece. */
static void check_start(const char *path, const unsigned char *data, size_t size, int id, const char *piece) {
    Model m;
    Tokenizer t = { 0 };
    char err[256], name[200];
    snprintf(name, sizeof name, "start token of %s: id %d%s%s", path, id, piece ? ", piece " : "",
             piece ? (piece[0] == '\n' ? "\"\\n\"" : piece) : "");
    if (model_load_memory(&m, data, size, err, sizeof err)) { report(0, name, "%s", err); return; }
    const char *got = piece ? start_piece(&m, &t) : NULL;
    report(m.config.start_id == id && (!piece || !strcmp(got, piece)), name, "id %d, piece \"%s\"",
           m.config.start_id, got ? got : "");
    tokenizer_free(&t);
    model_free(&m);
}

/* a little-endian u64 field of a file */
static uint64_t file_u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc(*size);
    if (data && fread(data, 1, *size, f) != *size) { free(data); data = NULL; }
    fclose(f);
    return data;
}

/* Each kind's start: BOS (llama2.c, its own formats imply 1), GPT-2's
 * <|endoftext|> (EOS), a character model's "\n" (found in its vocabulary,
 * not always id 0); a character vocabulary without "\n" has none (-1). */
static void test_start_token(void) {
    struct { const char *path; int id; const char *piece; } cases[] = {
        { "models/stories.bin", 1, NULL },          /* Llama, BOS in the qkv header */
        { "tests/data/gqa.legacy.bin", 1, NULL },   /* llama2.c legacy: BOS 1, no tokenizer inside */
        { "tests/data/mqa.v1.bin", 1, NULL },       /* llama2.c v1 */
        { "tests/data/gpt2-bpe.qkv", 406, "<|endoftext|>" },
        { "models/shakespeare.bin", 0, "\n" },      /* nanoGPT's characters: "\n" is its smallest */
        { "tests/data/gpt2.qkv", 0, "\n" },         /* characters (last: changed below) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t size;
        unsigned char *data = read_file(cases[i].path, &size);
        if (!data) { skip(cases[i].path, "missing"); continue; }
        check_start(cases[i].path, data, size, cases[i].id, cases[i].piece);
        if (i + 1 == sizeof cases / sizeof cases[0]) { /* its one-byte pieces 0 ("\n") and 1 swapped */
            unsigned char *first = data + file_u64(data + 72) + 4 + 8, *second = first + 9, was = *first;
            *first = *second;
            *second = was;
            check_start("tests/data/gpt2.qkv with \"\\n\" as piece 1", data, size, 1, "\n");
            *second = 0x7F; /* DEL: a character, and the vocabulary has no "\n" */
            check_start("tests/data/gpt2.qkv without \"\\n\"", data, size, -1, NULL);
        }
        free(data);
    }
}

/* ------------------------------------------------------------------------ */
/* Threads chosen by measuring (threads.h), on made-up step times            */

/* steps steps whose time a token is one_s with one thread and all_s with
 * all (4); returns how many ran on all threads. */
static int steps_on_all(ThreadChoice *t, int steps, double one_s, double all_s) {
    int on_all = 0;
    for (int i = 0; i < steps; i++) {
        int n = thread_choice_next(t);
        on_all += n == 4;
        thread_choice_record(t, n == 4 ? all_s : one_s, 1);
    }
    return on_all;
}

static void test_thread_choice(void) {
    ThreadChoice t = thread_choice(4, 0);
    int on_all = steps_on_all(&t, 2000, 1e-3, 20e-3); /* a busy machine: all threads 20x slower */
    report(on_all <= 20, "threads: all threads 20x slower -> one thread, all of them tried in at most 1% of 2000 steps",
           "%d steps on all threads", on_all);
    on_all = steps_on_all(&t, 2200, 1e-3, 0.55e-3); /* the machine frees up */
    int last = steps_on_all(&t, 200, 1e-3, 0.55e-3);
    report(last >= 195, "threads: back to all threads within 2200 steps once they are faster",
           "%d of the last 200 steps on all threads", last);
    t = thread_choice(4, 0);
    on_all = steps_on_all(&t, 2000, 1e-3, 0.55e-3);
    report(on_all >= 1980, "threads: all threads faster -> one thread tried in at most 1% of 2000 steps",
           "%d steps on all threads", on_all);
    t = thread_choice(4, 1);
    on_all = steps_on_all(&t, 100, 1e-3, 20e-3);
    report(on_all == 100, "threads: --threads (forced) is never changed", "%d of 100 steps on all threads", on_all);
    /* OMP_NUM_THREADS fixes the count only where OpenMP takes it (libgomp
     * warns of the others and uses every core: the choice stays measured).
     * Each value's fate is libgomp 12's, seen with omp_get_max_threads() */
    const char *given[] = { "2", " 1", "4,2", "3 ", "12", "+3", "03", "\n3", "3\n", "3 ,2", "3, 2" },
               *ignored[] = { "", "0", "-1", "garbage", "2x", " ", "0,2", "3,x", "3,", "3,0", "99999999999999999999",
                              "1e1", "-0", "+0" };
    int wrong = 0;
    for (size_t i = 0; i < sizeof given / sizeof *given; i++) wrong += !omp_count_given(given[i]);
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++) wrong += omp_count_given(ignored[i]);
    wrong += omp_count_given(NULL);
    report(wrong == 0, "threads: OMP_NUM_THREADS fixes the count when it is a positive count (or list), not when empty, 0, negative or garbage",
           "%d of 26 values misread", wrong);
}

/* ------------------------------------------------------------------------ */
/* A persistent team (team.h) against OpenMP regions                         */

/* Marks each item a task is given; counts the threads that ran. */
typedef struct {
    int items;
    unsigned char marks[1000];
    int ids[64];
} ShareTask;

static void mark_share(void *ctx, int id, int n) {
    ShareTask *t = ctx;
    long first, last;
    team_share(t->items, id, n, &first, &last);
    for (long i = first; i < last; i++) t->marks[i]++;
    t->ids[id] = n;
}

static int team_shares(Team *team, void *ctx) {
    int *ok = ctx;
    for (int threads = 3; threads >= 1; threads--) {
        team_set_threads(team, threads);
        for (int items = 0; items <= 1000; items += 37) {
            ShareTask t;
            memset(&t, 0, sizeof t);
            t.items = items;
            team_run(team, mark_share, &t, 1);
            for (int i = 0; i < items; i++) *ok &= t.marks[i] == 1;
            for (int id = 0; id < 64; id++) *ok &= t.ids[id] == (id < threads ? threads : 0);
        }
    }
    return team != NULL;
}

/* A prompt of 100 tokens, then 60 decode steps: every logit, on a team or
 * not. */
typedef struct {
    const Model *m;
    const int *tokens;
    float *logits; /* [61, vocab] */
} TeamForward;

static int team_forward(Team *team, void *ctx) {
    TeamForward *f = ctx;
    int V = f->m->config.vocab_size;
    RunState s;
    if (run_state_init(&s, &f->m->config, 160)) return -1;
    s.team = team;
    memcpy(f->logits, forward_tokens(f->m, &s, f->tokens, 100, 0, NULL), (size_t)V * sizeof(float));
    for (int pos = 100; pos < 160; pos++)
        memcpy(f->logits + (size_t)(pos - 99) * V, forward(f->m, &s, f->tokens[pos], pos, NULL), (size_t)V * sizeof(float));
    run_state_free(&s);
    return team != NULL;
}

static void test_team(void) {
#ifndef _OPENMP
    skip("team", "this build has no OpenMP (OPENMP=): a team is one thread");
    return;
#endif
    int shares_ok = 1;
    int teamed = team_main(3, team_shares, &shares_ok);
    report(shares_ok && teamed, "team: tasks on 3, 2 and 1 threads of a team of 3 see each item once, with their n",
           "an item missed or seen twice, or no team");
    Model m;
    char err[256];
    const char *path = "models/stories.bin";
    if (model_load(&m, path, err, sizeof err)) { report(0, path, "%s", err); return; }
    int V = m.config.vocab_size, tokens[160];
    uint32_t lcg = 7;
    for (int i = 0; i < 160; i++) { lcg = lcg * 1664525u + 1013904223u; tokens[i] = (int)((lcg >> 8) % (uint32_t)V); }
    float *alone = malloc((size_t)61 * V * sizeof(float)), *team = malloc((size_t)61 * V * sizeof(float));
    TeamForward a = { &m, tokens, alone }, b = { &m, tokens, team };
    int without = team_main(1, team_forward, &a), with = team_main(2, team_forward, &b);
    report(without == 0 && with == 1 && memcmp(alone, team, (size_t)61 * V * sizeof(float)) == 0,
           "team: models/stories.bin (Q8_0) on a team of 2 gives the logits of OpenMP's regions, bit for bit "
           "(a 100-token prompt, then 60 steps)", "logits differ (or no team: %d %d)", without, with);
    free(alone);
    free(team);
    model_free(&m);
}

/* piece_escape against hand-written escapes: control bytes, C1 controls,
 * bytes that are not UTF-8, and a buffer too small cut between characters
 * and escapes, never inside one */
static void test_piece_escape(void) {
    static const struct { const char *piece; int quoted; size_t cap; const char *want; int consumed; } cases[] = {
        { "a\\b\"c", 1, 64, "a\\\\b\\\"c", 5 },
        { "a\"\n\t\r", 0, 64, "a\"\\n\\t\\r", 5 },
        { "\x1b[2J\x7f", 0, 64, "\\x1B[2J\\x7F", 5 },
        { "\xc2\x9b" "2J\xc2\x9d", 0, 64, "\\u009B2J\\u009D", 6 },
        { "\xc2\xa0\xc3\xa9", 0, 64, "\xc2\xa0\xc3\xa9", 4 },        /* U+00A0 and é: printable */
        { "\xff\xfe" "ab\xc3(", 0, 64, "\\xFF\\xFEab\\xC3(", 6 },
        { "\xed\xa0\x80", 0, 64, "\\xED\\xA0\\x80", 3 },               /* a surrogate */
        { "ab\x1b" "cd", 0, 6, "ab", 2 },                                /* \x1B needs 4 of the 5 left */
        { "\xe4\xb8\xad\xe4\xb8\xad", 0, 5, "\xe4\xb8\xad", 3 },         /* 中中: one whole character */
        { "\xe4\xb8\xad\xe4\xb8", 0, 64, "\xe4\xb8\xad\\xE4\\xB8", 5 },  /* a character cut off */
    };
    int wrong = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        int consumed = piece_escape(out, cases[i].cap, cases[i].piece, (int)strlen(cases[i].piece), cases[i].quoted);
        if (strcmp(out, cases[i].want) || consumed != cases[i].consumed) {
            if (!wrong) printf("  case %zu: got \"%s\" (%d bytes read)\n", i, out, consumed);
            wrong++;
        }
    }
    report(!wrong, "piece_escape: \\xNN, \\u009B for C1, whole characters and escapes when cut", "%d cases wrong", wrong);
}

int main(void) {
    test_thread_choice();
    test_team();
    test_worked_example();
    test_kernels();
    test_float16();
    test_activations_quantize();
    test_matmul_kernels();
    test_kernel_vendor();
    test_weights_place();
    test_buffers();
    test_packed_rows();
    test_quantizers();
    test_kv_types();
    test_kv_q8_extremes();
    test_kv_q8_halves();
    test_golden_fixtures();
    test_golden_models();
    test_tokenizer();
    test_piece_escape();
    test_sampler_top_k_top_p();
    test_sampler_distribution();
    test_sampler_hostile();
    test_logit_passes();
    test_isa_within();
    for (int isa = 0; isa <= (int)isa_available() && isa <= ISA_AVX512; isa++)
        if (isa != ISA_AVX_VNNI) test_silu_mul((Isa)isa); /* its elementwise kernels are AVX2's */
    test_small_tokenizers();
    test_tokenizer_pieces();
    test_loader_hostile();
    test_start_token();
    return failures ? 1 : 0;
}
