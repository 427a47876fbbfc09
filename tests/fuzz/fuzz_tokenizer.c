/* fuzz_tokenizer.c — libFuzzer target: a tokenizer.bin and a text, both
 * arbitrary. Input: u16 (little-endian): the text's length in its low 14
 * bits, the tokenizer kind in its top 2 (0 llama2.c, 1 characters, 2 GPT-2
 * BPE, 3 as 0); for kinds 1 and 2 a u16 vocabulary size; the tokenizer's
 * bytes, then the text (its last bytes). A tokenizer loads or is refused;
 * one that loads encodes the text to ids in its vocabulary and decodes them
 * back. */
#include "../../tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t head = (size_t)data[0] | (size_t)data[1] << 8, text_len = head & 0x3FFF, skip = 2;
    int kind = (int)(head >> 14) % 3, vocab = -1;
    if (kind != TOKENIZER_LLAMA) {
        if (size < 4) return 0;
        vocab = data[2] | data[3] << 8;
        skip = 4;
    }
    if (text_len > size - skip) text_len = size - skip;
    const uint8_t *tok = data + skip, *text_bytes = data + size - text_len;
    size_t tok_len = size - skip - text_len;
    Tokenizer t;
    char err[256] = "";
    if (tokenizer_load_kind(&t, tok, tok_len, vocab, kind, err, sizeof err) != 0) {
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
