/* options.c — the command line's flags and the checks made before a run
 * loads anything (see options.h). */
#define _XOPEN_SOURCE 700 /* realpath (POSIX's XSI part) */
#include "options.h"
#include "cli.h"
#include "kv_window.h"
#include "stepper.h"
#include "output_file.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const MODE_NAMES[] = { "generate", "tokenize", "info", "ppl", "bench", "quantize", "heads" };
#define N_MODES ((int)(sizeof MODE_NAMES / sizeof MODE_NAMES[0]))
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
    { "--threads", ARG_INT, "N", 1, TEAM_MAX, 0, ALL_MODES, AT(threads), "all or 1",
      "OpenMP threads (or OMP_NUM_THREADS)" },
    { "-h", ARG_SWITCH, NULL, 0, 0, 0, ALL_MODES, AT(help), NULL, "this help, on stdout" },
    { "--help", ARG_SWITCH, NULL, 0, 0, 0, ALL_MODES, AT(help), NULL, "the same" },
    { "-z", ARG_TEXT, "FILE", 0, 0, 0, GENERATE | TOKENIZE | PPL | QUANTIZE, AT(tokenizer), "embedded",
      "a llama2.c tokenizer.bin" },
    { "-i", ARG_TEXT, "PROMPT", 0, 0, 0, GENERATE | TOKENIZE, AT(prompt), "empty", "the prompt; - reads stdin" },
    { "--prompt-file", ARG_TEXT, "FILE", 0, 0, 0, GENERATE | TOKENIZE, AT(prompt_file), "none",
      "prompt from FILE (last newline dropped)" },
    { "-n", ARG_INT, "STEPS", 0, BIG, 0, GENERATE, AT(steps), "256", "positions, prompt included; 0 = context" },
    { "-t", ARG_FLOAT, "TEMP", 0, FLT_MAX, 0, GENERATE, AT(temperature), "1.0", "temperature >= 0; 0 = greedy" },
    { "-p", ARG_FLOAT, "TOPP", 0, 1, 1, GENERATE, AT(topp), "0.9", "top-p in (0, 1]; 1 = off" },
    { "-k", ARG_INT, "TOPK", 0, BIG, 0, GENERATE, AT(topk), "0", "keep the k most likely tokens; 0 = off" },
    { "-s", ARG_SEED, "SEED", 0, 9223372036854775807.0, 0, GENERATE | HEADS, AT(seed), "clock; heads: 1",
      "random seed; 0 = from the clock (printed)" },
    { "--samples", ARG_INT, "N", 1, 100000, 0, GENERATE, AT(samples), "1", "N texts, seeds SEED, SEED + 1, ..." },
    { "--trace", ARG_SWITCH, NULL, 0, 0, 0, GENERATE, AT(trace.trace), "off", "text trace of each token, to stderr" },
    { "--trace-prompt", ARG_SWITCH, NULL, 0, 0, 0, GENERATE, AT(trace.trace_prompt), "off",
      "prompt positions too (implies --trace)" },
    { "--trace-level", ARG_TEXT, "L", 0, 0, 0, GENERATE, AT(trace.level_name), "see below",
      "full (tables) or summary (one line a head)" },
    { "--layer", ARG_INT, "L", 0, QKV_MAX_LAYERS, 0, GENERATE, AT(trace.layer), "all", "only this layer" },
    { "--head", ARG_INT, "H", 0, QKV_MAX_HEADS, 0, GENERATE, AT(trace.head), "all", "only this head" },
    { "--pos", ARG_POS, "A[-B]", 0, BIG, 0, GENERATE, AT(trace.pos), "all",
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
    { "-o", ARG_TEXT, "FILE", 0, 0, 0, QUANTIZE, AT(output), "required", "the file to write (GGUF if .gguf, any case)" },
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
    printf("a flag the chosen mode does not read is an error, as is a value given twice, and\n"
           "  --layer, --head, --pos, --top or --trace-level without an output they narrow\n"
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

_Noreturn void usage_error(const char *why) {
    fprintf(stderr, "error: %s\n", why);
    fprintf(stderr, "usage: ./run [checkpoint] [options]   (./run --help lists every flag)\n");
    exit(2);
}

static void usage_bad_value(const char *flag, const char *value, const char *expected) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s %s: expected %s", flag, value, expected);
    usage_error(msg);
}

/* An integer within the flag's bounds at s (end: where it stops, else the
 * whole of s); an error names the whole value given, shown. */
static long long parse_integer(const Flag *f, const char *s, const char **end, const char *shown) {
    char *stop;
    errno = 0;
    long long v = strtoll(s, &stop, 10);
    int bad = errno || stop == s || (end ? 0 : *stop != '\0') || v < f->lo || v > f->hi;
    if (bad) {
        char expected[96]; /* hi as an integer: the seed's, 2^63 - 1, is 2^63 as a double */
        long long hi = f->hi >= (double)LLONG_MAX ? LLONG_MAX : (long long)f->hi;
        snprintf(expected, sizeof expected, "an integer in [%.0f, %lld]", f->lo, hi);
        usage_bad_value(f->name, shown, expected);
    }
    if (end) *end = stop;
    return v;
}

/* --pos A or A-B: the positions the text and JSON trace show. */
static void parse_positions(const Flag *f, const char *s, int *first_last) {
    const char *rest;
    first_last[0] = first_last[1] = (int)parse_integer(f, s, &rest, s);
    if (*rest == '-') first_last[1] = (int)parse_integer(f, rest + 1, NULL, s);
    if (*rest && *rest != '-') usage_bad_value(f->name, s, "a position A or a range A-B");
    if (first_last[1] < first_last[0]) usage_bad_value(f->name, s, "a range A-B with A <= B");
}

/* Whether a flag's value is a file's name (FILE, or --compare's MODEL) */
static int names_file(const Flag *f) {
    return f->kind == ARG_TEXT && f->value && (!strcmp(f->value, "FILE") || !strcmp(f->value, "MODEL"));
}

/* Reads one flag's value into its place in o. */
static void set_flag(Options *o, const Flag *f, const char *v) {
    char *dst = (char *)o + f->offset;
    if (f->kind == ARG_SWITCH) *(int *)dst = 1;
    else if (names_file(f) && !*v) usage_bad_value(f->name, "''", "a file name");
    else if (names_file(f) && v[0] == '-' && (v[1] || strcmp(f->name, "--prompt-file")))
        /* a mistyped flag (--trace-json --tarce-prompt), or - for stdout, which only --prompt-file's stdin has */
        usage_bad_value(f->name, v, "a file name, not a flag or - (for a file whose name begins with '-', write ./NAME)");
    else if (f->kind == ARG_TEXT) *(const char **)dst = v;
    else if (f->kind == ARG_INT) *(int *)dst = (int)parse_integer(f, v, NULL, v);
    else if (f->kind == ARG_SEED) *(unsigned long long *)dst = (unsigned long long)parse_integer(f, v, NULL, v);
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
            if (f->hi >= 1e30)
                snprintf(expected, sizeof expected, "a finite number >= %g%s", f->lo,
                         errno == ERANGE && isinf(x) ? " (it is past float32's largest, 3.4e38)" : "");
            if (errno == ERANGE && x == 0.0f && !signbit(x) && f->lo_open && f->lo == 0.0f) /* positive, rounded to 0 */
                snprintf(expected + strlen(expected), sizeof expected - strlen(expected),
                         " (it rounds to 0 in float32, whose least is 1.4e-45)");
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
        usage_error(msg);
    }
}

/* The defaults, llama2.c's where it has them */
static void default_options(Options *o) {
    memset(o, 0, sizeof *o);
    o->temperature = 1.0f;
    o->topp = 0.9f;
    o->steps = 256;
    o->samples = 1;
    o->mode_name = "generate";
    o->trace.layer = o->trace.head = -1;
    o->trace.pos[1] = INT_MAX; /* every position (a --window run goes past the context) */
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
        if (name[0] != '-' || !name[1]) { /* a checkpoint after the flags is the likeliest */
            snprintf(msg, sizeof msg, "unexpected argument '%s'%s", name,
                     o->checkpoint || name[0] == '-' ? "" : ": a checkpoint goes first (./run CHECKPOINT [options])");
            usage_error(msg);
        }
        const Flag *f = find_flag(name);
        if (!f) {
            snprintf(msg, sizeof msg, "unknown flag '%s'", name);
            usage_error(msg);
        }
        /* a value that is itself a flag's name is one forgotten (-m -n 3), except a
         * prompt's: the text may be anything */
        if (f->kind != ARG_SWITCH && (i + 1 >= argc || (strcmp(name, "-i") && find_flag(argv[i + 1])))) {
            snprintf(msg, sizeof msg, "%s needs a value (%s)%s%s", name, f->value, i + 1 < argc ? ", not the flag " : "",
                     i + 1 < argc ? argv[i + 1] : "");
            usage_error(msg);
        }
        /* a value given twice: one would be dropped unseen (-i "the cat" -i "a dog") */
        if (f->kind != ARG_SWITCH && given[f - FLAGS]) {
            snprintf(msg, sizeof msg, "%s is given twice: give it once", name);
            usage_error(msg);
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
        usage_error(msg);
    }
}

/* Whether any trace is asked for: text, JSON, the page or step mode */
static int traced(const TraceOptions *tr) {
    return tr->trace || tr->trace_prompt || tr->out_path || tr->json_path || tr->html_path || tr->step;
}

/* A build without the observer hooks (-DQKV_NO_OBSERVER, the measure of
 * what they cost) runs generate and ppl: the modes that watch the forward
 * would see nothing (bench timed no attention, heads printed NaN roles) */
static void check_observer_build(const Options *o) {
#ifdef QKV_NO_OBSERVER
    const char *needs = o->mode == BENCH ? "-m bench needs" : o->mode == HEADS ? "-m heads needs"
                        : traced(&o->trace) ? "the trace, step mode and --html need" : NULL;
    if (needs) die("%s the observer hooks this build left out (-DQKV_NO_OBSERVER)", needs);
#else
    (void)o;
#endif
}

/* The flags that narrow a trace do nothing without an output they narrow:
 * the text trace reads them all, the JSON all but --trace-level, step mode's
 * view --layer, --head and --top, the page --top alone */
static void check_trace_narrowing(const TraceOptions *tr, const int *given) {
    int text = tr->trace || tr->trace_prompt || tr->out_path, json = tr->json_path != NULL;
#define TEXT_TRACE "the text trace (--trace, --trace-prompt, --trace-out)"
    const struct {
        const char *flag;
        int read;
        const char *readers;
    } narrowing[] = {
        { "--layer", text || json || tr->step, TEXT_TRACE ", --trace-json or --step" },
        { "--head", text || json || tr->step, TEXT_TRACE ", --trace-json or --step" },
        { "--pos", text || json, TEXT_TRACE " or --trace-json" },
        { "--top", traced(tr), "a trace: --trace, --trace-json, --html or --step" },
        { "--trace-level", text, TEXT_TRACE },
    };
#undef TEXT_TRACE
    for (size_t k = 0; k < sizeof narrowing / sizeof narrowing[0]; k++)
        if (given[find_flag(narrowing[k].flag) - FLAGS] && !narrowing[k].read) {
            char msg[200];
            snprintf(msg, sizeof msg, "%s needs what it narrows: %s", narrowing[k].flag, narrowing[k].readers);
            usage_error(msg);
        }
}

/* Flags that each make sense but not together, or not without another */
static void check_combinations(const Options *o, const int *given) {
    if (o->mode == QUANTIZE && !o->output) usage_error("-m quantize needs -o FILE");
    if (o->mode == PPL && !o->ppl.text_file) usage_error("-m ppl needs -f FILE");
    if (o->probe && strcmp(o->probe, "induction")) usage_bad_value("--probe", o->probe, "induction");
    if (o->probe && (o->prompt || o->prompt_file)) usage_error("--probe is the prompt: it goes without -i and --prompt-file");
    if (o->trace.compare_path && !o->trace.html_path) usage_error("--compare goes with --html");
    if (o->samples > 1 && traced(&o->trace))
        usage_error("--samples writes texts only: a trace, --html or --step follows one text");
    check_step_flags(&o->trace, given);
    check_trace_narrowing(&o->trace, given);
    if (o->prompt && o->prompt_file) usage_error("-i and --prompt-file both give the prompt: choose one");
    int prompt_from_stdin = (o->prompt && !strcmp(o->prompt, "-")) || (o->prompt_file && !strcmp(o->prompt_file, "-"));
    if (o->trace.step && prompt_from_stdin)
        usage_error("--step reads its keys from stdin, so the prompt cannot come from stdin too");
    if (o->trace.level_name && trace_level_parse(o->trace.level_name) < 0)
        usage_bad_value("--trace-level", o->trace.level_name, "full or summary");
    if (o->sinks >= 0 && !o->window) usage_error("--sinks needs --window W");
    if (o->ppl.recompute && !o->window) usage_error("--recompute needs --window W");
    if (o->bench.no_cache && o->window)
        usage_error("--no-cache recomputes whole prefixes, which cannot pass the context: not with --window");
}

void parse_options(Options *o, int argc, char **argv) {
    int given[N_FLAGS] = { 0 };
    default_options(o);
    read_flags(o, argc, argv, given);
    /* -s 0 is the clock's seed in every mode (and printed); no -s is the
     * mode's default: the clock's when generating, 1 for -m heads' probes */
    if (given[find_flag("-s") - FLAGS] && o->seed == 0) o->seed = clock_seed();
    o->steps_given = given[find_flag("-n") - FLAGS];
    if (o->help) print_help();
    for (int m = 0; m < N_MODES; m++)
        if (!strcmp(o->mode_name, MODE_NAMES[m])) o->mode = 1 << m;
    if (!o->mode) usage_bad_value("-m", o->mode_name, "generate, tokenize, info, ppl, bench, quantize or heads");
    check_modes(o, given);
    check_combinations(o, given);
    check_observer_build(o);
    if (o->sinks < 0) o->sinks = 0;
}

/* ------------------------------------------------------------------------ */
/* Against the model, the clock and the files                                */

void check_window(const Options *o, const Config *c) {
    char msg[256];
    if (kv_window_check(o->window, o->sinks, c->seq_len, msg, sizeof msg)) usage_error(msg);
    if (o->window && c->arch != ARCH_LLAMA) {
        /* a window slides by RoPE's relative turns; a learned position table
         * ends at the context, so past it there is no position to give */
        snprintf(msg, sizeof msg, "--window needs rotary positions (RoPE): this GPT-2-style model's learned "
                                  "positions end at its context of %d", c->seq_len);
        usage_error(msg);
    }
}

/* A seed from the clock when -s is absent or 0 (as in llama2.c, where 0 would
 * freeze xorshift): nanoseconds, so two runs in one second differ. It is
 * printed with the speed line, so any run can be repeated with -s. */
unsigned long long clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long seed = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
    seed &= 0x7fffffffffffffffull;
    return seed ? seed : 1;
}

/* The default checkpoint: models/stories.bin from the current directory,
 * else beside the executable (/proc/self/exe), so ./run works from anywhere
 * in a checkout and an installed copy finds its models. */
const char *default_checkpoint(char *buf, size_t cap) {
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

typedef struct {
    const char *flag, *path;
    int whole; /* written whole and renamed into place (output_file.h) */
} NamedPath;

/* Whether two paths name one regular file: the same inode when both exist
 * (a hard or symbolic link, ./x and x), else the same place (x, ./x, d/../x
 * and a dangling link to x alike: output_target). (Two outputs on
 * /dev/null or on one terminal harm nothing.) */
static int same_file(const char *a, const char *b) {
    struct stat x, y;
    int a_exists = stat(a, &x) == 0, b_exists = stat(b, &y) == 0;
    if (a_exists && b_exists) return S_ISREG(x.st_mode) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
    char ca[PATH_MAX], cb[PATH_MAX];
    return !a_exists && !b_exists && strcmp(output_target(a, ca), output_target(b, cb)) == 0;
}

/* A page or checkpoint written whole (output_file.h) cannot go where a
 * directory, FIFO or device is (said now, as a usage error, before the
 * model loads: the writer would refuse it too, later), nor over the file
 * stdout or stderr goes to */
static void check_whole_output(const char *flag, const char *path) {
    const char *refused = path ? whole_file_refusal(path) : NULL;
    char msg[PATH_MAX + 160];
    if (refused) {
        snprintf(msg, sizeof msg, "%s %s is %s, not a regular file: give the path of a file to write", flag, path, refused);
        usage_error(msg);
    }
    int stream = path ? output_standard_stream(path) : -1;
    if (stream < 0) return;
    snprintf(msg, sizeof msg, "%s %s is the file %s goes to: written whole and renamed over it, it would replace "
             "what %s writes: give another path", flag, path, stream == 1 ? "stdout" : "stderr",
             stream == 1 ? "stdout" : "stderr");
    usage_error(msg);
}

/* The files a run writes, by flag (a path NULL where not given) */
#define N_WRITES 7
static void written_paths(const Options *o, NamedPath writes[N_WRITES]) {
    const NamedPath all[N_WRITES] = { { "--trace-out", o->trace.out_path, 0 }, { "--trace-json", o->trace.json_path, 0 },
                                      { "--html", o->trace.html_path, 1 }, { "--csv", o->bench.csv_path, 0 },
                                      { "--svg", o->bench.svg_path, 0 }, { "--json", o->heads.json_path, 0 },
                                      { "-o", o->output, 1 } };
    memcpy(writes, all, sizeof all);
}

/* A temporary (PATH.part) replaces whatever is there: not a file this run
 * reads, nor one of its other outputs */
static void check_temporary(const NamedPath *whole, const NamedPath *reads, size_t n_reads, const NamedPath *writes) {
    char msg[3 * PATH_MAX], part[PATH_MAX + 8];
    if (!whole->path || whole_file_part(whole->path, part, sizeof part) >= sizeof part) return;
    for (size_t r = 0; r < n_reads + N_WRITES; r++) {
        const NamedPath *other = r < n_reads ? &reads[r] : &writes[r - n_reads];
        if (!other->path || !same_file(part, other->path)) continue;
        snprintf(msg, sizeof msg, "%s %s: its temporary %s is %s%s, which this run %s", whole->flag, whole->path, part,
                 r ? "the file of " : "", other->flag, r < n_reads ? "reads" : "also writes");
        usage_error(msg);
    }
}

/* Each file a run writes against the files it reads and the other files it
 * writes: an output opened over the checkpoint would truncate it under the
 * mapping that reads it (-o is exempt from the checkpoint alone: quantize
 * writes a new file and renames it, so reading the old one to the end; over
 * -z's tokenizer it would replace a file the user keeps); a file written
 * whole where a directory, FIFO or device is. A usage error. */
void check_paths(const Options *o, const char *checkpoint) {
    const char *prompt_file = o->prompt_file && strcmp(o->prompt_file, "-") ? o->prompt_file : NULL;
    const NamedPath reads[] = { { "the checkpoint", checkpoint, 0 }, { "-z", o->tokenizer, 0 },
                                { "--prompt-file", prompt_file, 0 }, { "-f", o->ppl.text_file, 0 },
                                { "--compare", o->trace.compare_path, 0 } };
    NamedPath writes[N_WRITES];
    written_paths(o, writes);
    char msg[3 * PATH_MAX];
    for (size_t w = 0; w < N_WRITES; w++)
        if (writes[w].whole) {
            check_whole_output(writes[w].flag, writes[w].path);
            check_temporary(&writes[w], reads, sizeof reads / sizeof reads[0], writes);
        }
    for (size_t w = 0; w < N_WRITES; w++) {
        if (!writes[w].path) continue;
        int in_place = strcmp(writes[w].flag, "-o") == 0; /* may name the checkpoint (reads[0]) */
        for (size_t r = in_place; r < sizeof reads / sizeof reads[0]; r++)
            if (reads[r].path && same_file(writes[w].path, reads[r].path)) {
                snprintf(msg, sizeof msg, "%s %s is %s%s, which this run reads", writes[w].flag, writes[w].path,
                         r ? "the file of " : "", reads[r].flag);
                usage_error(msg);
            }
        for (size_t v = w + 1; v < N_WRITES; v++)
            if (writes[v].path && same_file(writes[w].path, writes[v].path)) {
                snprintf(msg, sizeof msg, "%s and %s both write %s", writes[w].flag, writes[v].flag, writes[w].path);
                usage_error(msg);
            }
    }
    /* stdout or stderr appended (>>) to a file the run reads: the
     * checkpoint grew under the mapping, and the next run refused it. A
     * stderr there ends the run at once and silently: its error line would
     * land in the file it protects. */
    for (size_t r = 0; r < sizeof reads / sizeof reads[0]; r++)
        if (reads[r].path && stream_goes_to(STDERR_FILENO, reads[r].path)) exit(2);
    for (size_t r = 0; r < sizeof reads / sizeof reads[0]; r++)
        if (reads[r].path && stream_goes_to(STDOUT_FILENO, reads[r].path)) {
            snprintf(msg, sizeof msg, "stdout goes to %s, %s%s, which this run reads", reads[r].path,
                     r ? "the file of " : "", reads[r].flag);
            usage_error(msg);
        }
}

void check_outputs(const Options *o) {
    NamedPath writes[N_WRITES];
    char err[PATH_MAX + 128];
    written_paths(o, writes);
    for (size_t w = 0; w < N_WRITES; w++)
        if (writes[w].path && output_check(writes[w].path, writes[w].whole, writes[w].flag, err, sizeof err))
            die("%s", err);
}
