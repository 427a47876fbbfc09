/* kernels_int8.h — the int8 and 4-bit (Q8_0, Q4_0) matrix kernels, over
 * panels of 16 rows: the packing, the portable C kernel (whose order of
 * sums every instruction set keeps), AVX2, AVX-512BW and AVX-512 VNNI.
 *
 * Part of kernels.h's implementation (it includes this file where the
 * helpers it uses are defined, before the table of kernels); not a header
 * of its own. The layout of a panel is described with weight_pack in
 * kernels.h's interface.
 *
 * A panel puts one row in each 32-bit lane: a 64-byte vector is four
 * columns of 16 rows, so a block's integer dot product (exact) builds up
 * in its row's lane, with a broadcast of the matching four activations,
 * and is scaled once:
 *   sum = fma((float)dot, d_w * d_x, sum)    block after block
 * No lanes are summed across, and every kernel, whatever its tile, keeps
 * this order and these roundings: a prompt gives the bits of one token at
 * a time, and every instruction set the bits of the portable kernel. */
#ifndef QKV_KERNELS_INT8_H
#define QKV_KERNELS_INT8_H

/* ------------------------------------------------------------------------ */
/* Packing                                                                   */

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

/* ------------------------------------------------------------------------ */
/* Portable kernel                                                           */

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
/* x86-64: AVX2, AVX-512BW, AVX-512 VNNI                                     */

#ifdef QKV_HAVE_X86_KERNELS

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

/* Lanes of v for rows row0..row0+7 into position t's output, those
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

#endif /* QKV_HAVE_X86_KERNELS */

#endif /* QKV_KERNELS_INT8_H */
