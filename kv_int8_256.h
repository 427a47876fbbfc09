/* kv_int8_256.h — the int8 rows' kernels on 256-bit vectors: AVX2's,
 * which widen the bytes to int16 (pmaddwd), and VNNI's on 256-bit vectors
 * (ISA_AVX_VNNI: AVX-VNNI's VEX form, or AVX-512 VNNI's EVEX form of the
 * same instruction), which multiply them as stored, as kv_int8.h's
 * AVX-512 VNNI kernels do with vectors of 16.
 *
 * Part of kv_int8.h (included where its x86 kernels are, after the
 * AVX-512 ones); not a header of its own. */

/* query_int16 and abs_max with vectors of 8 */
TARGET_AVX2 INLINE void query_int16_256(const float *q, int count, float inverse, int16_t *p) {
    __m256 scale = _mm256_set1_ps(inverse);
    for (int i = 0; i < (count + 31) / 32 * 32; i += 16) {
        __m256 x0 = _mm256_mul_ps(_mm256_maskload_ps(q + i, lanes_below(count - i)), scale);
        __m256 x1 = _mm256_mul_ps(_mm256_maskload_ps(q + i + 8, lanes_below(count - i - 8)), scale);
        __m256i packed = _mm256_packs_epi32(_mm256_cvtps_epi32(x0), _mm256_cvtps_epi32(x1)); /* 128-bit lanes */
        _mm256_storeu_si256((__m256i *)(p + i), _mm256_permute4x64_epi64(packed, 0xD8));
    }
}

TARGET_AVX2 INLINE float abs_max_256(const float *x, int n) {
    __m256 amax = _mm256_setzero_ps(), nonfinite = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < n; i += 8) {
        __m256 v = _mm256_maskload_ps(x + i, lanes_below(n - i));
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v));
        nonfinite = _mm256_add_ps(nonfinite, _mm256_mul_ps(v, _mm256_setzero_ps()));
    }
    if (_mm256_movemask_ps(_mm256_cmp_ps(nonfinite, _mm256_setzero_ps(), _CMP_NEQ_UQ))) return NAN;
    float lanes[8], m = 0.0f;
    _mm256_storeu_ps(lanes, amax);
    for (int l = 0; l < 8; l++) m = lanes[l] > m ? lanes[l] : m; /* NaN is caught above; fmaxf is a call */
    return m;
}


/* 8 sums in order from two int32 lanes each: sums 0-3's in low, 4-7's in
 * high (add_lane_pairs_512's; hadd adds within 128-bit halves) */
TARGET_AVX2 INLINE __m256i add_lane_pairs_256(__m256i low, __m256i high) {
    return _mm256_permute4x64_epi64(_mm256_hadd_epi32(low, high), 0xD8);
}

/* A panel's 16 scores from its int32 dots (keys 0-7 in dots0, 8-15 in
 * dots1), the offset taken: each times its key's scale times q's, as the
 * portable path (q8_panel_scores_512 with vectors of 8) */
TARGET_AVX2 INLINE void q8_panel_scores_256(__m256i dots0, __m256i dots1, int32_t offset, Q8Keys k, int first,
                                            float q_scale, int skip, int n, float *scores) {
    __m256i offsets = _mm256_set1_epi32(offset);
    __m256 scale = _mm256_set1_ps(q_scale);
    float lanes[KV_Q8_PANEL];
    _mm256_storeu_ps(lanes, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(dots0, offsets)),
                                          _mm256_mul_ps(_mm256_loadu_ps(k.scales + first), scale)));
    _mm256_storeu_ps(lanes + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(dots1, offsets)),
                                              _mm256_mul_ps(_mm256_loadu_ps(k.scales + first + 8), scale)));
    q8_store_lanes(scores, first - skip, n, lanes, KV_Q8_PANEL);
}

/* Column quad c of a panel (x) widened to int16 (the stored k + 128),
 * times q's quad c (p): keys 0-3, 4-7, 8-11 and 12-15's into sums[0..3] */
#define Q8_QUAD_256(x, p, c, sums)                                                                           \
    do {                                                                                                     \
        __m256i pc = _mm256_set1_epi64x(quad_weights(p, c));                                                 \
        const __m128i *column = (const __m128i *)((x) + KV_Q8_QUAD * KV_Q8_PANEL * (size_t)(c));             \
        for (int g = 0; g < 4; g++)                                                                          \
            sums[g] = _mm256_add_epi32(sums[g], _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(column + g)), pc)); \
    } while (0)

/* q8_scores_avx512 with vectors of 8: each panel in four groups of 4 keys */
TARGET_AVX2 static void q8_scores_avx2(Q8Keys k, int skip, const float *q, int n, float *scores, Fetch fetch) {
    QueryScale qs = query_scale(abs_max_256(q, k.hs), k.hs);
    int16_t p[KV_Q8_COLUMNS];
    int32_t offset = k.hs <= KV_Q8_COLUMNS ? query_columns(query_int16_256, q, 0, k.hs, qs.inverse, p, 0) : 0;
    size_t panel_bytes = q8_panel_bytes(k.hs);
    for (int first = 0; first < skip + n; first += KV_Q8_PANEL) {
        const unsigned char *panel = q8_fetch_panel(k, first, panel_bytes, fetch);
        __m256i sums[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
        for (int from = 0; from < k.hs; from += KV_Q8_COLUMNS) {
            int count = k.hs - from < KV_Q8_COLUMNS ? k.hs - from : KV_Q8_COLUMNS;
            const unsigned char *x = panel + (size_t)from * KV_Q8_PANEL;
            if (k.hs > KV_Q8_COLUMNS) offset = query_columns(query_int16_256, q, from, count, qs.inverse, p, offset);
            for (int c = 0; c < KV_Q8_ROUND(count) / KV_Q8_QUAD; c++) Q8_QUAD_256(x, p, c, sums);
        }
        q8_panel_scores_256(add_lane_pairs_256(sums[0], sums[1]), add_lane_pairs_256(sums[2], sums[3]), offset, k,
                            first, qs.scale, skip, n, scores);
    }
}

/* q8_weights_512 with vectors of 8 */
TARGET_AVX2 static void q8_weights_256(Q8Values v, const float *w, int n, Q8Weights *q) {
    float wt[KV_Q8_CHUNK];
    for (int t = 0; t < n; t += 8) {
        __m256i m = lanes_below(n - t);
        _mm256_storeu_ps(wt + t, _mm256_mul_ps(_mm256_maskload_ps(w + t, m), _mm256_maskload_ps(v.scales + t, m)));
    }
    float amax = abs_max_256(wt, n);
    q->step = q8_weights_step(amax);
    if (q->step != 0.0f) query_int16_256(wt, n, 32767.0f / amax, q->c);
}

/* q8_quads_512 with V whole vectors of 8, each in two halves of 4 elements */
TARGET_AVX2 INLINE void q8_quads_256(int d, int V, Fetch fetch, Q8Values v, const Q8Weights *q, int n, float *out) {
    __m256i first_half[KV_SLICE_256], second_half[KV_SLICE_256];
    size_t quad_bytes = KV_Q8_QUAD * (size_t)v.hs;
    const unsigned char *x = v.quads + KV_Q8_QUAD * (size_t)d;
    for (int j = 0; j < V; j++) first_half[j] = second_half[j] = _mm256_setzero_si256();
    for (int t = 0; t < n; t += KV_Q8_QUAD, x += quad_bytes) {
        fetch_range(x + KV_Q8_PREFETCH_BYTES, quad_bytes, fetch);
        __m256i w = _mm256_set1_epi64x(quad_weights(q->c, t / KV_Q8_QUAD));
        for (int j = 0; j < V; j++) {
            __m256i rows0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 32 * j)));
            __m256i rows1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 32 * j + 16)));
            first_half[j] = _mm256_add_epi32(first_half[j], _mm256_madd_epi16(rows0, w));
            second_half[j] = _mm256_add_epi32(second_half[j], _mm256_madd_epi16(rows1, w));
        }
    }
    __m256 step = _mm256_set1_ps(q->step);
    for (int j = 0; j < V; j++) {
        float *o = out + d + 8 * j;
        __m256 sum = _mm256_cvtepi32_ps(add_lane_pairs_256(first_half[j], second_half[j]));
        _mm256_storeu_ps(o, _mm256_fmadd_ps(sum, step, _mm256_loadu_ps(o)));
    }
}

/* out += a chunk's products, whole vectors of 8 in slices of KV_SLICE_256
 * (a constant V in each call, so the sums stay in registers: QUADS(d, V,
 * fetch, v, q, n, out, then the kernel's own arguments, if any)), the last
 * hs % 8 elements by the portable loop (the same integers). Unlike
 * Q8_SLICES_512, whose masked loads take a last partial vector, it needs
 * the chunk (v, q, n, out) for that tail. */
#define Q8_SLICES_256(QUADS, v, q, n, out, fetch, ...)                                                         \
    do {                                                                                                       \
        int whole = (v).hs / 8 * 8;                                                                            \
        for (int d = 0; d < whole; d += 8 * KV_SLICE_256) {                                                    \
            int V = (whole - d) / 8 < KV_SLICE_256 ? (whole - d) / 8 : KV_SLICE_256;                           \
            Fetch f = d == 0 ? (fetch) : FETCH_NONE;                                                           \
            switch (V) {                                                                                       \
            case 1: QUADS(d, 1, f, v, q, n, out, ##__VA_ARGS__); break;                                        \
            case 2: QUADS(d, 2, f, v, q, n, out, ##__VA_ARGS__); break;                                        \
            case 3: QUADS(d, 3, f, v, q, n, out, ##__VA_ARGS__); break;                                        \
            default: QUADS(d, KV_SLICE_256, f, v, q, n, out, ##__VA_ARGS__); break;                            \
            }                                                                                                  \
        }                                                                                                      \
        if (whole < (v).hs) q8_add_sums_portable(v, q, n, whole, (v).hs, out);                                 \
    } while (0)

TARGET_AVX2 static void q8_sums_avx2(Q8Values v, const Q8Weights *q, int n, float *out, Fetch fetch) {
    Q8_SLICES_256(q8_quads_256, v, q, n, out, fetch);
}

/* ---- VNNI on 256-bit vectors (ISA_AVX_VNNI) ----
 * As q8_scores_vnni and q8_sums_vnni with vectors of 8: a panel's 16 keys
 * in two vectors, each with no lane to reduce; a quad of value rows' eight
 * elements a vector; q's columns and the weights as two bytes each, p =
 * 128 · high + low. Written once for both encodings (KV_Q8_VNNI256: DPBUSD
 * the VEX intrinsic or the EVEX one, TARGET to match); the same integers,
 * so the same bits, as every other path. */

/* q's int16 columns as VNNI's signed bytes, p = 128 · high + low (|p| ≤
 * 16383; count rounded up to 32) */
TARGET_AVX2 INLINE void query_bytes_256(const int16_t *p, int count, unsigned char *high, unsigned char *low) {
    const __m256i low7 = _mm256_set1_epi16(127);
    for (int i = 0; i < (count + 31) / 32 * 32; i += 32) {
        __m256i p0 = _mm256_loadu_si256((const __m256i *)(p + i)), p1 = _mm256_loadu_si256((const __m256i *)(p + i + 16));
        __m256i h = _mm256_packs_epi16(_mm256_srai_epi16(p0, 7), _mm256_srai_epi16(p1, 7)); /* 128-bit lanes */
        __m256i l = _mm256_packus_epi16(_mm256_and_si256(p0, low7), _mm256_and_si256(p1, low7));
        _mm256_storeu_si256((__m256i *)(high + i), _mm256_permute4x64_epi64(h, 0xD8));
        _mm256_storeu_si256((__m256i *)(low + i), _mm256_permute4x64_epi64(l, 0xD8));
    }
}

/* A chunk's weights as VNNI's unsigned bytes, c = 128 · high + low (count
 * rounded up to 32); 0 if a weight is negative (then the bytes are not
 * its weights, and AVX2's widening kernel sums them) */
TARGET_AVX2 INLINE int weight_bytes_256(const int16_t *c, int count, unsigned char *high, unsigned char *low) {
    const __m256i low7 = _mm256_set1_epi16(127);
    __m256i any = _mm256_setzero_si256();
    for (int i = 0; i < (count + 31) / 32 * 32; i += 32) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(c + i)), w1 = _mm256_loadu_si256((const __m256i *)(c + i + 16));
        any = _mm256_or_si256(any, _mm256_or_si256(w0, w1));
        __m256i h = _mm256_packus_epi16(_mm256_srli_epi16(w0, 7), _mm256_srli_epi16(w1, 7));
        __m256i l = _mm256_packus_epi16(_mm256_and_si256(w0, low7), _mm256_and_si256(w1, low7));
        _mm256_storeu_si256((__m256i *)(high + i), _mm256_permute4x64_epi64(h, 0xD8));
        _mm256_storeu_si256((__m256i *)(low + i), _mm256_permute4x64_epi64(l, 0xD8));
    }
    return (_mm256_movemask_epi8(any) & 0xAAAAAAAA) == 0; /* each int16's sign: its high byte's top bit */
}

#define KV_Q8_VNNI256(SUFFIX, TARGET, DPBUSD)                                                                  \
    /* q8_scores_avx2 on the keys as stored: keys 0-7 of a panel in lanes  \
     * of one vector, 8-15 of the other */                                 \
    TARGET static void q8_scores_##SUFFIX(Q8Keys k, int skip, const float *q, int n, float *scores,            \
                                          Fetch fetch) {                                                       \
        QueryScale qs = query_scale(abs_max_256(q, k.hs), k.hs);                                               \
        int16_t p[KV_Q8_COLUMNS];                                                                              \
        unsigned char high[KV_Q8_COLUMNS], low[KV_Q8_COLUMNS];                                                 \
        int32_t offset = 0;                                                                                    \
        if (k.hs <= KV_Q8_COLUMNS) {                                                                           \
            offset = query_columns(query_int16_256, q, 0, k.hs, qs.inverse, p, 0);                             \
            query_bytes_256(p, k.hs, high, low);                                                               \
        }                                                                                                      \
        size_t panel_bytes = q8_panel_bytes(k.hs);                                                             \
        for (int first = 0; first < skip + n; first += KV_Q8_PANEL) {                                          \
            const unsigned char *panel = q8_fetch_panel(k, first, panel_bytes, fetch);                         \
            __m256i h0 = _mm256_setzero_si256(), l0 = h0, h1 = h0, l1 = h0;                                    \
            for (int from = 0; from < k.hs; from += KV_Q8_COLUMNS) {                                           \
                int count = k.hs - from < KV_Q8_COLUMNS ? k.hs - from : KV_Q8_COLUMNS;                         \
                const unsigned char *x = panel + (size_t)from * KV_Q8_PANEL;                                   \
                if (k.hs > KV_Q8_COLUMNS) {                                                                    \
                    offset = query_columns(query_int16_256, q, from, count, qs.inverse, p, offset);            \
                    query_bytes_256(p, count, high, low);                                                      \
                }                                                                                              \
                for (int c = 0; c < KV_Q8_ROUND(count) / KV_Q8_QUAD; c++) {                                    \
                    const unsigned char *quad = x + KV_Q8_QUAD * KV_Q8_PANEL * (size_t)c;                      \
                    __m256i keys0 = _mm256_loadu_si256((const __m256i *)quad);                                 \
                    __m256i keys1 = _mm256_loadu_si256((const __m256i *)(quad + 32));                          \
                    __m256i hb = _mm256_set1_epi32(bytes_lane(high + KV_Q8_QUAD * c));                         \
                    __m256i lb = _mm256_set1_epi32(bytes_lane(low + KV_Q8_QUAD * c));                          \
                    h0 = DPBUSD(h0, keys0, hb), l0 = DPBUSD(l0, keys0, lb);                                    \
                    h1 = DPBUSD(h1, keys1, hb), l1 = DPBUSD(l1, keys1, lb);                                    \
                }                                                                                              \
            }                                                                                                  \
            q8_panel_scores_256(_mm256_add_epi32(_mm256_slli_epi32(h0, 7), l0),                                \
                                _mm256_add_epi32(_mm256_slli_epi32(h1, 7), l1), offset, k, first, qs.scale, skip, n, \
                                scores);                                                                       \
        }                                                                                                      \
    }                                                                                                          \
                                                                                                               \
    /* q8_quads_256 on the rows as stored: Σ c v = 128 Σ high·v + Σ low·v */                                  \
    TARGET INLINE void q8_quads_##SUFFIX(int d, int V, Fetch fetch, Q8Values v, const Q8Weights *q, int n,     \
                                         float *out, const unsigned char *high, const unsigned char *low) {    \
        __m256i hsum[KV_SLICE_256], lsum[KV_SLICE_256];                                                        \
        size_t quad_bytes = KV_Q8_QUAD * (size_t)v.hs;                                                         \
        const unsigned char *x = v.quads + KV_Q8_QUAD * (size_t)d;                                             \
        for (int j = 0; j < V; j++) hsum[j] = lsum[j] = _mm256_setzero_si256();                               \
        for (int t = 0; t < n; t += KV_Q8_QUAD, x += quad_bytes) {                                             \
            fetch_range(x + KV_Q8_PREFETCH_BYTES, quad_bytes, fetch);                                          \
            __m256i hw = _mm256_set1_epi32(bytes_lane(high + t)), lw = _mm256_set1_epi32(bytes_lane(low + t)); \
            for (int j = 0; j < V; j++) {                                                                      \
                __m256i rows = _mm256_loadu_si256((const __m256i *)(x + 32 * j));                              \
                hsum[j] = DPBUSD(hsum[j], hw, rows);                                                           \
                lsum[j] = DPBUSD(lsum[j], lw, rows);                                                           \
            }                                                                                                  \
        }                                                                                                      \
        __m256 step = _mm256_set1_ps(q->step);                                                                 \
        for (int j = 0; j < V; j++) {                                                                          \
            float *o = out + d + 8 * j;                                                                        \
            __m256 sum = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_slli_epi32(hsum[j], 7), lsum[j]));         \
            _mm256_storeu_ps(o, _mm256_fmadd_ps(sum, step, _mm256_loadu_ps(o)));                               \
        }                                                                                                      \
    }                                                                                                          \
                                                                                                               \
    TARGET static void q8_sums_##SUFFIX(Q8Values v, const Q8Weights *q, int n, float *out, Fetch fetch) {      \
        unsigned char high[KV_Q8_CHUNK], low[KV_Q8_CHUNK];                                                     \
        if (!weight_bytes_256(q->c, n, high, low)) q8_sums_avx2(v, q, n, out, fetch);                          \
        else Q8_SLICES_256(q8_quads_##SUFFIX, v, q, n, out, fetch, high, low);                                 \
    }

#ifdef QKV_HAVE_AVX_VNNI
KV_Q8_VNNI256(avxvnni_vex, TARGET_AVX_VNNI, _mm256_dpbusd_avx_epi32)
#endif
KV_Q8_VNNI256(vnni256_evex, TARGET_VNNI256_EVEX, _mm256_dpbusd_epi32)

/* ISA_AVX_VNNI's: the VEX form where the CPU has AVX-VNNI (VNNI256_FORM) */
static void q8_scores_avxvnni(Q8Keys k, int skip, const float *q, int n, float *scores, Fetch fetch) {
    VNNI256_FORM(q8_scores_avxvnni_vex, q8_scores_vnni256_evex)(k, skip, q, n, scores, fetch);
}

static void q8_sums_avxvnni(Q8Values v, const Q8Weights *q, int n, float *out, Fetch fetch) {
    VNNI256_FORM(q8_sums_avxvnni_vex, q8_sums_vnni256_evex)(v, q, n, out, fetch);
}
