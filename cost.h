/* cost.h — what a decode step costs: its FLOPs (a multiply-add counted as
 * 2) in the weights and in attention, and the bytes of weights and KV cache
 * it reads; -m info prints them and the bench sets its measurements beside
 * them (the roofline, the crossover).
 *
 * Included by model.h (after its types); the implementation where
 * QKV_COST_IMPLEMENTATION is defined (model.h's implementation does). */
#ifndef QKV_COST_H
#define QKV_COST_H

#include <stddef.h>

/* Arithmetic of one decode step in the weights (the classifier included). */
double flops_weights_per_token(const Config *c);
int mlp_matrices(const Config *c);
/* Parameters in one layer's matrices: attention's (wq, wk, wv, wo) and the MLP's */
size_t attention_matrix_params(const Config *c);
size_t mlp_matrix_params(const Config *c);
double flops_attention_per_token(const Config *c, int n_visible);
size_t kv_cache_bytes_per_token(const Config *c); /* float32 */
/* Bytes of weights a decode step reads: every matrix and norm, but of the
 * token embedding only one row, unless it is also the classifier, and of
 * GPT-2's position embedding one row. */
size_t weight_bytes_per_token(const Model *m);

#endif /* QKV_COST_H */

/* ======================================================================== */
#ifdef QKV_COST_IMPLEMENTATION
#ifndef QKV_COST_IMPLEMENTED
#define QKV_COST_IMPLEMENTED

/* The MLP's matrices: w1, w2, w3 (SwiGLU) or c_fc, c_proj (GPT-2). */
int mlp_matrices(const Config *c) { return c->arch == ARCH_GPT2 ? 2 : 3; }

size_t attention_matrix_params(const Config *c) {
    size_t q_dim = (size_t)c->n_heads * c->head_size, kv_dim = (size_t)c->n_kv_heads * c->head_size;
    return (size_t)c->dim * (2 * q_dim + 2 * kv_dim);
}

size_t mlp_matrix_params(const Config *c) { return (size_t)mlp_matrices(c) * c->dim * c->hidden_dim; }

double flops_weights_per_token(const Config *c) {
    double per_layer = (double)attention_matrix_params(c) + (double)mlp_matrix_params(c);
    return 2.0 * (per_layer * c->n_layers + (double)c->vocab_size * c->dim);
}

/* scores (q·k) and the weighted sum of values: 2 multiply-adds per visible
 * position per head dimension, for every query head and layer */
double flops_attention_per_token(const Config *c, int n_visible) {
    return 4.0 * (double)c->n_layers * c->n_heads * c->head_size * n_visible;
}

size_t weight_bytes_per_token(const Model *m) {
    const Matrix *e = &m->weights.token_embedding, *p = &m->weights.position_embedding;
    size_t positions = p->rows ? matrix_bytes(p) - weight_row_bytes(p->type, p->cols) : 0; /* GPT-2: one row read */
    if (m->config.shared_classifier) return m->weight_bytes - positions;
    return m->weight_bytes - positions - matrix_bytes(e) + weight_row_bytes(e->type, e->cols);
}

size_t kv_cache_bytes_per_token(const Config *c) {
    return kv_bytes_per_position(KV_F32, c->n_layers, c->n_kv_heads, c->head_size);
}

#endif /* QKV_COST_IMPLEMENTED */
#endif /* QKV_COST_IMPLEMENTATION */
