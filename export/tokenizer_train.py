#!/usr/bin/python3
"""Tokenizers for qkv, written in llama2.c's tokenizer.bin layout.

Layout (see README, "Checkpoint format", tokenizer section):
    i32 max_token_length, then per token: f32 score, i32 n, n bytes.
    id 0 <unk>, 1 <s>, 2 </s>, ids 3..258 byte tokens <0x00>..<0xFF>,
    then every single character that occurs, then merged pieces.
    Higher score = merged earlier (score = -rank).

Encoding (must match the C engine, which encodes like llama2.c):
    prepend " " to the text, split into UTF-8 characters (look each one up,
    else byte-fallback to <0xXX> tokens), then repeatedly merge the adjacent
    pair whose concatenation is a vocabulary piece with the highest score
    (leftmost on ties) until no merge applies.

Our Python encoder computes exactly that, but fast: text is pre-split into
chunks that no vocabulary piece can straddle, and each distinct chunk is
encoded once (cached).  Chunks are  " ?[^\\s]+"  |  "\\n+"  |  one other
whitespace character.  Training only ever merges inside a chunk, so every
learned piece is a substring of some chunk, hence:
  * a piece contains a space only at its first position,
  * a piece containing "\\n" consists only of "\\n",
  * the special/byte strings (<s>, <0x41>, ...) are never learned (we skip
    any merge whose string is already a token) so strings are unique.
A concatenation a+b across a chunk boundary then always has whitespace
after its first character (next chunk starts with whitespace) or mixes
"\\n" with other characters, so it is never a piece: the C encoder can never
merge across a boundary, and its per-chunk merge sequences are independent.

Two vocabularies:
  * BPE (stories):  python3 export/tokenizer_train.py --input FILE --vocab-size 4096 --out tok.bin
  * word-level (grammar): build_word_vocab(words) -- each word with its
    leading space is one piece; every space-prefixed prefix of it is also a
    piece so the pairwise merge can reach the whole word.

Check a C build against this encoder:
    python3 export/tokenizer_train.py --verify TOK.bin --text FILE [--run ./run]
"""
import argparse
import collections
import re
import struct
import sys

import cli  # one-line errors

CHUNK_RE = re.compile(r" ?[^\s]+|\n+|\s")
N_SPECIAL = 3 + 256  # <unk> <s> </s> + 256 byte tokens
SPECIALS = ["<unk>", "<s>", "</s>"]
BOS_ID, EOS_ID = 1, 2


def byte_piece(b):
    return "<0x%02X>" % b


def base_pieces():
    return SPECIALS + [byte_piece(b) for b in range(256)]


def chunks(text):
    """Split text (already with the dummy space) into merge-independent chunks."""
    return CHUNK_RE.findall(text)


# ---------------------------------------------------------------------------
# file I/O
def write_tokenizer(path, pieces, scores):
    assert len(pieces) == len(scores)
    assert len(set(pieces)) == len(pieces), "duplicate piece strings"
    with open(path, "wb") as f:
        f.write(tokenizer_bytes(pieces, scores))


def tokenizer_bytes(pieces, scores):
    enc = [p.encode("utf-8") for p in pieces]
    out = [struct.pack("<i", max(len(e) for e in enc))]
    for e, s in zip(enc, scores):
        out.append(struct.pack("<fi", s, len(e)))
        out.append(e)
    return b"".join(out)


def parse_tokenizer(data, vocab_size=None):
    """data: bytes of a tokenizer section.  Returns (pieces, scores)."""
    (maxlen,) = struct.unpack_from("<i", data, 0)
    off = 4
    pieces, scores = [], []
    while off < len(data) and (vocab_size is None or len(pieces) < vocab_size):
        s, n = struct.unpack_from("<fi", data, off)
        off += 8
        pieces.append(data[off:off + n].decode("utf-8", errors="surrogateescape"))
        off += n
        scores.append(s)
    return pieces, scores


def read_tokenizer(path, vocab_size=None):
    with open(path, "rb") as f:
        return parse_tokenizer(f.read(), vocab_size)


# ---------------------------------------------------------------------------
class Tokenizer:
    """llama2.c-equivalent encoder/decoder over a (pieces, scores) vocabulary."""

    def __init__(self, pieces, scores):
        self.pieces = list(pieces)
        self.scores = list(scores)
        self.lookup = {}
        for i, p in enumerate(self.pieces):
            self.lookup.setdefault(p, i)  # C's bsearch needs unique strings anyway
        self.cache = {}

    @classmethod
    def load(cls, path):
        return cls(*read_tokenizer(path))

    @property
    def vocab_size(self):
        return len(self.pieces)

    def _encode_chunk(self, chunk):
        lookup, scores = self.lookup, self.scores
        ids = []
        for ch in chunk:
            i = lookup.get(ch)
            if i is not None:
                ids.append(i)
            else:
                ids.extend(b + 3 for b in ch.encode("utf-8"))
        strs = [self.pieces[i] for i in ids]
        while True:
            best, best_score, best_id = -1, -1e10, -1
            for k in range(len(ids) - 1):
                j = lookup.get(strs[k] + strs[k + 1])
                if j is not None and scores[j] > best_score:
                    best, best_score, best_id = k, scores[j], j
            if best < 0:
                return ids
            ids[best:best + 2] = [best_id]
            strs[best:best + 2] = [self.pieces[best_id]]

    def encode(self, text, bos=False, eos=False):
        out = [BOS_ID] if bos else []
        if text:
            cache = self.cache
            for c in chunks(" " + text):
                r = cache.get(c)
                if r is None:
                    r = self._encode_chunk(c)
                    if len(cache) < 2_000_000:
                        cache[c] = r
                out.extend(r)
        if eos:
            out.append(EOS_ID)
        return out

    def encode_reference(self, text):
        """Direct (slow, unchunked) llama2.c algorithm; for self-checks."""
        return self._encode_chunk(" " + text) if text else []

    def piece_bytes(self, i):
        p = self.pieces[i]
        m = re.fullmatch(r"<0x([0-9A-F]{2})>", p)
        if m and 3 <= i < N_SPECIAL:
            return bytes([int(m.group(1), 16)])
        return p.encode("utf-8", errors="surrogateescape")

    def decode(self, ids):
        b = b"".join(self.piece_bytes(i) for i in ids if i not in (0, 1, 2))
        s = b.decode("utf-8", errors="replace")
        return s[1:] if s.startswith(" ") else s


# ---------------------------------------------------------------------------
def train_bpe(texts, vocab_size, verbose=True):
    """Byte-pair merges learned inside chunks of " " + text for each text.

    Returns (pieces, scores) for the full vocabulary."""
    counts = collections.Counter()
    for t in texts:
        counts.update(chunks(" " + t))
    charcount = collections.Counter()
    for w, c in counts.items():
        for ch in w:
            charcount[ch] += c
    pieces = base_pieces()
    chars = sorted(charcount, key=lambda ch: (-charcount[ch], ch))
    taken = set(pieces)
    chars = [c for c in chars if c not in taken]
    pieces += chars
    scores = [0.0] * N_SPECIAL + [-1e6] * len(chars)
    taken.update(chars)
    n_merges_wanted = vocab_size - len(pieces)
    if n_merges_wanted < 0:
        raise SystemExit("vocab_size %d smaller than %d base pieces" % (vocab_size, len(pieces)))

    words = [list(w) for w in counts]
    freqs = [counts[w] for w in counts]
    pair_count = collections.Counter()
    where = collections.defaultdict(set)
    for wi, (w, f) in enumerate(zip(words, freqs)):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += f
            where[(a, b)].add(wi)

    rank = 0
    n_merges = 0
    while rank < n_merges_wanted and pair_count:
        # highest count; deterministic tie-break on the strings
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0]))
        (a, b), c = best
        if c < 2:
            break
        new = a + b
        n_merges += 1
        if new not in taken:
            pieces.append(new)
            scores.append(-float(rank))
            taken.add(new)
            rank += 1
        for wi in list(where[(a, b)]):
            w, f = words[wi], freqs[wi]
            i = 0
            out = []
            changed = False
            while i < len(w):
                if i < len(w) - 1 and w[i] == a and w[i + 1] == b:
                    out.append(new)
                    i += 2
                    changed = True
                else:
                    out.append(w[i])
                    i += 1
            if not changed:
                continue
            for p in zip(w, w[1:]):
                pair_count[p] -= f
                if pair_count[p] <= 0:
                    del pair_count[p]
            for p in set(zip(w, w[1:])):
                where[p].discard(wi)
            for p in zip(out, out[1:]):
                pair_count[p] += f
                where[p].add(wi)
            words[wi] = out
        pair_count.pop((a, b), None)
        where.pop((a, b), None)
        if verbose and rank % 500 == 0 and rank:
            print("  merges %d  last %r (count %d)" % (rank, new, c), file=sys.stderr)
    return pieces, scores


def build_word_vocab(words, extra_chars=()):
    """Word-level vocabulary: each entry of `words` (e.g. " the", " .") becomes
    one token.  Single characters and all intermediate prefixes are included
    so that llama2.c's pairwise merging turns each word into exactly its own
    token.  Words must consist of non-whitespace after an optional leading
    space (chunk-shaped), so merges never cross words."""
    for w in words:
        assert CHUNK_RE.fullmatch(w), "not chunk-shaped: %r" % w
    pieces = base_pieces()
    taken = set(pieces)
    chars = sorted({ch for w in words for ch in w} | set(extra_chars))
    for ch in chars:
        assert ch not in taken
        pieces.append(ch)
        taken.add(ch)
    scores = [0.0] * N_SPECIAL + [-1e6] * len(chars)
    inter = []  # prefixes (length>=2) that are not themselves words, by length
    wordset = set(words)
    for w in words:
        for k in range(2, len(w)):
            p = w[:k]
            if p not in wordset and p not in taken:
                inter.append(p)
                taken.add(p)
    rank = 0
    # intermediate prefixes first (shorter first), then the words themselves
    for p in sorted(inter, key=lambda s: (len(s), s)):
        pieces.append(p)
        scores.append(-float(rank))
        rank += 1
    for w in words:
        if len(w) >= 2:
            assert w not in taken, w
            pieces.append(w)
            scores.append(-float(rank))
            taken.add(w)
            rank += 1
    return pieces, scores


# ---------------------------------------------------------------------------
def verify(tok_path, text, run="./run", model=None):
    """Compare our encoder with the C engine's `-m tokenize` output."""
    import subprocess
    tok = Tokenizer.load(tok_path)
    # the text on stdin (-i -), not on the command line (a text over ~128 KB
    # is too long an argument); -i - drops one final newline, so one is added
    cmd = [run, "-m", "tokenize", "-z", tok_path, "-i", "-"]
    if model:
        cmd[1:1] = [model]
    res = subprocess.run(cmd, input=text + "\n", capture_output=True, text=True, check=True)
    c_ids = [int(x) for x in res.stdout.splitlines()[0].split()]
    py = tok.encode(text)
    ok = c_ids == py or c_ids == [BOS_ID] + py
    ref = tok.encode_reference(text)
    return ok, ref == py, c_ids, py


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", help="training text (one document per line group)")
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--out", help="output tokenizer.bin")
    ap.add_argument("--verify", metavar="TOK", help="tokenizer.bin to check against the C engine")
    ap.add_argument("--text", help="text file for --verify / --encode")
    ap.add_argument("--run", default="./run")
    ap.add_argument("--encode", metavar="TOK", help="print ids of --text (or stdin) with this tokenizer")
    args = ap.parse_args()
    if args.verify and not args.text:
        ap.error("--verify needs --text (the text to encode both ways)")
    if args.encode:
        tok = Tokenizer.load(args.encode)
        text = open(args.text, encoding="utf-8").read() if args.text else sys.stdin.read()
        print(" ".join(map(str, tok.encode(text, bos=True))))
        return
    if args.verify:
        text = open(args.text, encoding="utf-8").read()
        ok, selfok, c_ids, py = verify(args.verify, text, args.run)
        print("C == python: %s   chunked == unchunked python: %s   (%d C ids, %d python ids)"
              % (ok, selfok, len(c_ids), len(py)))
        sys.exit(0 if ok and selfok else 1)
    if not (args.input and args.out):
        ap.error("--input and --out are required for training")
    text = open(args.input, encoding="utf-8").read()
    docs = [d for d in text.split("\n") if d]
    pieces, scores = train_bpe(docs, args.vocab_size)
    write_tokenizer(args.out, pieces, scores)
    print("wrote %s: %d tokens" % (args.out, len(pieces)), file=sys.stderr)


if __name__ == "__main__":
    cli.run(main)
