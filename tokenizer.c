/* tokenizer.c — byte-pair encoding with merge scores, as llama2.c's
 * tokenizer.bin (and the section embedded in a qkv checkpoint) stores it;
 * nanoGPT's characters; GPT-2's byte-level BPE.
 *
 * Encoding (llama2.c): a dummy space, then each UTF-8 character as its own
 * piece (or as <0xXX> byte tokens when the vocabulary lacks it), then
 * repeatedly merge the adjacent pair whose concatenation is the
 * highest-scoring piece (leftmost on ties). A heap of candidate pairs makes
 * that O(n log n), so whole files can be encoded, with exactly the result of
 * llama2.c's O(n^2) rescan. GPT-2's BPE is the same loop over bytes with the
 * merge's rank for the score, inside the pieces its pre-tokenizer cuts.
 */
#include "tokenizer.h"
#include "unicode_classes.h"
#include "input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Loading                                                                   */

typedef struct {
    const unsigned char *p, *end;
} Reader;

static int read_bytes(Reader *r, void *out, size_t n) {
    if ((size_t)(r->end - r->p) < n) return -1;
    memcpy(out, r->p, n);
    r->p += n;
    return 0;
}

/* Pieces in byte order, a prefix before the longer piece: by their
 * lengths, not strcmp, since a piece may hold a NUL byte ("a\0" is not
 * "a", and "a" joined with "\0b" is not "a") */
static int compare_pieces(const char *a, int a_len, const char *b, int b_len) {
    int c = memcmp(a, b, (size_t)(a_len < b_len ? a_len : b_len));
    return c ? c : (a_len > b_len) - (a_len < b_len);
}

/* The index's order: by piece, equal pieces by id */
static int compare_tokens(const void *a, const void *b) {
    const TokenIndex *x = a, *y = b;
    int c = compare_pieces(x->piece, x->length, y->piece, y->length);
    return c ? c : (x->id > y->id) - (x->id < y->id);
}

/* The token whose piece is the len bytes at piece (the lowest id, where a
 * vocabulary holds the piece twice), or -1 */
static int lookup_piece(const Tokenizer *t, const char *piece, int len) {
    size_t lo = 0, hi = (size_t)t->vocab_size;
    while (lo < hi) { /* the first entry not below the piece */
        size_t mid = lo + (hi - lo) / 2;
        const TokenIndex *e = &t->sorted[mid];
        if (compare_pieces(e->piece, e->length, piece, len) < 0) lo = mid + 1;
        else hi = mid;
    }
    const TokenIndex *e = lo < (size_t)t->vocab_size ? &t->sorted[lo] : NULL;
    return e && compare_pieces(e->piece, e->length, piece, len) == 0 ? e->id : -1;
}

static int fail(Tokenizer *t, char *err, size_t err_len, const char *msg) {
    snprintf(err, err_len, "%s", msg);
    tokenizer_free(t);
    return -1;
}

/* The sorted index, and the token of each byte: <0xXX> (llama2.c) or the
 * one-byte piece itself (GPT-2; the first such, every byte must have one).
 * Returns 0, or -1 with a reason in err. */
static int index_vocabulary(Tokenizer *t, char *err, size_t err_len) {
    for (int i = 0; i < t->vocab_size; i++) t->sorted[i] = (TokenIndex){ t->vocab[i], t->piece_lengths[i], i };
    qsort(t->sorted, (size_t)t->vocab_size, sizeof(TokenIndex), compare_tokens);
    char name[8];
    for (int b = 0; b < 256; b++) {
        t->byte_values[b] = (char)b;
        int len = snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_tokens[b] = t->kind == TOKENIZER_LLAMA ? lookup_piece(t, name, len) : -1;
    }
    if (t->kind != TOKENIZER_GPT2_BPE) return 0;
    for (int i = t->vocab_size - 1; i >= 0; i--)
        if (t->piece_lengths[i] == 1) t->byte_tokens[(unsigned char)t->vocab[i][0]] = i;
    for (int b = 0; b < 256; b++)
        if (t->byte_tokens[b] < 0) {
            snprintf(err, err_len, "GPT-2 tokenizer: byte 0x%02X has no token (byte-level BPE needs all 256)", b);
            return -1;
        }
    return 0;
}

/* A character vocabulary's pieces are single UTF-8 characters. */
static int check_characters(const Tokenizer *t, char *err, size_t err_len) {
    for (int i = 0; i < t->vocab_size; i++) {
        int len = t->piece_lengths[i];
        int one = t->vocab[i][0] == '\0' ? 1 : utf8_sequence_length((const unsigned char *)t->vocab[i]);
        if (len != one) {
            snprintf(err, err_len, "character tokenizer: piece %d is not one UTF-8 character", i);
            return -1;
        }
    }
    return 0;
}

/* ---- GPT-2's merges: a hash table from (left, right) to rank and result ---- */

static unsigned long long merge_key(int left, int right) {
    return ((unsigned long long)(unsigned)left << 32 | (unsigned)right) + 1; /* never 0: 0 is empty */
}

static MergeSlot *merge_slot(const Tokenizer *t, unsigned long long key) {
    size_t mask = (size_t)t->merge_slots - 1, i = (size_t)(key * 0x9E3779B97F4A7C15ull >> 20) & mask;
    while (t->merges[i].key != 0 && t->merges[i].key != key) i = (i + 1) & mask;
    return &t->merges[i];
}

/* The merge of left then right: its rank, or -1 if there is none. */
static int merge_rank(const Tokenizer *t, int left, int right, int *merged_id) {
    const MergeSlot *slot = merge_slot(t, merge_key(left, right));
    if (slot->key == 0) return -1;
    *merged_id = slot->merged_id;
    return slot->rank;
}

/* Reads the merges after the pieces. Each merge must join two pieces that
 * exist by then (bytes, or the results of earlier merges) into their
 * concatenation, made by no other merge: then a new pair's rank is always
 * above the one that made it, and merging the lowest rank first, leftmost
 * first (the heap), is exactly GPT-2's pass over each rank in turn. */
static int load_merges(Tokenizer *t, Reader *r, char *err, size_t err_len) {
    uint32_t n;
    if (read_bytes(r, &n, 4) || (size_t)(r->end - r->p) / 12 < n || n > (uint32_t)t->vocab_size) {
        snprintf(err, err_len, "GPT-2 tokenizer: the merge list is truncated or longer than the vocabulary");
        return -1;
    }
    int slots = 16;
    while (slots < 2 * (int)n) slots *= 2;
    int *made_at = malloc((size_t)t->vocab_size * sizeof(int)); /* rank that made each piece; -1 a byte */
    t->merges = calloc((size_t)slots, sizeof(MergeSlot));
    t->merge_list = malloc(((size_t)n * 3 + 1) * sizeof(int));
    if (!made_at || !t->merges || !t->merge_list) {
        free(made_at);
        snprintf(err, err_len, "tokenizer: out of memory");
        return -1;
    }
    t->merge_slots = slots;
    for (int i = 0; i < t->vocab_size; i++) made_at[i] = t->piece_lengths[i] == 1 ? -1 : INT32_MAX;
    const char *why = NULL;
    uint32_t k;
    for (k = 0; k < n && !why; k++) {
        int32_t ids[3] = { 0, 0, 0 };
        read_bytes(r, ids, 12); /* there: the count was checked against the bytes left */
        memcpy(t->merge_list + 3 * (size_t)k, ids, sizeof ids);
        int left = ids[0], right = ids[1], merged = ids[2], v = t->vocab_size;
        if (left < 0 || left >= v || right < 0 || right >= v || merged < 0 || merged >= v) why = "an id outside the vocabulary";
        else if (made_at[left] >= (int)k || made_at[right] >= (int)k) why = "a piece no earlier merge made";
        else if (made_at[merged] != INT32_MAX) why = "a piece made twice";
        else if (t->piece_lengths[merged] != t->piece_lengths[left] + t->piece_lengths[right] ||
                 memcmp(t->vocab[merged], t->vocab[left], (size_t)t->piece_lengths[left]) != 0 ||
                 memcmp(t->vocab[merged] + t->piece_lengths[left], t->vocab[right], (size_t)t->piece_lengths[right]) != 0)
            why = "a result that is not left + right";
        else {
            MergeSlot *slot = merge_slot(t, merge_key(left, right));
            if (slot->key != 0) why = "a pair listed twice";
            else *slot = (MergeSlot){ merge_key(left, right), (int)k, merged };
            made_at[merged] = (int)k;
        }
    }
    free(made_at);
    t->n_merges = (int)n;
    if (why) {
        snprintf(err, err_len, "GPT-2 tokenizer: merge %u has %s", k - 1, why);
        return -1;
    }
    return 0;
}

/* Entries in a tokenizer section, for a tokenizer.bin used without a model.
 * A malformed entry counts too, so that loading reaches it and says what is
 * wrong with it. */
static int count_entries(const unsigned char *data, size_t n) {
    Reader r = { data + 4, data + n };
    int count = 0;
    int32_t len;
    float score;
    while (r.p < r.end) {
        count++;
        if (read_bytes(&r, &score, 4) || read_bytes(&r, &len, 4) || len < 0 || (size_t)(r.end - r.p) < (size_t)len)
            break;
        r.p += len;
    }
    return count;
}

int tokenizer_load_bytes(Tokenizer *t, const unsigned char *data, size_t n, int vocab_size,
                         char *err, size_t err_len) {
    return tokenizer_load_kind(t, data, n, vocab_size, TOKENIZER_LLAMA, err, err_len);
}

/* The vocabulary's t->vocab_size entries (a float score, an int32 length,
 * that many bytes) into t's arrays; -1 with err set and t freed when they
 * are cut short or a length is out of range. */
static int read_pieces(Tokenizer *t, Reader *r, char *err, size_t err_len) {
    int vocab_size = t->vocab_size, max_len = t->max_token_length;
    t->vocab = calloc((size_t)vocab_size, sizeof(char *));
    t->piece_lengths = calloc((size_t)vocab_size, sizeof(int));
    t->scores = calloc((size_t)vocab_size, sizeof(float));
    t->sorted = calloc((size_t)vocab_size, sizeof(TokenIndex));
    if (!t->vocab || !t->piece_lengths || !t->scores || !t->sorted)
        return fail(t, err, err_len, "tokenizer: out of memory");
    for (int i = 0; i < vocab_size; i++) {
        int32_t len;
        if (read_bytes(r, &t->scores[i], 4) || read_bytes(r, &len, 4))
            return fail(t, err, err_len, "tokenizer: truncated (fewer tokens than the model's vocabulary)");
        /* llama2.c's merges join two pieces' bytes and look the result up:
         * two empty pieces made one again, so a text the vocabulary cannot
         * spell (every character an empty <unk>) merged into one token,
         * silently. (GPT-2's merges are by id: its padding pieces are empty.) */
        int empty_refused = len == 0 && t->kind == TOKENIZER_LLAMA;
        if (len < 0 || len > max_len || empty_refused) {
            snprintf(err, err_len, len < 0        ? "tokenizer: piece %d has a negative length (%d)"
                                   : empty_refused ? "tokenizer: piece %d is empty (a llama2.c piece has 1 byte or more)"
                                                   : "tokenizer: piece %d has %d bytes, more than max_token_length",
                     i, (int)len);
            tokenizer_free(t);
            return -1;
        }
        if (!(t->vocab[i] = malloc((size_t)len + 1))) return fail(t, err, err_len, "tokenizer: out of memory");
        if (read_bytes(r, t->vocab[i], (size_t)len))
            return fail(t, err, err_len, "tokenizer: truncated inside a piece");
        t->vocab[i][len] = '\0';
        t->piece_lengths[i] = len;
    }
    return 0;
}

int tokenizer_load_kind(Tokenizer *t, const unsigned char *data, size_t n, int vocab_size, int kind,
                        char *err, size_t err_len) {
    memset(t, 0, sizeof *t);
    if (kind < TOKENIZER_LLAMA || kind > TOKENIZER_GPT2_BPE) return fail(t, err, err_len, "tokenizer: unknown kind");
    t->kind = kind;
    t->bos_id = kind == TOKENIZER_LLAMA ? 1 : -1;
    t->eos_id = kind == TOKENIZER_LLAMA ? 2 : -1;
    if (vocab_size < 0 && n >= 4 && kind == TOKENIZER_LLAMA) vocab_size = count_entries(data, n);
    if (vocab_size <= 0) return fail(t, err, err_len, "tokenizer: empty or malformed");
    if (vocab_size > TOKENIZER_MAX_VOCAB) { /* a checkpoint's vocabulary is at most this (model.h) */
        snprintf(err, err_len, "tokenizer: %d entries, more than any model's %d", vocab_size, TOKENIZER_MAX_VOCAB);
        tokenizer_free(t);
        return -1;
    }
    /* tokenizer_encode falls back to id 0, and BOS and EOS are 1 and 2 unless a qkv
     * header says otherwise (checked against the vocabulary at load) */
    if (vocab_size < 3 && kind == TOKENIZER_LLAMA) {
        snprintf(err, err_len, "tokenizer: %d entries; the engine needs at least 3 (<unk>, <s>, </s>)", vocab_size);
        tokenizer_free(t);
        return -1;
    }
    Reader r = { data, data + n };
    int32_t max_len;
    if (read_bytes(&r, &max_len, 4) || max_len <= 0 || max_len > (1 << 16))
        return fail(t, err, err_len, "tokenizer: truncated or bad header");
    t->max_token_length = max_len;
    t->vocab_size = vocab_size;
    if (read_pieces(t, &r, err, err_len)) return -1;
    if (kind == TOKENIZER_GPT2_BPE && load_merges(t, &r, err, err_len)) {
        tokenizer_free(t);
        return -1;
    }
    if (r.p != r.end)
        return fail(t, err, err_len, "tokenizer: has more tokens than the model's vocabulary (wrong tokenizer?)");
    if (index_vocabulary(t, err, err_len) || (kind == TOKENIZER_CHAR && check_characters(t, err, err_len))) {
        tokenizer_free(t);
        return -1;
    }
    return 0;
}

/* The largest tokenizer.bin read: Llama 2's is 434 KB, and a vocabulary of
 * QKV's largest (2^20 entries) with long pieces fits. */
#define MAX_TOKENIZER_BYTES (64u << 20)

int tokenizer_load_file(Tokenizer *t, const char *path, int vocab_size, char *err, size_t err_len) {
    memset(t, 0, sizeof *t);
    size_t size = 0;
    int fd = input_open(path, &size);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f && fd != INPUT_NOT_REGULAR) {
        snprintf(err, err_len, "cannot open tokenizer %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    const char *why = !f ? "is not a regular file" : size == 0 ? "is empty"
                      : size > MAX_TOKENIZER_BYTES ? "is larger than 64 MiB" : NULL;
    if (why) {
        if (f) fclose(f);
        snprintf(err, err_len, "tokenizer %s %s", path, why);
        return -1;
    }
    unsigned char *data = malloc(size);
    int ok = data && fread(data, 1, size, f) == size;
    fclose(f);
    if (!ok) {
        free(data);
        snprintf(err, err_len, "cannot read tokenizer %s", path);
        return -1;
    }
    int rc = tokenizer_load_bytes(t, data, size, vocab_size, err, err_len);
    free(data);
    return rc;
}

int tokenizer_first_difference(const Tokenizer *a, const Tokenizer *b) {
    int n = a->vocab_size < b->vocab_size ? a->vocab_size : b->vocab_size;
    for (int i = 0; i < n; i++) {
        int control = i == 0 || i == a->bos_id || i == a->eos_id;
        if (!control && (a->piece_lengths[i] != b->piece_lengths[i] ||
                         memcmp(a->vocab[i], b->vocab[i], (size_t)a->piece_lengths[i])))
            return i;
    }
    return a->vocab_size == b->vocab_size ? -1 : n;
}

void tokenizer_free(Tokenizer *t) {
    if (t->vocab)
        for (int i = 0; i < t->vocab_size; i++) free(t->vocab[i]);
    free(t->vocab);
    free(t->piece_lengths);
    free(t->scores);
    free(t->sorted);
    free(t->merges);
    free(t->merge_list);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------------ */
/* UTF-8                                                                     */

/* Length of the well-formed UTF-8 sequence at s, or 0 if it is not one
 * (overlong forms, surrogates and code points past U+10FFFF included). */
int utf8_sequence_length(const unsigned char *s) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int n;
    unsigned min;
    if ((c & 0xE0) == 0xC0) { n = 2; min = 0x80; c &= 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 3; min = 0x800; c &= 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 4; min = 0x10000; c &= 0x07; }
    else return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    return n;
}

size_t utf8_invalid_at(const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (s[i]) {
        int n = utf8_sequence_length(s + i);
        if (n == 0) return i + 1;
        i += (size_t)n;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */

/* A candidate merge of the live tokens at left and right. */
typedef struct {
    float score;
    int left, right;       /* positions in the symbol list */
    int left_id, right_id; /* the tokens there when this was pushed */
    int merged_id;
} Merge;

typedef struct {
    Merge *items;
    int count;
} MergeHeap;

/* Higher score first; on equal scores, the leftmost pair (llama2.c's rule). */
static int merge_before(const Merge *a, const Merge *b) {
    if (a->score != b->score) return a->score > b->score;
    return a->left < b->left;
}

static void heap_push(MergeHeap *h, Merge m) {
    int i = h->count++;
    h->items[i] = m;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!merge_before(&h->items[i], &h->items[parent])) break;
        Merge tmp = h->items[i]; h->items[i] = h->items[parent]; h->items[parent] = tmp;
        i = parent;
    }
}

static Merge heap_pop(MergeHeap *h) {
    Merge top = h->items[0];
    h->items[0] = h->items[--h->count];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, best = i;
        if (l < h->count && merge_before(&h->items[l], &h->items[best])) best = l;
        if (r < h->count && merge_before(&h->items[r], &h->items[best])) best = r;
        if (best == i) break;
        Merge tmp = h->items[i]; h->items[i] = h->items[best]; h->items[best] = tmp;
        i = best;
    }
    return top;
}

typedef struct {
    const Tokenizer *t;
    int *ids, *next, *prev; /* a doubly linked list over the symbols */
    MergeHeap heap;
    char *buffer;           /* room for two pieces joined */
    unsigned char *starts_piece; /* GPT-2: 1 where the pre-tokenizer starts a piece; no merge crosses it */
} Encoder;

static void push_pair(Encoder *e, int left) {
    int right = left < 0 ? -1 : e->next[left];
    if (left < 0 || right < 0) return;
    const Tokenizer *t = e->t;
    int a = e->ids[left], b = e->ids[right];
    if (t->kind == TOKENIZER_GPT2_BPE) {
        int merged, rank = e->starts_piece[right] ? -1 : merge_rank(t, a, b, &merged);
        /* the lowest rank first: as a score, its negative (exact: ranks < 2^24) */
        if (rank >= 0) heap_push(&e->heap, (Merge){ -(float)rank, left, right, a, b, merged });
        return;
    }
    int la = t->piece_lengths[a], lb = t->piece_lengths[b];
    if (la + lb > t->max_token_length) return;
    memcpy(e->buffer, t->vocab[a], (size_t)la);
    memcpy(e->buffer + la, t->vocab[b], (size_t)lb);
    int id = lookup_piece(t, e->buffer, la + lb);
    /* llama2.c merges only pieces scored above -1e10 (its best score's
     * start), and so never one scored NaN (which would break the heap's
     * order); nor into BOS or EOS (a GGUF's "<s>", sentencepiece's: text
     * "<s>" in a prompt is text, as sentencepiece encodes it) */
    if (id < 0 || !(t->scores[id] > -1e10f) || tokenizer_ends_text(t, id)) return;
    heap_push(&e->heap, (Merge){ t->scores[id], left, right, a, b, id });
}

/* Splits text into characters (or byte tokens) after the dummy space
 * (llama2.c), into characters (CHAR) or into bytes (GPT-2). */
static int initial_symbols(const Tokenizer *t, const char *text, int *ids) {
    int n = 0;
    if (t->kind == TOKENIZER_GPT2_BPE) {
        for (const unsigned char *s = (const unsigned char *)text; *s; s++) ids[n++] = t->byte_tokens[*s];
        return n;
    }
    if (text[0] != '\0' && t->kind == TOKENIZER_LLAMA) {
        int space = lookup_piece(t, " ", 1);
        if (space >= 0) ids[n++] = space;
    }
    const unsigned char *s = (const unsigned char *)text;
    while (*s) {
        int len = utf8_sequence_length(s);
        if (len == 0) len = 1; /* a stray byte stands alone */
        int id = lookup_piece(t, (const char *)s, len);
        if (id >= 0) ids[n++] = id;
        else if (t->kind == TOKENIZER_CHAR) ids[n++] = 0; /* refused before: tokenizer_unknown_at */
        else
            for (int i = 0; i < len; i++) {
                int b = t->byte_tokens[s[i]];
                ids[n++] = b >= 0 ? b : 0; /* no byte token: <unk> */
            }
        s += len;
    }
    return n;
}

/* ---- GPT-2's pre-tokenizer ---- */

static int in_ranges(uint32_t cp, const uint32_t (*r)[2], size_t n) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp > r[mid][1]) lo = mid + 1;
        else if (cp < r[mid][0]) hi = mid;
        else return 1;
    }
    return 0;
}

#define COUNT(a) (sizeof a / sizeof a[0])
enum { CLASS_LETTER, CLASS_NUMBER, CLASS_SPACE, CLASS_OTHER };

/* The code point of the valid UTF-8 sequence of l bytes at s */
static uint32_t code_point(const unsigned char *s, int l) {
    uint32_t cp = l == 1 ? s[0] : l == 2 ? (s[0] & 0x1Fu) : l == 3 ? (s[0] & 0x0Fu) : (s[0] & 0x07u);
    for (int k = 1; k < l; k++) cp = cp << 6 | (s[k] & 0x3Fu);
    return cp;
}

int utf8_columns(const char *s, int *bytes) {
    int l = utf8_sequence_length((const unsigned char *)s);
    *bytes = l ? l : 1;
    return l && in_ranges(code_point((const unsigned char *)s, l), UNICODE_WIDE, COUNT(UNICODE_WIDE)) ? 2 : 1;
}

/* The class of the character at s[i] (n bytes in all), and its length in
 * *len; a byte that starts no valid sequence is a character of class other. */
static int char_class(const unsigned char *s, size_t i, size_t n, size_t *len) {
    int l = utf8_sequence_length(s + i);
    if (l == 0 || (size_t)l > n - i) {
        *len = 1;
        return CLASS_OTHER;
    }
    uint32_t cp = code_point(s + i, l);
    *len = (size_t)l;
    if (in_ranges(cp, UNICODE_LETTERS, COUNT(UNICODE_LETTERS))) return CLASS_LETTER;
    if (in_ranges(cp, UNICODE_NUMBERS, COUNT(UNICODE_NUMBERS))) return CLASS_NUMBER;
    if (in_ranges(cp, UNICODE_SPACES, COUNT(UNICODE_SPACES))) return CLASS_SPACE;
    return CLASS_OTHER;
}

/* End of the run of characters of class cls from i. */
static size_t run_end(const unsigned char *s, size_t i, size_t n, int cls) {
    size_t len;
    while (i < n && char_class(s, i, n, &len) == cls) i += len;
    return i;
}

/* Where the piece starting at i ends, by GPT-2's pattern, tried in order:
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t gpt2_piece_end(const unsigned char *s, size_t i, size_t n) {
    static const char *const contractions[] = { "s", "t", "re", "ve", "m", "ll", "d" };
    if (s[i] == '\'')
        for (size_t k = 0; k < COUNT(contractions); k++) {
            size_t l = strlen(contractions[k]);
            if (n - i - 1 >= l && memcmp(s + i + 1, contractions[k], l) == 0) return i + 1 + l;
        }
    /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': a run of one class after an optional space */
    size_t len, at = s[i] == ' ' && i + 1 < n ? i + 1 : i;
    int cls = char_class(s, at, n, &len);
    if (cls != CLASS_SPACE) return run_end(s, at, n, cls);
    /* \s+(?!\S): all the spaces at the end of the text, else all but the
     * last (which then leads the next piece); one space alone is \s+ */
    size_t end = run_end(s, i, n, CLASS_SPACE), last = i;
    for (size_t k = i; k < end; k += len) {
        char_class(s, k, n, &len);
        last = k;
    }
    return end == n || last == i ? end : last;
}

/* Marks where each piece of the text starts (bytes 0..n-1). */
static void gpt2_pre_tokenize(const unsigned char *s, size_t n, unsigned char *starts) {
    memset(starts, 0, n);
    for (size_t i = 0; i < n;) {
        starts[i] = 1;
        i = gpt2_piece_end(s, i, n);
    }
}

static int merge_all(Encoder *e, int n) {
    for (int i = 0; i < n; i++) {
        e->next[i] = i + 1 < n ? i + 1 : -1;
        e->prev[i] = i - 1;
    }
    for (int i = 0; i + 1 < n; i++) push_pair(e, i);
    while (e->heap.count > 0) {
        Merge m = heap_pop(&e->heap);
        /* stale if either side has merged since it was pushed */
        if (e->ids[m.left] != m.left_id || e->next[m.left] != m.right || e->ids[m.right] != m.right_id)
            continue;
        e->ids[m.left] = m.merged_id;
        e->ids[m.right] = -1;
        e->next[m.left] = e->next[m.right];
        if (e->next[m.right] >= 0) e->prev[e->next[m.right]] = m.left;
        push_pair(e, e->prev[m.left]);
        push_pair(e, m.left);
    }
    int count = 0;
    for (int i = 0; i >= 0 && n > 0; i = e->next[i]) e->ids[count++] = e->ids[i];
    return count;
}

size_t tokenizer_unknown_at(const Tokenizer *t, const char *text) {
    if (t->kind != TOKENIZER_CHAR) return 0;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; s[i];) {
        int len = utf8_sequence_length(s + i);
        if (len == 0) len = 1;
        if (lookup_piece(t, (const char *)s + i, len) < 0) return i + 1;
        i += (size_t)len;
    }
    return 0;
}

int tokenizer_encode(const Tokenizer *t, const char *text, int bos, int eos, int *tokens) {
    size_t len = strlen(text), cap = len + 2;
    Encoder e = { t, NULL, NULL, NULL, { NULL, 0 }, NULL, NULL };
    e.ids = malloc(cap * sizeof(int));
    e.next = malloc(cap * sizeof(int));
    e.prev = malloc(cap * sizeof(int));
    e.heap.items = malloc(cap * 3 * sizeof(Merge)); /* each merge pushes at most two */
    e.buffer = malloc((size_t)t->max_token_length * 2 + 2);
    e.starts_piece = malloc(cap);
    int n = -1;
    if (e.ids && e.next && e.prev && e.heap.items && e.buffer && e.starts_piece) {
        if (t->kind == TOKENIZER_GPT2_BPE) gpt2_pre_tokenize((const unsigned char *)text, len, e.starts_piece);
        int symbols = initial_symbols(t, text, e.ids);
        if (t->kind != TOKENIZER_CHAR) symbols = merge_all(&e, symbols);
        n = 0;
        if (bos && t->bos_id >= 0) tokens[n++] = t->bos_id;
        memcpy(tokens + n, e.ids, (size_t)symbols * sizeof(int));
        n += symbols;
        if (eos && t->eos_id >= 0) tokens[n++] = t->eos_id;
    }
    free(e.ids); free(e.next); free(e.prev); free(e.heap.items); free(e.buffer); free(e.starts_piece);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Decoding and printing                                                     */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

const char *tokenizer_decode(const Tokenizer *t, int prev, int token, int *len) {
    const char *piece = t->vocab[token];
    int n = t->piece_lengths[token];
    *len = n;
    if (t->kind != TOKENIZER_LLAMA) return piece;
    if (prev == t->bos_id && n > 0 && piece[0] == ' ') { piece++; n--; }
    if (n == 6 && memcmp(piece, "<0x", 3) == 0 && piece[5] == '>') {
        int hi = hex_digit(piece[3]), lo = hex_digit(piece[4]);
        if (hi >= 0 && lo >= 0) {
            *len = 1;
            return &t->byte_values[hi * 16 + lo];
        }
    }
    *len = n;
    return piece;
}

/* A C1 control (U+0080..U+009F, bytes C2 80..C2 9F): 8-bit CSI, OSC and
 * the like to a terminal, so as unsafe to print as ESC itself */
static int c1_control(const unsigned char *seq, int n) { return n == 2 && seq[0] == 0xC2 && seq[1] < 0xA0; }

int piece_escape(char *out, size_t cap, const char *piece, int len, int quoted) {
    size_t used = 0;
    int i = 0;
    if (cap == 0) return 0;
    while (i < len) {
        const unsigned char *c = (const unsigned char *)piece + i;
        int n = *c < 0x80 ? 1 : utf8_sequence_length(c); /* piece is NUL-terminated */
        if (n == 0 || i + n > len) n = 1;                 /* a byte that makes no character: \xNN */
        char unit[8];
        if (*c == '\\' || (*c == '"' && quoted)) snprintf(unit, sizeof unit, "\\%c", *c);
        else if (*c == '\n' || *c == '\t' || *c == '\r')
            snprintf(unit, sizeof unit, "\\%c", *c == '\n' ? 'n' : *c == '\t' ? 't' : 'r');
        else if (n == 1 && (*c < 0x20 || *c >= 0x7F)) snprintf(unit, sizeof unit, "\\x%02X", *c);
        else if (c1_control(c, n)) snprintf(unit, sizeof unit, "\\u%04X", c[1]);
        else { memcpy(unit, c, (size_t)n); unit[n] = '\0'; }
        size_t k = strlen(unit);
        if (used + k > cap - 1) break; /* never half an escape or a character */
        memcpy(out + used, unit, k);
        used += k;
        i += n;
    }
    out[used] = '\0';
    return i;
}

void write_escaped_text(FILE *f, const char *s, int len, EscapeSyntax syntax) {
    int xml = syntax == ESCAPE_XML;
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int n = c < 0x80 ? 1 : utf8_sequence_length((const unsigned char *)s + i); /* s is NUL-terminated */
        if (n == 0 || i + n > len) fputs(xml ? "\xEF\xBF\xBD" : "\\ufffd", f);  /* not UTF-8: U+FFFD */
        else if (xml && n == 3 && !memcmp(s + i, "\xEF\xBF", 2) && (unsigned char)s[i + 2] >= 0xBE) {
            fputs("\xEF\xBF\xBD", f); /* U+FFFE, U+FFFF: not XML characters either */
            i += 2;
        } else if (c1_control((const unsigned char *)s + i, n)) { /* kept, but never raw to a terminal */
            fprintf(f, xml ? "&#x%X;" : "\\u%04x", (unsigned char)s[i + 1]);
            i += 1;
        } else if (n > 1) { fwrite(s + i, 1, (size_t)n, f); i += n - 1; }
        else if (xml && (c < 0x20 || c == 0x7F)) fputs("\xEF\xBF\xBD", f);      /* XML cannot hold them */
        else if (xml && strchr("&<>\"", c))
            fputs(c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : "&quot;", f);
        else if (!xml && (c == '"' || c == '\\')) { fputc('\\', f); fputc(c, f); }
        else if (!xml && (c < 0x20 || c == 0x7F || (c == '<' && syntax == ESCAPE_JSON_IN_HTML)))
            fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
}

static int printable_ascii(unsigned char c) {
    return c >= 0x20 ? c != 0x7F : (c == '\t' || c == '\n' || c == '\r');
}

/* Bytes a sequence starting with lead has in all, or 0 if lead cannot start one. */
static int utf8_expected_length(unsigned char lead) {
    if ((lead & 0xE0) == 0xC0) return 2;
    if ((lead & 0xF0) == 0xE0) return 3;
    if ((lead & 0xF8) == 0xF0) return 4;
    return 0;
}

static void text_printer_byte(TextPrinter *p, unsigned char c) {
    if (p->n_pending > 0 && (c & 0xC0) != 0x80) p->n_pending = 0; /* sequence broken off: drop it */
    if (p->n_pending == 0) {
        if (c < 0x80) {
            if (printable_ascii(c)) putchar(c);
            return;
        }
        if (utf8_expected_length(c) == 0) return; /* a stray continuation or invalid byte */
    }
    if (p->n_pending < 0 || p->n_pending >= (int)sizeof p->pending) p->n_pending = 0;
    p->pending[p->n_pending++] = c;
    if (p->n_pending < utf8_expected_length(p->pending[0])) return;
    unsigned char seq[5];
    memcpy(seq, p->pending, (size_t)p->n_pending);
    seq[p->n_pending] = 0;
    if (utf8_sequence_length(seq) == p->n_pending && !c1_control(seq, p->n_pending))
        fwrite(seq, 1, (size_t)p->n_pending, stdout);
    p->n_pending = 0;
}

void text_printer_put(TextPrinter *p, const char *piece, int len) {
    for (int i = 0; i < len; i++) text_printer_byte(p, (unsigned char)piece[i]);
}
