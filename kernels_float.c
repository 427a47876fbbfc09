/* kernels_float.c — the float32 and float16 matrix kernels, over panels of
 * 16 rows: the packing, the portable C kernel, AVX2 and AVX-512.
 *
 * A translation unit of its own, so that `make -j2` compiles its tiles
 * beside engine.c's (each about half of the build's time); kernels_float.h
 * declares what kernels.h's table and packing call. The layout of a panel
 * is described with weight_pack in kernels.h's interface.
 *
 * A panel holds 16 rows column by column: column j of its rows is 16
 * values in a row (64 bytes of float32, 32 of float16), so a vector lane
 * is one row. A product is then an outer product, column after column:
 *   acc[rows] = fma(W[rows, j], x[j], acc[rows])    j = 0, 1, ..., cols - 1
 * with x[j] broadcast to every lane. No lanes are summed across: a row
 * read as stored needs a sum across its vector's 16 lanes for each (row,
 * position), which 288-wide rows (the stories15M shape) amortize over only
 * 18 vectors (that shape's matrices times 128 positions, 1 thread, Xeon:
 * 142-165 GFLOP/s in rows, 189-195 in panels). A prompt's tile loads a few panels'
 * column once for eight positions with AVX-512, six with AVX2 (a
 * register-blocked matrix multiply); a decode step streams four panels side
 * by side.
 *
 * Every (row, position) is one accumulator summed in column order with one
 * rounding per step (an FMA), whatever the tile: a prompt gives the bits
 * of one token at a time, and AVX2 the bits of AVX-512. The portable
 * kernel keeps the order, not the FMA (plain C on x86-64 has none). */
#include <stdint.h>
#include <string.h>

#include "kernels_float.h" /* with kernels_isa.h: act_row, out_at, TARGET_*, INLINE */

/* ------------------------------------------------------------------------ */
/* Packing                                                                   */

/* n rows of cols values (elem bytes each) from first into a panel, value j
 * of row r at [j * QKV_PANEL + r]. */
static inline void transpose_rows(unsigned char *panel, const unsigned char *first, int n, int cols, size_t elem) {
    for (int j = 0; j < cols; j++)
        for (int r = 0; r < n; r++)
            memcpy(panel + ((size_t)j * QKV_PANEL + r) * elem, first + ((size_t)r * cols + j) * elem, elem);
}

/* (kernels_float.h) */
void pack_float(const void *data, int rows, int cols, int elem, void *panels) {
    size_t panel_bytes = (size_t)QKV_PANEL * (size_t)cols * (size_t)elem;
    for (int g = 0; (long)g * QKV_PANEL < rows; g++) {
        unsigned char *panel = (unsigned char *)panels + (size_t)g * panel_bytes;
        const unsigned char *first = (const unsigned char *)data + (size_t)g * QKV_PANEL * cols * elem;
        int n = rows - g * QKV_PANEL < QKV_PANEL ? rows - g * QKV_PANEL : QKV_PANEL;
        if (n < QKV_PANEL) memset(panel, 0, panel_bytes);
        /* a constant size makes each value's memcpy one move, not a call
         * (a call per value was most of a small model's start-up) */
        if (elem == 4) transpose_rows(panel, first, n, cols, 4);
        else if (elem == 2) transpose_rows(panel, first, n, cols, 2);
        else transpose_rows(panel, first, n, cols, (size_t)elem);
    }
}

/* (kernels_float.h) */
void unpack_float_values(const void *panels, int cols, int elem, int i, int j0, int n, unsigned char *out) {
    const unsigned char *panel = (const unsigned char *)panels + (size_t)(i / QKV_PANEL) * QKV_PANEL * cols * elem;
    for (int j = 0; j < n; j++)
        memcpy(out + (size_t)j * elem, panel + ((size_t)(j0 + j) * QKV_PANEL + i % QKV_PANEL) * elem, elem);
}

/* ------------------------------------------------------------------------ */
/* Portable kernel                                                           */

/* One panel's 16 rows times one position's input x: acc[r] for row r. */
static void panel_float_portable(float acc[QKV_PANEL], const unsigned char *panel, int cols, const float *x,
                                 int half) {
    for (int r = 0; r < QKV_PANEL; r++) acc[r] = 0.0f;
    for (int j = 0; j < cols; j++) {
        float w[QKV_PANEL];
        if (half)
            for (int r = 0; r < QKV_PANEL; r++) w[r] = half_bits_to_float(((const uint16_t *)panel)[(size_t)j * QKV_PANEL + r]);
        else
            memcpy(w, (const float *)panel + (size_t)j * QKV_PANEL, sizeof w);
        for (int r = 0; r < QKV_PANEL; r++) acc[r] += w[r] * x[j];
    }
}

static void matmul_float_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                  int end, int half) {
    size_t panel_bytes = (size_t)QKV_PANEL * (size_t)cols * (half ? 2 : 4);
    for (int row0 = begin - begin % QKV_PANEL; row0 < end; row0 += QKV_PANEL) {
        const unsigned char *panel = (const unsigned char *)w + (size_t)(row0 / QKV_PANEL) * panel_bytes;
        for (int t = 0; t < a->n; t++) {
            float acc[QKV_PANEL];
            panel_float_portable(acc, panel, cols, act_row(a, t), half);
            for (int r = 0; r < QKV_PANEL; r++)
                if (row0 + r >= begin && row0 + r < end) *out_at(out, os, t, row0 + r) = acc[r];
        }
    }
}

void matmul_f32_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                int end) {
    matmul_float_portable(out, os, a, w, cols, begin, end, 0);
}

void matmul_f16_portable(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                int end) {
    matmul_float_portable(out, os, a, w, cols, begin, end, 1);
}

/* ------------------------------------------------------------------------ */
/* x86-64: AVX2 and AVX-512                                                  */

#ifdef QKV_HAVE_X86_KERNELS

/* A prompt's panels go in blocks of about this many bytes: each tile of
 * positions runs over the whole block, whose panels stay in L2 meanwhile
 * (the inputs of a tile's positions stay in L1). */
#define QKV_PANEL_BLOCK_BYTES (256 * 1024)

/* Panels a decode step streams side by side (four accumulators' FMAs in
 * flight, four streams for the prefetchers). */
#ifndef QKV_DECODE_PANELS
#define QKV_DECODE_PANELS 4
#endif
_Static_assert(QKV_DECODE_PANELS >= 1 && QKV_DECODE_PANELS <= 4, "the decode tiles are 1-4 panels");

/* A decode step requests each panel's bytes this far ahead of the column
 * it reads, a cache line (one column of float32, two of float16) at a
 * time, running on into the next tile's panels (prefetch_column; every
 * kernel but float32's AVX-512 entry for AMD: see KERNELS). The
 * hardware prefetchers alone left the core waiting on four streams that
 * each restart at every 4 KiB: float16 decode of the 42M shape, 1 thread,
 * Xeon, 248 tok/s against 294-312 for the rows the panels replaced (which
 * streamed four adjacent rows as one and requested eight rows ahead).
 * Requests within each panel only: 283-298 (1 to 6 KiB ahead, 1, 2 or 8
 * panels a tile: all within a few per cent); running on into the next
 * tile: 322-333 against the rows' 317-324, and the 15M shape's float16 on
 * two threads (whose shares are a few short tiles a product) 1675-1729
 * against 1678-1704. */
#ifndef QKV_PANEL_AHEAD
#define QKV_PANEL_AHEAD 3072
#endif

/* The line QKV_PANEL_AHEAD bytes past column j of panel r of a decode
 * tile of R panels: in panel r while it lasts, then in panel r of the next
 * tile (R panels on), so each stream's first lines are requested before
 * its tile starts (a prefetch never faults: past the matrix's end it is
 * harmless). */
INLINE void prefetch_column(const unsigned char *panel, size_t panel_bytes, int r, int R, int j, int half,
                            Fetch fetch) {
    size_t ahead = (size_t)j * QKV_PANEL * (half ? 2 : 4) + QKV_PANEL_AHEAD;
    size_t skip = ahead >= panel_bytes ? (size_t)(R - 1) * panel_bytes : 0;
    fetch_line(panel + (size_t)r * panel_bytes + ahead + skip, fetch);
}

/* Panels of [row0, end) from row0 on, at most max. */
INLINE int panels_left(int row0, int end, int max) {
    int n = (end - row0 + QKV_PANEL - 1) / QKV_PANEL;
    return n < max ? n : max;
}

/* A tile: R panels from row0 times positions t..t+P-1 (the R and P an
 * instruction set's kernel supports: see matmul_float_panels). */
typedef void (*FloatTile)(float *out, int os, const Activations *a, const unsigned char *panel, size_t panel_bytes,
                          int cols, int row0, int begin, int end, int t, int R, int P, int half, Fetch prefetch);

/* A decode step's product (a->n == 1): rows [begin, end) of a float
 * matrix's panels, up to QKV_DECODE_PANELS panels a tile, the panels in
 * tiles as equal as can be (9 as 3 + 3 + 3, not 4 + 4 + 1). */
INLINE void decode_float_panels(FloatTile tile, float *out, int os, const Activations *a, const void *w, int cols,
                                int begin, int end, int half, Fetch prefetch) {
    size_t panel_bytes = (size_t)QKV_PANEL * (size_t)cols * (half ? 2 : 4);
    int first = begin - begin % QKV_PANEL;
    const unsigned char *panels = (const unsigned char *)w + (size_t)(first / QKV_PANEL) * panel_bytes;
    int n = panels_left(first, end, 1 << 30), tiles = (n + QKV_DECODE_PANELS - 1) / QKV_DECODE_PANELS;
    for (int k = 0, row0 = first; k < tiles; k++) {
        int R = n / tiles + (k < n % tiles);
        tile(out, os, a, panels + (size_t)((row0 - first) / QKV_PANEL) * panel_bytes, panel_bytes, cols, row0, begin,
             end, 0, R, 1, half, prefetch);
        row0 += R * QKV_PANEL;
    }
}

/* Rows [begin, end) of a float matrix's panels times every position of a,
 * tile by tile: a decode step as above; a prompt blocks of panels, each
 * block's tiles of R panels x P positions, every tile of positions over
 * the whole block. Inlined into each kernel with its tile (called through
 * the pointer, the tile's loop kept fewer addresses in registers: a
 * 200-token prompt 3-7% slower). */
INLINE void matmul_float_panels(FloatTile tile, int R, int P, float *out, int os, const Activations *a, const void *w,
                                int cols, int begin, int end, int half, Fetch prefetch) {
    if (a->n == 1) {
        decode_float_panels(tile, out, os, a, w, cols, begin, end, half, prefetch);
        return;
    }
    size_t panel_bytes = (size_t)QKV_PANEL * (size_t)cols * (half ? 2 : 4);
    int first = begin - begin % QKV_PANEL;
    const unsigned char *panels = (const unsigned char *)w + (size_t)(first / QKV_PANEL) * panel_bytes;
    int block = (int)(QKV_PANEL_BLOCK_BYTES / panel_bytes) / R * R * QKV_PANEL;
    if (block < R * QKV_PANEL) block = R * QKV_PANEL;
    for (int start = first; start < end; start += block) {
        int stop = start + block < end ? start + block : end;
        for (int t = 0; t < a->n; t += P)
            for (int row0 = start; row0 < stop; row0 += R * QKV_PANEL)
                tile(out, os, a, panels + (size_t)((row0 - first) / QKV_PANEL) * panel_bytes, panel_bytes, cols,
                     row0, begin, end, t, panels_left(row0, stop, R), a->n - t < P ? a->n - t : P, half, prefetch);
    }
}

/* ---- AVX2 (8 floats a vector: a panel's column is two) ---- */

/* The lanes of rows row0..row0+7 within [begin, end), as maskstore wants. */
TARGET_AVX2 INLINE __m256i rows_mask_avx2(int row0, int begin, int end) {
    __m256i row = _mm256_add_epi32(_mm256_set1_epi32(row0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(begin), row),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32(end), row));
}

/* Column j of a panel, lanes 8h..8h+7, as floats. */
TARGET_AVX2 INLINE __m256 column_avx2(const unsigned char *panel, int j, int h, int half) {
    if (half) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(panel + ((size_t)j * QKV_PANEL + 8 * h) * 2)));
    return _mm256_loadu_ps((const float *)panel + (size_t)j * QKV_PANEL + 8 * h);
}

/* R panels from row0 times positions t..t+P-1: 2R x P accumulators (a
 * prompt 1 x 6, twelve of the sixteen registers; a decode step 4 x 1). */
TARGET_AVX2 INLINE void tile_panels_avx2(float *out, int os, const Activations *a, const unsigned char *panel,
                                         size_t panel_bytes, int cols, int row0, int begin, int end, int t, int R,
                                         int P, int half, Fetch prefetch) {
    const float *x[6];
    __m256 acc[8][6];
#pragma GCC unroll 6
    for (int p = 0; p < P; p++) x[p] = act_row(a, t + p);
#pragma GCC unroll 8
    for (int v = 0; v < 2 * R; v++)
#pragma GCC unroll 6
        for (int p = 0; p < P; p++) acc[v][p] = _mm256_setzero_ps();
    for (int j = 0; j < cols; j++) {
        __m256 w[8];
        if (P == 1 && prefetch && (!half || j % 2 == 0))
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) prefetch_column(panel, panel_bytes, r, R, j, half, prefetch);
#pragma GCC unroll 8
        for (int v = 0; v < 2 * R; v++) w[v] = column_avx2(panel + (size_t)(v / 2) * panel_bytes, j, v % 2, half);
#pragma GCC unroll 6
        for (int p = 0; p < P; p++) {
            __m256 xj = _mm256_broadcast_ss(x[p] + j);
#pragma GCC unroll 8
            for (int v = 0; v < 2 * R; v++) acc[v][p] = _mm256_fmadd_ps(w[v], xj, acc[v][p]);
        }
    }
#pragma GCC unroll 8
    for (int v = 0; v < 2 * R; v++) {
        __m256i rows = rows_mask_avx2(row0 + 8 * v, begin, end);
#pragma GCC unroll 6
        for (int p = 0; p < P; p++) _mm256_maskstore_ps(out_at(out, os, t + p, row0 + 8 * v), rows, acc[v][p]);
    }
}

/* The tiles the AVX2 kernels use: a decode step's 1-4 panels, a prompt's
 * one panel times 1-6 positions. */
TARGET_AVX2 INLINE void tile_avx2(float *out, int os, const Activations *a, const unsigned char *panel,
                                  size_t panel_bytes, int cols, int row0, int begin, int end, int t, int R, int P,
                                  int half, Fetch prefetch) {
#define TILE(RR, PP) tile_panels_avx2(out, os, a, panel, panel_bytes, cols, row0, begin, end, t, RR, PP, half, prefetch)
    switch (P == 1 ? R : 10 + P) {
    case 4: TILE(4, 1); break;
    case 3: TILE(3, 1); break;
    case 2: TILE(2, 1); break;
    case 16: TILE(1, 6); break;
    case 15: TILE(1, 5); break;
    case 14: TILE(1, 4); break;
    case 13: TILE(1, 3); break;
    case 12: TILE(1, 2); break;
    default: TILE(1, 1); break;
    }
#undef TILE
}

TARGET_AVX2 void matmul_f32_avx2(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                        int end) {
    matmul_float_panels(tile_avx2, 1, 6, out, os, a, w, cols, begin, end, 0, FETCH_L1);
}

TARGET_AVX2 void matmul_f16_avx2(float *out, int os, const Activations *a, const void *w, int cols, int begin,
                                        int end) {
    matmul_float_panels(tile_avx2, 1, 6, out, os, a, w, cols, begin, end, 1, FETCH_L1);
}


/* ---- AVX-512 (16 floats a vector: a panel's column is one) ---- */

/* Column j of a panel as floats. */
TARGET_AVX512 INLINE __m512 column_512(const unsigned char *panel, int j, int half) {
    if (half) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(panel + (size_t)j * QKV_PANEL * 2)));
    return _mm512_loadu_ps((const float *)panel + (size_t)j * QKV_PANEL);
}

/* Column j of R panels times positions x[0..P-1]: acc[r][p] += W x. */
TARGET_AVX512 INLINE void step_512(__m512 acc[4][8], const unsigned char *panel, size_t panel_bytes, const float **x,
                                   int j, int R, int P, int half) {
    __m512 w[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) w[r] = column_512(panel + (size_t)r * panel_bytes, j, half);
#pragma GCC unroll 8
    for (int p = 0; p < P; p++) {
        __m512 xj = _mm512_set1_ps(x[p][j]);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) acc[r][p] = _mm512_fmadd_ps(w[r], xj, acc[r][p]);
    }
}

/* R panels from row0 times positions t..t+P-1: R x P accumulators (a
 * prompt 3 x 8, 24 of the 32 registers, each column loaded once for eight
 * positions and each broadcast used three times; a decode step 4 x 1).
 * The stories15M shape's matrices times 128 positions, 1 thread, Xeon:
 * 3 x 8 and 2 x 14 189-197 GFLOP/s, 2 x 12 172. */
TARGET_AVX512 INLINE void tile_panels_512(float *out, int os, const Activations *a, const unsigned char *panel,
                                          size_t panel_bytes, int cols, int row0, int begin, int end, int t, int R,
                                          int P, int half, Fetch prefetch) {
    const float *x[8];
    __m512 acc[4][8];
#pragma GCC unroll 8
    for (int p = 0; p < P; p++) x[p] = act_row(a, t + p);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) acc[r][p] = _mm512_setzero_ps();
    int j = 0;
    for (; j + 2 <= cols; j += 2) { /* two columns a turn: one line of float16, two of float32 */
        if (P == 1 && prefetch)
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                prefetch_column(panel, panel_bytes, r, R, j, half, prefetch);
                if (!half) prefetch_column(panel, panel_bytes, r, R, j + 1, half, prefetch);
            }
        step_512(acc, panel, panel_bytes, x, j, R, P, half);
        step_512(acc, panel, panel_bytes, x, j + 1, R, P, half);
    }
    if (j < cols) step_512(acc, panel, panel_bytes, x, j, R, P, half);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        __mmask16 rows = panel_rows_mask(row0 + r * QKV_PANEL, begin, end);
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) _mm512_mask_storeu_ps(out_at(out, os, t + p, row0 + r * QKV_PANEL), rows, acc[r][p]);
    }
}

/* The tiles the AVX-512 kernels use: a decode step's 1-4 panels, a
 * prompt's 1-3 panels times 1-8 positions. */
TARGET_AVX512 INLINE void tile_512(float *out, int os, const Activations *a, const unsigned char *panel,
                                   size_t panel_bytes, int cols, int row0, int begin, int end, int t, int R, int P,
                                   int half, Fetch prefetch) {
#define TILE(RR, PP) tile_panels_512(out, os, a, panel, panel_bytes, cols, row0, begin, end, t, RR, PP, half, prefetch)
#define TILE_P(RR)                                                                                          \
    switch (P) {                                                                                            \
    case 8: TILE(RR, 8); break;                                                                             \
    case 7: TILE(RR, 7); break;                                                                             \
    case 6: TILE(RR, 6); break;                                                                             \
    case 5: TILE(RR, 5); break;                                                                             \
    case 4: TILE(RR, 4); break;                                                                             \
    case 3: TILE(RR, 3); break;                                                                             \
    case 2: TILE(RR, 2); break;                                                                             \
    default: TILE(RR, 1); break;                                                                            \
    }
    if (R == 4) TILE(4, 1);
    else if (R == 3) TILE_P(3)
    else if (R == 2) TILE_P(2)
    else TILE_P(1)
#undef TILE_P
#undef TILE
}

TARGET_AVX512 void matmul_f32_avx512(float *out, int os, const Activations *a, const void *w, int cols,
                                            int begin, int end) {
    matmul_float_panels(tile_512, 3, 8, out, os, a, w, cols, begin, end, 0, FETCH_L1);
}

/* The same with a decode step's lines left to the hardware prefetchers
 * (no prefetch_column: KERNELS in kernels.h says where it is chosen). A
 * prompt takes matmul_f32_avx512's tiles, the same sums (only a tail of
 * one position requests lines there): a second copy of their 25 shapes
 * had been 8 s of the kernels' 20 s build. */
TARGET_AVX512 void matmul_f32_avx512_hw(float *out, int os, const Activations *a, const void *w, int cols,
                                               int begin, int end) {
    if (a->n == 1) decode_float_panels(tile_512, out, os, a, w, cols, begin, end, 0, FETCH_NONE);
    else matmul_f32_avx512(out, os, a, w, cols, begin, end);
}

TARGET_AVX512 void matmul_f16_avx512(float *out, int os, const Activations *a, const void *w, int cols,
                                            int begin, int end) {
    matmul_float_panels(tile_512, 3, 8, out, os, a, w, cols, begin, end, 1, FETCH_L1);
}

/* The same with a decode step's requests into L2 only (chosen on AMD:
 * KERNELS in kernels.h). Requests change no arithmetic: the same sums. */
TARGET_AVX512 void matmul_f16_avx512_l2(float *out, int os, const Activations *a, const void *w, int cols,
                                        int begin, int end) {
    matmul_float_panels(tile_512, 3, 8, out, os, a, w, cols, begin, end, 1, FETCH_L2);
}

#endif /* QKV_HAVE_X86_KERNELS */
