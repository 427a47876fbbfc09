/* run.c — the qkv command line: load a checkpoint, then generate text,
 * tokenize or describe the model; the other modes (score a file, benchmark,
 * quantize, the heads' roles) have files of their own: ppl.c, bench.c,
 * quantize.c, heads.c. The flags and their checks are options.c's; what
 * the modes share is in cli.c.
 *
 *   ./run [checkpoint] [-t TEMP] [-p TOPP] [-k TOPK] [-s SEED] [-n STEPS]
 *         [-i PROMPT] [-z TOKENIZER] [-m MODE] ...
 *
 * The flags are llama2.c's, so its checkpoints and habits work unchanged.
 */
#include "model.h" /* the engine: engine.c */
#include "sampler.h"
#include "tokenizer.h"
#include "trace.h"
#include "stepper.h"
#include "bench.h"
#include "quantize.h"
#include "threads.h"
#include "heads.h"
#include "cli.h"
#include "ppl.h"
#include "options.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif


/* ------------------------------------------------------------------------ */
/* The tokenizer and the text                                                */


/* The tokenizer: -z FILE if given, else the one inside a qkv checkpoint. An
 * embedded one is always read, so a damaged checkpoint is refused either way. */
static void load_tokenizer(Tokenizer *t, const Options *o, const Model *m) {
    char err[256];
    int vocab = m ? m->config.vocab_size : -1, kind = m ? m->config.tokenizer_kind : TOKENIZER_LLAMA;
    int rc = 0;
    if (m && m->tokenizer_data) {
        rc = tokenizer_load_kind(t, m->tokenizer_data, m->tokenizer_bytes, vocab, kind, err, sizeof err);
        if (rc == 0 && o->tokenizer) tokenizer_free(t);
    }
    if (rc == 0 && o->tokenizer && kind != TOKENIZER_LLAMA) {
        snprintf(err, sizeof err, "-z gives a llama2.c tokenizer.bin, and this checkpoint's own tokenizer is of "
                                  "another kind (%s): -z does not apply", kind == TOKENIZER_CHAR ? "characters" : "GPT-2 BPE");
        rc = -1;
    } else if (rc == 0 && o->tokenizer) rc = tokenizer_load_file(t, o->tokenizer, vocab, err, sizeof err);
    else if (!m || !m->tokenizer_data) {
        snprintf(err, sizeof err, "this checkpoint has no tokenizer inside: give one with -z tokenizer.bin");
        rc = -1;
    }
    if (rc) die("%s", err);
    if (m) {
        t->bos_id = m->config.bos_id;
        t->eos_id = m->config.eos_id;
    }
}

static void print_token(TextPrinter *out, const Tokenizer *t, int prev, int token) {
    int len;
    const char *piece = tokenizer_decode(t, prev, token, &len);
    text_printer_put(out, piece, len);
    fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* Generation                                                                */

/* Runs the prompt; returns the logits that predict the token after it. */
static float *run_prompt(const Model *m, RunState *s, Tracer *tr, const int *prompt, int n, int *at) {
    const ForwardObserver *obs = tracer_observer(tr);
    *at = n - 1;
    if (!tracer_wants_prompt(tr)) return forward_tokens(m, s, prompt, n, 0, obs);
    float *logits = NULL;
    for (int pos = 0; pos < n; pos++) {
        logits = forward(m, s, prompt[pos], pos, obs);
        *at = pos;
        if (logits_check(logits, m->config.vocab_size) >= 0) break; /* traced: the first bad position is known */
        if (pos + 1 < n) tracer_step(tr, pos, prompt[pos], logits, prompt[pos + 1], NULL);
    }
    return logits;
}

/* --probe induction: the prompt is -m heads' first repeat probe (BOS, a
 * block of random tokens, the block again) for the sample's seed, so the
 * explorer shows the induction stripe. */
static int *probe_prompt(const Config *c, unsigned long long seed, int *n) {
    int block_len = heads_block_length(c);
    if (!block_len) die("--probe induction: the context or vocabulary is too small for a probe");
    if (c->start_id < 0) die("--probe induction: this character vocabulary has no \"\\n\" to start the probe from");
    int *tokens = malloc((2 * (size_t)block_len + 1) * sizeof(int));
    if (!tokens) die("out of memory");
    uint64_t rng = heads_repeat_rng(seed);
    heads_repeat_probe(tokens, c, block_len, &rng);
    *n = 2 * block_len + 1;
    return tokens;
}

/* The positions a run goes to (-n, clamped to the context unless a window
 * streams past it, and never short of the prompt), or 0 after one error
 * line: a prompt longer than the context. */
static int steps_for(const Config *c, const Options *o, int n_prompt) {
    if (n_prompt > c->seq_len && !o->window) { /* a window streams a longer prompt */
        fprintf(stderr, "error: the prompt is %d tokens, longer than the model's context of %d\n",
                n_prompt, c->seq_len);
        return 0;
    }
    int steps = o->steps ? o->steps : c->seq_len; /* -n 0: the whole context, as in llama2.c */
    if (steps > c->seq_len && !o->window) { /* a window runs on past the context */
        if (o->steps_given) fprintf(stderr, "warning: -n %d is beyond the context; clamped to %d\n", steps, c->seq_len);
        steps = c->seq_len;
    }
    if (steps < n_prompt) {
        fprintf(stderr, "warning: the prompt is %d tokens, more than %s %d: it runs whole, then one token "
                        "is generated\n", n_prompt, o->steps ? "-n" : "the context (-n 0) of", steps);
        steps = n_prompt;
    }
    return steps;
}

/* A --compare model reads the run's tokens again, so the run stops at its
 * context if that is shorter (with a warning, as -n past the context is;
 * tracer_open refused a prompt longer than it) */
static int steps_for_compare(const Tracer *tr, int steps) {
    int most = tracer_max_positions(tr, steps);
    if (most < steps) fprintf(stderr, "warning: the --compare model's context is %d positions: the run stops there\n", most);
    return most;
}

/* The closing line on stderr: the decode rate over the computing time (the
 * prompt's and a --step user's time left out), and the prompt's rate. The
 * first token generated comes from the prompt's logits: with one, no decode
 * step was timed, and the rate is "-", not 0. */
static void report_speed(int generated, double computing, const char *stopped_by, int n_prompt,
                         double prompt_seconds, unsigned long long seed, int stepped, double waited) {
    char rate[32] = "-", line[320], waits[96] = "";
    if (generated > 1) snprintf(rate, sizeof rate, "%.2f", (generated - 1) / computing);
    if (stepped) snprintf(waits, sizeof waits, "; computing only, %.1f s waiting for keys left out", waited);
    snprintf(line, sizeof line, "achieved tok/s: %s (%d generated, stopped by %s; prompt: %d token%s at %.2f tok/s; seed %llu%s)",
             rate, generated, stopped_by, n_prompt, n_prompt == 1 ? "" : "s", n_prompt / (prompt_seconds + 1e-9), seed,
             waits);
    print_line_for_reader(stderr, line);
}

/* The next token from logits. The sampler works on a copy (probs), so the
 * trace sees the logits themselves; greedy reads them without changing
 * them, and needs none. */
static int sample_next(Sampler *sampler, const float *logits, float *probs, int vocab_size, float temperature,
                       SampleInfo *info) {
    float *from = temperature == 0.0f ? (float *)logits : memcpy(probs, logits, (size_t)vocab_size * sizeof(float));
    return sample(sampler, from, info);
}

/* The step mode's wait for a key (none without --step): 1 if the user
 * quit. Its time goes into *waited: the user's, not the engine's. */
static int user_quits(Tracer *tr, double *waited) {
    double start = now_seconds();
    int quit = tracer_pause(tr);
    *waited += now_seconds() - start;
    return quit;
}

/* One decode step with the thread count the choice is trying, timed for it */
static float *forward_choosing_threads(const Model *m, RunState *s, ThreadChoice *threads, int token, int pos,
                                       const ForwardObserver *obs) {
    team_set_threads(s->team, thread_choice_apply(threads));
    double start = now_seconds();
    float *logits = forward(m, s, token, pos, obs);
    thread_choice_record(threads, now_seconds() - start, 1);
    return logits;
}

/* What the decode loop did: tokens printed, why it stopped, the time it
 * waited on the user */
typedef struct {
    int generated;
    const char *stopped_by;
    double waited;
} Decoded;

/* Sample, trace, print, step: from the prompt's last position (its logits)
 * until -n, the end of text, or the user quits. d comes in with what stops
 * the run at steps (its stopped_by). Returns the exit status. */
static int decode_loop(const Model *m, const Tokenizer *t, const Options *o, RunState *s, Sampler *sampler,
                       Tracer *tr, TextPrinter *out, float *logits, int token, int n_prompt, int steps, Decoded *d) {
    const Config *c = &m->config;
    ThreadChoice threads = choose_threads(o->threads);
    const ForwardObserver *obs = tracer_observer(tr);
    float *probs = malloc((size_t)c->vocab_size * sizeof(float));
    if (!probs) die("out of memory");
    int rc = 0;
    for (int pos = n_prompt - 1; pos < steps && rc == 0; pos++) {
        SampleInfo info;
        int next = sample_next(sampler, logits, probs, c->vocab_size, o->temperature, &info);
        if (next < 0) { /* not reached: the logits were checked */
            rc = 1;
            break;
        }
        tracer_step(tr, pos, token, logits, next, &info);
        int end = tokenizer_ends_text(t, next);
        if (!end) {
            print_token(out, t, token, next);
            d->generated++;
            token = next;
        }
        int quit = user_quits(tr, &d->waited); /* step mode shows the step that ends the text too */
        if (end || quit) {
            d->stopped_by = end ? "end of text" : "quit";
            break;
        }
        if (pos + 1 < steps) {
            logits = forward_choosing_threads(m, s, &threads, token, pos + 1, obs);
            if (report_bad_logits(s, logits, c->vocab_size, pos + 1)) rc = 1;
        }
    }
    free(probs);
    return rc;
}

/* What every sample of a run shares: the prompt, the positions, the run
 * state (each sample starts again at position 0, which rewrites every
 * cache slot before attention reads it) and the tracer (one sample only). */
typedef struct {
    const Model *m;
    const Tokenizer *t;
    const Options *o;
    RunState *s;
    Tracer *tr;
    const int *prompt;
    int n_prompt, started, steps;
    const char *limit; /* what steps is: "the -n limit", "the context", the --compare model's */
} Generation;

/* The seed of --samples' text k: seed + k, within -s's range 1..2^63 - 1
 * (after its last comes 1), so each printed seed can be given back to -s */
static unsigned long long sample_seed(unsigned long long seed, int k) {
    const unsigned long long last = 9223372036854775807ull;
    return (seed - 1 + (unsigned long long)k) % last + 1;
}

/* One text from seed: the prompt, then decoding, the speed line. Returns
 * the exit status: 0, or 1 after one error line (bad logits, a trace that
 * cannot be written). */
static int generate_sample(const Generation *g, unsigned long long seed) {
    const Config *c = &g->m->config;
    const Options *o = g->o;
    Sampler sampler;
    char err[256];
    if (sampler_init(&sampler, c->vocab_size, o->temperature, o->topp, o->topk, seed))
        die("out of memory for the sampler");
    double start = now_seconds();
    int at;
    float *logits = run_prompt(g->m, g->s, g->tr, g->prompt, g->n_prompt, &at);
    int rc = report_bad_logits(g->s, logits, c->vocab_size, at) ? 1 : 0;
    TextPrinter out = { { 0 }, 0 };
    /* the start token is not the user's text, except a character model's "\n" (as nanoGPT prints it) */
    int first_shown = g->started && g->t->kind != TOKENIZER_CHAR ? 1 : 0;
    for (int i = first_shown; i < g->n_prompt && rc == 0; i++)
        print_token(&out, g->t, i ? g->prompt[i - 1] : -1, g->prompt[i]);
    double prompt_done = now_seconds();

    Decoded d = { 0, g->limit, 0 };
    if (rc == 0)
        rc = decode_loop(g->m, g->t, o, g->s, &sampler, g->tr, &out, logits, g->prompt[g->n_prompt - 1], g->n_prompt,
                         g->steps, &d);
    if (rc == 0) {
        printf("\n");
        fflush(stdout); /* the text's last line before the speed line on a terminal */
        double end = now_seconds();
        if (g->tr && tracer_close(g->tr, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            rc = 1;
        } else {
            report_speed(d.generated, end - prompt_done - d.waited, d.stopped_by, g->n_prompt, prompt_done - start,
                         seed, o->trace.step, d.waited);
        }
    } else {
        tracer_discard(g->tr);
    }
    sampler_free(&sampler);
    return rc;
}

/* Returns the exit status: 0, or 1 after one error line.
 * team: the threads of the forward's parallel loops (team.h), or NULL. */
static int generate(const Model *m, const Tokenizer *t, const Options *o, Team *team) {
    const Config *c = &m->config;
    int n_prompt, started = 1;
    /* a probe's prompt is the seed's, so the seed is -m heads' default (1) unless given */
    unsigned long long seed = o->seed ? o->seed : o->probe ? HEADS_DEFAULT_SEED : clock_seed();
    int *prompt = o->probe ? probe_prompt(c, seed, &n_prompt)
                           : encode_text(t, c->start_id, o->prompt ? o->prompt : "", "the prompt", 0, &n_prompt, &started);
    int steps = steps_for(c, o, n_prompt);
    if (!steps) {
        free(prompt);
        return 1;
    }

    RunState s;
    char err[256];
    TraceOptions trace = o->trace;
    trace.positions = steps;
    trace.prompt_tokens = n_prompt;
    int bad_flag;
    Tracer *tr = tracer_open(&trace, m, t, o->temperature, o->topp, o->topk, err, sizeof err, &bad_flag);
    if (!tr && bad_flag) usage_error(err);
    if (!tr && err[0]) die("%s", err);
    /* -n, unless it was 0 or past the context (a prompt longer than -n runs whole) */
    const char *limit = o->steps && o->steps <= steps ? "the -n limit" : "the context";
    int most = steps_for_compare(tr, steps);
    if (most < steps) limit = "the --compare model's context";
    steps = most;
    /* the KV cache holds the positions this run visits, not the whole
     * context the header claims */
    run_state_for(&s, c, steps, o->kv_type, o->window, o->sinks);
    s.team = team;
    Generation g = { m, t, o, &s, tr, prompt, n_prompt, started, steps, limit };
    int rc = 0;
    for (int k = 0; k < o->samples && rc == 0; k++) {
        if (o->probe && k > 0) { /* each sample's probe from its own seed, as a run with that seed makes it */
            free(prompt);
            g.prompt = prompt = probe_prompt(c, sample_seed(seed, k), &n_prompt);
            g.n_prompt = n_prompt;
        }
        rc = generate_sample(&g, sample_seed(seed, k));
    }
    free(prompt);
    run_state_free(&s);
    return rc;
}

typedef struct {
    const Model *m;
    const Tokenizer *t;
    const Options *o;
} GenerateRun;

static int generate_on_team(Team *team, void *ctx) {
    const GenerateRun *g = ctx;
    return generate(g->m, g->t, g->o, team);
}

/* ------------------------------------------------------------------------ */
/* Tokenize                                                                  */

/* A piece escaped as the trace shows it (piece_escape): 4 bytes at most
 * for each byte of the piece */
static void print_piece_escaped(const char *piece, int len) {
    char *escaped = malloc(4 * (size_t)len + 1);
    if (!escaped) die("out of memory");
    piece_escape(escaped, 4 * (size_t)len + 1, piece, len, 0);
    fputs(escaped, stdout);
    free(escaped);
}

/* start: the model's start token (Config.start_id). */
static void tokenize(const Tokenizer *t, int start, const Options *o) {
    int n, started;
    int *tokens = encode_text(t, start, o->prompt ? o->prompt : "", "the prompt", 0, &n, &started);
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", tokens[i]);
    printf("\n");
    for (int i = 0; i < n; i++) {
        printf("%d\t", tokens[i]);
        print_piece_escaped(t->vocab[tokens[i]], t->piece_lengths[tokens[i]]);
        printf("\n");
    }
    free(tokens);
}

/* ------------------------------------------------------------------------ */
/* Info                                                                      */

/* Whether n values are all zero (a bias a file stores but never learned) */
static int all_zero(const float *v, int n) {
    for (int i = 0; v && i < n; i++)
        if (v[i] != 0.0f) return 0;
    return 1;
}

/* Whether every bias of a GPT-2 model is zero: nanoGPT's bias=False, whose
 * export stores them as zeros */
static int biases_all_zero(const Model *m) {
    const Config *c = &m->config;
    int q_dim = c->n_heads * c->head_size, kv_dim = c->n_kv_heads * c->head_size;
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *w = &m->weights.layers[l];
        if (!all_zero(w->attention_norm_bias, c->dim) || !all_zero(w->ffn_norm_bias, c->dim) ||
            !all_zero(w->bq, q_dim) || !all_zero(w->bk, kv_dim) || !all_zero(w->bv, kv_dim) ||
            !all_zero(w->bo, c->dim) || !all_zero(w->b1, c->hidden_dim) || !all_zero(w->b2, c->dim))
            return 0;
    }
    return all_zero(m->weights.final_norm_bias, c->dim);
}

/* The weights' bytes, and their matrices' type: the header's, or how many
 * have each type where they differ (a file quantized to blocks keeps in
 * float16 what is not whole blocks; a GGUF file may mix any) */
static void print_weight_bytes(const Model *m) {
    WeightType type = (WeightType)m->config.weight_type;
    printf("weight bytes      %zu (", m->weight_bytes);
    if (model_matrices_of(m, type) == model_matrices_of(m, WEIGHT_TYPE_COUNT)) {
        printf("%s matrices, float32 norms)\n", weight_type_name(type));
        return;
    }
    const char *sep = "matrices: ";
    for (int t = 0; t < WEIGHT_TYPE_COUNT; t++)
        if (model_matrices_of(m, (WeightType)t)) {
            printf("%s%d %s", sep, model_matrices_of(m, (WeightType)t), weight_type_name((WeightType)t));
            sep = ", ";
        }
    printf("; float32 norms)\n");
}

static void info(const Model *m, const char *path, int ctx) {
    const Config *c = &m->config;
    size_t embedding = (size_t)c->vocab_size * c->dim;
    size_t attention = (size_t)c->n_layers * attention_matrix_params(c);
    size_t mlp = (size_t)c->n_layers * mlp_matrix_params(c);
    size_t norms = (size_t)c->n_layers * 2 * c->dim + c->dim;
    size_t classifier = c->shared_classifier ? 0 : embedding;
    int gpt2 = c->arch == ARCH_GPT2;
    size_t positions = gpt2 ? (size_t)c->seq_len * c->dim : 0;
    size_t biases = gpt2 ? m->n_params - embedding - attention - mlp - norms - classifier - positions : 0;
    static const char *const tokenizers[] = { "llama2.c BPE (BOS first)", "characters (nanoGPT meta.pkl; no BOS)",
                                              "GPT-2 byte-level BPE (no BOS; <|endoftext|> ends)" };
    printf("checkpoint        %s (%s)\n", path, model_format_name(m->format));
    if (m->metadata) fputs(m->metadata, stdout); /* a GGUF's own keys, as read */
    printf("architecture      %s\n", !gpt2 ? "Llama (RMSNorm, RoPE, SwiGLU, no biases)"
                                    : c->activation == ACT_GELU_TANH
                                        ? "GPT-2 (LayerNorm, learned positions, tanh-approximate GELU, biases)"
                                        : "GPT-2 (LayerNorm, learned positions, exact erf GELU, biases)");
    if (m->tokenizer_data) printf("tokenizer         %s\n", tokenizers[c->tokenizer_kind]);
    printf("dim %d  hidden_dim %d  n_layers %d  n_heads %d  n_kv_heads %d  head_size %d\n",
           c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_size);
    if (gpt2) printf("vocab_size %d  seq_len %d  norm_eps %g  classifier %s\n",
                     c->vocab_size, c->seq_len, c->norm_eps, c->shared_classifier ? "tied" : "separate");
    else printf("vocab_size %d  seq_len %d  norm_eps %g  rope_theta %g  classifier %s\n",
                c->vocab_size, c->seq_len, c->norm_eps, c->rope_theta, c->shared_classifier ? "tied" : "separate");
    printf("parameters        %zu\n", m->n_params);
    printf("  embedding       %zu\n  attention       %zu\n  mlp             %zu\n", embedding, attention, mlp);
    printf("  norms           %zu\n  classifier      %zu%s\n", norms, classifier,
           c->shared_classifier ? " (tied to the embedding)" : "");
    if (gpt2) printf("  positions       %zu\n  biases          %zu (linear layers and LayerNorms%s)\n", positions, biases,
                     biases_all_zero(m) ? "; all zero: trained without biases" : "");
    print_weight_bytes(m);
    printf("CPU               %s, family %d (QKV_VENDOR, QKV_FAMILY)\n", vendor_name(cpu_vendor()), cpu_family());
    /* 256-bit VNNI's kernels come in two encodings (cpu.h: ISA_AVX_VNNI) */
    const char *form = !strstr(model_kernel_name(m), "avxvnni") ? ""
                       : cpu_has_avx_vnni()                   ? ", its VEX form"
                                                              : ", in AVX-512 VNNI's EVEX form";
    printf("kernels           %s (%s%s; QKV_ISA)\n", isa_name(isa_available()), model_kernel_name(m), form);
    size_t step = weight_bytes_per_token(m), llc = last_level_cache_bytes();
    printf("weights a step    %zu bytes: %s (half the last-level cache: %zu bytes; QKV_CACHE_BYTES)\n", step,
           weights_from_memory(step) ? "from memory" : "cached", llc / 2);
    size_t kv = kv_cache_bytes_per_token(c);
    printf("KV cache          %zu bytes per token, %zu bytes for the full context of %d\n",
           kv, kv * (size_t)c->seq_len, c->seq_len);
    printf("FLOPs per token   weights %.4g; attention %.4g at context %d (%.1f%% of the step)\n",
           flops_weights_per_token(c), flops_attention_per_token(c, ctx), ctx,
           100.0 * flops_attention_per_token(c, ctx) /
               (flops_attention_per_token(c, ctx) + flops_weights_per_token(c)));
}


/* The prompt: -i TEXT, -i - (stdin) or --prompt-file FILE (- is stdin too).
 * One final newline of a file is dropped: editors add it, and a prompt
 * rarely means it. The caller frees *owned. */
static const char *read_prompt(const Options *o, int stdin_closed, char **owned) {
    *owned = NULL;
    const char *path = o->prompt_file;
    if (o->prompt && !strcmp(o->prompt, "-")) path = "-";
    if (!path) return o->prompt ? o->prompt : "";
    if (stdin_closed && !strcmp(path, "-")) die("cannot read stdin: it is closed");
    size_t n;
    *owned = strcmp(path, "-") ? read_text_file(path, "--prompt-file", &n) : read_stream(stdin, "stdin", &n);
    if (n > 0 && (*owned)[n - 1] == '\n') { /* one final newline, "\n" or "\r\n"; a bare "\r" is text */
        (*owned)[--n] = '\0';
        if (n > 0 && (*owned)[n - 1] == '\r') (*owned)[--n] = '\0';
    }
    return *owned;
}

/* A mode's exit status: 0, or 1 after its error line */
static int mode_status(int failed, const char *err) {
    if (failed) fprintf(stderr, "error: %s\n", err);
    return failed ? 1 : 0;
}

/* The chosen mode on the loaded model (and its tokenizer, when the mode
 * has one); returns the exit status. */
static int run_mode(Options *o, const Model *m, Tokenizer *t, const char *path) {
    char err[512];
    int status = 0;
    if (o->mode == INFO) {
        int ctx = o->bench.ctx ? o->bench.ctx : m->config.seq_len;
        if (ctx > m->config.seq_len) { /* as bench does */
            fprintf(stderr, "warning: --ctx %d is beyond the context; clamped to %d\n", ctx, m->config.seq_len);
            ctx = m->config.seq_len;
        }
        info(m, path, ctx);
    } else if (o->mode == BENCH) {
        o->bench.model_path = path;
        o->bench.kv_type = o->kv_type;
        o->bench.window = o->window;
        o->bench.sinks = o->sinks;
        status = mode_status(bench_run(m, &o->bench, err, sizeof err), err);
    } else if (o->mode == HEADS) {
        o->heads.seed = o->seed ? o->seed : HEADS_DEFAULT_SEED;
        o->heads.csv_path = o->bench.csv_path;
        o->heads.svg_path = o->bench.svg_path;
        o->heads.model_path = path;
        status = mode_status(heads_run(m, &o->heads, err, sizeof err), err);
    } else if (o->mode == TOKENIZE) {
        tokenize(t, m->config.start_id, o);
    } else if (o->mode == QUANTIZE) {
        status = mode_status(quantize_checkpoint(m, t, (WeightType)o->dtype, o->output, err, sizeof err), err);
    } else if (o->mode == PPL) {
        o->ppl.kv_type = o->kv_type;
        o->ppl.window = o->window;
        o->ppl.sinks = o->sinks;
        o->ppl.threads = o->threads;
        status = ppl_run(m, t, &o->ppl);
    } else {
        GenerateRun run = { m, t, o };
#ifdef _OPENMP
        status = team_main(omp_get_max_threads(), generate_on_team, &run);
#else
        status = team_main(1, generate_on_team, &run);
#endif
    }
    return status;
}

/* The threads a run has: --threads, else OpenMP's count (OMP_NUM_THREADS,
 * else the processors), at most TEAM_MAX (a team's size, and so every
 * OpenMP region's: OMP_NUM_THREADS=100000 made libgomp's own regions, the
 * bench's probes and ppl's, crash). More than the processors is allowed (a
 * measurement may want it), with a warning: it is never faster. */
static int settle_threads(int forced) {
#ifdef _OPENMP
    if (forced > 0) omp_set_num_threads(forced);
    int n = omp_get_max_threads(), procs = omp_get_num_procs();
    char asked[48];
    snprintf(asked, sizeof asked, forced > 0 ? "--threads %d" : "OMP_NUM_THREADS=%d", n);
    const char *turns = "the threads take turns on them, and every step waits for the last";
    if (n > TEAM_MAX) {
        omp_set_num_threads(n = TEAM_MAX);
        fprintf(stderr, "warning: %s: qkv runs at most %d threads, and takes that many", asked, TEAM_MAX);
        if (n > procs) fprintf(stderr, ", more than this machine's %d processors: %s", procs, turns);
        fprintf(stderr, "\n");
    } else if (n > procs) {
        fprintf(stderr, "warning: %s is more than this machine's %d processors: %s\n", asked, procs, turns);
    }
    return n;
#else
    if (forced > 1) fprintf(stderr, "warning: --threads %d: this build has no OpenMP (OPENMP=), so it runs one thread\n", forced);
    return 1;
#endif
}

/* A closed standard descriptor would be lent to the next file opened (a
 * trace, a checkpoint being written), and what goes to the stream would
 * land in that file. A closed stdin or stderr is given /dev/null (the
 * messages were not wanted; step mode's keys end at once); a closed stdout
 * is refused (the output is the point). Returns whether stdin was closed:
 * a prompt asked of it is refused (read_prompt), not taken as empty. */
static int check_standard_streams(void) {
    int stdin_closed = fcntl(STDIN_FILENO, F_GETFD) < 0;
    for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; fd++) {
        if (fd == STDOUT_FILENO || fcntl(fd, F_GETFD) >= 0) continue;
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || (null != fd && (dup2(null, fd) < 0 || close(null) < 0))) exit(1);
    }
    if (fcntl(STDOUT_FILENO, F_GETFD) < 0) die("stdout is closed: give the output somewhere to go");
    return stdin_closed;
}

int main(int argc, char **argv) {
    int stdin_closed = check_standard_streams();
    /* a file-size limit (ulimit -f) killed the run mid-write, a half file
     * left: ignored, the write fails and says so, and the file is removed */
    signal(SIGXFSZ, SIG_IGN);
    Options o;
    parse_options(&o, argc, argv);
    char env_error[192];
    if (kernel_env_error(env_error, sizeof env_error)) {
        fprintf(stderr, "error: %s\n", env_error);
        return 2;
    }
    o.bench.threads = settle_threads(o.threads);
    o.trace.window = o.window; /* the trace marks the sinks and the window */
    o.trace.sinks = o.sinks;
    char *owned_prompt = NULL;
    if (o.mode & (GENERATE | TOKENIZE)) o.prompt = read_prompt(&o, stdin_closed, &owned_prompt);
    Tokenizer t;
    if (o.mode == TOKENIZE && !o.checkpoint && o.tokenizer) {
        load_tokenizer(&t, &o, NULL);
        tokenize(&t, t.bos_id, &o); /* a tokenizer.bin alone is llama2.c's kind: BOS starts */
        tokenizer_free(&t);
        free(owned_prompt);
        return output_status(0);
    }
    char exe_path[4096];
    const char *path = o.checkpoint ? o.checkpoint : default_checkpoint(exe_path, sizeof exe_path);
    check_paths(&o, path);
    check_outputs(&o);
    o.trace.model_path = path;
    Model m;
    char err[512];
    if (model_load(&m, path, err, sizeof err)) die("%s", err);
    /* Every mode reads the whole file: info and bench need no tokenizer, but
     * a checkpoint whose tokenizer is damaged is refused in all of them. */
    int text_mode = o.mode != INFO && o.mode != BENCH && o.mode != HEADS;
    int has_tokenizer = text_mode || m.tokenizer_data || o.tokenizer;
    if (has_tokenizer) load_tokenizer(&t, &o, &m);
    check_window(&o, &m.config);
    int status = run_mode(&o, &m, &t, path);
    if (has_tokenizer) tokenizer_free(&t);
    model_free(&m);
    free(owned_prompt);
    return output_status(status);
}
