/* sampler.h — picks the next token from the logits: greedy, temperature,
 * top-k, top-p. stb-style: define QKV_SAMPLER_IMPLEMENTATION in one file.
 *
 * With top-k off, the random stream and every choice are llama2.c's, so the
 * same checkpoint, seed and flags give the same text in both engines. */
#ifndef QKV_SAMPLER_H
#define QKV_SAMPLER_H

#include <stdint.h>

/* SAMPLE_TOP_K, _TOP_P, _TOP_K_TOP_P: which cutoffs the candidates passed */
typedef enum { SAMPLE_GREEDY, SAMPLE_TEMPERATURE, SAMPLE_TOP_K, SAMPLE_TOP_P, SAMPLE_TOP_K_TOP_P } SampleMethod;

typedef struct {
    float prob;
    int index;
} ProbIndex;

typedef struct {
    int vocab_size;
    float temperature; /* 0 = greedy */
    float topp;        /* nucleus mass in (0, 1]; 1 = off */
    int topk;          /* keep the k most likely; 0 = off */
    uint64_t rng_state;
    ProbIndex *candidates; /* [vocab_size] scratch for top-k / top-p */
} Sampler;

/* How the last token was chosen, for the trace. */
typedef struct {
    SampleMethod method;
    int n_candidates;  /* tokens left after top-k and top-p cutoffs */
    float coin;        /* the uniform draw in [0,1), when sampling */
    float probability; /* probability of the chosen token after temperature */
} SampleInfo;

/* Returns 0, or -1 for settings no sampler can follow (vocab_size < 1, a
 * temperature that is negative or not finite) or out of memory. */
int sampler_init(Sampler *s, int vocab_size, float temperature, float topp, int topk, uint64_t seed);
void sampler_free(Sampler *s);
/* Picks a token in 0..vocab_size-1; logits are turned into probabilities in
 * place. Returns -1 if a logit is NaN or infinite: there is no distribution
 * to sample from (the caller says where; see logits_check). info may be NULL. */
int sample(Sampler *s, float *logits, SampleInfo *info);

/* The first logit that is NaN or infinite, or -1 if all are finite: one
 * pass over the vocabulary, cheap next to the classifier that made them. */
int logits_check(const float *logits, int n);

/* x / temperature in place (temperature > 0), then its softmax; x should
 * hold no NaN (sample() checks its logits first, and the tracer records
 * only positions whose logits were checked; one would give NaN
 * probabilities, never an index outside x). A
 * temperature so small that the largest x over it overflows (to +inf, or
 * to -inf when it is negative) is the limit T -> 0: probability 1 on the
 * largest x (the first of equals), the token greedy picks; softmax would
 * give inf - inf = NaN. Returns that token in the limit, else -1. */
int softmax_at_temperature(float *x, int n, float temperature);

#endif

#ifdef QKV_SAMPLER_IMPLEMENTATION
#ifndef QKV_SAMPLER_IMPLEMENTED
#define QKV_SAMPLER_IMPLEMENTED
#include <math.h>
#include <stdlib.h>
#include "model.h"
#include "elementwise.h" /* the passes over the logits */

int logits_check(const float *logits, int n) { return nonfinite_first(isa_available(), logits, n); }

int sampler_init(Sampler *s, int vocab_size, float temperature, float topp, int topk, uint64_t seed) {
    s->candidates = NULL;
    if (vocab_size < 1 || !(temperature >= 0.0f) || isinf(temperature)) return -1;
    s->vocab_size = vocab_size;
    s->temperature = temperature;
    s->topp = topp;
    s->topk = topk;
    s->rng_state = seed;
    s->candidates = malloc((size_t)vocab_size * sizeof(ProbIndex));
    return s->candidates ? 0 : -1;
}

void sampler_free(Sampler *s) { free(s->candidates); s->candidates = NULL; }

/* xorshift*: a small, fast generator whose stream matches llama2.c's */
static uint32_t random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

static float random_f32(uint64_t *state) { return (random_u32(state) >> 8) / 16777216.0f; }

/* the first index of the largest value (of values that are not NaN:
 * logits_check runs first); elementwise.h, in vectors where the CPU has
 * them, since greedy decoding runs this on every token while the other
 * threads wait */
static int argmax(const float *x, int n) { return max_first(isa_available(), x, n); }

static const SampleInfo GREEDY_INFO = { SAMPLE_GREEDY, 1, 0.0f, 1.0f };

static int greedy(const float *logits, int n, SampleInfo *info) {
    *info = GREEDY_INFO;
    return argmax(logits, n);
}

/* walk the cumulative distribution until it passes the coin */
static int sample_cdf(const float *probs, int n, float coin) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += probs[i];
        if (coin < cdf) return i;
    }
    return n - 1;
}

/* Most likely first; equal probabilities by token id (glibc's qsort keeps
 * ties in their order, as llama2.c's run gets them: now said, not left to
 * the sort) */
static int by_probability_desc(const void *a, const void *b) {
    const ProbIndex *x = a, *y = b;
    if (x->prob != y->prob) return x->prob > y->prob ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* a is a worse candidate than b: less likely, or as likely and a later id */
static inline int worse_candidate(ProbIndex a, ProbIndex b) {
    return a.prob < b.prob || (a.prob == b.prob && a.index > b.index);
}

/* The k most likely tokens into candidates[0..k-1], most likely first
 * (a min-heap of k over the vocabulary, then sorted: O(vocab log k), where
 * sorting the vocabulary would cost a millisecond at 32,000 tokens). */
static int top_k_candidates(Sampler *s, const float *probs, int k) {
    ProbIndex *heap = s->candidates; /* heap[0] the worst kept (worse_candidate: ties go to the lower id) */
    for (int i = 0; i < s->vocab_size; i++) {
        ProbIndex cand = { probs[i], i };
        int at;
        if (i < k) /* sift the new one up */
            for (at = i; at > 0 && worse_candidate(cand, heap[(at - 1) / 2]); at = (at - 1) / 2)
                heap[at] = heap[(at - 1) / 2];
        else if (worse_candidate(heap[0], cand)) /* it replaces the worst: sift down */
            for (at = 0; 2 * at + 1 < k;) {
                int child = 2 * at + 1;
                if (child + 1 < k && worse_candidate(heap[child + 1], heap[child])) child++;
                if (!worse_candidate(heap[child], cand)) break;
                heap[at] = heap[child];
                at = child;
            }
        else continue;
        heap[at] = cand;
    }
    qsort(heap, (size_t)k, sizeof(ProbIndex), by_probability_desc);
    return k;
}

/* -k on: fewer than the whole vocabulary (-k at or past it keeps it all,
 * as -k 0) */
static inline int uses_top_k(const Sampler *s) { return s->topk > 0 && s->topk < s->vocab_size; }
/* -p on: a share below the whole mass */
static inline int uses_top_p(const Sampler *s) { return s->topp > 0.0f && s->topp < 1.0f; }

/* The candidates, most likely first: the top k (if k is on), then the
 * shortest prefix whose share of their mass reaches topp (if p is on), the
 * order and the renormalisation of Hugging Face's and llama.cpp's
 * samplers. Returns how many are kept and their mass. Top-p alone is
 * llama2.c's: tokens below (1-topp)/(n-1) are dropped before sorting (they
 * can never be in the nucleus), and the same coin picks the same token. */
static int select_candidates(Sampler *s, const float *probs, float *mass) {
    int n = 0, nucleus = uses_top_p(s) && s->vocab_size > 1, top_k = uses_top_k(s);
    if (top_k) n = top_k_candidates(s, probs, s->topk);
    else {
        float cutoff = nucleus ? (1.0f - s->topp) / (s->vocab_size - 1) : 0.0f;
        for (int i = 0; i < s->vocab_size; i++)
            if (!nucleus || probs[i] >= cutoff) s->candidates[n++] = (ProbIndex){ probs[i], i };
        /* A flat distribution can leave every token under the cutoff (each
         * 1/n, the cutoff (1-topp)/(n-1) above it when topp < 1/n): then
         * nothing was dropped for good reason, so all stay. llama2.c reads
         * candidates[-1] here. */
        if (n == 0)
            for (int i = 0; i < s->vocab_size; i++) s->candidates[n++] = (ProbIndex){ probs[i], i };
        qsort(s->candidates, (size_t)n, sizeof(ProbIndex), by_probability_desc);
    }
    float kept = 0.0f; /* the mass top-p takes its share of: all of it (1 up to rounding) or the top k's */
    for (int i = 0; top_k && i < n; i++) kept += s->candidates[i].prob;
    float threshold = top_k ? s->topp * kept : s->topp;
    float cumulative = 0.0f;
    int last = n - 1;
    for (int i = 0; i < n; i++) {
        cumulative += s->candidates[i].prob;
        if (nucleus && cumulative > threshold) { last = i; break; }
    }
    *mass = cumulative;
    return last + 1;
}

int softmax_at_temperature(float *x, int n, float temperature) {
    int best = argmax(x, n);
    for (int i = 0; i < n; i++) x[i] /= temperature;
    if (!isinf(x[best])) { /* after an overflow every x above 0 is the same +inf: best was found before */
        softmax(x, n);
        return -1;
    }
    for (int i = 0; i < n; i++) x[i] = i == best ? 1.0f : 0.0f;
    return best;
}

int sample(Sampler *s, float *logits, SampleInfo *info) {
    SampleInfo local;
    if (!info) info = &local;
    if (logits_check(logits, s->vocab_size) >= 0) return -1;
    if (s->temperature == 0.0f) return greedy(logits, s->vocab_size, info);
    int limit = softmax_at_temperature(logits, s->vocab_size, s->temperature);
    if (limit >= 0) { /* T -> 0: greedy */
        *info = GREEDY_INFO;
        return limit;
    }
    float coin = random_f32(&s->rng_state);
    int top_p = uses_top_p(s), top_k = uses_top_k(s);
    if (!top_p && !top_k) {
        int next = sample_cdf(logits, s->vocab_size, coin);
        *info = (SampleInfo){ SAMPLE_TEMPERATURE, s->vocab_size, coin, logits[next] };
        return next;
    }
    float mass;
    int n = select_candidates(s, logits, &mass);
    float r = coin * mass, cdf = 0.0f;
    int chosen = s->candidates[n - 1].index;
    for (int i = 0; i < n; i++) {
        cdf += s->candidates[i].prob;
        if (r < cdf) { chosen = s->candidates[i].index; break; }
    }
    SampleMethod method = !top_k ? SAMPLE_TOP_P : top_p ? SAMPLE_TOP_K_TOP_P : SAMPLE_TOP_K;
    *info = (SampleInfo){ method, n, coin, logits[chosen] };
    return chosen;
}

#endif
#endif
