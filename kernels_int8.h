/* kernels_int8.h — the int8 and 4-bit (Q8_0, Q4_0) matrix kernels, over
 * panels of 16 rows: the packing, the int8 activations, the portable C
 * kernel (whose order of sums every instruction set keeps), AVX2,
 * AVX-512BW, AVX-512 VNNI and, for prompts, AMX.
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

/* Block b of row r of a panel as ggml stores it (pack_row undone): the
 * float16 scale, then the values. */
static void unpack_block(const unsigned char *panel, int r, int blocks, int q4, int b, unsigned char *blk) {
    int value_bytes = packed_value_bytes(q4);
    const unsigned char *values = panel + (size_t)b * QKV_PANEL * value_bytes + r * 4;
    uint32_t flip = q4 ? 0 : 0x80808080u;
    memcpy(blk, panel + (size_t)blocks * QKV_PANEL * value_bytes + (size_t)b * QKV_PANEL * 2 + r * 2, 2);
    for (int c = 0; c < value_bytes / 4; c++) {
        uint32_t word;
        memcpy(&word, values + (size_t)c * 4 * QKV_PANEL, 4);
        word ^= flip;
        memcpy(blk + 2 + 4 * c, &word, 4);
    }
}

static void pack_quantized(WeightType type, const void *data, int rows, int cols, void *panels) {
    int q4 = type == WEIGHT_Q4_0, blocks = cols / QKV_QBLOCK;
    size_t row_bytes = weight_row_bytes(type, cols), panel_bytes = QKV_PANEL * row_bytes;
    if (rows % QKV_PANEL) /* the last panel's padding rows are zeros */
        memset((unsigned char *)panels + (size_t)(rows / QKV_PANEL) * panel_bytes, 0, panel_bytes);
    for (int i = 0; i < rows; i++)
        pack_row((const unsigned char *)data + (size_t)i * row_bytes, i % QKV_PANEL, blocks, q4,
                 (unsigned char *)panels + (size_t)(i / QKV_PANEL) * panel_bytes);
}

/* ------------------------------------------------------------------------ */
/* The activations: int8 per block of 32                                     */

#ifdef QKV_HAVE_X86_KERNELS
/* roundf of 16 floats, as round_half_away does it: the truncation (the
 * same cvtt as a C cast on x86), plus one if the fraction is half or
 * more, minus one if it is minus half or less. */
TARGET_AVX512 INLINE __m512i round_half_away_512(__m512 v) {
    const __m512i one = _mm512_set1_epi32(1);
    __m512i t = _mm512_cvttps_epi32(v);
    __m512 fraction = _mm512_sub_ps(v, _mm512_cvtepi32_ps(t));
    t = _mm512_mask_add_epi32(t, _mm512_cmp_ps_mask(fraction, _mm512_set1_ps(0.5f), _CMP_GE_OQ), t, one);
    return _mm512_mask_sub_epi32(t, _mm512_cmp_ps_mask(fraction, _mm512_set1_ps(-0.5f), _CMP_LE_OQ), t, one);
}

/* quantize_activation_block's arithmetic, a block as two vectors: the
 * same maximum of magnitudes' bits, the same scalar d and 1 / d, the same
 * products and rounding. */
TARGET_AVX512 static void quantize_activation_row_512(const float *x, int8_t *q, float *scale, int32_t *sum,
                                                      int blocks) {
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
    for (int b = 0; b < blocks; b++, x += QKV_QBLOCK, q += QKV_QBLOCK) {
        __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
        uint32_t top = _mm512_reduce_max_epu32(_mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(lo), magnitude),
                                                                _mm512_and_si512(_mm512_castps_si512(hi), magnitude)));
        if (top > 0x7f7fffffu) { /* NaN or infinity */
            scale[b] = NAN, sum[b] = 0;
            memset(q, 0, QKV_QBLOCK);
            continue;
        }
        float amax;
        memcpy(&amax, &top, 4);
        float d = amax / 127.0f, id = inverse_scale(1.0f, d);
        scale[b] = d;
        __m512i level_lo = round_half_away_512(_mm512_mul_ps(lo, _mm512_set1_ps(id)));
        __m512i level_hi = round_half_away_512(_mm512_mul_ps(hi, _mm512_set1_ps(id)));
        _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(level_lo));
        _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(level_hi));
        sum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(level_lo, level_hi));
    }
}
#endif

static void quantize_activation_row(Isa isa, const float *x, int8_t *q, float *scale, int32_t *sum, int blocks) {
#ifdef QKV_HAVE_X86_KERNELS
    if (isa >= ISA_AVX512) {
        quantize_activation_row_512(x, q, scale, sum, blocks);
        return;
    }
#else
    (void)isa;
#endif
    for (int b = 0; b < blocks; b++)
        quantize_activation_block(x + b * QKV_QBLOCK, q + b * QKV_QBLOCK, scale + b, sum + b);
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
/* x86-64: AVX2, AVX-512BW, AVX-512 VNNI, AMX                                */

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

/* Bytes ahead of the block being summed whose lines a decode step
 * requests (8 blocks of Q8_0, 16 of Q4_0; past the panel's end they fall
 * in its scales, then the next panel), at the kernel's Fetch level. The
 * AVX2 kernels request them into L1: without them the core waited on the
 * loads (the shipped model's Q4_0 decode, QKV_ISA=avx2, 1 thread, Xeon,
 * 3957-4096 -> 4620-4883 tok/s, Q8_0 2739-2751 -> 2843-2877); 2 and 4
 * blocks ahead helped less, 16 and 32 no more. A prompt reads each panel
 * for many positions: with the requests too its prefill was 4-8% slower.
 * The AVX-512 kernels read their panels as fast without on the Xeon; on an
 * AMD EPYC (Zen 4) their requests into L2 pay when the weights come from
 * memory (KERNELS in kernels.h), 4 KiB ahead faster than 2 (42M Q8_0). */
#define PANEL_AHEAD_BYTES 4096

/* The lines of the block PANEL_AHEAD_BYTES past block b of a panel of
 * value_bytes a row, requested */
INLINE void fetch_block(const unsigned char *panel, int b, int value_bytes, Fetch fetch) {
    const unsigned char *block = panel + (size_t)b * QKV_PANEL * value_bytes + PANEL_AHEAD_BYTES;
    fetch_range(block, (size_t)QKV_PANEL * value_bytes, fetch);
}

/* A panel (rows row0..row0+15) times positions t..t+P-1, eight rows (one
 * half) at a time: per block, the integer dots, then the scales. */
TARGET_AVX2 INLINE void panel_avx2(float *out, int os, const Activations *a, const unsigned char *panel, int blocks,
                                   int row0, int begin, int end, int t, int P, int q4, Fetch fetch) {
    int value_bytes = packed_value_bytes(q4);
    const unsigned char *scales = panel + (size_t)blocks * QKV_PANEL * value_bytes;
    for (int half = 0; half < 2; half++) {
        __m256 acc[2];
        for (int p = 0; p < P; p++) acc[p] = _mm256_setzero_ps();
        for (int b = 0; b < blocks; b++) {
            __m256i dots[2];
            if (fetch && half == 0 && a->n == 1) /* a decode step reads each panel once, from memory */
                fetch_block(panel, b, value_bytes, fetch);
            block_dots_avx2(dots, panel + (size_t)b * QKV_PANEL * value_bytes, half, a, t, b, P, q4);
            __m256 ws = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + (size_t)b * QKV_PANEL * 2 + half * 16)));
            for (int p = 0; p < P; p++)
                acc[p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[p]),
                                         _mm256_mul_ps(ws, _mm256_set1_ps(act_scale(a, t + p)[b])), acc[p]);
        }
        for (int p = 0; p < P; p++) store_rows_avx2(out, os, t + p, row0 + half * 8, begin, end, acc[p]);
    }
}

/* 256-bit VNNI (ISA_AVX_VNNI): a panel (rows row0..row0+15, two vectors of
 * eight) times positions t..t+P-1, P at most VNNI256_POSITIONS, both
 * halves at once (each broadcast of four activations serves the sixteen
 * rows, as with AVX-512). vpdpbusd takes the stored q + 128 (Q8_0) and
 * the nibbles (Q4_0) as they are, each lane starting from the offset's
 * share (-128 or -8 sum x): the same exact integer sums as
 * block_dots_avx2, one instruction where AVX2 takes three or four; then
 * panel_avx2's scales, in its order (the same bits). Written once for both
 * encodings: DPBUSD is the VEX intrinsic or the EVEX one, TARGET to match.
 *
 * A prompt's positions a tile: 2 x 3 accumulators, 2 x 3 dots, the two
 * halves' weights and a broadcast: 15 of the 16 vector registers AVX-VNNI
 * has (the EVEX form has 32); 3 ran faster than 2 on the Zen 4 (EVEX form,
 * 42M shape's Q8_0 and Q4_0 prompts, 1 thread: 1.2-1.3x) */
#define VNNI256_POSITIONS 3
#define PANEL_VNNI256(NAME, TARGET, DPBUSD)                                                                    \
    TARGET INLINE void NAME(float *out, int os, const Activations *a, const unsigned char *panel, int blocks,   \
                            int row0, int begin, int end, int t, int P, int q4, Fetch fetch) {                  \
        const __m256i low4 = _mm256_set1_epi8(0x0f);                                                           \
        int value_bytes = packed_value_bytes(q4);                                                              \
        const unsigned char *scales = panel + (size_t)blocks * QKV_PANEL * value_bytes;                        \
        __m256 acc[2][VNNI256_POSITIONS];                                                                      \
        for (int p = 0; p < P; p++) acc[0][p] = acc[1][p] = _mm256_setzero_ps();                               \
        for (int b = 0; b < blocks; b++) {                                                                     \
            const unsigned char *values = panel + (size_t)b * QKV_PANEL * value_bytes;                         \
            const int8_t *x[VNNI256_POSITIONS];                                                                \
            __m256i dots[2][VNNI256_POSITIONS];                                                                \
            if (fetch && a->n == 1) fetch_block(panel, b, value_bytes, fetch);                                 \
            for (int p = 0; p < P; p++) {                                                                      \
                x[p] = act_q(a, t + p) + b * QKV_QBLOCK;                                                       \
                dots[0][p] = dots[1][p] = _mm256_set1_epi32(-(q4 ? 8 : 128) * act_sum(a, t + p)[b]);           \
            }                                                                                                  \
            for (int c = 0; c < value_bytes / 4; c++) {                                                        \
                __m256i w0 = _mm256_loadu_si256((const __m256i *)(values + c * 64));                          \
                __m256i w1 = _mm256_loadu_si256((const __m256i *)(values + c * 64 + 32));                     \
                if (!q4) {                                                                                     \
                    for (int p = 0; p < P; p++) {                                                              \
                        __m256i bx = _mm256_set1_epi32(X4(x[p], 4 * c));                                       \
                        dots[0][p] = DPBUSD(dots[0][p], w0, bx);                                               \
                        dots[1][p] = DPBUSD(dots[1][p], w1, bx);                                               \
                    }                                                                                          \
                    continue;                                                                                  \
                }                                                                                              \
                for (int nibble = 0; nibble < 2; nibble++) { /* the low four bits, then the high */            \
                    __m256i q0 = _mm256_and_si256(nibble ? _mm256_srli_epi16(w0, 4) : w0, low4);             \
                    __m256i q1 = _mm256_and_si256(nibble ? _mm256_srli_epi16(w1, 4) : w1, low4);             \
                    for (int p = 0; p < P; p++) {                                                              \
                        __m256i bx = _mm256_set1_epi32(X4(x[p], 16 * nibble + 4 * c));                         \
                        dots[0][p] = DPBUSD(dots[0][p], q0, bx);                                               \
                        dots[1][p] = DPBUSD(dots[1][p], q1, bx);                                               \
                    }                                                                                          \
                }                                                                                              \
            }                                                                                                  \
            for (int half = 0; half < 2; half++) {                                                             \
                __m256 ws = _mm256_cvtph_ps(                                                                   \
                    _mm_loadu_si128((const __m128i *)(scales + (size_t)b * QKV_PANEL * 2 + half * 16)));       \
                for (int p = 0; p < P; p++)                                                                    \
                    acc[half][p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[half][p]),                          \
                                                   _mm256_mul_ps(ws, _mm256_set1_ps(act_scale(a, t + p)[b])),  \
                                                   acc[half][p]);                                              \
            }                                                                                                  \
        }                                                                                                      \
        for (int half = 0; half < 2; half++)                                                                   \
            for (int p = 0; p < P; p++) store_rows_avx2(out, os, t + p, row0 + half * 8, begin, end, acc[half][p]); \
    }

#ifdef QKV_HAVE_AVX_VNNI
PANEL_VNNI256(panel_avxvnni, TARGET_AVX_VNNI, _mm256_dpbusd_avx_epi32)
#endif
PANEL_VNNI256(panel_vnni256_evex, TARGET_VNNI256_EVEX, _mm256_dpbusd_epi32)

/* A kernel over panels: every panel that holds a row of [begin, end), its
 * positions PMAX at a time, then one at a time; a decode step's requests
 * at level FETCH. */
#define PANEL_MATMUL(NAME, TARGET, TILE, Q4, PMAX, FETCH)                                                             \
    TARGET static void NAME(float *out, int os, const Activations *a, const void *w, int cols, int begin,     \
                            int end) {                                                                         \
        int blocks = cols / QKV_QBLOCK;                                                                        \
        size_t panel_bytes = QKV_PANEL * weight_row_bytes(Q4 ? WEIGHT_Q4_0 : WEIGHT_Q8_0, cols);                \
        for (int row0 = begin - begin % QKV_PANEL; row0 < end; row0 += QKV_PANEL) {                            \
            const unsigned char *panel = (const unsigned char *)w + (size_t)(row0 / QKV_PANEL) * panel_bytes;  \
            int t = 0;                                                                                         \
            for (; t + PMAX <= a->n; t += PMAX) TILE(out, os, a, panel, blocks, row0, begin, end, t, PMAX, Q4, FETCH); \
            for (; t < a->n; t++) TILE(out, os, a, panel, blocks, row0, begin, end, t, 1, Q4, FETCH);           \
        }                                                                                                      \
    }

PANEL_MATMUL(matmul_q8_avx2, TARGET_AVX2, panel_avx2, 0, 2, FETCH_L1)
PANEL_MATMUL(matmul_q4_avx2, TARGET_AVX2, panel_avx2, 1, 2, FETCH_L1)
#ifdef QKV_HAVE_AVX_VNNI
PANEL_MATMUL(matmul_q8_avxvnni_vex, TARGET_AVX_VNNI, panel_avxvnni, 0, VNNI256_POSITIONS, FETCH_L1)
PANEL_MATMUL(matmul_q4_avxvnni_vex, TARGET_AVX_VNNI, panel_avxvnni, 1, VNNI256_POSITIONS, FETCH_L1)
#endif
PANEL_MATMUL(matmul_q8_vnni256_evex, TARGET_VNNI256_EVEX, panel_vnni256_evex, 0, VNNI256_POSITIONS, FETCH_L1)
PANEL_MATMUL(matmul_q4_vnni256_evex, TARGET_VNNI256_EVEX, panel_vnni256_evex, 1, VNNI256_POSITIONS, FETCH_L1)

/* ISA_AVX_VNNI's kernels: the VEX form where the CPU has AVX-VNNI
 * (VNNI256_FORM) */
static void matmul_q8_avxvnni(float *out, int os, const Activations *a, const void *w, int cols, int begin, int end) {
    VNNI256_FORM(matmul_q8_avxvnni_vex, matmul_q8_vnni256_evex)(out, os, a, w, cols, begin, end);
}

static void matmul_q4_avxvnni(float *out, int os, const Activations *a, const void *w, int cols, int begin, int end) {
    VNNI256_FORM(matmul_q4_avxvnni_vex, matmul_q4_vnni256_evex)(out, os, a, w, cols, begin, end);
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

/* A panel (rows row0..row0+15) times positions t..t+P-1: per block, the
 * integer dots, then one FMA per position with the rows' scales times the
 * position's. No sums across lanes: lane l is row row0 + l. A decode step
 * requests the lines PANEL_AHEAD_BYTES on at level fetch. */
#define PANEL_TILE_512(NAME, TARGET, DOTS)                                                                     \
    TARGET INLINE void NAME(float *out, int os, const Activations *a, const unsigned char *panel, int blocks,   \
                            int row0, int begin, int end, int t, int P, int q4, Fetch fetch) {                  \
        int value_bytes = packed_value_bytes(q4);                                                              \
        const unsigned char *scales = panel + (size_t)blocks * QKV_PANEL * value_bytes;                        \
        __m512 acc[8];                                                                                         \
        for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();                                              \
        for (int b = 0; b < blocks; b++) {                                                                     \
            __m512i dots[8];                                                                                   \
            if (fetch && a->n == 1) fetch_block(panel, b, value_bytes, fetch);            \
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

PANEL_MATMUL(matmul_q8_avx512, TARGET_AVX512, panel_bw, 0, 4, FETCH_NONE)
PANEL_MATMUL(matmul_q4_avx512, TARGET_AVX512, panel_bw, 1, 4, FETCH_NONE)
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

/* Positions t..n-1 of a through one panel: eight at a time, then one. */
TARGET_VNNI INLINE void panel_vnni_from(float *out, int os, const Activations *a, const unsigned char *panel,
                                        int blocks, int row0, int begin, int end, int t, int q4, Fetch fetch) {
    for (; t + 8 <= a->n; t += 8) panel_vnni(out, os, a, panel, blocks, row0, begin, end, t, 8, q4, fetch);
    for (; t < a->n; t++) panel_vnni(out, os, a, panel, blocks, row0, begin, end, t, 1, q4, fetch);
}

/* VNNI: a decode step (or a last lone panel) one panel at a time, a
 * prompt two panels at a time. */
#define VNNI_MATMUL(NAME, Q4, FETCH)                                                                           \
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
            panel_vnni_from(out, os, a, panel, blocks, row0, begin, end, 0, Q4, FETCH);                        \
        }                                                                                                      \
    }

VNNI_MATMUL(matmul_q8_vnni, 0, FETCH_NONE)
VNNI_MATMUL(matmul_q4_vnni, 1, FETCH_NONE)
/* The same with a decode step's requests into L2 (chosen on AMD for
 * weights that come from memory: KERNELS in kernels.h) */
VNNI_MATMUL(matmul_q8_vnni_l2, 0, FETCH_L2)
VNNI_MATMUL(matmul_q4_vnni_l2, 1, FETCH_L2)

#ifdef QKV_HAVE_AMX
/* AMX: a prompt's positions sixteen at a time through the tile unit. One
 * tdpbssd multiplies an A tile (16 positions x one block's 32 int8
 * activations) by a B tile (the block's 32 values of a panel's 16 rows, as
 * 8 rows of 16 x 4 bytes: the layout a panel's chunks already have) into
 * C (16 positions x 16 rows of int32): 16 x 16 exact block dot products in
 * one instruction. The blocks cannot share a tile product (each has its
 * own scales), so each block's C is stored, and AVX-512 scales it into the
 * positions' accumulators as panel_vnni does: the same arithmetic, in the
 * same order, so the same bits. */
enum { AMX_POSITIONS = 16, AMX_B_BYTES = QKV_QBLOCK / 4 * 64 };

/* Tile numbers are immediates: two sets of A, B and C, so that one
 * block's product runs in the tile unit while the one before is scaled. */
#define AMX_A0 0
#define AMX_B0 1
#define AMX_C0 2
#define AMX_A1 3
#define AMX_B1 4
#define AMX_C1 5

/* ldtilecfg's 64 bytes: palette 1, then each tile's bytes a row and rows. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t row_bytes[16];
    uint8_t rows[16];
} AmxConfig;
_Static_assert(sizeof(AmxConfig) == 64, "ldtilecfg reads 64 bytes");

/* The tile shapes, loaded on each thread that runs the kernel (ldtilecfg
 * is per thread, and matmul_group's threads take any rows). Static: GCC
 * 12's _tile_loadconfig tells the compiler it reads 8 bytes, and the
 * stores of a local's other 56 were measured gone. */
static const AmxConfig AMX_CONFIG = {
    .palette = 1,
    .row_bytes = { [AMX_A0] = QKV_QBLOCK, [AMX_B0] = 64, [AMX_C0] = 64,
                   [AMX_A1] = QKV_QBLOCK, [AMX_B1] = 64, [AMX_C1] = 64 },
    .rows = { [AMX_A0] = AMX_POSITIONS, [AMX_B0] = QKV_QBLOCK / 4, [AMX_C0] = AMX_POSITIONS,
              [AMX_A1] = AMX_POSITIONS, [AMX_B1] = QKV_QBLOCK / 4, [AMX_C1] = AMX_POSITIONS },
};

/* A panel's blocks as B tiles of signed bytes (tdpbssd: no offset to take
 * off), and its scales as float32 (ws: [block][row]). Tile b is 8 rows of
 * 64 bytes, row k holding elements 4k..4k+3 of block b for the panel's 16
 * rows. Q8_0: a panel's chunk c is row c as it stands, but q + 128, so
 * flipped back to q. Q4_0: byte j of a row holds element j (low nibble)
 * and j + 16 (high), so rows 0-3 are the low nibbles of chunks 0-3 and
 * rows 4-7 their high nibbles, minus 8. Made once a panel, read for every
 * group of positions. */
TARGET_AMX INLINE void amx_weight_tiles(int8_t *tiles, float *ws, const unsigned char *panel, int blocks, int q4) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8), flip = _mm512_set1_epi8((char)0x80);
    int value_bytes = packed_value_bytes(q4);
    const unsigned char *scales = panel + (size_t)blocks * QKV_PANEL * value_bytes;
    for (int b = 0; b < blocks; b++) {
        _mm512_store_ps(ws + b * QKV_PANEL,
                        _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(scales + (size_t)b * QKV_PANEL * 2))));
        const unsigned char *values = panel + (size_t)b * QKV_PANEL * value_bytes;
        int8_t *tile = tiles + (size_t)b * AMX_B_BYTES;
        if (!q4) {
            for (int c = 0; c < 8; c++)
                _mm512_store_si512(tile + c * 64, _mm512_xor_si512(_mm512_loadu_si512(values + c * 64), flip));
            continue;
        }
        for (int c = 0; c < 4; c++) {
            __m512i raw = _mm512_loadu_si512(values + c * 64);
            __m512i lo = _mm512_and_si512(raw, low4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
            _mm512_store_si512(tile + c * 64, _mm512_sub_epi8(lo, eight));
            _mm512_store_si512(tile + (4 + c) * 64, _mm512_sub_epi8(hi, eight));
        }
    }
    __asm__ volatile("" ::: "memory"); /* the tiles are read by tileloadd, which the compiler cannot see */
}

/* Block b of 16 positions (x: the first one's int8 activations, stride
 * bytes apart) times a panel's B tile into the C of one set of tiles:
 * C = A x B, int32 [position][row]. */
#define AMX_PRODUCT(A, B, C, x, stride, tiles, b)                                                                \
    do {                                                                                                       \
        _tile_loadd(A, (x) + (b) * QKV_QBLOCK, stride);                                                        \
        _tile_loadd(B, (tiles) + (size_t)(b) * AMX_B_BYTES, 64);                                               \
        _tile_zero(C);                                                                                         \
        _tile_dpbssd(C, A, B);                                                                                 \
    } while (0)

/* Block b's dots (C as stored: [position][row]) into the positions'
 * accumulators: one FMA each with the rows' scales (ws: [block][row])
 * times the position's (dx: [block][position]). */
TARGET_AMX INLINE void amx_scale_block(__m512 acc[AMX_POSITIONS], const int32_t *dots, const float *ws, const float *dx,
                                       int b) {
    __m512 row_scales = _mm512_load_ps(ws + b * QKV_PANEL);
    for (int p = 0; p < AMX_POSITIONS; p++)
        acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(dots + p * QKV_PANEL)),
                                 _mm512_mul_ps(row_scales, _mm512_set1_ps(dx[b * AMX_POSITIONS + p])), acc[p]);
}

/* Block b of the next panel (its values and scales) asked into L2 while
 * this panel computes, a block a step: a panel's bytes come from L3 or
 * memory (each chunk of a prompt streams every matrix), and waiting for
 * them at the start of each panel cost a quarter of the kernel's time
 * (measured on weights out of L2). next: NULL for none. */
INLINE void amx_prefetch_block(const unsigned char *next, int blocks, int b, int value_bytes) {
    if (!next) return;
    const char *values = (const char *)next + (size_t)b * QKV_PANEL * value_bytes;
    fetch_range(values, (size_t)QKV_PANEL * value_bytes, FETCH_L2);
    const char *scales = (const char *)next + (size_t)blocks * QKV_PANEL * value_bytes;
    _mm_prefetch(scales + (size_t)b * QKV_PANEL * 2, _MM_HINT_T1);
}

/* A panel (rows row0..row0+15: its blocks as B tiles, ws its scales)
 * times 16 positions (x: their int8 activations, stride bytes apart; dx:
 * their scales) into out[0..15][row0..]: per block, one tile product, then
 * one FMA per position. Three blocks are in flight: block b's C is stored
 * while b + 1's product runs, and b - 1's, stored a step before, is scaled
 * (reading C's bytes right after tilestored writes them waits for the
 * store). Even blocks use tile set 0 and dots[0], odd ones set 1 and
 * dots[1]. next: the next panel, to prefetch (value_bytes a row a block). */
TARGET_AMX INLINE void panel_amx(float *out, int os, const int8_t *x, long stride, const float *dx,
                                 const int8_t *tiles, const float *ws, int blocks, __mmask16 rows,
                                 const unsigned char *next, int value_bytes) {
    _Alignas(64) int32_t dots[2][AMX_POSITIONS * QKV_PANEL];
    __m512 acc[AMX_POSITIONS];
    for (int p = 0; p < AMX_POSITIONS; p++) acc[p] = _mm512_setzero_ps();
    AMX_PRODUCT(AMX_A0, AMX_B0, AMX_C0, x, stride, tiles, 0);
    if (blocks > 1) AMX_PRODUCT(AMX_A1, AMX_B1, AMX_C1, x, stride, tiles, 1);
    for (int b = 0; b < blocks; b += 2) {
        _tile_stored(AMX_C0, dots[0], 64);
        if (b + 2 < blocks) AMX_PRODUCT(AMX_A0, AMX_B0, AMX_C0, x, stride, tiles, b + 2);
        amx_prefetch_block(next, blocks, b, value_bytes);
        if (b > 0) amx_scale_block(acc, dots[1], ws, dx, b - 1);
        if (b + 1 == blocks) break;
        _tile_stored(AMX_C1, dots[1], 64);
        if (b + 3 < blocks) AMX_PRODUCT(AMX_A1, AMX_B1, AMX_C1, x, stride, tiles, b + 3);
        amx_prefetch_block(next, blocks, b + 1, value_bytes);
        amx_scale_block(acc, dots[0], ws, dx, b);
    }
    amx_scale_block(acc, dots[(blocks - 1) % 2], ws, dx, blocks - 1);
    for (int p = 0; p < AMX_POSITIONS; p++) _mm512_mask_storeu_ps(out + (size_t)p * os, rows, acc[p]);
}

/* The activations' scales regrouped for panel_amx, [group][block][16]:
 * position 16g + p's scale of block b at dx[(g * blocks + b) * 16 + p], so
 * a block's 16 broadcasts come from one address plus constants. */
static void amx_position_scales(float *dx, const Activations *a, int groups, int blocks) {
    for (int g = 0; g < groups; g++)
        for (int b = 0; b < blocks; b++)
            for (int p = 0; p < AMX_POSITIONS; p++)
                dx[((size_t)g * blocks + b) * AMX_POSITIONS + p] = act_scale(a, g * AMX_POSITIONS + p)[b];
}

/* A prompt of at least 16 positions: each panel's blocks made B tiles once
 * (16 bytes a column of the matrix: 22 KiB for 1376 columns, in L1 or L2
 * while every group of 16 positions reads them), then the last positions
 * (fewer than 16) with VNNI. Fewer than 16 positions (a decode step), or no memory for
 * the scratch: all VNNI. */
TARGET_AMX static void matmul_panels_amx(float *out, int os, const Activations *a, const void *w, int cols,
                                         int begin, int end, int q4, MatmulKernel vnni) {
    int blocks = cols / QKV_QBLOCK, groups = a->n / AMX_POSITIONS;
    size_t tile_bytes = (size_t)blocks * AMX_B_BYTES, ws_bytes = (size_t)blocks * QKV_PANEL * sizeof(float);
    size_t dx_bytes = (size_t)groups * blocks * AMX_POSITIONS * sizeof(float); /* each a multiple of 64 */
    unsigned char *scratch = groups ? aligned_alloc(64, tile_bytes + ws_bytes + dx_bytes) : NULL;
    if (!scratch) {
        vnni(out, os, a, w, cols, begin, end);
        return;
    }
    int8_t *tiles = (int8_t *)scratch;
    float *ws = (float *)(scratch + tile_bytes), *dx = (float *)(scratch + tile_bytes + ws_bytes);
    amx_position_scales(dx, a, groups, blocks);
    size_t panel_bytes = QKV_PANEL * weight_row_bytes(q4 ? WEIGHT_Q4_0 : WEIGHT_Q8_0, cols);
    _tile_loadconfig(&AMX_CONFIG);
    for (int row0 = begin - begin % QKV_PANEL; row0 < end; row0 += QKV_PANEL) {
        const unsigned char *panel = (const unsigned char *)w + (size_t)(row0 / QKV_PANEL) * panel_bytes;
        amx_weight_tiles(tiles, ws, panel, blocks, q4);
        __mmask16 rows = panel_rows_mask(row0, begin, end);
        const unsigned char *next = row0 + QKV_PANEL < end ? panel + panel_bytes : NULL;
        for (int g = 0; g < groups; g++)
            panel_amx(out_at(out, os, g * AMX_POSITIONS, row0), os, act_q(a, g * AMX_POSITIONS), a->stride,
                      dx + (size_t)g * blocks * AMX_POSITIONS, tiles, ws, blocks, rows, g == 0 ? next : NULL,
                      packed_value_bytes(q4));
        panel_vnni_from(out, os, a, panel, blocks, row0, begin, end, groups * AMX_POSITIONS, q4, FETCH_NONE);
    }
    _tile_release();
    free(scratch);
}

TARGET_AMX static void matmul_q8_amx(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                     int end) {
    matmul_panels_amx(out, os, a, w, cols, begin, end, 0, matmul_q8_vnni);
}

TARGET_AMX static void matmul_q4_amx(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                     int end) {
    matmul_panels_amx(out, os, a, w, cols, begin, end, 1, matmul_q4_vnni);
}
#endif /* QKV_HAVE_AMX */

#endif /* QKV_HAVE_X86_KERNELS */

#endif /* QKV_KERNELS_INT8_H */
