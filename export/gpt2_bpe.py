"""GPT-2's byte-level BPE (Radford et al. 2019; OpenAI's encoder.py), in
plain Python: the reference the engine's tokenizer is tested against, the
reader of vocab.json + merges.txt, and a small trainer for test vocabularies.

    vocab, merges = load("vocab.json", "merges.txt")
    ids = encode(text, vocab, merges)         # what GPT-2's encoder gives
    text = decode(ids, vocab)
    pieces, triples = to_qkv(vocab, merges)   # the qkv tokenizer section's content

vocab.json maps each token, written in GPT-2's byte-to-unicode alphabet, to
its id; merges.txt lists the merges in rank order ("#version" line first,
then "left right" per line, in the same alphabet). The pre-tokenizer is
GPT-2's pattern with Python's re, \\p{L} and \\p{N} spelled out as the
character classes of unicodedata's categories L* and N* (re has no \\p{}).
"""
import functools
import json
import re
import unicodedata

END_OF_TEXT = "<|endoftext|>"


@functools.lru_cache()
def bytes_to_unicode():
    """GPT-2's map from each byte to a printable character: printable Latin-1
    bytes stand for themselves, the others for U+0100 onwards."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def code_point_ranges(pred):
    """The inclusive ranges (first, last) of the code points for which pred(character) holds."""
    out, start = [], None
    for cp in range(0x110000):
        inside = pred(chr(cp))
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            out.append((start, cp - 1))
            start = None
    if start is not None:
        out.append((start, 0x10FFFF))
    return out


def _class(pred):
    """A re character class of every code point for which pred holds."""
    out = code_point_ranges(pred)
    return "".join("\\U%08x-\\U%08x" % r if r[0] != r[1] else "\\U%08x" % r[0] for r in out)


@functools.lru_cache()
def pattern():
    letters = _class(lambda c: unicodedata.category(c).startswith("L"))
    numbers = _class(lambda c: unicodedata.category(c).startswith("N"))
    # GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    return re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[%s]+| ?[%s]+| ?[^\s%s%s]+|\s+(?!\S)|\s+"""
                      % (letters, numbers, letters, numbers))


def pre_tokenize(text):
    return pattern().findall(text)


def merge_pair(parts, pair):
    """parts with every occurrence of the adjacent pair joined, left to right."""
    out, i = [], 0
    while i < len(parts):
        if i + 1 < len(parts) and (parts[i], parts[i + 1]) == pair:
            out.append(parts[i] + parts[i + 1])
            i += 2
        else:
            out.append(parts[i])
            i += 1
    return out


def bpe(word, ranks):
    """OpenAI's bpe(): merge the lowest-ranked adjacent pair, every occurrence
    left to right, until no pair has a rank."""
    parts = list(word)
    while len(parts) > 1:
        pairs = {(parts[i], parts[i + 1]) for i in range(len(parts) - 1)}
        best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        parts = merge_pair(parts, best)
    return parts


def encode(text, vocab, merges):
    ranks = {m: i for i, m in enumerate(merges)}
    enc = bytes_to_unicode()
    ids = []
    for piece in pre_tokenize(text):
        word = "".join(enc[b] for b in piece.encode("utf-8"))
        ids.extend(vocab[t] for t in bpe(word, ranks))
    return ids


def decode(ids, vocab):
    dec = {c: b for b, c in bytes_to_unicode().items()}
    inv = {i: t for t, i in vocab.items()}
    return bytes(dec[c] for i in ids for c in inv[i]).decode("utf-8", errors="replace")


def load(vocab_path, merges_path):
    with open(vocab_path, encoding="utf-8") as f:
        vocab = json.load(f)
    with open(merges_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    merges = [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]
    return vocab, merges


def save(vocab, merges, vocab_path, merges_path):
    with open(vocab_path, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(merges_path, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join("%s %s\n" % m for m in merges))


def piece_bytes(token):
    """A vocab.json token's bytes (special tokens like <|endoftext|> are
    printable ASCII, which stands for itself)."""
    dec = {c: b for b, c in bytes_to_unicode().items()}
    return bytes(dec[c] for c in token)


def to_qkv(vocab, merges, vocab_size=None):
    """(pieces, merge triples) for the qkv tokenizer section: pieces[id] is
    the token's bytes (ids beyond the vocabulary, a model's padding, are
    empty), and each merge is (left id, right id, merged id) in rank order."""
    n = vocab_size or (max(vocab.values()) + 1)
    pieces = [b""] * n
    for token, i in vocab.items():
        pieces[i] = piece_bytes(token)
    triples = [(vocab[a], vocab[b], vocab[a + b]) for a, b in merges]
    return pieces, triples


def train(text, n_merges):
    """A small byte-level BPE over text: the 256 bytes, then n_merges merges
    (the most frequent adjacent pair within pre-tokenized pieces, ties by
    first appearance), then <|endoftext|>. Returns (vocab, merges)."""
    enc = bytes_to_unicode()
    words = {}
    for piece in pre_tokenize(text):
        w = tuple(enc[b] for b in piece.encode("utf-8"))
        words[w] = words.get(w, 0) + 1
    vocab = {enc[b]: i for i, b in enumerate(range(256))}
    merges = []
    for _ in range(n_merges):
        counts = {}
        for w, c in words.items():
            for p in zip(w, w[1:]):
                counts[p] = counts.get(p, 0) + c
        if not counts:
            break
        # dicts keep first appearance on ties; a pair whose result is already a
        # token (made from another split) is skipped: each token has one merge
        fresh = [p for p in counts if p[0] + p[1] not in vocab]
        if not fresh:
            break
        best = max(fresh, key=lambda p: counts[p])
        merges.append(best)
        vocab[best[0] + best[1]] = len(vocab)
        new = {}
        for w, c in words.items():
            out = tuple(merge_pair(w, best))
            new[out] = new.get(out, 0) + c
        words = new
    vocab[END_OF_TEXT] = len(vocab)
    return vocab, merges
