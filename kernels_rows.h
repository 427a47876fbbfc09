/* kernels_rows.h — dot products with float32 and float16 rows as stored:
 * the KV cache's keys, one row a key (kv_cache.h: kv_scores), which grow a
 * row a token and so are never regrouped into panels as the weights are
 * (kernels_float.c). out[t, k] = key[k] . q[t] for keys begin..end-1 and
 * every query t: the portable C, AVX2 and AVX-512 kernels, with the
 * MatmulKernel signature (w: the rows, cols: their length).
 *
 * Part of kernels.h's implementation (included before the table of
 * kernels); not a header of its own.
 *
 * One accumulator per (row, query) holds a vector's lanes; four rows' lanes
 * are summed together at the end by one tree, whatever the tile, so a
 * prompt's scores are those of its tokens one at a time (tested). */
#ifndef QKV_KERNELS_ROWS_H
#define QKV_KERNELS_ROWS_H

/* ------------------------------------------------------------------------ */
/* Portable                                                                  */

static float dot_f16(const uint16_t *w, const float *x, int n) {
    float sum = 0.0f;
    for (int j = 0; j < n; j++) sum += half_to_float(w[j]) * x[j];
    return sum;
}

static void rows_f32_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                int end) {
    for (int i = begin; i < end; i++)
        for (int t = 0; t < a->n; t++)
            *out_at(out, os, t, i) = dot_f32((const float *)w + (size_t)i * cols, act_row(a, t), cols);
}

static void rows_f16_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                int end) {
    for (int i = begin; i < end; i++)
        for (int t = 0; t < a->n; t++)
            *out_at(out, os, t, i) = dot_f16((const uint16_t *)w + (size_t)i * cols, act_row(a, t), cols);
}

/* ------------------------------------------------------------------------ */
/* x86-64: AVX2 and AVX-512                                                  */

#ifdef QKV_HAVE_X86_KERNELS

/* Tiles: R rows at a time (each row's bytes stream in parallel, which is
 * what keeps the memory system busy in a decode step), times up to P
 * queries (each key vector loaded once for all of them: a prompt). One
 * accumulator per (row, position); each four rows' accumulators are summed
 * across lanes together at the end. TILE_ROWS is R everywhere but an AVX2
 * float16 decode step, which takes 8 (AVX2_MATMUL); P is 6 with AVX-512
 * (the last 1-5 positions in one tile), 3 with AVX2 (then 2 or 1). */
#define TILE_ROWS 4
/* Software prefetch (the kernels with fetch, into L1 or into L2 (_l2); not
 * the _hw ones: kv_fetch_ahead chooses): while a tile streams its rows, the
 * bytes QKV_KV_AHEAD (kernels.h) further on are requested, so the memory
 * system always has several rows in flight. A prefetch never faults, so past the
 * last row it is harmless. */
#define PREFETCH(row, offset, fetch) fetch_line((const char *)(row) + QKV_KV_AHEAD + (offset), fetch)

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
                                       int R, int P, int j, int cols, size_t row_bytes, int half, int whole,
                                       Fetch fetch) {
    __m256 x[3];
#pragma GCC unroll 3
    for (int p = 0; p < P; p++) x[p] = whole ? _mm256_loadu_ps(act_row(a, t + p) + j) : load8_x(act_row(a, t + p), j, cols);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        if (fetch && j % 16 == 0) PREFETCH(rows[r], (size_t)j * (half ? 2 : 4), fetch);
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
                                        int cols, int i, int end, int t, int R, int P, int half, Fetch fetch) {
    const unsigned char *rows[8];
    tile_rows(rows, R, w, row_bytes, i, end);
    __m256 acc[8][3];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int p = 0; p < P; p++) acc[r][p] = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= cols; j += 8) step_float_256(acc, rows, a, t, R, P, j, cols, row_bytes, half, 1, fetch);
    if (j < cols) step_float_256(acc, rows, a, t, R, P, j, cols, row_bytes, half, 0, fetch);
#pragma GCC unroll 2
    for (int r = 0; r < R; r += 4)
#pragma GCC unroll 3
        for (int p = 0; p < P; p++)
            store_tile(out, os, t + p, i + r, end, reduce4_256(acc[r][p], acc[r + 1][p], acc[r + 2][p], acc[r + 3][p]));
}

/* An AVX2 kernel: a float16 decode step eight rows a tile; otherwise four
 * rows, positions three at a time, then the last one or two. FETCH: the
 * requests for the rows ahead (a Fetch: kv_fetch_ahead). */
#define AVX2_MATMUL(NAME, TILE, TYPE, FLAG, FETCH)                                                             \
    TARGET_AVX2 static void NAME(float *out, int os, const Activations *a, const void *w, int cols, int begin,  \
                                 int end) {                                                                    \
        size_t row_bytes = weight_row_bytes(TYPE, cols);                                                       \
        if (a->n == 1 && FLAG) {                                                                               \
            for (int i = begin; i < end; i += 8)                                                               \
                TILE(out, os, a, w, row_bytes, cols, i, end, 0, 8, 1, FLAG, FETCH);                            \
            return;                                                                                            \
        }                                                                                                      \
        for (int i = begin; i < end; i += TILE_ROWS) {                                                         \
            int t = 0;                                                                                         \
            for (; t + 3 <= a->n; t += 3)                                                                      \
                TILE(out, os, a, w, row_bytes, cols, i, end, t, TILE_ROWS, 3, FLAG, FETCH);                    \
            if (a->n - t == 2) TILE(out, os, a, w, row_bytes, cols, i, end, t, TILE_ROWS, 2, FLAG, FETCH);     \
            if (a->n - t == 1) TILE(out, os, a, w, row_bytes, cols, i, end, t, TILE_ROWS, 1, FLAG, FETCH);     \
        }                                                                                                      \
    }

AVX2_MATMUL(rows_f32_avx2, tile_float_avx2, WEIGHT_F32, 0, FETCH_L1)
AVX2_MATMUL(rows_f16_avx2, tile_float_avx2, WEIGHT_F16, 1, FETCH_L1)
AVX2_MATMUL(rows_f32_avx2_l2, tile_float_avx2, WEIGHT_F32, 0, FETCH_L2)
AVX2_MATMUL(rows_f16_avx2_l2, tile_float_avx2, WEIGHT_F16, 1, FETCH_L2)
AVX2_MATMUL(rows_f32_avx2_hw, tile_float_avx2, WEIGHT_F32, 0, FETCH_NONE)
AVX2_MATMUL(rows_f16_avx2_hw, tile_float_avx2, WEIGHT_F16, 1, FETCH_NONE)

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

/* One step of a float tile: 16 columns from j (masked: the row's last,
 * partial vector) of R rows times P positions (their inputs at x[p]). */
TARGET_AVX512 INLINE void step_float_512(__m512 acc[4][6], const unsigned char **rows, const float **x_rows, int R,
                                         int P, int j, __mmask16 m, size_t row_bytes, int half, Fetch fetch) {
    __m512 x[6];
#pragma GCC unroll 6
    for (int p = 0; p < P; p++) x[p] = _mm512_maskz_loadu_ps(m, x_rows[p] + j);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        if (fetch) PREFETCH(rows[r], (size_t)j * (half ? 2 : 4), fetch);
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
                                         int cols, int i, int end, int t, int R, int P, int half, Fetch fetch) {
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
        for (; j + 16 <= cols; j += 16) step_float_512(acc, rows, x_rows, R, P, j, 0xffff, row_bytes, half, fetch);
    else
        for (; j + 16 <= cols; j += 16) step_float_512(acc, rows, x_rows, R, P, j, 0xffff, row_bytes, half, FETCH_NONE);
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
TARGET_AVX512 INLINE void rows_float_512(float *out, int os, const Activations *a, const void *w, int cols,
                                           int begin, int end, int half, Fetch fetch) {
    size_t row_bytes = (size_t)cols * (half ? 2 : 4);
    if (a->n == 1) {
        for (int i = begin; i < end; i += 4)
            tile_float_512(out, os, a, w, row_bytes, cols, i, end, 0, 4, 1, half, fetch);
        return;
    }
    int whole = a->n / 6 * 6, block = (int)(QKV_ROW_BLOCK_BYTES / row_bytes) / 4 * 4;
    if (block < 4) block = 4;
    for (int first = begin; first < end; first += block) {
        int last = first + block < end ? first + block : end;
        for (int t = 0; t < whole; t += 6)
            for (int i = first; i < last; i += 4)
                tile_float_512(out, os, a, w, row_bytes, cols, i, end, t, 4, 6, half, t == 0 ? fetch : FETCH_NONE);
        /* the last 1-5 positions in one tile (a chunk of 128 is 21 x 6 + 2) */
        Fetch tail_fetch = whole == 0 ? fetch : FETCH_NONE;
        for (int i = first; i < last; i += 4) switch (a->n - whole) {
            case 5: tile_float_512(out, os, a, w, row_bytes, cols, i, end, whole, 4, 5, half, tail_fetch); break;
            case 4: tile_float_512(out, os, a, w, row_bytes, cols, i, end, whole, 4, 4, half, tail_fetch); break;
            case 3: tile_float_512(out, os, a, w, row_bytes, cols, i, end, whole, 4, 3, half, tail_fetch); break;
            case 2: tile_float_512(out, os, a, w, row_bytes, cols, i, end, whole, 4, 2, half, tail_fetch); break;
            case 1: tile_float_512(out, os, a, w, row_bytes, cols, i, end, whole, 4, 1, half, tail_fetch); break;
            }
    }
}

/* float32 and float16; _l2: the requests into L2, _hw: none (kv_fetch_ahead) */
#define AVX512_ROWS(NAME, HALF, FETCH)                                                                          \
    TARGET_AVX512 static void NAME(float *out, int os, const Activations *a, const void *w, int cols, int begin, \
                                   int end) {                                                                   \
        rows_float_512(out, os, a, w, cols, begin, end, HALF, FETCH);                                           \
    }
AVX512_ROWS(rows_f32_avx512, 0, FETCH_L1)
AVX512_ROWS(rows_f16_avx512, 1, FETCH_L1)
AVX512_ROWS(rows_f32_avx512_l2, 0, FETCH_L2)
AVX512_ROWS(rows_f16_avx512_l2, 1, FETCH_L2)
AVX512_ROWS(rows_f32_avx512_hw, 0, FETCH_NONE)
AVX512_ROWS(rows_f16_avx512_hw, 1, FETCH_NONE)

#endif /* QKV_HAVE_X86_KERNELS */

/* The row kernel for float32 or float16 rows within an instruction set,
 * requesting the rows ahead as fetch says (kv_fetch_ahead). */
MatmulKernel rows_kernel_for(WeightType type, Isa isa, Fetch fetch) {
    int half = type == WEIGHT_F16;
#ifdef QKV_HAVE_X86_KERNELS
    static const MatmulKernel kernels[2][2][3] = { /* [avx512][half][fetch: none, L1, L2] */
        { { rows_f32_avx2_hw, rows_f32_avx2, rows_f32_avx2_l2 }, { rows_f16_avx2_hw, rows_f16_avx2, rows_f16_avx2_l2 } },
        { { rows_f32_avx512_hw, rows_f32_avx512, rows_f32_avx512_l2 },
          { rows_f16_avx512_hw, rows_f16_avx512, rows_f16_avx512_l2 } },
    };
    if (isa >= ISA_AVX2) return kernels[isa >= ISA_AVX512][half][fetch];
#else
    (void)isa, (void)fetch;
#endif
    return half ? rows_f16_portable : rows_f32_portable;
}

#endif /* QKV_KERNELS_ROWS_H */
