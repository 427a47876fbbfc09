/* fuzz_tokenizer.c — libFuzzer target: a tokenizer.bin and a text, both
 * arbitrary. Input: u16 (little-endian): the text's length in its low 14
 * bits, the tokenizer kind in its top 2 (0 llama2.c, 1 characters, 2 GPT-2
 * BPE, 3 as 0); for kinds 1 and 2 a u16 vocabulary size; the tokenizer's
 * bytes, then the text (its last bytes). A tokenizer loads or is refused;
 * one that loads encodes the text to ids in its vocabulary and decodes them
 * back, each piece through the escapers of the trace, JSON and XML. */
#include "../../tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the escapers promise for any bytes: text that is valid UTF-8 with
 * no control character (C0, DEL, C1), a piece_escape cut short between
 * characters and escapes inside its buffer, and the whole piece when the
 * buffer holds 4 bytes a byte */
static int safe_text(const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c < 0x20 || *c == 0x7F || (c[0] == 0xC2 && c[1] >= 0x80 && c[1] < 0xA0)) return 0;
    return utf8_invalid_at(s) == 0;
}

static void check_escapes(const char *piece, int len, size_t small_cap) {
    char *full = malloc(4 * (size_t)len + 1), small[64];
    if (!full) return;
    if (piece_escape(full, 4 * (size_t)len + 1, piece, len, 1) != len || !safe_text(full)) __builtin_trap();
    int done = piece_escape(small, small_cap, piece, len, 0);
    if (done < 0 || done > len || strlen(small) >= small_cap || !safe_text(small)) __builtin_trap();
    for (int syntax = ESCAPE_JSON; syntax <= ESCAPE_XML; syntax++) {
        char *text = NULL;
        size_t bytes = 0;
        FILE *f = open_memstream(&text, &bytes);
        if (!f) break;
        write_escaped_text(f, piece, len, (EscapeSyntax)syntax);
        fclose(f);
        if (text && (strlen(text) != bytes || !safe_text(text))) __builtin_trap();
        free(text);
    }
    free(full);
}

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
            check_escapes(piece, len, (size_t)(i % 40) + 1);
        }
    }
    free(text);
    free(ids);
    tokenizer_free(&t);
    return 0;
}
