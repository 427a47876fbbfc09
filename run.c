/* run.c — the qkv command line: load a checkpoint, then generate text,
 * tokenize or describe the model; the other modes (score a file, benchmark,
 * quantize, the heads' roles) have files of their own: ppl.c, bench.c,
 * quantize.c, heads.c. What the modes share is in cli.c.
 *
 *   ./run [checkpoint] [-t TEMP] [-p TOPP] [-k TOPK] [-s SEED] [-n STEPS]
 *         [-i PROMPT] [-z TOKENIZER] [-m MODE] ...
 *
 * The flags are llama2.c's, so its checkpoints and habits work unchanged.
 */
#define _XOPEN_SOURCE 700 /* realpath (POSIX's XSI part) */
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
#include "output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <limits.h>
#include <sys/stat.h>
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
    const char *output;      /* -o, for quantize */
    int dtype;               /* --dtype, for quantize: a WeightType */
    int kv_type;             /* --kv-type: a KVType */
    int window, sinks;       /* --window W --sinks S (kv_window.h); window 0: off; sinks -1: not given */
    float temperature, topp;
    int topk, steps, threads, help;
    unsigned long long seed;
    TraceOptions trace;
    BenchOptions bench;
    HeadsOptions heads;      /* its --csv and --svg are bench's fields */
    PplOptions ppl;          /* its --kv-type, --window, --sinks and --threads are the fields above */
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
    { "-f", ARG_TEXT, "FILE", 0, 0, 0, PPL, AT(ppl.text_file), "required", "the text file to score" },
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
    { "--recompute", ARG_SWITCH, NULL, 0, 0, 0, PPL, AT(ppl.recompute), "off",
      "with --window: each token from scratch over it" },
};
#define N_FLAGS ((int)(sizeof FLAGS / sizeof FLAGS[0]))

/* "generate, tokenize" for the mode bits. */
static void print_modes(unsigned modes) {
    if (modes == ALL_MODES) { printf("all modes"); return; }
    for (int m = 0, first = 1; m < N_MODES; m++)
        if (modes & (1u << m)) { printf("%s%s", first ? "" : ", ", MODE_NAMES[m]); first = 0; }
}

/* The exit status once what was printed has reached stdout's file: a full
 * disk or a closed pipe end is an error line, not a silent loss. */
static int output_status(int status) {
    int failed = fflush(stdout) != 0 ? errno : 0;
    if (!failed && !ferror(stdout)) return status;
    fprintf(stderr, "error: cannot write the output to stdout: %s\n", failed ? strerror(failed) : "a write failed");
    return 1;
}

static void print_help(void) {
    printf("usage: ./run [checkpoint] [options]\n"
           "  checkpoint: a qkv, GGUF or llama2.c checkpoint; default " DEFAULT_CHECKPOINT "\n"
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
    exit(output_status(0));
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
    else if (f->kind == ARG_TEXT && !*v && f->value && (!strcmp(f->value, "FILE") || !strcmp(f->value, "MODEL")))
        usage_bad_value(f->name, "''", "a file name");
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
        /* ERANGE with a finite x is an underflow (1e-40): a number, rounded */
        if ((errno && errno != ERANGE) || end == v || *end || !isfinite(x) || x < f->lo || x > f->hi ||
            (f->lo_open && x == f->lo)) {
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

/* The defaults, llama2.c's where it has them */
static void default_options(Options *o) {
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
}

/* Each flag in argv (after the checkpoint, if first) into o; given[i] = 1
 * for each FLAGS[i] seen. A usage error exits. */
static void read_flags(Options *o, int argc, char **argv, int *given) {
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
}

/* Step mode's view is on stderr and shows every position; its text trace
 * goes only to --trace-out: without it, the flags of the text trace would
 * do nothing, and --pos (text and JSON) too without --trace-json */
static void check_step_flags(const TraceOptions *tr, const int *given) {
    if (!tr->step || tr->out_path) return;
    const char *text_only[] = { "--trace", "--trace-prompt", "--trace-level", "--pos" };
    for (size_t k = 0; k < sizeof text_only / sizeof text_only[0]; k++) {
        if (!given[find_flag(text_only[k]) - FLAGS] || (k == 3 && tr->json_path)) continue;
        char msg[200];
        snprintf(msg, sizeof msg, "%s does nothing with --step alone: step mode writes its text trace only "
                                  "to --trace-out FILE%s", text_only[k], k == 3 ? " (and JSON to --trace-json)" : "");
        usage(msg);
    }
}

/* The flags that narrow a trace do nothing without one */
static void check_trace_narrowing(const TraceOptions *tr, const int *given) {
    int traced = tr->trace || tr->trace_prompt || tr->out_path || tr->json_path || tr->html_path || tr->step;
    const char *narrowing[] = { "--layer", "--head", "--pos", "--top", "--trace-level" };
    for (size_t k = 0; k < sizeof narrowing / sizeof narrowing[0] && !traced; k++)
        if (given[find_flag(narrowing[k]) - FLAGS]) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s needs a trace: --trace, --trace-json, --html or --step", narrowing[k]);
            usage(msg);
        }
}

/* Flags that each make sense but not together, or not without another */
static void check_combinations(const Options *o, const int *given) {
    if (o->mode == QUANTIZE && !o->output) usage("-m quantize needs -o FILE");
    if (o->mode == PPL && !o->ppl.text_file) usage("-m ppl needs -f FILE");
    if (o->probe && strcmp(o->probe, "induction")) usage_bad_value("--probe", o->probe, "induction");
    if (o->probe && (o->prompt || o->prompt_file)) usage("--probe is the prompt: it goes without -i and --prompt-file");
    if (o->trace.compare_path && !o->trace.html_path) usage("--compare goes with --html");
    check_trace_narrowing(&o->trace, given);
    check_step_flags(&o->trace, given);
    if (o->prompt && o->prompt_file) usage("-i and --prompt-file both give the prompt: choose one");
    int prompt_from_stdin = (o->prompt && !strcmp(o->prompt, "-")) || (o->prompt_file && !strcmp(o->prompt_file, "-"));
    if (o->trace.step && prompt_from_stdin)
        usage("--step reads its keys from stdin, so the prompt cannot come from stdin too");
    if (o->trace.level_name && trace_level_parse(o->trace.level_name) < 0)
        usage_bad_value("--trace-level", o->trace.level_name, "full or summary");
    if (o->sinks >= 0 && !o->window) usage("--sinks needs --window W");
    if (o->ppl.recompute && !o->window) usage("--recompute needs --window W");
    if (o->bench.no_cache && o->window)
        usage("--no-cache recomputes whole prefixes, which cannot pass the context: not with --window");
}

static unsigned long long clock_seed(void);

static void parse_options(Options *o, int argc, char **argv) {
    int given[N_FLAGS] = { 0 };
    default_options(o);
    read_flags(o, argc, argv, given);
    /* -s 0 is the clock's seed in every mode (and printed); no -s is the
     * mode's default: the clock's when generating, 1 for -m heads' probes */
    if (given[find_flag("-s") - FLAGS] && o->seed == 0) o->seed = clock_seed();
    if (o->help) print_help();
    for (int m = 0; m < N_MODES; m++)
        if (!strcmp(o->mode_name, MODE_NAMES[m])) o->mode = 1 << m;
    if (!o->mode) usage_bad_value("-m", o->mode_name, "generate, tokenize, info, ppl, bench, quantize or heads");
    check_modes(o, given);
    check_combinations(o, given);
    if (o->sinks < 0) o->sinks = 0;
}

/* ------------------------------------------------------------------------ */
/* Small utilities                                                           */

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
        fprintf(stderr, "warning: -n %d is beyond the context; clamped to %d\n", steps, c->seq_len);
        steps = c->seq_len;
    }
    if (steps < n_prompt) {
        fprintf(stderr, "warning: the prompt is %d tokens, more than -n %d: it runs whole, then one token "
                        "is generated\n", n_prompt, steps);
        steps = n_prompt;
    }
    return steps;
}

/* A --compare model reads the run's tokens again, so the run stops at its
 * context if that is shorter (with a warning, as -n past the context is) */
static int steps_for_compare(const Tracer *tr, int steps, int n_prompt) {
    int most = tracer_max_positions(tr, steps);
    if (most == steps) return steps;
    if (most < n_prompt) {
        fprintf(stderr, "error: the prompt is %d tokens, longer than the --compare model's context of %d\n", n_prompt,
                most);
        exit(1);
    }
    fprintf(stderr, "warning: the --compare model's context is %d positions: the run stops there\n", most);
    return most;
}

/* The closing line on stderr: the decode rate over the computing time (the
 * prompt's and a --step user's time left out), and the prompt's rate. */
static void report_speed(int generated, double computing, const char *stopped_by, int n_prompt,
                         double prompt_seconds, unsigned long long seed, int stepped, double waited) {
    fprintf(stderr, "achieved tok/s: %.2f (%d generated, stopped by %s; prompt: %d token%s at %.2f tok/s; seed %llu",
            generated > 1 ? (generated - 1) / computing : 0.0, generated, stopped_by, n_prompt,
            n_prompt == 1 ? "" : "s", n_prompt / (prompt_seconds + 1e-9), seed);
    if (stepped) fprintf(stderr, "; computing only, %.1f s waiting for keys left out", waited);
    fprintf(stderr, ")\n");
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
static float *timed_forward(const Model *m, RunState *s, ThreadChoice *threads, int token, int pos,
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
 * until -n, the end of text, or the user quits. Returns the exit status. */
static int decode_loop(const Model *m, const Tokenizer *t, const Options *o, RunState *s, Sampler *sampler,
                       Tracer *tr, TextPrinter *out, float *logits, int token, int n_prompt, int steps, Decoded *d) {
    const Config *c = &m->config;
    ThreadChoice threads = choose_threads(o->threads);
    const ForwardObserver *obs = tracer_observer(tr);
    float *probs = malloc((size_t)c->vocab_size * sizeof(float));
    if (!probs) die("%s", "out of memory");
    int rc = 0;
    *d = (Decoded){ 0, "the -n limit", 0 };
    for (int pos = n_prompt - 1; pos < steps && rc == 0; pos++) {
        SampleInfo info;
        int next = sample_next(sampler, logits, probs, c->vocab_size, o->temperature, &info);
        if (next < 0) { /* not reached: the logits were checked */
            rc = 1;
            break;
        }
        tracer_step(tr, pos, token, logits, next, &info);
        int end = next == t->bos_id || next == t->eos_id;
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
            logits = timed_forward(m, s, &threads, token, pos + 1, obs);
            if (check_logits(logits, c->vocab_size, pos + 1)) rc = 1;
        }
    }
    free(probs);
    return rc;
}

/* Returns the exit status: 0, or 1 after one error line (bad logits).
 * team: the threads of the forward's parallel loops (team.h), or NULL. */
static int generate(const Model *m, const Tokenizer *t, const Options *o, Team *team) {
    const Config *c = &m->config;
    int n_prompt, started = 1;
    int *prompt = o->probe ? probe_prompt(c, o, &n_prompt)
                           : encode_text(t, c->start_id, o->prompt ? o->prompt : "", "the prompt", &n_prompt, &started);
    int steps = steps_for(c, o, n_prompt);
    if (!steps) {
        free(prompt);
        return 1;
    }

    RunState s;
    Sampler sampler;
    char err[256];
    unsigned long long seed = o->seed ? o->seed : clock_seed();
    TraceOptions trace = o->trace;
    trace.positions = steps;
    Tracer *tr = tracer_open(&trace, m, t, o->temperature, o->topp, o->topk, err, sizeof err);
    if (!tr && err[0]) die("%s", err);
    steps = steps_for_compare(tr, steps, n_prompt);
    /* the KV cache holds the positions this run visits, not the whole
     * context the header claims */
    run_state_for(&s, c, steps, o->kv_type, o->window, o->sinks);
    s.team = team;
    if (sampler_init(&sampler, c->vocab_size, o->temperature, o->topp, o->topk, seed))
        die("%s", "out of memory for the run state");

    double start = now_seconds();
    float *logits = run_prompt(m, &s, tr, prompt, n_prompt);
    int rc = check_logits(logits, c->vocab_size, n_prompt - 1) ? 1 : 0;
    TextPrinter out = { { 0 }, 0 };
    /* the start token is not the user's text, except a character model's "\n" (as nanoGPT prints it) */
    int first_shown = started && t->kind != TOKENIZER_CHAR ? 1 : 0;
    for (int i = first_shown; i < n_prompt && rc == 0; i++) print_token(&out, t, i ? prompt[i - 1] : -1, prompt[i]);
    double prompt_done = now_seconds();

    Decoded d = { 0, "", 0 };
    if (rc == 0) rc = decode_loop(m, t, o, &s, &sampler, tr, &out, logits, prompt[n_prompt - 1], n_prompt, steps, &d);
    if (rc == 0) {
        printf("\n");
        fflush(stdout); /* the text's last line before the speed line on a terminal */
        double end = now_seconds();
        if (tr && tracer_close(tr, err, sizeof err)) {
            fprintf(stderr, "error: %s\n", err);
            rc = 1;
        } else {
            report_speed(d.generated, end - prompt_done - d.waited, d.stopped_by, n_prompt, prompt_done - start,
                         seed, o->trace.step, d.waited);
        }
    } else {
        tracer_discard(tr);
    }
    free(prompt);
    sampler_free(&sampler);
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
    if (!escaped) die("%s", "out of memory");
    piece_escape(escaped, 4 * (size_t)len + 1, piece, len, 0);
    fputs(escaped, stdout);
    free(escaped);
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
    if (gpt2) printf("  positions       %zu\n  biases          %zu (linear layers and LayerNorms)\n", positions, biases);
    printf("weight bytes      %zu (%s matrices, float32 norms)\n", m->weight_bytes, weight_type_name((WeightType)m->config.weight_type));
    printf("CPU               %s, family %d (QKV_VENDOR, QKV_FAMILY)\n", vendor_name(cpu_vendor()), cpu_family());
    printf("kernels           %s (%s; QKV_ISA)\n", isa_name(isa_available()), model_kernel_name(m));
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

/* ---- What a run writes is not what it reads ---- */

typedef struct { const char *flag, *path; } NamedPath;

/* A path that need not exist yet, made absolute through its directory
 * (x, ./x and d/../x alike); the path as given if the directory is not there */
static const char *canonical_path(const char *path, char *out) {
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    if (!realpath(dir, real) || snprintf(out, PATH_MAX, "%s/%s", real, base) >= PATH_MAX) return path;
    return out;
}

/* Whether two paths name one regular file: the same inode when both exist
 * (a hard or symbolic link, ./x and x), else the same place. (Two outputs
 * on /dev/null or on one terminal harm nothing.) */
static int same_file(const char *a, const char *b) {
    struct stat x, y;
    int a_exists = stat(a, &x) == 0, b_exists = stat(b, &y) == 0;
    if (a_exists && b_exists) return S_ISREG(x.st_mode) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
    char ca[PATH_MAX], cb[PATH_MAX];
    return !a_exists && !b_exists && strcmp(canonical_path(a, ca), canonical_path(b, cb)) == 0;
}

/* A page or checkpoint written whole (output_file.h) cannot go where a
 * directory, FIFO or device is: said now, as a usage error, before the
 * model loads (the writer would refuse it too, later) */
static void check_whole_output(const char *flag, const char *path) {
    const char *refused = path ? whole_file_refusal(path) : NULL;
    if (!refused) return;
    char msg[PATH_MAX + 96];
    snprintf(msg, sizeof msg, "%s %s is %s, not a regular file: give the path of a file to write", flag, path, refused);
    usage(msg);
}

/* Each file a run writes against the files it reads and the other files it
 * writes: an output opened over the checkpoint would truncate it under the
 * mapping that reads it (-o is exempt: quantize writes a new file and
 * renames it, so reading the old one to the end). A usage error. */
static void check_paths(const Options *o, const char *checkpoint) {
    const char *prompt_file = o->prompt_file && strcmp(o->prompt_file, "-") ? o->prompt_file : NULL;
    const NamedPath reads[] = { { "the checkpoint", checkpoint }, { "-z", o->tokenizer },
                                { "--prompt-file", prompt_file }, { "-f", o->ppl.text_file },
                                { "--compare", o->trace.compare_path } };
    const NamedPath writes[] = { { "--trace-out", o->trace.out_path }, { "--trace-json", o->trace.json_path },
                                 { "--html", o->trace.html_path }, { "--csv", o->bench.csv_path },
                                 { "--svg", o->bench.svg_path }, { "--json", o->heads.json_path } };
    char msg[2 * PATH_MAX];
    for (size_t w = 0; w < sizeof writes / sizeof writes[0]; w++) {
        if (!writes[w].path) continue;
        for (size_t r = 0; r < sizeof reads / sizeof reads[0]; r++)
            if (reads[r].path && same_file(writes[w].path, reads[r].path)) {
                snprintf(msg, sizeof msg, "%s %s is %s%s, which this run reads", writes[w].flag, writes[w].path,
                         r ? "the file of " : "", reads[r].flag);
                usage(msg);
            }
        for (size_t v = w + 1; v < sizeof writes / sizeof writes[0]; v++)
            if (writes[v].path && same_file(writes[w].path, writes[v].path)) {
                snprintf(msg, sizeof msg, "%s and %s both write %s", writes[w].flag, writes[v].flag, writes[w].path);
                usage(msg);
            }
    }
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

int main(int argc, char **argv) {
    /* A closed stdout would lend its descriptor to the next file opened (a
     * trace, say), and the text would land there */
    if (fcntl(STDOUT_FILENO, F_GETFD) < 0) die("%s", "stdout is closed: give the output somewhere to go");
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
        return output_status(0);
    }
    char exe_path[4096];
    const char *path = o.checkpoint ? o.checkpoint : default_checkpoint(exe_path, sizeof exe_path);
    check_paths(&o, path);
    check_whole_output("--html", o.trace.html_path);
    check_whole_output("-o", o.output);
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
