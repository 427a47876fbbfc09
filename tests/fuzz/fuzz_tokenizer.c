/* fuzz_tokenizer.c — libFuzzer target: a tokenizer.bin and a text, both
 * arbitrary. Input: u16 text length (little-endian), the tokenizer's bytes,
 * then the text (its last bytes). A tokenizer loads or is refused; one that
 * loads encodes the text to ids in its vocabulary and decodes them back. */
#include "../../tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t text_len = (size_t)data[0] | (size_t)data[1] << 8;
    if (text_len > size - 2) text_len = size - 2;
    const uint8_t *tok = data + 2, *text_bytes = data + size - text_len;
    size_t tok_len = size - 2 - text_len;
    Tokenizer t;
    char err[256] = "";
    if (tokenizer_load_bytes(&t, tok, tok_len, -1, err, sizeof err) != 0) {
        if (!err[0]) __builtin_trap();
        return 0;
    }
    char *text = malloc(text_len + 1);
    int *ids = malloc((text_len + 3) * sizeof(int));
    if (text && ids) {
        memcpy(text, text_bytes, text_len);
        text[text_len] = '\0';
        (void)utf8_invalid_at(text);
        int n = tokenizer_encode(&t, text, 1, 1, ids);
        TextPrinter out = { { 0 }, 0 };
        for (int i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= t.vocab_size) __builtin_trap();
            int len;
            const char *piece = tokenizer_decode(&t, i ? ids[i - 1] : t.bos_id, ids[i], &len);
            if (len < 0) __builtin_trap();
            text_printer_put(&out, piece, len);
        }
    }
    free(text);
    free(ids);
    tokenizer_free(&t);
    return 0;
}
