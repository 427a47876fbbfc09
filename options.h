/* options.h — the command line's flags: one table (options.c) drives
 * parsing, --help, the ranges of values and which modes read each flag;
 * then the checks a run makes before it loads anything: flags that do
 * nothing, files written over files read. A bad flag is a usage error
 * (exit 2), said before the model loads. */
#ifndef QKV_OPTIONS_H
#define QKV_OPTIONS_H

#include "model.h"
#include "trace.h"
#include "bench.h"
#include "heads.h"
#include "ppl.h"

#define DEFAULT_CHECKPOINT "models/stories.bin"

/* The modes, as bits, so a flag can say which modes read it. */
enum { GENERATE = 1, TOKENIZE = 2, INFO = 4, PPL = 8, BENCH = 16, QUANTIZE = 32, HEADS = 64, ALL_MODES = 127 };

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
    int steps_given;  /* -n was given: the default 256 is clamped to a shorter context without a word */
    unsigned long long seed;
    int samples;             /* --samples N: texts one after another, seeds seed, seed + 1, ... */
    TraceOptions trace;
    BenchOptions bench;
    HeadsOptions heads;      /* its --csv and --svg are bench's fields */
    PplOptions ppl;          /* its --kv-type, --window, --sinks and --threads are the fields above */
    const char *probe;       /* --probe: the prompt is a probe sequence (with --html) */
} Options;

/* Reads argv into o, with every check that needs no model: exits with a
 * usage error (2), or after --help (0). */
void parse_options(Options *o, int argc, char **argv);

/* A usage error: why, then the one-line usage, on stderr; exits 2. */
_Noreturn void usage_error(const char *why);

/* --window and --sinks against the model: a usage error, like any flag. */
void check_window(const Options *o, const Config *c);

/* A seed from the clock (-s absent or 0), never 0 */
unsigned long long clock_seed(void);

/* The default checkpoint's path: models/stories.bin here, else beside the
 * executable (buf holds it then) */
const char *default_checkpoint(char *buf, size_t cap);

/* Each file the run writes against the files it reads and the others it
 * writes, and a file written whole against what cannot be replaced: a
 * usage error before anything is opened. */
void check_paths(const Options *o, const char *checkpoint);
/* Each output can be written (output_check): else one error line, exit 1,
 * before any is opened (and truncated). */
void check_outputs(const Options *o);

#endif
