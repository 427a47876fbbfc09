/* heads.h — what each attention head does: role scores measured on probe
 * sequences the tool makes itself (seeded), through the real forward pass
 * (a ForwardObserver reads the weights forward() computed). -m heads. */
#ifndef QKV_HEADS_H
#define QKV_HEADS_H

#include <stdint.h>
#include "model.h"

/* The roles. Each but entropy is the mean attention weight a head puts on
 * one key (README, "What each head does"). */
typedef enum {
    ROLE_SELF,      /* key = the query's own position (text probes) */
    ROLE_PREVIOUS,  /* key = pos - 1 (text probes) */
    ROLE_FIRST,     /* key = 0, the BOS token (text probes) */
    ROLE_INDUCTION, /* key = the token after the query token's first occurrence (repeat probes) */
    ROLE_DUPLICATE, /* key = the query token's first occurrence (repeat probes) */
    ROLE_ENTROPY,   /* the row's entropy / ln(keys visible): 0 focused, 1 uniform (text probes) */
    N_ROLES
} HeadRole;

/* The roles a head can be named for: the weight roles, not entropy. */
#define N_WEIGHT_ROLES ROLE_ENTROPY
/* A head's dominant role: its largest weight role, if at least this. */
#define HEADS_THRESHOLD 0.3
/* The repeated block's length, at most (fewer if the context or the
 * vocabulary is smaller). */
#define HEADS_BLOCK_MAX 32
#define HEADS_DEFAULT_PROBES 8
#define HEADS_DEFAULT_SEED 1

extern const char *const HEAD_ROLE_NAMES[N_ROLES];

typedef struct {
    int n_probes;             /* --probes N: probes of each kind */
    unsigned long long seed;  /* -s: the probes' random stream */
    const char *csv_path;     /* --csv FILE */
    const char *json_path;    /* --json FILE */
    const char *svg_path;     /* --svg FILE: the heatmap */
    const char *model_path;
} HeadsOptions;

typedef struct {
    int n_layers, n_heads;
    int n_probes, block_len, probe_len; /* a probe is BOS + 2 * block_len tokens */
    unsigned long long seed;
    const char *start;       /* the token a probe starts from, in words: BOS, <|endoftext|>, "\n" */
    double *scores;          /* [n_layers, n_heads, N_ROLES] */
    double chance[N_ROLES];  /* the same scores for attention spread evenly over the visible keys */
    double loss_first;       /* repeat probes: mean nats/token predicting the first copy's tokens 2..L */
    double loss_second;      /*   and the second copy's tokens 2..L */
    int n_candidates;        /* ids a random token is drawn from: ln of it is a uniform guess's loss */
    int *text_tokens;        /* [n_probes, probe_len] the text probes */
    int *repeat_tokens;      /* [n_probes, probe_len] the repeat probes */
} HeadsReport;

/* The repeated block's length for this model, or 0 if its context or
 * vocabulary is too small for a block of 3. */
int heads_block_length(const Config *c);

/* A repeat probe: the model's start token (Config.start_id: BOS, GPT-2's
 * <|endoftext|>, a character model's "\n"; not -1), then block_len distinct
 * random token ids (from 3 up, never BOS or EOS), then the same block again;
 * out holds 2*block_len + 1.
 * rng is a xorshift state (nonzero), advanced. */
void heads_repeat_probe(int *out, const Config *c, int block_len, uint64_t *rng);

/* The random stream of the repeat probes for a seed. */
uint64_t heads_repeat_rng(unsigned long long seed);

/* Runs the probes through m and fills r. Returns 0, or -1 with err filled. */
int heads_measure(const Model *m, int n_probes, unsigned long long seed, HeadsReport *r,
                  char *err, size_t err_len);
void heads_report_free(HeadsReport *r);

/* The dominant role of a head (a weight role), or -1 if none clears
 * HEADS_THRESHOLD; its score in *score. */
int heads_dominant(const HeadsReport *r, int layer, int head, double *score);

/* -m heads: measures, prints the table on stdout, writes --csv, --json, --svg.
 * Returns 0, or -1 with err filled. */
int heads_run(const Model *m, const HeadsOptions *o, char *err, size_t err_len);

#endif
