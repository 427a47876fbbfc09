/* cli.c — what the command line's modes share: run.c's generate and
 * tokenize, and ppl.c. cli.h says what each piece does. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "input_file.h"
#include "sampler.h"

void die(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\n");
    va_end(args);
    exit(1);
}

/* The exit status once what was printed has reached stdout's file: a full
 * disk is an error line, not a silent loss (one line a run: a run that
 * failed already said why, as --trace-out /dev/stdout onto a full disk
 * did). A closed pipe end (./run | head) ends the run by SIGPIPE, as it
 * ends any filter, or, where SIGPIPE is ignored, is an error line too. */
int output_status(int status) {
    int failed = fflush(stdout) != 0 ? errno : 0;
    if (!failed && !ferror(stdout)) return status;
    if (status == 0)
        fprintf(stderr, "error: cannot write the output to stdout: %s\n", failed ? strerror(failed) : "a write failed");
    return status ? status : 1;
}

char *read_stream(FILE *f, const char *path, size_t *n) {
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
        if (len > MAX_TEXT_BYTES) { /* the buffer's last step is one byte past the limit */
            free(buf);
            die("%s is longer than the %u MiB qkv reads as a text", path, MAX_TEXT_BYTES >> 20);
        }
        if (len == cap) {
            cap = cap < MAX_TEXT_BYTES ? 2 * cap : MAX_TEXT_BYTES + 1;
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

/* A device (/dev/urandom, /dev/zero) could run forever or fill memory, and a
 * directory has no text: hence a regular file only, its size checked first. */
char *read_text_file(const char *path, const char *flag, size_t *n) {
    size_t size = 0;
    int fd = input_open(path, &size);
    if (fd == INPUT_NOT_REGULAR)
        die("%s %s is not a regular file%s", flag, path,
            strcmp(flag, "--prompt-file") ? "" : " (a pipe or a terminal: --prompt-file - reads stdin)");
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) die("cannot open %s %s: %s", flag, path, strerror(errno));
    if (size > MAX_TEXT_BYTES) die("%s has %zu bytes, more than the %u MiB qkv reads as a text", path, size, MAX_TEXT_BYTES >> 20);
    char *text = read_stream(f, path, n);
    fclose(f);
    return text;
}

void check_text(const Tokenizer *t, const char *text, const char *what) {
    size_t bad = utf8_invalid_at(text);
    if (bad) die("%s is not valid UTF-8 (bad byte at offset %zu)", what, bad - 1);
    if ((bad = tokenizer_unknown_at(t, text)))
        die("%s has a character (at byte %zu) that is not in this character-level model's vocabulary", what, bad - 1);
}

int *encode_text(const Tokenizer *t, int start, const char *text, const char *what, int always_start, int *n,
                 int *started) {
    check_text(t, text, what);
    int *tokens = malloc((strlen(text) + 4) * sizeof(int)); /* tokenizer_encode's room, after the start */
    if (!tokens || (*n = tokenizer_encode(t, text, 0, 0, tokens + 1)) < 0) die("out of memory encoding %s", what);
    *started = t->kind == TOKENIZER_LLAMA || always_start || *n == 0;
    if (*started && start < 0) /* only a character vocabulary lacks one (checkpoint.h: start_id_of) */
        die("an empty prompt starts from \"\\n\", which this character vocabulary lacks: give one with -i");
    if (*started) tokens[0] = start, ++*n;
    else memmove(tokens, tokens + 1, (size_t)*n * sizeof(int));
    return tokens;
}

int report_bad_logits(const RunState *s, const float *logits, int n, int pos) {
    int bad = logits_check(logits, n);
    if (bad < 0) return 0;
    char message[256];
    bad_logits_message(message, sizeof message, isnan(logits[bad]), pos, s->kv_cache.type);
    fprintf(stderr, "error: %s\n", message);
    return -1;
}

void run_state_for(RunState *s, const Config *c, int capacity, int kv_type, int window, int sinks) {
    if (run_state_init_window(s, c, capacity, (KVType)kv_type, window, sinks)) die("out of memory for the run state");
}

ThreadChoice choose_threads(int threads) {
#ifdef _OPENMP
    int most = omp_get_max_threads();
#else
    int most = 1;
#endif
    return thread_choice(most, threads > 0 || omp_count_given(getenv("OMP_NUM_THREADS")));
}
