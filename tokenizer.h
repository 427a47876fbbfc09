/* tokenizer.h — the three tokenizers a checkpoint can carry: llama2.c's
 * byte-pair encoding (tokenizer.bin), nanoGPT's characters (meta.pkl) and
 * GPT-2's byte-level BPE (vocab.json + merges.txt), all in tokenizer.bin's
 * layout (README: Tokenizer section). */
#ifndef QKV_TOKENIZER_H
#define QKV_TOKENIZER_H

#include <stddef.h>
#include <stdio.h> /* FILE: write_escaped_text */

/* Entries a vocabulary may have: QKV_MAX_VOCAB (model.h), which a
 * checkpoint's vocab_size is checked against */
#define TOKENIZER_MAX_VOCAB (1 << 20)

typedef struct {
    const char *piece;
    int length; /* its bytes (a piece may hold a NUL) */
    int id;
} TokenIndex;

/* What a prompt becomes, by kind (the qkv header's tokenizer_kind):
 *   LLAMA     BOS, then a dummy space and the text, merged by score; <0xXX>
 *             byte tokens for characters the vocabulary lacks.
 *   CHAR      one token per character, nothing prepended (nanoGPT); a
 *             character outside the vocabulary is an error.
 *   GPT2_BPE  GPT-2's pre-tokenizer splits the text, then each piece's
 *             bytes are merged by rank (merges.txt's order); nothing
 *             prepended. Every byte has a token, so any text encodes. */
typedef enum { TOKENIZER_LLAMA = 0, TOKENIZER_CHAR = 1, TOKENIZER_GPT2_BPE = 2 } TokenizerKind;

typedef struct {
    unsigned long long key; /* left id << 32 | right id; 0 marks an empty slot (key + 1 stored) */
    int rank, merged_id;
} MergeSlot;

typedef struct {
    char **vocab;          /* [vocab_size] NUL-terminated pieces */
    int *piece_lengths;    /* [vocab_size] bytes in each piece (a piece may hold a NUL byte) */
    float *scores;         /* [vocab_size] merge priority: higher merges first */
    int vocab_size;
    int max_token_length;
    TokenIndex *sorted;    /* pieces sorted for binary search */
    int byte_tokens[256];  /* id of <0xXX> for each byte, -1 if absent (GPT-2: the byte's own piece) */
    char byte_values[256]; /* byte b at index b: what a byte token decodes to */
    int bos_id, eos_id;    /* -1: none */
    int kind;              /* TokenizerKind */
    MergeSlot *merges;     /* GPT-2: [merge_slots] hash of (left, right) -> rank, merged id */
    int *merge_list;       /* GPT-2: [n_merges, 3] left, right, merged id in rank order (for writing) */
    int n_merges, merge_slots;
} Tokenizer;

/* Reads llama2.c's layout: i32 max_token_length, then per token f32 score,
 * i32 length, bytes. From a file (tokenizer.bin) or from memory (the section
 * embedded in a qkv checkpoint). Returns 0, or -1 with a reason in err. */
int tokenizer_load_file(Tokenizer *t, const char *path, int vocab_size, char *err, size_t err_len);
int tokenizer_load_bytes(Tokenizer *t, const unsigned char *data, size_t n, int vocab_size,
                         char *err, size_t err_len);
/* The same for any TokenizerKind. GPT-2's section goes on after the pieces
 * with u32 n_merges and n_merges x (i32 left, i32 right, i32 merged), in
 * rank order; each merged piece must be left + right, made by no other
 * merge, from pieces that are bytes or made by earlier merges. */
int tokenizer_load_kind(Tokenizer *t, const unsigned char *data, size_t n, int vocab_size, int kind,
                        char *err, size_t err_len);
void tokenizer_free(Tokenizer *t);

/* The first token id whose piece differs between a and b (bytes, or absent
 * from one), or -1 when they are the same vocabulary: one model's token
 * ids then mean the other's. The control tokens (id 0, a's start and end)
 * are compared by id alone: llama2.c's tokenizer.bin spells <s> "\n<s>\n",
 * its GGUF conversions "<s>". */
int tokenizer_first_difference(const Tokenizer *a, const Tokenizer *b);

/* Checks that text is well-formed UTF-8; returns 0 if so, else the 1-based
 * byte offset of the first bad byte. */
size_t utf8_invalid_at(const char *text);

/* Bytes in the valid UTF-8 sequence at s (1..4), or 0 if it is not one
 * (overlong, surrogate, beyond U+10FFFF, bad continuation). Reads at most
 * up to the first NUL, so s must be NUL-terminated. */
int utf8_sequence_length(const unsigned char *s);

/* Columns a terminal gives the character at s (NUL-terminated): 2 for East
 * Asian Wide and Fullwidth (CJK, most emoji), else 1; its bytes in *bytes
 * (a byte that starts no valid sequence: 1 column, 1 byte). */
int utf8_columns(const char *s, int *bytes);

/* 0 if every character of text has a token, else the 1-based byte offset
 * of the first that has none (only a character vocabulary lacks any). */
size_t tokenizer_unknown_at(const Tokenizer *t, const char *text);

/* Encodes text into tokens (room for strlen(text)+3 ids), optionally with BOS
 * first and EOS last; returns the count, or -1 if out of memory. A
 * character the vocabulary lacks becomes id 0 (check tokenizer_unknown_at). */
int tokenizer_encode(const Tokenizer *t, const char *text, int bos, int eos, int *tokens);

/* The text of token after prev: for llama2.c's kind a leading space is
 * dropped after BOS, and a byte token <0xXX> becomes its byte; the other
 * kinds' pieces are their bytes. *len receives its length in bytes. */
const char *tokenizer_decode(const Tokenizer *t, int prev, int token, int *len);

/* Whether a sampled id ends the text: BOS or EOS (generate stops there and
 * prints neither) */
static inline int tokenizer_ends_text(const Tokenizer *t, int id) { return id == t->bos_id || id == t->eos_id; }

/* A piece of any bytes as printable text, for the trace and -m tokenize:
 * \n \t \r \\ (and \" when quoted), \xNN for other control bytes, DEL and
 * each byte that is not part of valid UTF-8, \u0080..\u009F for the C1
 * controls. Writes at most cap - 1 bytes and a NUL into out, stopping
 * before an escape or character that does not fit (never half of one).
 * Returns how many of the piece's len bytes it wrote: len when all fit. */
int piece_escape(char *out, size_t cap, const char *piece, int len, int quoted);

/* Any bytes as the contents of a JSON string (no quotes) or as XML text:
 * valid UTF-8 kept and each byte that is not part of it U+FFFD. JSON: " and
 * \ escaped, control bytes and C1 controls as \u00XX (and < too inside an
 * HTML page, so no string closes its <script>); XML: & < > " as entities,
 * C1 controls as &#xNN;, C0 bytes, U+FFFE and U+FFFF as U+FFFD (XML 1.0
 * cannot hold them). No raw control character reaches the file. */
typedef enum { ESCAPE_JSON, ESCAPE_JSON_IN_HTML, ESCAPE_XML } EscapeSyntax;
void write_escaped_text(FILE *f, const char *s, int len, EscapeSyntax syntax);

/* Prints generated text so that stdout only ever receives well-formed UTF-8
 * and no control characters except \t \n \r (C1 included): a model can neither drive the
 * terminal nor print half a character. Byte tokens that together make a
 * character are held until it is complete; bytes that cannot make one are
 * dropped (as llama2.c drops unprintable bytes). */
typedef struct {
    unsigned char pending[4];
    int n_pending;
} TextPrinter;

void text_printer_put(TextPrinter *p, const char *piece, int len);

#endif
