/* rope.h — rotary position embedding (RoPE): within each head, the pair
 * (i, i+1) of a query or key turns by pos · theta^(-i/head_size) radians,
 * i = 0, 2, 4, ... The forward turns each position's queries and keys
 * (model.h); a sliding window turns its sinks' keys again as the window
 * moves past them (kv_window.h). Small functions, static inline: the
 * header is its own implementation. */
#ifndef QKV_ROPE_H
#define QKV_ROPE_H

#include <math.h>
#include <stddef.h>

/* theta^(-i/head_size) in float32, as llama2.c's model.py trains it */
static inline float rope_frequency(int i, int head_size, float theta) {
    return 1.0f / powf(theta, (float)i / (float)head_size);
}

/* The turn of each pair at position pos: cos[i/2], sin[i/2] of pos *
 * theta^(-i/head_size), i = 0, 2, 4, ... (the same for every head and layer) */
static inline void rope_angles(float *cos_out, float *sin_out, int head_size, int pos, float theta) {
    for (int i = 0; i < head_size; i += 2) {
        float angle = pos * rope_frequency(i, head_size, theta);
        cos_out[i / 2] = cosf(angle);
        sin_out[i / 2] = sinf(angle);
    }
}

/* Turns the pairs of every head of vec[n_heads*head_size] by the angles. */
static inline void rope_apply(float *vec, int n_heads, int head_size, const float *cos_in, const float *sin_in) {
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < head_size; i += 2) {
            float *v = vec + (size_t)h * head_size + i, c = cos_in[i / 2], s = sin_in[i / 2];
            float a = v[0], b = v[1];
            v[0] = a * c - b * s;
            v[1] = a * s + b * c;
        }
}

/* cos and sin of pos · rope_frequency, the product in double reduced mod
 * 2π: exact enough at any position (past the context, with a window). */
static inline void rope_angles_exact(float *cos_out, float *sin_out, int head_size, long long pos, float theta) {
    const double two_pi = 6.283185307179586476925;
    for (int i = 0; i < head_size; i += 2) {
        double angle = fmod((double)rope_frequency(i, head_size, theta) * (double)pos, two_pi);
        cos_out[i / 2] = (float)cos(angle);
        sin_out[i / 2] = (float)sin(angle);
    }
}

#endif /* QKV_ROPE_H */
