/* replay.c — runs a fuzz target's LLVMFuzzerTestOneInput on files, without
 * libFuzzer or clang: make test replays the seed corpus and every input a
 * fuzzer ever crashed on (tests/fuzz/regressions/) with the plain build, and
 * CI's sanitizer pass with AddressSanitizer.
 *
 *     build/replay_TARGET FILE...      exit 0: every input ran */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) { fprintf(stderr, "replay: cannot open %s\n", argv[i]); return 1; }
        size_t cap = 1 << 16, n = 0, got;
        uint8_t *data = malloc(cap);
        while (data && (got = fread(data + n, 1, cap - n, f)) > 0) {
            n += got;
            if (n == cap) {
                uint8_t *bigger = realloc(data, cap *= 2);
                if (!bigger) { free(data); data = NULL; }
                else data = bigger;
            }
        }
        fclose(f);
        if (!data) { fprintf(stderr, "replay: out of memory for %s\n", argv[i]); return 1; }
        LLVMFuzzerTestOneInput(data, n);
        free(data);
    }
    return 0;
}
