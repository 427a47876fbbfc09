/* run.c — the qkv command line: load a checkpoint, then generate text,
 * tokenize, describe the model, score a file, or benchmark.
 *
 *   ./run [checkpoint] [-t TEMP] [-p TOPP] [-k TOPK] [-s SEED] [-n STEPS]
 *         [-i PROMPT] [-z TOKENIZER] [-m MODE] ...
 *
 * The flags are llama2.c's, so its checkpoints and habits work unchanged.
 */
#define QKV_MODEL_IMPLEMENTATION
#include "model.h"
#define QKV_SAMPLER_IMPLEMENTATION
#include "sampler.h"
#include "tokenizer.h"
#include "trace.h"
#include "bench.h"

#include <errno.h>
#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define DEFAULT_CHECKPOINT "models/stories.bin"

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

typedef struct {
    const char *checkpoint;  /* NULL: the default, or none for tokenize -z */
    const char *tokenizer;   /* -z */
    const char *prompt;      /* -i */
    const char *mode;        /* -m generate|tokenize|info|ppl|bench */
    const char *text_file;   /* -f, for ppl */
    float temperature, topp;
    int topk, steps, threads;
    unsigned long long seed;
    TraceOptions trace;
    BenchOptions bench;
} Options;

static void usage(const char *why) {
    if (why) fprintf(stderr, "error: %s\n", why);
    fprintf(stderr,
        "usage: ./run [checkpoint] [options]      (default checkpoint: " DEFAULT_CHECKPOINT ")\n"
        "  -m MODE      generate (default), tokenize, info, ppl, bench\n"
        "  -i PROMPT    input prompt (default: empty)\n"
        "  -n STEPS     positions to run, prompt included (default 256, clamped to the context)\n"
        "  -t TEMP      temperature >= 0 (default 1.0; 0 = greedy)\n"
        "  -p TOPP      top-p in (0, 1] (default 0.9; 1 = off)\n"
        "  -k TOPK      top-k >= 0 (default 0 = off)\n"
        "  -s SEED      random seed; 0 or absent: from the clock (printed)\n"
        "  -z FILE      tokenizer.bin (needed for llama2.c checkpoints)\n"
        "  -f FILE      text file to score (ppl mode)\n"
        "  --threads N  OpenMP threads (default: OMP_NUM_THREADS or all cores)\n"
        "trace (generate mode):\n"
        "  --trace  --trace-prompt  --layer L  --head H  --top N  --trace-out FILE\n"
        "  --trace-json FILE  --html FILE  --compare MODEL  --step\n"
        "bench mode:\n"
        "  --ctx N  --no-cache  --repeats N  --csv FILE  --svg FILE\n");
    exit(2);
}

static void usage_bad_value(const char *flag, const char *value, const char *expected) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s %s: expected %s", flag, value, expected);
    usage(msg);
}

static long parse_int(const char *flag, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        char expected[96];
        snprintf(expected, sizeof expected, "an integer in [%ld, %ld]", lo, hi);
        usage_bad_value(flag, s, expected);
    }
    return v;
}

static float parse_float(const char *flag, const char *s) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v)) usage_bad_value(flag, s, "a number");
    return v;
}

/* The table of flags that take a value; a flag's entry says where it goes. */
static int parse_valued_flag(Options *o, const char *flag, const char *v) {
    if (!strcmp(flag, "-t")) {
        o->temperature = parse_float(flag, v);
        if (o->temperature < 0) usage_bad_value(flag, v, "a temperature >= 0");
    } else if (!strcmp(flag, "-p")) {
        o->topp = parse_float(flag, v);
        if (!(o->topp > 0 && o->topp <= 1)) usage_bad_value(flag, v, "top-p in (0, 1]");
    } else if (!strcmp(flag, "-k")) o->topk = (int)parse_int(flag, v, 0, 1 << 30);
    else if (!strcmp(flag, "-s")) o->seed = (unsigned long long)parse_int(flag, v, 0, 0x7fffffffffffffffL);
    else if (!strcmp(flag, "-n")) o->steps = (int)parse_int(flag, v, 1, 1 << 30);
    else if (!strcmp(flag, "-i")) o->prompt = v;
    else if (!strcmp(flag, "-z")) o->tokenizer = v;
    else if (!strcmp(flag, "-m")) o->mode = v;
    else if (!strcmp(flag, "-f")) o->text_file = v;
    else if (!strcmp(flag, "--threads")) o->threads = (int)parse_int(flag, v, 1, 1024);
    else if (!strcmp(flag, "--layer")) o->trace.layer = (int)parse_int(flag, v, 0, QKV_MAX_LAYERS);
    else if (!strcmp(flag, "--head")) o->trace.head = (int)parse_int(flag, v, 0, QKV_MAX_HEADS);
    else if (!strcmp(flag, "--top")) o->trace.top_logits = (int)parse_int(flag, v, 1, 1000);
    else if (!strcmp(flag, "--trace-out")) o->trace.out_path = v;
    else if (!strcmp(flag, "--trace-json")) o->trace.json_path = v;
    else if (!strcmp(flag, "--html")) o->trace.html_path = v;
    else if (!strcmp(flag, "--compare")) o->trace.compare_path = v;
    else if (!strcmp(flag, "--ctx")) o->bench.ctx = (int)parse_int(flag, v, 1, QKV_MAX_SEQ_LEN);
    else if (!strcmp(flag, "--repeats")) o->bench.repeats = (int)parse_int(flag, v, 1, 1000);
    else if (!strcmp(flag, "--csv")) o->bench.csv_path = v;
    else if (!strcmp(flag, "--svg")) o->bench.svg_path = v;
    else return 0;
    return 1;
}

static int parse_switch(Options *o, const char *flag) {
    if (!strcmp(flag, "--trace")) o->trace.trace = 1;
    else if (!strcmp(flag, "--trace-prompt")) o->trace.trace_prompt = o->trace.trace = 1;
    else if (!strcmp(flag, "--step")) o->trace.step = 1;
    else if (!strcmp(flag, "--no-cache")) o->bench.no_cache = 1;
    else if (!strcmp(flag, "-h") || !strcmp(flag, "--help")) usage(NULL);
    else return 0;
    return 1;
}

static void parse_options(Options *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->temperature = 1.0f;
    o->topp = 0.9f;
    o->steps = 256;
    o->mode = "generate";
    o->trace.layer = o->trace.head = -1;
    o->trace.top_logits = 10;
    o->bench.repeats = 3;
    int i = 1;
    if (argc > 1 && argv[1][0] != '-') o->checkpoint = argv[i++];
    for (; i < argc; i++) {
        const char *flag = argv[i];
        if (parse_switch(o, flag)) continue;
        if (flag[0] != '-') {
            char msg[256];
            snprintf(msg, sizeof msg, "unexpected argument '%s'", flag);
            usage(msg);
        }
        if (i + 1 >= argc) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s needs a value", flag);
            usage(msg);
        }
        if (!parse_valued_flag(o, flag, argv[i + 1])) {
            char msg[256];
            snprintf(msg, sizeof msg, "unknown flag '%s'", flag);
            usage(msg);
        }
        i++;
    }
    const char *modes[] = { "generate", "tokenize", "info", "ppl", "bench" };
    int known = 0;
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) known |= !strcmp(o->mode, modes[m]);
    if (!known) usage_bad_value("-m", o->mode, "generate, tokenize, info, ppl or bench");
    if (!strcmp(o->mode, "ppl") && !o->text_file) usage("-m ppl needs -f FILE");
    if (o->trace.compare_path && !o->trace.html_path) usage("--compare goes with --html");
}

/* ------------------------------------------------------------------------ */
/* Small utilities                                                           */

static void die(const char *fmt, const char *detail) {
    fprintf(stderr, "error: ");
    fprintf(stderr, fmt, detail);
    fprintf(stderr, "\n");
    exit(1);
}

/* A seed from the clock when -s is absent or 0 (as in llama2.c, where 0 would
 * freeze xorshift): nanoseconds, so two runs in one second differ. It is
 * printed with the speed line, so any run can be repeated with -s. */
static unsigned long long clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long seed = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
    seed &= 0x7fffffffffffffffull;
    return seed ? seed : 1;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The tokenizer: -z FILE if given, else the one inside a qkv checkpoint. An
 * embedded one is always read, so a damaged checkpoint is refused either way. */
static void load_tokenizer(Tokenizer *t, const Options *o, const Model *m) {
    char err[256];
    int vocab = m ? m->config.vocab_size : -1;
    int rc = 0;
    if (m && m->tokenizer_data) {
        rc = tokenizer_load_bytes(t, m->tokenizer_data, m->tokenizer_bytes, vocab, err, sizeof err);
        if (rc == 0 && o->tokenizer) tokenizer_free(t);
    }
    if (rc == 0 && o->tokenizer) rc = tokenizer_load_file(t, o->tokenizer, vocab, err, sizeof err);
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

/* Encodes a whole text (a prompt or a file) with BOS first; exits on bad input. */
static int *encode_text(const Tokenizer *t, const char *text, const char *what, int *n) {
    size_t bad = utf8_invalid_at(text);
    if (bad) {
        char msg[128];
        snprintf(msg, sizeof msg, "%%s is not valid UTF-8 (bad byte at offset %zu)", bad - 1);
        die(msg, what);
    }
    int *tokens = malloc((strlen(text) + 3) * sizeof(int));
    if (!tokens || (*n = tokenizer_encode(t, text, 1, 0, tokens)) < 0) die("out of memory encoding %s", what);
    return tokens;
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
static float *run_prompt(const Model *m, RunState *s, Tracer *tr, const int *prompt, int n) {
    const ForwardObserver *obs = tracer_observer(tr);
    if (!tracer_wants_prompt(tr)) return forward_tokens(m, s, prompt, n, 0, obs);
    float *logits = NULL;
    for (int pos = 0; pos < n; pos++) {
        logits = forward(m, s, prompt[pos], pos, obs);
        if (pos + 1 < n) tracer_step(tr, pos, prompt[pos], logits, prompt[pos + 1], NULL);
    }
    return logits;
}

/* Non-finite logits mean the weights (or the arithmetic) broke down: there is
 * no distribution to sample from, and no silent answer to give. Returns 0
 * if the logits at pos are all finite, else says so and returns -1. */
static int check_logits(const float *logits, int n, int pos) {
    int bad = logits_check(logits, n);
    if (bad < 0) return 0;
    fprintf(stderr, "error: the model produced %s logits at position %d\n",
            isnan(logits[bad]) ? "NaN" : "infinite", pos);
    return -1;
}

/* Returns the exit status: 0, or 1 after one error line (bad logits). */
static int generate(const Model *m, const Tokenizer *t, const Options *o) {
    const Config *c = &m->config;
    int n_prompt;
    int *prompt = encode_text(t, o->prompt ? o->prompt : "", "the prompt", &n_prompt);
    if (n_prompt > c->seq_len) {
        fprintf(stderr, "error: the prompt is %d tokens, longer than the model's context of %d\n",
                n_prompt, c->seq_len);
        free(prompt);
        return 1;
    }
    int steps = o->steps;
    if (steps > c->seq_len) {
        fprintf(stderr, "warning: -n %d is beyond the context; clamped to %d\n", steps, c->seq_len);
        steps = c->seq_len;
    }
    if (steps < n_prompt) steps = n_prompt;

    RunState s;
    Sampler sampler;
    char err[256];
    unsigned long long seed = o->seed ? o->seed : clock_seed();
    /* the KV cache holds the positions this run visits, not the whole
     * context the header claims */
    if (run_state_init(&s, c, steps) || sampler_init(&sampler, c->vocab_size, o->temperature, o->topp, o->topk, seed))
        die("%s", "out of memory for the run state");
    Tracer *tr = tracer_open(&o->trace, m, t, o->temperature, o->topp, o->topk, err, sizeof err);
    if (!tr && err[0]) die("%s", err);

    double start = now_seconds();
    float *logits = run_prompt(m, &s, tr, prompt, n_prompt);
    int rc = check_logits(logits, c->vocab_size, n_prompt - 1) ? 1 : 0;
    TextPrinter out = { { 0 }, 0 };
    for (int i = 1; i < n_prompt && rc == 0; i++) print_token(&out, t, prompt[i - 1], prompt[i]);
    double prompt_done = now_seconds();

    /* the sampler works on a copy, so the trace sees the logits themselves */
    float *probs = malloc((size_t)c->vocab_size * sizeof(float));
    if (!probs) die("%s", "out of memory");
    int token = prompt[n_prompt - 1], generated = 0;
    const ForwardObserver *obs = tracer_observer(tr);
    const char *stopped_by = "the -n limit";
    for (int pos = n_prompt - 1; pos < steps && rc == 0; pos++) {
        SampleInfo info;
        memcpy(probs, logits, (size_t)c->vocab_size * sizeof(float));
        int next = sample(&sampler, probs, &info);
        if (next < 0) { /* not reached: the logits were checked */
            rc = 1;
            break;
        }
        tracer_step(tr, pos, token, logits, next, &info);
        if (next == t->bos_id || next == t->eos_id) {
            stopped_by = "end of text";
            break;
        }
        print_token(&out, t, token, next);
        generated++;
        token = next;
        if (tracer_pause(tr)) {
            stopped_by = "quit";
            break;
        }
        if (pos + 1 < steps) {
            logits = forward(m, &s, token, pos + 1, obs);
            if (check_logits(logits, c->vocab_size, pos + 1)) rc = 1;
        }
    }
    double end = now_seconds();
    if (rc == 0) {
        printf("\n");
        fflush(stdout); /* the text's last line before the speed line on a terminal */
        end = now_seconds();
        if (tr && tracer_close(tr, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            rc = 1;
        }
    } else {
        tracer_discard(tr);
    }
    if (rc == 0)
        fprintf(stderr, "achieved tok/s: %.2f (%d generated, stopped by %s; prompt: %d tokens at %.2f tok/s; seed %llu)\n",
                generated > 1 ? (generated - 1) / (end - prompt_done) : 0.0, generated, stopped_by, n_prompt,
                n_prompt / (prompt_done - start + 1e-9), seed);
    free(probs);
    free(prompt);
    sampler_free(&sampler);
    run_state_free(&s);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Tokenize                                                                  */

/* A piece on one line: bytes that are not printable ASCII or UTF-8 are
 * shown as \xNN so each token keeps its own line. */
static void print_piece_escaped(const char *piece, int len) {
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)piece[i];
        if (c < 0x20 || c == 0x7F || c == '\\') printf("\\x%02X", c);
        else putchar(c);
    }
}

static void tokenize(const Tokenizer *t, const Options *o) {
    int n;
    int *tokens = encode_text(t, o->prompt ? o->prompt : "", "the prompt", &n);
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

static void info(const Model *m, const char *path, int ctx) {
    const Config *c = &m->config;
    size_t q_dim = (size_t)c->n_heads * c->head_size, kv_dim = (size_t)c->n_kv_heads * c->head_size;
    size_t embedding = (size_t)c->vocab_size * c->dim;
    size_t attention = (size_t)c->n_layers * (2 * q_dim * c->dim + 2 * kv_dim * c->dim);
    size_t mlp = (size_t)c->n_layers * 3 * (size_t)c->hidden_dim * c->dim;
    size_t norms = (size_t)c->n_layers * 2 * c->dim + c->dim;
    size_t classifier = c->shared_classifier ? 0 : embedding;
    printf("checkpoint        %s (%s)\n", path, model_format_name(m->format));
    printf("dim %d  hidden_dim %d  n_layers %d  n_heads %d  n_kv_heads %d  head_size %d\n",
           c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_size);
    printf("vocab_size %d  seq_len %d  norm_eps %g  rope_theta %g  classifier %s\n",
           c->vocab_size, c->seq_len, c->norm_eps, c->rope_theta, c->shared_classifier ? "tied" : "separate");
    printf("parameters        %zu\n", m->n_params);
    printf("  embedding       %zu\n  attention       %zu\n  mlp             %zu\n", embedding, attention, mlp);
    printf("  norms           %zu\n  classifier      %zu%s\n", norms, classifier,
           c->shared_classifier ? " (tied to the embedding)" : "");
    printf("weight bytes      %zu (%s matrices, float32 norms)\n", m->weight_bytes, weight_type_name((WeightType)m->config.weight_type));
    size_t kv = kv_cache_bytes_per_token(c);
    printf("KV cache          %zu bytes per token, %zu bytes for the full context of %d\n",
           kv, kv * (size_t)c->seq_len, c->seq_len);
    printf("FLOPs per token   weights %.4g; attention %.4g at context %d (%.1f%% of the step)\n",
           flops_weights_per_token(c), flops_attention_per_token(c, ctx), ctx,
           100.0 * flops_attention_per_token(c, ctx) /
               (flops_attention_per_token(c, ctx) + flops_weights_per_token(c)));
}

/* ------------------------------------------------------------------------ */
/* Perplexity                                                                */

/* The largest text -m ppl reads: 4x the largest corpus here, and about
 * 1.5 GB of encoder scratch at 90 bytes per byte of text. */
#define MAX_TEXT_BYTES (16u << 20)

/* Reads a whole text file. A device or a pipe (/dev/urandom, /dev/zero)
 * could run forever or fill memory, and a directory has no text: only a
 * regular file of at most MAX_TEXT_BYTES is read. */
static char *read_text_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open %s", path);
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        die("%s is not a regular file", path);
    }
    if (st.st_size > (off_t)MAX_TEXT_BYTES) {
        fclose(f);
        fprintf(stderr, "error: %s has %lld bytes, more than the %u MiB -m ppl reads\n", path,
                (long long)st.st_size, MAX_TEXT_BYTES >> 20);
        exit(1);
    }
    /* read at most the limit even if the file grows meanwhile */
    size_t len = (size_t)st.st_size;
    char *buf = malloc(len + 1);
    if (!buf) die("out of memory reading %s", path);
    size_t got = fread(buf, 1, len, f);
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        die("cannot read %s", path);
    }
    buf[got] = '\0';
    if (strlen(buf) != got) {
        free(buf);
        die("%s contains a NUL byte: not a text file", path);
    }
    *n = got;
    return buf;
}

/* -log p(target) from logits, in double: log-sum-exp minus the target's logit */
static double negative_log_likelihood(const float *logits, int n, int target) {
    double max = logits[0], sum = 0;
    for (int i = 1; i < n; i++) if (logits[i] > max) max = logits[i];
    for (int i = 0; i < n; i++) sum += exp(logits[i] - max);
    return max + log(sum) - logits[target];
}

/* Mean loss over non-overlapping windows of seq_len: window w runs tokens
 * w*T..w*T+T-1 from position 0 and predicts the token after each. */
/* Returns the exit status: 0, or 1 after one error line. */
static int perplexity(const Model *m, const Tokenizer *t, const Options *o) {
    size_t bytes;
    char *text = read_text_file(o->text_file, &bytes);
    int n;
    int *tokens = bytes ? encode_text(t, text, o->text_file, &n) : NULL;
    if (!tokens || n < 2) {
        fprintf(stderr, "error: %s is empty: no token to score\n", o->text_file);
        free(tokens);
        free(text);
        return 1;
    }
    int T = m->config.seq_len, V = m->config.vocab_size, windows = (n - 1 + T - 1) / T, show = isatty(2);
    RunState s;
    /* a window is at most T positions, and no more than the text has */
    if (run_state_init(&s, &m->config, n - 1 < T ? n - 1 : T)) die("%s", "out of memory for the run state");
    double total = 0;
    int rc = 0;
    for (int w = 0; w < windows && rc == 0; w++) {
        int start = w * T, len = n - 1 - start < T ? n - 1 - start : T;
        for (int i = 0; i < len && rc == 0; i += QKV_CHUNK) {
            int chunk = len - i < QKV_CHUNK ? len - i : QKV_CHUNK;
            float *logits = forward_logits(m, &s, tokens + start + i, chunk, i, NULL);
            for (int j = 0; j < chunk && rc == 0; j++) {
                if (check_logits(logits + (size_t)j * V, V, i + j)) rc = 1;
                else total += negative_log_likelihood(logits + (size_t)j * V, V, tokens[start + i + j + 1]);
            }
        }
        if (show) fprintf(stderr, "\rwindow %d/%d", w + 1, windows);
    }
    if (show) fprintf(stderr, "\n");
    if (rc == 0) {
        int predicted = n - 1;
        printf("tokens %d  bytes %zu\n", predicted, bytes);
        printf("nats/token %.6f  perplexity %.4f  bits/byte %.6f\n", total / predicted,
               exp(total / predicted), total / log(2.0) / bytes);
    }
    run_state_free(&s);
    free(tokens);
    free(text);
    return rc;
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    Options o;
    parse_options(&o, argc, argv);
#ifdef _OPENMP
    if (o.threads > 0) omp_set_num_threads(o.threads);
    o.bench.threads = omp_get_max_threads();
#else
    o.bench.threads = 1;
#endif
    Tokenizer t;
    if (!strcmp(o.mode, "tokenize") && !o.checkpoint && o.tokenizer) {
        load_tokenizer(&t, &o, NULL);
        tokenize(&t, &o);
        tokenizer_free(&t);
        return 0;
    }
    const char *path = o.checkpoint ? o.checkpoint : DEFAULT_CHECKPOINT;
    o.trace.model_path = path;
    Model m;
    char err[512];
    if (model_load(&m, path, err, sizeof err)) die("%s", err);
    /* Every mode reads the whole file: info and bench need no tokenizer, but
     * a checkpoint whose tokenizer is damaged is refused in all of them. */
    int text_mode = strcmp(o.mode, "info") != 0 && strcmp(o.mode, "bench") != 0;
    int has_tokenizer = text_mode || m.tokenizer_data || o.tokenizer;
    if (has_tokenizer) load_tokenizer(&t, &o, &m);
    int status = 0;
    if (!strcmp(o.mode, "info")) {
        info(&m, path, o.bench.ctx ? o.bench.ctx : m.config.seq_len);
    } else if (!strcmp(o.mode, "bench")) {
        o.bench.model_path = path;
        if (bench_run(&m, &o.bench, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            status = 1;
        }
    } else if (!strcmp(o.mode, "tokenize")) {
        tokenize(&t, &o);
    } else if (!strcmp(o.mode, "ppl")) {
        status = perplexity(&m, &t, &o);
    } else {
        status = generate(&m, &t, &o);
    }
    if (has_tokenizer) tokenizer_free(&t);
    model_free(&m);
    return status;
}
