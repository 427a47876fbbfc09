/* weights_pack.h — a parsed checkpoint's matrices made ready for the
 * forward: the kernel each one uses (pick_kernels: the instruction set,
 * and whether a step's weights come from memory or the caches), their
 * panels (pack_matrices: every matrix regrouped for its kernel, in one
 * large-page allocation) and the mapped file's pages given back as they
 * are packed; the matrices counted by type (-m info).
 *
 * Implementation only, included by checkpoint.h (which calls it once a
 * file is parsed); the interface is in model.h. */
#ifndef QKV_WEIGHTS_PACK_IMPLEMENTED
#define QKV_WEIGHTS_PACK_IMPLEMENTED

/* A layer's matrices, in the order its block uses them (GPT-2's w3 empty) */
#define LAYER_MATRICES 7
static void layer_matrices(LayerWeights *w, Matrix *out[LAYER_MATRICES]) {
    Matrix *mats[LAYER_MATRICES] = { &w->wq, &w->wk, &w->wv, &w->wo, &w->w1, &w->w2, &w->w3 };
    memcpy(out, mats, sizeof mats);
}

int model_matrices_of(const Model *m, WeightType type) {
    const Weights *w = &m->weights;
    const Matrix *top[] = { &w->token_embedding, w->classifier.data != w->token_embedding.data ? &w->classifier : NULL,
                            &w->position_embedding };
    int n = 0;
    for (size_t i = 0; i < 3; i++) n += top[i] && top[i]->rows > 0 && (type == WEIGHT_TYPE_COUNT || top[i]->type == type);
    for (int l = 0; l < m->config.n_layers; l++) {
        Matrix *mats[LAYER_MATRICES];
        layer_matrices((LayerWeights *)&w->layers[l], mats); /* read only */
        for (int i = 0; i < LAYER_MATRICES; i++) n += mats[i]->rows > 0 && (type == WEIGHT_TYPE_COUNT || mats[i]->type == type);
    }
    return n;
}

const char *model_kernel_name(const Model *m) {
    const KernelEntry *k = m->config.n_layers > 0 ? m->weights.layers[0].wq.kernel : NULL;
    return k ? k->name : "?";
}

/* Every matrix's kernel, for one instruction set and for where a decode
 * step finds the weights (m->weight_bytes is set). */
static void pick_kernels(Model *m, Isa isa) {
    int from_memory = weights_from_memory(weight_bytes_per_token(m));
    Matrix *top[] = { &m->weights.token_embedding, &m->weights.classifier, &m->weights.position_embedding };
    for (size_t i = 0; i < 3; i++) top[i]->kernel = kernel_for(top[i]->type, isa, from_memory);
    for (int l = 0; l < m->config.n_layers; l++) {
        Matrix *mats[LAYER_MATRICES];
        layer_matrices(&m->weights.layers[l], mats);
        for (int i = 0; i < LAYER_MATRICES; i++) mats[i]->kernel = kernel_for(mats[i]->type, isa, from_memory);
    }
}

/* The whole pages of [data, data + bytes) that lie in the mapped file are
 * no longer needed: they leave this process's resident memory (a private
 * mapping never written reads them from the file again if touched, as
 * -m quantize does). */
static void release_mapped(const Model *m, const void *data, size_t bytes) {
#ifdef MADV_DONTNEED
    const unsigned char *base = m->mapping, *p = data;
    if (!base || p < base || p + bytes > base + m->file_bytes) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t first = ((uintptr_t)p + page - 1) / page * page, last = ((uintptr_t)p + bytes) / page * page;
    if (last > first) madvise((void *)first, last - first, MADV_DONTNEED);
#else
    (void)m, (void)data, (void)bytes;
#endif
}

/* A matrix's panels, rounded up so that the next matrix's start on a cache
 * line too. */
static size_t packed_bytes_aligned(const Matrix *w) {
    return align_up(weight_packed_bytes(w->type, w->rows, w->cols), 64);
}

/* The mapped file's pages are released (release_mapped) a span at a time:
 * matrices that follow one another in the file, with at most
 * QKV_RELEASE_GAP bytes between them (a layer's norms), up to
 * QKV_RELEASE_BYTES. One call for a small model's matrices when they lie
 * in the order they are packed, not one a matrix: each is a trip to the
 * kernel and a TLB flush, and on a virtual machine they were 7% of the
 * grammar model's start-up. What lies in a span's gaps (norms) is read
 * again from the file when next touched. */
#define QKV_RELEASE_GAP ((size_t)64 << 10)
#define QKV_RELEASE_BYTES ((size_t)16 << 20)

typedef struct {
    const unsigned char *low, *high; /* packed matrices' bytes in the file, not yet released */
} FileSpan;

static void release_span(const Model *m, FileSpan *s) {
    if (s->low) release_mapped(m, s->low, (size_t)(s->high - s->low));
    s->low = s->high = NULL;
}

/* [start, end) joins the span if it follows it closely enough, else the
 * span is released first; a span of QKV_RELEASE_BYTES is released at once */
static void span_add(const Model *m, FileSpan *s, const unsigned char *start, const unsigned char *end) {
    if (s->low && (start < s->high || (size_t)(start - s->high) > QKV_RELEASE_GAP)) release_span(m, s);
    if (!s->low) s->low = start;
    s->high = end;
    if ((size_t)(s->high - s->low) >= QKV_RELEASE_BYTES) release_span(m, s);
}

/* The matrices the forward multiplies by (the classifier and each layer's),
 * each regrouped into its kernels' panels (kernels.h: weight_pack), all in
 * one allocation (2 MiB pages: alloc.h's zalloc_written_whole); the
 * mapped pages the matrices were read from are released as they are
 * packed, so a mapped file's matrices are not held twice (a buffer's are:
 * the caller owns it). A tied embedding table is released too: a lookup
 * reads its row from the classifier's panels (matrix_row). -1 if the memory
 * cannot be had. */
static int pack_matrices(Model *m) {
    int n_layers = m->config.n_layers, n = 1 + LAYER_MATRICES * n_layers;
    Matrix **mats = malloc((size_t)n * sizeof *mats);
    if (!mats) return -1;
    mats[0] = &m->weights.classifier;
    for (int l = 0; l < n_layers; l++) layer_matrices(&m->weights.layers[l], mats + 1 + LAYER_MATRICES * l);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += packed_bytes_aligned(mats[i]);
    unsigned char *at = total ? zalloc_written_whole(total) : NULL;
    if (total && !at) {
        free(mats);
        return -1;
    }
    m->panels = at;
    FileSpan span = { NULL, NULL };
    for (int i = 0; i < n; i++)
        if (mats[i]->data && weight_pack(mats[i]->type, mats[i]->data, mats[i]->rows, mats[i]->cols, at)) {
            mats[i]->panels = at;
            at += packed_bytes_aligned(mats[i]);
            const unsigned char *start = mats[i]->data;
            span_add(m, &span, start, start + matrix_bytes(mats[i]));
        }
    release_span(m, &span);
    if (m->config.shared_classifier && m->weights.classifier.data == m->weights.token_embedding.data)
        m->weights.token_embedding.panels = m->weights.classifier.panels; /* lookups read the panels (matrix_row) */
    free(mats);
    return 0;
}

#endif /* QKV_WEIGHTS_PACK_IMPLEMENTED */
