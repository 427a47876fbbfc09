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
#include "stepper.h"
#include "bench.h"
#include "quantize.h"
#include "progress.h"
#include "threads.h"
#include "heads.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
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

/* The modes, as bits, so a flag can say which modes read it. */
enum { GENERATE = 1, TOKENIZE = 2, INFO = 4, PPL = 8, BENCH = 16, QUANTIZE = 32, HEADS = 64, ALL_MODES = 127 };
static const char *const MODE_NAMES[] = { "generate", "tokenize", "info", "ppl", "bench", "quantize", "heads" };
#define N_MODES ((int)(sizeof MODE_NAMES / sizeof MODE_NAMES[0]))

typedef struct {
    const char *checkpoint;  /* NULL: the default, or none for tokenize -z */
    const char *tokenizer;   /* -z */
    const char *prompt;      /* -i; "-" reads stdin */
    const char *prompt_file; /* --prompt-file */
    const char *mode_name;   /* -m */
    int mode;                /* one of the mode bits */
    const char *text_file;   /* -f, for ppl */
    const char *output;      /* -o, for quantize */
    int dtype;               /* --dtype, for quantize: a WeightType */
    int kv_type;             /* --kv-type: a KVType */
    int window, sinks;       /* --window W --sinks S (kv_window.h); window 0: off; sinks -1: not given */
    int recompute;           /* --recompute: ppl recomputes the window for every token */
    float temperature, topp;
    int topk, steps, threads, help;
    unsigned long long seed;
    TraceOptions trace;
    BenchOptions bench;
    HeadsOptions heads;      /* its --csv and --svg are bench's fields */
    const char *probe;       /* --probe: the prompt is a probe sequence (with --html) */
} Options;

/* What a flag's value is, so one parser can read and check every flag. */
typedef enum {
    ARG_SWITCH, /* no value: sets an int to 1 */
    ARG_INT,    /* an int in [lo, hi] */
    ARG_SEED,   /* an unsigned long long in [lo, hi] */
    ARG_FLOAT,  /* a finite float in [lo, hi], or (lo, hi] with lo_open */
    ARG_TEXT,   /* a string, kept as given */
    ARG_DTYPE,  /* f32, f16, q8 or q4: a WeightType */
    ARG_KVTYPE, /* f32, f16 or q8: a KVType */
    ARG_POS     /* A or A-B: two ints, first and last position */
} ArgKind;

/* One flag: the table below drives parsing, --help and the check that the
 * chosen mode uses every flag given. */
typedef struct {
    const char *name;
    ArgKind kind;
    const char *value;    /* the value's name in --help */
    double lo, hi;        /* numbers: the accepted range */
    int lo_open;          /* lo itself is refused */
    unsigned modes;       /* the modes that read it */
    size_t offset;        /* where the value goes in Options */
    const char *fallback; /* the default, as --help shows it */
    const char *help;     /* one line */
} Flag;

#define AT(field) offsetof(Options, field)
#define BIG 2147483647.0
/* Flags of the same modes stay together: --help prints a heading where the
 * modes change. */
static const Flag FLAGS[] = {
    { "-m", ARG_TEXT, "MODE", 0, 0, 0, ALL_MODES, AT(mode_name), "generate",
      "generate tokenize info ppl bench quantize heads" },
    { "--threads", ARG_INT, "N", 1, 1024, 0, ALL_MODES, AT(threads), "all or 1",
      "OpenMP threads (or OMP_NUM_THREADS)" },
    { "-h", ARG_SWITCH, NULL, 0, 0, 0, ALL_MODES, AT(help), NULL, "this help, on stdout" },
    { "--help", ARG_SWITCH, NULL, 0, 0, 0, ALL_MODES, AT(help), NULL, "the same" },
    { "-z", ARG_TEXT, "FILE", 0, 0, 0, GENERATE | TOKENIZE | PPL | QUANTIZE, AT(tokenizer), "embedded",
      "a llama2.c tokenizer.bin" },
    { "-i", ARG_TEXT, "PROMPT", 0, 0, 0, GENERATE | TOKENIZE, AT(prompt), "empty", "the prompt; - reads stdin" },
    { "--prompt-file", ARG_TEXT, "FILE", 0, 0, 0, GENERATE | TOKENIZE, AT(prompt_file), "none",
      "prompt from FILE (last newline dropped)" },
    { "-n", ARG_INT, "STEPS", 0, BIG, 0, GENERATE, AT(steps), "256", "positions, prompt included; 0 = context" },
    { "-t", ARG_FLOAT, "TEMP", 0, 3.4e38, 0, GENERATE, AT(temperature), "1.0", "temperature >= 0; 0 = greedy" },
    { "-p", ARG_FLOAT, "TOPP", 0, 1, 1, GENERATE, AT(topp), "0.9", "top-p in (0, 1]; 1 = off" },
    { "-k", ARG_INT, "TOPK", 0, BIG, 0, GENERATE, AT(topk), "0", "keep the k most likely tokens; 0 = off" },
    { "-s", ARG_SEED, "SEED", 0, 9223372036854775807.0, 0, GENERATE | HEADS, AT(seed), "clock; heads: 1",
      "random seed; 0 = from the clock (printed)" },
    { "--trace", ARG_SWITCH, NULL, 0, 0, 0, GENERATE, AT(trace.trace), "off", "text trace of each token, to stderr" },
    { "--trace-prompt", ARG_SWITCH, NULL, 0, 0, 0, GENERATE, AT(trace.trace_prompt), "off",
      "prompt positions too (implies --trace)" },
    { "--trace-level", ARG_TEXT, "L", 0, 0, 0, GENERATE, AT(trace.level_name), "see below",
      "full (tables) or summary (one line a head)" },
    { "--layer", ARG_INT, "L", 0, QKV_MAX_LAYERS, 0, GENERATE, AT(trace.layer), "all", "only this layer" },
    { "--head", ARG_INT, "H", 0, QKV_MAX_HEADS, 0, GENERATE, AT(trace.head), "all", "only this head" },
    { "--pos", ARG_POS, "A[-B]", 0, QKV_MAX_SEQ_LEN, 0, GENERATE, AT(trace.pos), "all",
      "only positions A..B (text and JSON)" },
    { "--top", ARG_INT, "N", 1, 1000, 0, GENERATE, AT(trace.top_logits), "10", "next tokens listed per step" },
    { "--trace-out", ARG_TEXT, "FILE", 0, 0, 0, GENERATE, AT(trace.out_path), "stderr",
      "text trace to FILE (implies --trace)" },
    { "--trace-json", ARG_TEXT, "FILE", 0, 0, 0, GENERATE, AT(trace.json_path), "none",
      "JSON Lines, one object per position" },
    { "--html", ARG_TEXT, "FILE", 0, 0, 0, GENERATE, AT(trace.html_path), "none", "the attention explorer page" },
    { "--compare", ARG_TEXT, "MODEL", 0, 0, 0, GENERATE, AT(trace.compare_path), "none",
      "with --html: MODEL side by side" },
    { "--step", ARG_SWITCH, NULL, 0, 0, 0, GENERATE, AT(trace.step), "off", "pause after each token (keys below)" },
    { "--probe", ARG_TEXT, "KIND", 0, 0, 0, GENERATE, AT(probe), "none",
      "induction: -m heads' repeat probe as prompt" },
    { "-f", ARG_TEXT, "FILE", 0, 0, 0, PPL, AT(text_file), "required", "the text file to score" },
    { "--ctx", ARG_INT, "N", 1, QKV_MAX_SEQ_LEN, 0, INFO | BENCH, AT(bench.ctx), "context",
      "FLOPs at N (info); 1..N, log >2048 (bench)" },
    { "--no-cache", ARG_SWITCH, NULL, 0, 0, 0, BENCH, AT(bench.no_cache), "off", "also time recomputing the prefix" },
    { "--repeats", ARG_INT, "N", 1, 1000, 0, BENCH, AT(bench.repeats), "3", "median over N runs" },
    { "--csv", ARG_TEXT, "FILE", 0, 0, 0, BENCH | HEADS, AT(bench.csv_path), "none",
      "times (bench); every head's scores (heads)" },
    { "--svg", ARG_TEXT, "FILE", 0, 0, 0, BENCH | HEADS, AT(bench.svg_path), "none",
      "latency chart (bench); heatmap (heads)" },
    { "--probes", ARG_INT, "N", 1, 1000, 0, HEADS, AT(heads.n_probes), "8", "probe sequences of each kind" },
    { "--json", ARG_TEXT, "FILE", 0, 0, 0, HEADS, AT(heads.json_path), "none", "the scores and probes as JSON" },
    { "-o", ARG_TEXT, "FILE", 0, 0, 0, QUANTIZE, AT(output), "required", "the file to write (GGUF if .gguf)" },
    { "--dtype", ARG_DTYPE, "T", 0, 0, 0, QUANTIZE, AT(dtype), "q8", "f32, f16, q8 (Q8_0) or q4 (Q4_0)" },
    { "--kv-type", ARG_KVTYPE, "T", 0, 0, 0, GENERATE | PPL | BENCH, AT(kv_type), "f32",
      "KV cache rows: f32, f16 or q8 (int8, a scale a row)" },
    { "--window", ARG_INT, "W", 1, QKV_MAX_SEQ_LEN, 0, GENERATE | PPL | BENCH, AT(window), "off",
      "keep W positions (S sinks, W-S recent); run past ctx" },
    { "--sinks", ARG_INT, "S", 0, QKV_MAX_SEQ_LEN, 0, GENERATE | PPL | BENCH, AT(sinks), "0",
      "with --window: the first S positions are never evicted" },
    { "--recompute", ARG_SWITCH, NULL, 0, 0, 0, PPL, AT(recompute), "off",
      "with --window: each token from scratch over it" },
};
#define N_FLAGS ((int)(sizeof FLAGS / sizeof FLAGS[0]))

/* "generate, tokenize" for the mode bits. */
static void print_modes(unsigned modes) {
    if (modes == ALL_MODES) { printf("all modes"); return; }
    for (int m = 0, first = 1; m < N_MODES; m++)
        if (modes & (1u << m)) { printf("%s%s", first ? "" : ", ", MODE_NAMES[m]); first = 0; }
}

static void print_help(void) {
    printf("usage: ./run [checkpoint] [options]\n"
           "  checkpoint: a qkv file or a llama2.c checkpoint; default " DEFAULT_CHECKPOINT "\n"
           "  (in the current directory, else beside the executable)\n");
    for (int i = 0; i < N_FLAGS; i++) {
        const Flag *f = &FLAGS[i];
        if (i == 0 || f->modes != FLAGS[i - 1].modes) {
            print_modes(f->modes);
            printf(":\n");
        }
        char left[32], line[160];
        snprintf(left, sizeof left, "%s%s%s", f->name, f->value ? " " : "", f->value ? f->value : "");
        snprintf(line, sizeof line, "  %-18s %s", left, f->help);
        if (f->fallback) printf("%-62s [%s]\n", line, f->fallback);
        else printf("%s\n", line);
    }
    printf("a flag the chosen mode does not read is an error, as is --layer, --head,\n"
           "  --pos, --top or --trace-level without a trace to narrow\n"
           "trace level: summary when the trace goes to a terminal and --layer and --head\n"
           "  do not both pick one head; full otherwise (a file or a pipe)\n"
           "step keys (--step; when stdin is not a terminal, the same letters one a line):\n"
           "%s"
           "examples:\n"
           "  ./run models/stories.bin -i \"once upon a time\" -t 0.8 -s 7        # generate\n"
           "  ./run models/grammar.bin -i \"the cat\" -t 0 -n 8 --trace --pos 3   # trace\n"
           "  ./run models/grammar.bin -i \"the cat\" --step                      # step\n"
           "  ./run models/stories.bin -m tokenize -i \"hello world\"\n"
           "  ./run models/stories.bin -m info --ctx 128\n"
           "  ./run models/grammar.bin -m ppl -f tests/data/grammar-sample.txt\n"
           "  ./run models/stories.bin -m bench --repeats 1 --svg bench.svg\n"
           "  ./run models/grammar.bin -m quantize -o grammar-q8.bin --dtype q8\n"
           "  ./run models/induction.bin -m heads --svg heads.svg\n", STEP_KEYS_HELP);
    exit(0);
}

static void usage(const char *why) {
    fprintf(stderr, "error: %s\n", why);
    fprintf(stderr, "usage: ./run [checkpoint] [options]   (./run --help lists every flag)\n");
    exit(2);
}

static void usage_bad_value(const char *flag, const char *value, const char *expected) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s %s: expected %s", flag, value, expected);
    usage(msg);
}

static long long parse_integer(const Flag *f, const char *s, const char **end) {
    char *stop;
    errno = 0;
    long long v = strtoll(s, &stop, 10);
    int bad = errno || stop == s || (end ? 0 : *stop != '\0') || v < f->lo || v > f->hi;
    if (bad) {
        char expected[96];
        snprintf(expected, sizeof expected, "an integer in [%.0f, %.0f]", f->lo, f->hi);
        usage_bad_value(f->name, s, expected);
    }
    if (end) *end = stop;
    return v;
}

/* --pos A or A-B: the positions the text and JSON trace show. */
static void parse_positions(const Flag *f, const char *s, int *first_last) {
    const char *rest;
    first_last[0] = first_last[1] = (int)parse_integer(f, s, &rest);
    if (*rest == '-') first_last[1] = (int)parse_integer(f, rest + 1, NULL);
    if (*rest && *rest != '-') usage_bad_value(f->name, s, "a position A or a range A-B");
    if (first_last[1] < first_last[0]) usage_bad_value(f->name, s, "a range A-B with A <= B");
}

/* Reads one flag's value into its place in o. */
static void set_flag(Options *o, const Flag *f, const char *v) {
    char *dst = (char *)o + f->offset;
    if (f->kind == ARG_SWITCH) *(int *)dst = 1;
    else if (f->kind == ARG_TEXT) *(const char **)dst = v;
    else if (f->kind == ARG_INT) *(int *)dst = (int)parse_integer(f, v, NULL);
    else if (f->kind == ARG_SEED) *(unsigned long long *)dst = (unsigned long long)parse_integer(f, v, NULL);
    else if (f->kind == ARG_POS) parse_positions(f, v, (int *)dst);
    else if (f->kind == ARG_DTYPE) {
        *(int *)dst = weight_type_parse(v);
        if (*(int *)dst < 0) usage_bad_value(f->name, v, "f32, f16, q8 or q4");
    } else if (f->kind == ARG_KVTYPE) {
        *(int *)dst = kv_type_parse(v);
        if (*(int *)dst < 0) usage_bad_value(f->name, v, "f32, f16 or q8");
    } else {
        char *end;
        errno = 0;
        float x = strtof(v, &end);
        if (errno || end == v || *end || !isfinite(x) || x < f->lo || x > f->hi || (f->lo_open && x == f->lo)) {
            char expected[96];
            snprintf(expected, sizeof expected, "a number in %s%g, %g]", f->lo_open ? "(" : "[", f->lo, f->hi);
            if (f->hi >= 1e30) snprintf(expected, sizeof expected, "a number >= %g", f->lo);
            usage_bad_value(f->name, v, expected);
        }
        *(float *)dst = x;
    }
}

static const Flag *find_flag(const char *name) {
    for (int i = 0; i < N_FLAGS; i++)
        if (!strcmp(FLAGS[i].name, name)) return &FLAGS[i];
    return NULL;
}

/* A flag the chosen mode does not read is a usage error: it would be
 * silently ignored, and the user believes it did something. */
static void check_modes(const Options *o, const int *given) {
    for (int i = 0; i < N_FLAGS; i++) {
        if (!given[i] || (FLAGS[i].modes & o->mode)) continue;
        char msg[256];
        snprintf(msg, sizeof msg, "%s is not used by -m %s", FLAGS[i].name, o->mode_name);
        usage(msg);
    }
}

static void parse_options(Options *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->temperature = 1.0f;
    o->topp = 0.9f;
    o->steps = 256;
    o->mode_name = "generate";
    o->trace.layer = o->trace.head = -1;
    o->trace.pos[1] = QKV_MAX_SEQ_LEN; /* every position */
    o->trace.top_logits = 10;
    o->bench.repeats = 3;
    o->heads.n_probes = HEADS_DEFAULT_PROBES;
    o->dtype = WEIGHT_Q8_0;
    o->sinks = -1;
    int given[N_FLAGS] = { 0 };
    int i = 1;
    if (argc > 1 && argv[1][0] != '-') o->checkpoint = argv[i++];
    for (; i < argc; i++) {
        const char *name = argv[i];
        char msg[256];
        if (name[0] != '-' || !name[1]) {
            snprintf(msg, sizeof msg, "unexpected argument '%s'", name);
            usage(msg);
        }
        const Flag *f = find_flag(name);
        if (!f) {
            snprintf(msg, sizeof msg, "unknown flag '%s'", name);
            usage(msg);
        }
        if (f->kind != ARG_SWITCH && i + 1 >= argc) {
            snprintf(msg, sizeof msg, "%s needs a value (%s)", name, f->value);
            usage(msg);
        }
        set_flag(o, f, f->kind == ARG_SWITCH ? NULL : argv[++i]);
        given[f - FLAGS] = 1;
    }
    if (o->help) print_help();
    for (int m = 0; m < N_MODES; m++)
        if (!strcmp(o->mode_name, MODE_NAMES[m])) o->mode = 1 << m;
    if (!o->mode) usage_bad_value("-m", o->mode_name, "generate, tokenize, info, ppl, bench, quantize or heads");
    check_modes(o, given);
    if (o->mode == QUANTIZE && !o->output) usage("-m quantize needs -o FILE");
    if (o->mode == PPL && !o->text_file) usage("-m ppl needs -f FILE");
    if (o->probe && strcmp(o->probe, "induction")) usage_bad_value("--probe", o->probe, "induction");
    if (o->probe && (o->prompt || o->prompt_file)) usage("--probe is the prompt: it goes without -i and --prompt-file");
    if (o->trace.compare_path && !o->trace.html_path) usage("--compare goes with --html");
    /* the flags that narrow a trace do nothing without one */
    const TraceOptions *tr = &o->trace;
    int traced = tr->trace || tr->trace_prompt || tr->out_path || tr->json_path || tr->html_path || tr->step;
    const char *narrowing[] = { "--layer", "--head", "--pos", "--top", "--trace-level" };
    for (size_t k = 0; k < sizeof narrowing / sizeof narrowing[0] && !traced; k++)
        if (given[find_flag(narrowing[k]) - FLAGS]) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s needs a trace: --trace, --trace-json, --html or --step", narrowing[k]);
            usage(msg);
        }
    if (o->prompt && o->prompt_file) usage("-i and --prompt-file both give the prompt: choose one");
    int prompt_from_stdin = (o->prompt && !strcmp(o->prompt, "-")) || (o->prompt_file && !strcmp(o->prompt_file, "-"));
    if (o->trace.step && prompt_from_stdin)
        usage("--step reads its keys from stdin, so the prompt cannot come from stdin too");
    if (o->trace.level_name && trace_level_parse(o->trace.level_name) < 0)
        usage_bad_value("--trace-level", o->trace.level_name, "full or summary");
    if (o->sinks >= 0 && !o->window) usage("--sinks needs --window W");
    if (o->recompute && !o->window) usage("--recompute needs --window W");
    if (o->sinks < 0) o->sinks = 0;
    if (o->bench.no_cache && o->window)
        usage("--no-cache recomputes whole prefixes, which cannot pass the context: not with --window");
}

/* ------------------------------------------------------------------------ */
/* Small utilities                                                           */

static void die(const char *fmt, const char *detail) {
    fprintf(stderr, "error: ");
    fprintf(stderr, fmt, detail);
    fprintf(stderr, "\n");
    exit(1);
}

/* --window and --sinks against the model: a usage error, like any flag. */
static void check_window(const Options *o, const Config *c) {
    char msg[256];
    if (kv_window_check(o->window, o->sinks, c->seq_len, msg, sizeof msg)) usage(msg);
    if (o->window && c->arch != ARCH_LLAMA) {
        /* a window slides by RoPE's relative turns; a learned position table
         * ends at the context, so past it there is no position to give */
        snprintf(msg, sizeof msg, "--window needs rotary positions (RoPE): this GPT-2-style model's learned "
                                  "positions end at its context of %d", c->seq_len);
        usage(msg);
    }
}

/* A run state for the run's positions: capacity of them, or with --window
 * W positions however long the run (positions past it evict). */
static void run_state_for(RunState *s, const Config *c, int capacity, const Options *o) {
    if (o->window) capacity = o->window;
    if (run_state_init_kv(s, c, capacity, (KVType)o->kv_type) || kv_window_init(&s->kv_cache, o->sinks))
        die("%s", "out of memory for the run state");
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

/* Defined with ppl below; the prompt file is read the same way. */
static char *read_text_file(const char *path, size_t *n);
static char *read_stream(FILE *f, const char *path, size_t *n);

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

/* Exits with one error line unless text is valid UTF-8 made of characters the
 * vocabulary has (a character-level model has no byte fallback). */
static void check_text(const Tokenizer *t, const char *text, const char *what) {
    size_t bad = utf8_invalid_at(text);
    char msg[160];
    if (bad) {
        snprintf(msg, sizeof msg, "%%s is not valid UTF-8 (bad byte at offset %zu)", bad - 1);
        die(msg, what);
    }
    if ((bad = tokenizer_unknown_at(t, text))) {
        snprintf(msg, sizeof msg, "%%s has a character (at byte %zu) that is not in this character-level "
                                  "model's vocabulary", bad - 1);
        die(msg, what);
    }
}

/* Encodes a whole text (a prompt or a file); exits on bad input. The
 * sequence starts with start, the model's start token (Config.start_id), for
 * llama2.c's kind (BOS) and, for the other kinds, only when the text is
 * empty; *started says whether it does. */
static int *encode_text(const Tokenizer *t, int start, const char *text, const char *what, int *n, int *started) {
    check_text(t, text, what);
    int *tokens = malloc((strlen(text) + 3) * sizeof(int));
    if (!tokens || (*n = tokenizer_encode(t, text, 0, 0, tokens + 1)) < 0) die("out of memory encoding %s", what);
    *started = t->kind == TOKENIZER_LLAMA || *n == 0;
    if (*started && start < 0) /* only a character vocabulary lacks one (checkpoint.h: start_id_of) */
        die("%s", "an empty prompt starts from \"\\n\", which this character vocabulary lacks: give one with -i");
    if (*started) tokens[0] = start, ++*n;
    else memmove(tokens, tokens + 1, (size_t)*n * sizeof(int));
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

/* --probe induction: the prompt is -m heads' first repeat probe (BOS, a
 * block of random tokens, the block again) for the same seed, so the
 * explorer shows the induction stripe. */
static int *probe_prompt(const Config *c, const Options *o, int *n) {
    int block_len = heads_block_length(c);
    if (!block_len) die("%s", "--probe induction: the context or vocabulary is too small for a probe");
    if (c->start_id < 0) die("%s", "--probe induction: this character vocabulary has no \"\\n\" to start the probe from");
    int *tokens = malloc((2 * (size_t)block_len + 1) * sizeof(int));
    if (!tokens) die("%s", "out of memory");
    uint64_t rng = heads_repeat_rng(o->seed ? o->seed : HEADS_DEFAULT_SEED);
    heads_repeat_probe(tokens, c, block_len, &rng);
    *n = 2 * block_len + 1;
    return tokens;
}

/* The threads of generate and ppl: measured step by step (threads.h),
 * unless --threads or OMP_NUM_THREADS sets them. Called before any step. */
static ThreadChoice choose_threads(const Options *o) {
#ifdef _OPENMP
    int most = omp_get_max_threads();
#else
    int most = 1;
#endif
    return thread_choice(most, o->threads > 0 || getenv("OMP_NUM_THREADS") != NULL);
}

/* Returns the exit status: 0, or 1 after one error line (bad logits). */
static int generate(const Model *m, const Tokenizer *t, const Options *o) {
    const Config *c = &m->config;
    ThreadChoice threads = choose_threads(o);
    int n_prompt, started = 1;
    int *prompt = o->probe ? probe_prompt(c, o, &n_prompt)
                           : encode_text(t, c->start_id, o->prompt ? o->prompt : "", "the prompt", &n_prompt, &started);
    if (n_prompt > c->seq_len && !o->window) { /* a window streams a longer prompt */
        fprintf(stderr, "error: the prompt is %d tokens, longer than the model's context of %d\n",
                n_prompt, c->seq_len);
        free(prompt);
        return 1;
    }
    int steps = o->steps ? o->steps : c->seq_len; /* -n 0: the whole context, as in llama2.c */
    if (steps > c->seq_len && !o->window) { /* a window runs on past the context */
        fprintf(stderr, "warning: -n %d is beyond the context; clamped to %d\n", steps, c->seq_len);
        steps = c->seq_len;
    }
    if (steps < n_prompt) {
        fprintf(stderr, "warning: the prompt is %d tokens, more than -n %d: it runs whole, then one token "
                        "is generated\n", n_prompt, steps);
        steps = n_prompt;
    }

    RunState s;
    Sampler sampler;
    char err[256];
    unsigned long long seed = o->seed ? o->seed : clock_seed();
    /* the KV cache holds the positions this run visits, not the whole
     * context the header claims */
    run_state_for(&s, c, steps, o);
    if (sampler_init(&sampler, c->vocab_size, o->temperature, o->topp, o->topk, seed))
        die("%s", "out of memory for the run state");
    Tracer *tr = tracer_open(&o->trace, m, t, o->temperature, o->topp, o->topk, err, sizeof err);
    if (!tr && err[0]) die("%s", err);

    double start = now_seconds();
    float *logits = run_prompt(m, &s, tr, prompt, n_prompt);
    int rc = check_logits(logits, c->vocab_size, n_prompt - 1) ? 1 : 0;
    TextPrinter out = { { 0 }, 0 };
    /* the start token is not the user's text, except a character model's "\n" (as nanoGPT prints it) */
    int first_shown = started && t->kind != TOKENIZER_CHAR ? 1 : 0;
    for (int i = first_shown; i < n_prompt && rc == 0; i++) print_token(&out, t, i ? prompt[i - 1] : -1, prompt[i]);
    double prompt_done = now_seconds();

    /* the sampler works on a copy, so the trace sees the logits themselves */
    float *probs = malloc((size_t)c->vocab_size * sizeof(float));
    if (!probs) die("%s", "out of memory");
    int token = prompt[n_prompt - 1], generated = 0;
    const ForwardObserver *obs = tracer_observer(tr);
    const char *stopped_by = "the -n limit";
    double waited = 0;
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
        double pause_start = now_seconds();
        int quit = tracer_pause(tr);
        waited += now_seconds() - pause_start; /* the user's time, not the engine's */
        if (quit) {
            stopped_by = "quit";
            break;
        }
        if (pos + 1 < steps) {
            thread_choice_apply(&threads);
            double step_start = now_seconds();
            logits = forward(m, &s, token, pos + 1, obs);
            thread_choice_record(&threads, now_seconds() - step_start, 1);
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
    if (rc == 0) {
        double computing = end - prompt_done - waited;
        fprintf(stderr, "achieved tok/s: %.2f (%d generated, stopped by %s; prompt: %d token%s at %.2f tok/s; seed %llu",
                generated > 1 ? (generated - 1) / computing : 0.0, generated, stopped_by, n_prompt,
                n_prompt == 1 ? "" : "s", n_prompt / (prompt_done - start + 1e-9), seed);
        if (o->trace.step) fprintf(stderr, "; computing only, %.1f s waiting for keys left out", waited);
        fprintf(stderr, ")\n");
    }
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

/* start: the model's start token (Config.start_id). */
static void tokenize(const Tokenizer *t, int start, const Options *o) {
    int n, started;
    int *tokens = encode_text(t, start, o->prompt ? o->prompt : "", "the prompt", &n, &started);
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
    size_t mlp = (size_t)c->n_layers * mlp_matrices(c) * (size_t)c->hidden_dim * c->dim;
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
    if (gpt2) printf("  positions       %zu\n  biases          %zu (linear layers and LayerNorms)\n", positions, biases);
    printf("weight bytes      %zu (%s matrices, float32 norms)\n", m->weight_bytes, weight_type_name((WeightType)m->config.weight_type));
    printf("kernels           %s (the best this CPU has; QKV_ISA caps it)\n", isa_name(isa_available()));
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

/* The largest text qkv reads (-m ppl, a prompt): 4x the largest corpus here, and about
 * 1.5 GB of encoder scratch at 90 bytes per byte of text. */
#define MAX_TEXT_BYTES (16u << 20)

/* Reads f to its end into a NUL-terminated buffer: at most MAX_TEXT_BYTES
 * (the limit is checked as it reads, so a stream that never ends is cut
 * off, with an error), and no NUL byte inside. */
static char *read_stream(FILE *f, const char *path, size_t *n) {
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
        if (len == cap) {
            if (cap >= MAX_TEXT_BYTES) {
                free(buf);
                fprintf(stderr, "error: %s is longer than the %u MiB qkv reads as a text\n", path,
                        MAX_TEXT_BYTES >> 20);
                exit(1);
            }
            cap *= 2;
            char *grown = realloc(buf, cap + 1);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    if (!buf) die("out of memory reading %s", path);
    if (ferror(f)) {
        free(buf);
        die("cannot read %s", path);
    }
    buf[len] = '\0';
    if (strlen(buf) != len) {
        free(buf);
        die("%s contains a NUL byte: not a text file", path);
    }
    *n = len;
    return buf;
}

/* Reads a whole text file. A device (/dev/urandom, /dev/zero) could run
 * forever or fill memory, and a directory has no text: only a regular file
 * of at most MAX_TEXT_BYTES is read. */
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
        fprintf(stderr, "error: %s has %lld bytes, more than the %u MiB qkv reads as a text\n", path,
                (long long)st.st_size, MAX_TEXT_BYTES >> 20);
        exit(1);
    }
    char *text = read_stream(f, path, n);
    fclose(f);
    return text;
}

/* -log p(target) from logits, in double: log-sum-exp minus the target's logit */
static double negative_log_likelihood(const float *logits, int n, int target) {
    double max = logits[0], sum = 0;
    for (int i = 1; i < n; i++) if (logits[i] > max) max = logits[i];
    for (int i = 0; i < n; i++) sum += exp(logits[i] - max);
    return max + log(sum) - logits[target];
}

/* A text for -m ppl may hold several documents, in TinyStories' layout: a
 * line that reads <|endoftext|> between two stories. */
#define DOCUMENT_SEPARATOR "<|endoftext|>"

/* The end of the document that starts at text: the start of its separator
 * line, or the end of the text. *next is where the next document starts. */
static const char *document_end(const char *text, const char **next) {
    size_t sep = strlen(DOCUMENT_SEPARATOR);
    for (const char *line = text; *line; ) {
        const char *eol = strchr(line, '\n');
        const char *stop = eol ? eol : line + strlen(line);
        const char *end = line + sep;
        if (stop - line >= (ptrdiff_t)sep && memcmp(line, DOCUMENT_SEPARATOR, sep) == 0) {
            while (end < stop && isspace((unsigned char)*end)) end++;
            if (end == stop) {
                *next = eol ? eol + 1 : stop;
                return line;
            }
        }
        line = eol ? eol + 1 : stop;
    }
    *next = text + strlen(text);
    return *next;
}

/* The tokens of every document of text, each BOS + its tokens (without the
 * line break before a separator line), one after another:
 * the BOS that starts a document is what the model predicts at the end of
 * the one before, so the separators' bytes are scored too. starts[d] is the
 * index of document d's BOS, starts[*n_docs] = *n. A model without BOS (a
 * character or GPT-2 vocabulary) reads the whole text as one document. */
static int *encode_documents(const Tokenizer *t, int start, char *text, const char *what, int *n, int **starts,
                             int *n_docs) {
    size_t len = strlen(text), max_docs = len / (sizeof DOCUMENT_SEPARATOR - 1) + 2;
    *starts = malloc((max_docs + 1) * sizeof(int));
    if (!*starts) die("out of memory encoding %s", what);
    if (t->kind != TOKENIZER_LLAMA) {
        int started;
        int *tokens = encode_text(t, start, text, what, n, &started);
        (*starts)[0] = 0, (*starts)[1] = *n, *n_docs = 1;
        return tokens;
    }
    int *tokens = malloc((len + 3 * max_docs) * sizeof(int));
    if (!tokens) die("out of memory encoding %s", what);
    check_text(t, text, what);
    *n = *n_docs = 0;
    for (char *doc = text; *doc; ) {
        const char *next;
        char *end = (char *)document_end(doc, &next);
        int at_separator = end != next;
        if (at_separator && end > doc && end[-1] == '\n') end--;
        if (at_separator && end > doc && end[-1] == '\r') end--;
        if (end > doc) {
            char saved = *end;
            *end = '\0';
            int k = tokenizer_encode(t, doc, 0, 0, tokens + *n + 1);
            *end = saved;
            if (k < 0) die("out of memory encoding %s", what);
            tokens[*n] = start;
            (*starts)[(*n_docs)++] = *n;
            *n += k + 1;
        }
        doc = (char *)next;
    }
    (*starts)[*n_docs] = *n;
    return tokens;
}

/* What -m ppl carries through its scoring loops. */
typedef struct {
    const Model *m;
    RunState *s;
    const int *tokens;  /* the text's n tokens */
    int n;
    double total;       /* the sum of -log p(next token) so far, in nats */
    Progress progress;
    ThreadChoice threads;
} Scoring;

/* Adds -log p(next token) for the rows of logits that predict the tokens
 * after at..at+rows-1. Returns 0, or -1 after one error line (bad logits). */
static int add_losses(Scoring *sc, const float *logits, int rows, int at) {
    int V = sc->m->config.vocab_size;
    for (int j = 0; j < rows; j++) {
        if (check_logits(logits + (size_t)j * V, V, at + j)) return -1;
        sc->total += negative_log_likelihood(logits + (size_t)j * V, V, sc->tokens[at + j + 1]);
    }
    return 0;
}

static void show_scoring(Scoring *sc, int done) {
    char what[48];
    snprintf(what, sizeof what, "token %d/%d", done, sc->n - 1);
    progress_update(&sc->progress, done, sc->n - 1, what);
}

/* Tokens first+from..first+to-1 of the text at positions from..to-1 of one
 * stream, as chunks that never pass the cache's capacity (a window evicts
 * one position a token beyond it). */
static int score_stream(Scoring *sc, int first, int from, int to) {
    for (int pos = from; pos < to;) {
        int chunk = to - pos < QKV_CHUNK ? to - pos : QKV_CHUNK, room = sc->s->kv_cache.capacity - pos;
        if (chunk > room) chunk = room > 1 ? room : 1;
        thread_choice_apply(&sc->threads);
        double start = now_seconds();
        float *logits = forward_logits(sc->m, sc->s, sc->tokens + first + pos, chunk, pos, NULL);
        thread_choice_record(&sc->threads, now_seconds() - start, chunk);
        if (add_losses(sc, logits, chunk, first + pos)) return -1;
        pos += chunk;
        show_scoring(sc, first + pos);
    }
    return 0;
}

/* Without --window, each document from BOS at position 0, restarting when
 * full: window w of a document runs its tokens w*T..w*T+T-1 from position 0
 * and predicts the token after each (the last window of a document predicts
 * the next document's BOS). A text without separators is one document. */
static int score_restarting(Scoring *sc, const int *starts, int n_docs) {
    int T = sc->m->config.seq_len;
    for (int d = 0; d < n_docs; d++) {
        int end = starts[d + 1] < sc->n - 1 ? starts[d + 1] : sc->n - 1; /* the last token predicts nothing */
        for (int start = starts[d]; start < end; start += T)
            if (score_stream(sc, start, 0, end - start < T ? end - start : T)) return -1;
    }
    return 0;
}

/* --window W --recompute: each position p past the window runs from scratch
 * over what a sliding cache would hold, the S sinks and the W-S tokens up
 * to p, at positions 0..W-1 (StreamingLLM's "sliding window with
 * re-computation", the quality reference); positions inside the window are
 * one stream. */
static int score_recomputing(Scoring *sc, int W, int S) {
    int V = sc->m->config.vocab_size, n = sc->n, first = n - 1 < W ? n - 1 : W;
    if (score_stream(sc, 0, 0, first)) return -1;
    int *view = malloc((size_t)W * sizeof(int));
    if (!view) die("%s", "out of memory");
    int rc = 0;
    for (int p = first; p < n - 1 && rc == 0; p++) {
        memcpy(view, sc->tokens, (size_t)S * sizeof(int));
        memcpy(view + S, sc->tokens + p - (W - S) + 1, (size_t)(W - S) * sizeof(int));
        float *logits = forward_tokens(sc->m, sc->s, view, W, 0, NULL);
        if (check_logits(logits, V, p)) rc = -1;
        else sc->total += negative_log_likelihood(logits, V, sc->tokens[p + 1]);
        show_scoring(sc, p + 1);
    }
    free(view);
    return rc;
}

/* Mean loss of predicting each token of the file from the ones before it:
 * each document restarting every context (the default), the whole text
 * through one stream with a sliding window (--window, --sinks), or
 * recomputing each window (--recompute). Returns the exit status: 0, or 1
 * after one error line. */
static int perplexity(const Model *m, const Tokenizer *t, const Options *o) {
    size_t bytes;
    char *text = read_text_file(o->text_file, &bytes);
    int n = 0, n_docs = 0, *starts = NULL;
    int *tokens = bytes ? encode_documents(t, m->config.start_id, text, o->text_file, &n, &starts, &n_docs) : NULL;
    if (!tokens || n < 2) {
        fprintf(stderr, "error: %s is empty: no token to score\n", o->text_file);
        free(tokens);
        free(starts);
        free(text);
        return 1;
    }
    int T = m->config.seq_len;
    RunState s;
    /* a window is at most T positions, and no more than the text has */
    run_state_for(&s, &m->config, n - 1 < T ? n - 1 : T, o);
    Scoring sc = { m, &s, tokens, n, 0, progress_start("ppl"), choose_threads(o) };
    double start = now_seconds();
    int rc;
    if (o->recompute) rc = score_recomputing(&sc, o->window, o->sinks);
    else if (o->window) rc = score_stream(&sc, 0, 0, n - 1);
    else rc = score_restarting(&sc, starts, n_docs);
    double seconds = now_seconds() - start;
    progress_end(&sc.progress);
    if (rc == 0) {
        int predicted = n - 1;
        double total = sc.total;
        printf("tokens %d  bytes %zu  documents %d  %.1f tok/s\n", predicted, bytes, n_docs,
               predicted / (seconds + 1e-9));
        printf("nats/token %.6f  perplexity %.4f  bits/byte %.6f\n", total / predicted,
               exp(total / predicted), total / log(2.0) / bytes);
    }
    run_state_free(&s);
    free(tokens);
    free(starts);
    free(text);
    return rc ? 1 : 0;
}

/* ------------------------------------------------------------------------ */

/* The default checkpoint: models/stories.bin from the current directory,
 * else beside the executable (/proc/self/exe), so ./run works from anywhere
 * in a checkout and an installed copy finds its models. */
static const char *default_checkpoint(char *buf, size_t cap) {
    if (access(DEFAULT_CHECKPOINT, R_OK) == 0) return DEFAULT_CHECKPOINT;
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0) return DEFAULT_CHECKPOINT;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash || (size_t)(slash - buf) + sizeof "/" DEFAULT_CHECKPOINT > cap) return DEFAULT_CHECKPOINT;
    strcpy(slash + 1, DEFAULT_CHECKPOINT);
    return access(buf, R_OK) == 0 ? buf : DEFAULT_CHECKPOINT;
}

/* The prompt: -i TEXT, -i - (stdin) or --prompt-file FILE (- is stdin too).
 * One final newline of a file is dropped: editors add it, and a prompt
 * rarely means it. The caller frees *owned. */
static const char *read_prompt(const Options *o, char **owned) {
    *owned = NULL;
    const char *path = o->prompt_file;
    if (o->prompt && !strcmp(o->prompt, "-")) path = "-";
    if (!path) return o->prompt ? o->prompt : "";
    size_t n;
    *owned = strcmp(path, "-") ? read_text_file(path, &n) : read_stream(stdin, "stdin", &n);
    if (n > 0 && (*owned)[n - 1] == '\n') (*owned)[--n] = '\0';
    if (n > 0 && (*owned)[n - 1] == '\r') (*owned)[--n] = '\0';
    return *owned;
}

int main(int argc, char **argv) {
    Options o;
    parse_options(&o, argc, argv);
#ifdef _OPENMP
    if (o.threads > 0) omp_set_num_threads(o.threads);
    o.bench.threads = omp_get_max_threads();
#else
    o.bench.threads = 1;
#endif
    o.trace.window = o.window; /* the trace marks the sinks and the window */
    o.trace.sinks = o.sinks;
    char *owned_prompt = NULL;
    if (o.mode & (GENERATE | TOKENIZE)) o.prompt = read_prompt(&o, &owned_prompt);
    Tokenizer t;
    if (o.mode == TOKENIZE && !o.checkpoint && o.tokenizer) {
        load_tokenizer(&t, &o, NULL);
        tokenize(&t, t.bos_id, &o); /* a tokenizer.bin alone is llama2.c's kind: BOS starts */
        tokenizer_free(&t);
        free(owned_prompt);
        return 0;
    }
    char exe_path[4096];
    const char *path = o.checkpoint ? o.checkpoint : default_checkpoint(exe_path, sizeof exe_path);
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
    int status = 0;
    if (o.mode == INFO) {
        int ctx = o.bench.ctx ? o.bench.ctx : m.config.seq_len;
        if (ctx > m.config.seq_len) { /* as bench does */
            fprintf(stderr, "warning: --ctx %d is beyond the context; clamped to %d\n", ctx, m.config.seq_len);
            ctx = m.config.seq_len;
        }
        info(&m, path, ctx);
    } else if (o.mode == BENCH) {
        o.bench.model_path = path;
        o.bench.kv_type = o.kv_type;
        o.bench.window = o.window;
        o.bench.sinks = o.sinks;
        if (bench_run(&m, &o.bench, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            status = 1;
        }
    } else if (o.mode == HEADS) {
        o.heads.seed = o.seed ? o.seed : HEADS_DEFAULT_SEED;
        o.heads.csv_path = o.bench.csv_path;
        o.heads.svg_path = o.bench.svg_path;
        o.heads.model_path = path;
        if (heads_run(&m, &o.heads, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            status = 1;
        }
    } else if (o.mode == TOKENIZE) {
        tokenize(&t, m.config.start_id, &o);
    } else if (o.mode == QUANTIZE) {
        if (quantize_checkpoint(&m, &t, (WeightType)o.dtype, o.output, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            status = 1;
        }
    } else if (o.mode == PPL) {
        status = perplexity(&m, &t, &o);
    } else {
        status = generate(&m, &t, &o);
    }
    if (has_tokenizer) tokenizer_free(&t);
    model_free(&m);
    free(owned_prompt);
    return status;
}
