#!/usr/bin/python3
"""Deterministic tiny random checkpoints, broken files and golden vectors for the tests.

    python3 export/make_test_models.py            # (= export/make_golden.sh) rewrites
                                                  # tests/data/ and tests/golden/*.txt
    python3 export/make_test_models.py --random-legacy OUT --dim 288 --hidden 768 --layers 6 \\
        --heads 6 --kv-heads 6 --vocab 32000 --seq 256 [--separate-classifier] [--seed N]
                                                  # one random llama2.c legacy checkpoint (benchmarks)

Written by the default mode:
  tests/data/tiny-tokenizer.bin     300 tokens: <unk> <s> </s>, <0x00>..<0xFF> (ids 3..258),
                                    20 single characters, 21 merges (scores: earlier merge = higher)
  tests/data/gqa.qkv, gqa.legacy.bin                 n_heads 4, n_kv_heads 2, shared classifier
  tests/data/mqa.qkv, mqa.v1.bin                     n_heads 4, n_kv_heads 1, shared classifier
  tests/data/sepcls.qkv, sepcls.legacy.bin, sepcls.v1.bin
                                                     n_heads 4, n_kv_heads 4, separate classifier
  tests/data/f16.qkv                                 n_heads 4, n_kv_heads 2, separate classifier, float16
      all: dim 32, hidden_dim 72, n_layers 2, head_size 8, seq_len 32, vocab_size 300
      (every format of one model holds the same weights)
  tests/data/q8.qkv    Q8_0 matrices, dim 64, hidden_dim 96, n_heads 4, n_kv_heads 2, shared classifier
  tests/data/q4.qkv    Q4_0 matrices, dim 64, hidden_dim 160, n_heads 4, n_kv_heads 2, separate classifier
      both: n_layers 2, head_size 16, seq_len 32, vocab_size 300 (every width a multiple of 32)
  tests/data/heads.qkv, heads.legacy.bin   one layer, heads built by hand: self, previous token,
                                    first token, uniform (dim 32, head_size 8, seq_len 80)
  tests/data/bad/*                  hostile files the loader must reject (listed in README.txt)
  tests/golden/{gqa,mqa,sepcls,f16}.txt reference.py's logits/scores/weights (see reference.py)
  tests/golden/{q8,q4}.txt          the same with the matrix inputs quantized as the engine's int8
                                    kernels do (reference.py --quantized-activations)

Everything is a pure function of the fixed seeds below, so rerunning gives identical bytes.
"""
import argparse
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import qkvfile  # noqa: E402
import reference  # noqa: E402
import cli  # noqa: E402  (one-line errors)

ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "tests", "data")
BAD = os.path.join(DATA, "bad")
GOLDEN = os.path.join(ROOT, "tests", "golden")
REGEN_COMMAND = "export/make_golden.sh   (= /usr/bin/python3 export/make_test_models.py)"

# ------------------------------------------------------------ tokenizer --

SINGLE_CHARS = [" ", "e", "t", "a", "o", "i", "n", "s", "h", "r",
                "d", "l", "c", "u", "m", "T", ".", ",", "!", "y"]
# In merge order: the first is merged first and gets the highest score.
# Each is the concatenation of two earlier pieces (single chars or merges).
MERGES = [" t", "he", "in", "at", " the", " a", "th", "er", "an", "on",
          " c", " cat", "is", " s", "re", "nd", "ou", "en", " o", "ed", " in"]


def tiny_tokenizer():
    """Llama-style layout: ids 0..2 specials, 3..258 byte tokens, then pieces."""
    pieces = [(b"<unk>", 0.0), (b"<s>", 0.0), (b"</s>", 0.0)]
    pieces += [(("<0x%02X>" % b).encode(), 0.0) for b in range(256)]
    merge_scores = [(m.encode(), -float(i)) for i, m in enumerate(MERGES)]
    single_scores = [(c.encode(), -100.0 - i) for i, c in enumerate(SINGLE_CHARS)]
    pieces += single_scores + merge_scores
    known = set(SINGLE_CHARS)
    for m in MERGES:  # every merge must be buildable from two known pieces
        assert any(m[:k] in known and m[k:] in known for k in range(1, len(m))), m
        known.add(m)
    assert len(set(p for p, _ in pieces)) == len(pieces)
    return qkvfile.Tokenizer(pieces, max(len(p) for p, _ in pieces))


# --------------------------------------------------------------- models --

TEST_SHAPE = dict(dim=32, hidden_dim=72, n_layers=2, n_heads=4, seq_len=32)
# the quantized fixtures: every matrix width a whole number of blocks of 32
QUANT_SHAPES = {"q8": dict(dim=64, hidden_dim=96, n_layers=2, n_heads=4, seq_len=32),
                "q4": dict(dim=64, hidden_dim=160, n_layers=2, n_heads=4, seq_len=32)}

# name -> (seed, n_kv_heads, shared_classifier, formats); f16, q8 and q4 are
# written with float16, Q8_0 and Q4_0 matrices (qkv weight_type 1, 2, 3), so
# only in the qkv format
TEST_MODELS = [
    ("gqa", 1001, 2, 1, ("qkv", "legacy.bin")),
    ("mqa", 1002, 1, 1, ("qkv", "v1.bin")),
    ("sepcls", 1003, 4, 0, ("qkv", "legacy.bin", "v1.bin")),
    ("f16", 1004, 2, 0, ("qkv",)),
    ("q8", 1005, 2, 1, ("qkv",)),
    ("q4", 1006, 2, 0, ("qkv",)),
]
WEIGHT_TYPES = {"f16": qkvfile.WEIGHT_F16, "q8": qkvfile.WEIGHT_Q8_0, "q4": qkvfile.WEIGHT_Q4_0}

GOLDEN_TOKENS = [1, 283, 45, 299, 3, 260, 120, 7, 283, 283, 258, 2, 150, 271, 0, 99, 264, 31, 200, 277]
GOLDEN_POSITIONS = [0, 1, 5, 12, 19]

# Standard deviations of the random weights: large enough that attention is
# peaky and the logits spread over several units.
STD = {"tok_embeddings": 1.0, "output": 0.5, "attention.wq": 0.45, "attention.wk": 0.45,
       "attention.wv": 0.3, "attention.wo": 0.3, "feed_forward.w1": 0.3, "feed_forward.w2": 0.3,
       "feed_forward.w3": 0.3}
NORM_STD = 0.1  # norm weights: 1 + NORM_STD * N(0, 1)


def std_for(name):
    return STD[name.split(".", 2)[-1] if name.startswith("layers.") else name]


def random_tensors(config, seed, widths=None):
    """widths: the matrix width the STD values are meant for (TEST_SHAPE's dim):
    a wider matrix gets std * sqrt(widths / cols), so the activations keep
    their size.  None: STD as it is."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in qkvfile.tensor_shapes(config):
        if len(shape) == 1:
            a = 1.0 + NORM_STD * rng.standard_normal(shape)
        else:
            a = std_for(name) * np.sqrt(widths / shape[1] if widths else 1.0) * rng.standard_normal(shape)
        tensors[name] = a.astype(np.float32)
    return tensors


def write_model(path, fmt, config, tensors, tokenizer):
    if fmt == "qkv":
        return qkvfile.write_qkv(path, config, tensors, tokenizer)
    if fmt == "legacy.bin":
        return qkvfile.write_llama2c_legacy(path, config, tensors)
    if fmt == "v1.bin":
        return qkvfile.write_llama2c_v1(path, config, tensors)
    raise ValueError(fmt)


def as_stored(config, tensors):
    """The values a qkv file of this config holds: each matrix in the type
    write_qkv gives it (float16 rounded to nearest even, Q8_0/Q4_0 quantized),
    as float32."""
    def stored(a):
        t = qkvfile.matrix_type(config.get("weight_type", 0), a.shape[1])
        return qkvfile.decode_matrix(qkvfile.encode_matrix(a, t), t, a.shape[1])
    return {n: stored(a) if a.ndim == 2 else a for n, a in tensors.items()}


def same_model(a, b):
    (ca, ta, _), (cb, tb, _) = a, b
    return ca == cb and set(ta) == set(tb) and all(np.array_equal(ta[n], tb[n]) for n in ta)


# ------------------------------------------------------------ bad files --

BAD_SHAPE = dict(dim=4, hidden_dim=8, n_layers=1, n_heads=2, n_kv_heads=1, seq_len=8)


def _patch(buf, fmt, offset, *values):
    b = bytearray(buf)
    struct.pack_into(fmt, b, offset, *values)
    return bytes(b)


def _header_offset(field):
    """Byte offset of a qkv header field (README header table)."""
    offsets = dict(magic=0, version=4, dim=8, hidden_dim=12, n_layers=16, n_heads=20, n_kv_heads=24,
                   head_size=28, vocab_size=32, seq_len=36, norm_eps=40, rope_theta=44,
                   shared_classifier=48, weight_type=52, bos_id=56, eos_id=60, n_tensors=64,
                   alignment=68, tokenizer_offset=72, tokenizer_bytes=80, tensor_table_offset=88,
                   file_bytes=96)
    return offsets[field]


def make_bad_files(tokenizer):
    """Returns [(file name, description, bytes)].  Each starts from a valid
    tiny model and breaks exactly one thing."""
    tmp = os.path.join(BAD, ".tmp")
    vocab = len(tokenizer.pieces)
    cfg = qkvfile.default_config(vocab_size=vocab, **BAD_SHAPE)
    t = random_tensors(cfg, 7)
    cfg_sep = dict(cfg, shared_classifier=0)
    t_sep = random_tensors(cfg_sep, 8)

    def qkv_bytes(c, tensors, strict=True):
        qkvfile.write_qkv(tmp, c, tensors, tokenizer, strict=strict)
        return open(tmp, "rb").read()

    def legacy_bytes(c, tensors, strict=True):
        qkvfile.write_llama2c_legacy(tmp, c, tensors, strict=strict)
        return open(tmp, "rb").read()

    def v1_bytes(c, tensors):
        qkvfile.write_llama2c_v1(tmp, c, tensors)
        return open(tmp, "rb").read()

    good = qkv_bytes(cfg, t)
    h = qkvfile.parse_qkv_header(good)
    table = qkvfile.parse_tensor_table(good, h)
    entry = {e["name"]: e for e in table}
    size = len(good)
    legacy = legacy_bytes(cfg_sep, t_sep)
    v1 = v1_bytes(cfg, t)
    off = _header_offset
    imax = 0x7FFFFFFF
    out = []

    def add(name, what, data):
        out.append((name, what, data))

    # ---- qkv
    add("truncated-in-header.qkv", "qkv file cut after 100 bytes, inside the 256-byte header", good[:100])
    cut = h["tensor_table_offset"] + 3 * qkvfile.TENSOR_ENTRY_BYTES + 40
    add("truncated-in-tensor-table.qkv", "qkv file cut in the middle of the 4th tensor table entry", good[:cut])
    e = entry["tok_embeddings"]
    add("truncated-in-tensor-data.qkv", "qkv file cut 1000 bytes into tok_embeddings' data (the first tensor)",
        good[:e["offset"] + 1000])
    add("truncated-last-byte.qkv", "qkv file missing only its final byte", good[:-1])
    add("wrong-magic.qkv", "magic is 'QKVX' instead of 'QKVM' (so it is not a qkv file; as legacy it is nonsense)",
        b"QKVX" + good[4:])
    add("wrong-version.qkv", "qkv version 2 (only 1 exists)", _patch(good, "<I", off("version"), 2))
    add("zero-dim.qkv", "dim = 0", _patch(good, "<i", off("dim"), 0))
    add("negative-n-layers.qkv", "n_layers = -1", _patch(good, "<i", off("n_layers"), -1))
    add("zero-seq-len.qkv", "seq_len = 0", _patch(good, "<i", off("seq_len"), 0))
    # head_size 3, n_heads 2: tensors shaped for q width 6, kv width 3, only the oddness is wrong
    c_odd = dict(cfg, head_size=3)
    add("odd-head-size.qkv", "head_size = 3 (odd; RoPE needs pairs), tensor shapes consistent with it",
        qkv_bytes(c_odd, random_tensors(c_odd, 10), strict=False))
    # n_heads 3, n_kv_heads 2, head_size 2: tensors shaped consistently, only the ratio is wrong
    c_bad_ratio = dict(cfg, n_heads=3, n_kv_heads=2, head_size=2)
    add("heads-not-multiple-of-kv-heads.qkv",
        "n_heads 3, n_kv_heads 2, head_size 2 (tensor shapes consistent with the header)",
        qkv_bytes(c_bad_ratio, random_tensors(c_bad_ratio, 9), strict=False))
    huge = good
    for field, value in (("dim", imax), ("hidden_dim", imax), ("n_layers", imax), ("n_heads", 2),
                         ("n_kv_heads", 1), ("head_size", 0x40000000), ("seq_len", imax)):
        huge = _patch(huge, "<i", off(field), value)
    add("huge-dims-overflow.qkv",
        "dim, hidden_dim, n_layers, seq_len = 2^31-1, n_heads 2, head_size 2^30 (vocab 300 and tokenizer valid): "
        "n_heads*head_size overflows i32, n_layers*hidden_dim*dim overflows 64 bits",
        huge)
    # every dimension plausible on its own, but byte counts wrap around in 32-bit arithmetic
    # (dim*hidden_dim*4 = 2^34, n_heads*head_size*dim*4 = 2^32); table shapes follow the header
    big = dict(cfg, dim=32768, hidden_dim=131072, n_layers=1, n_heads=256, n_kv_heads=128, head_size=128,
               seq_len=4096)
    wrap = good
    for field in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "head_size", "seq_len"):
        wrap = _patch(wrap, "<i", off(field), big[field])
    big_shapes = dict(qkvfile.tensor_shapes(big))
    for e in table:
        shape = big_shapes[e["name"]]
        wrap = _patch(wrap, "<2I", e["entry_offset"] + 72, *(list(shape) + [0])[:2])
    add("large-dims-32bit-wrap.qkv",
        "dim 32768, hidden_dim 131072, n_heads 256, n_kv_heads 128, head_size 128, seq_len 4096, 1 layer, "
        "tensor shapes to match: tensor byte counts (2^32, 2^34) wrap to 0 in 32 bits; the data is not there",
        wrap)
    add("shared-classifier-2.qkv", "shared_classifier = 2 (must be 0 or 1)",
        _patch(good, "<i", off("shared_classifier"), 2))
    add("weight-type-4.qkv", "weight_type = 4 (0 float32, 1 float16, 2 q8_0, 3 q4_0 exist)",
        _patch(good, "<i", off("weight_type"), 4))
    e = entry["layers.0.feed_forward.w2"]
    add("tensor-offset-past-end.qkv", "layers.0.feed_forward.w2's data offset is past the end of the file",
        _patch(good, "<Q", e["entry_offset"] + 88, (size + 64) // 64 * 64))
    add("tensor-offset-wraps.qkv", "layers.0.feed_forward.w2's data offset is 2^64-64: offset + size wraps around",
        _patch(good, "<Q", e["entry_offset"] + 88, 2 ** 64 - 64))
    add("tensor-offset-misaligned.qkv",
        "layers.0.feed_forward.w2's data offset is 4 more than a multiple of the 64-byte alignment",
        _patch(good, "<Q", e["entry_offset"] + 88, e["offset"] + 4))
    e = entry["layers.0.feed_forward.w1"]
    hd, d = cfg["hidden_dim"], cfg["dim"]
    add("tensor-wrong-shape.qkv",
        "layers.0.feed_forward.w1 has shape [%d, %d] instead of [%d, %d] (same byte count)" % (d, hd, hd, d),
        _patch(good, "<2I", e["entry_offset"] + 72, d, hd))
    e = entry["norm"]
    add("tensor-huge-shape.qkv", "norm is declared 2-D [2^32-1, 2^32-1]: its byte size overflows 64 bits",
        _patch(good, "<3I", e["entry_offset"] + 68, 2, 0xFFFFFFFF, 0xFFFFFFFF))
    add("tensor-type-4.qkv", "layers.0.attention.wq has tensor type 4 (no such type)",
        _patch(good, "<I", entry["layers.0.attention.wq"]["entry_offset"] + 64, 4))
    add("q8-cols-not-blocks.qkv",
        "layers.0.attention.wq is type 2 (q8_0) but its %d columns are not a whole number of blocks of 32"
        % cfg["dim"], _patch(good, "<I", entry["layers.0.attention.wq"]["entry_offset"] + 64, 2))
    no_w3 = {k: v for k, v in t.items() if k != "layers.0.feed_forward.w3"}
    no_w3["layers.0.feed_forward.w4"] = t["layers.0.feed_forward.w3"]
    add("missing-tensor.qkv",
        "tensor layers.0.feed_forward.w3 is absent (an unknown 'layers.0.feed_forward.w4' of its shape is there)",
        qkv_bytes(cfg, no_w3, strict=False))
    add("missing-output.qkv",
        "shared_classifier = 0 but there is no tensor 'output' (an unknown 'outputs' of its shape is there)",
        qkv_bytes(dict(cfg, shared_classifier=0), dict(t, outputs=t_sep["output"]), strict=False))
    # an extra (unknown) tensor is written last, then renamed to an existing name
    extra = qkv_bytes(cfg, dict(t, zzz=t["layers.0.attention.wk"] + 1), strict=False)
    extra_table = qkvfile.parse_tensor_table(extra, qkvfile.parse_qkv_header(extra))
    assert extra_table[-1]["name"] == "zzz"
    add("duplicate-tensor.qkv",
        "layers.0.attention.wk appears twice in the table (all required tensors present; the data differ)",
        _patch(extra, "<64s", extra_table[-1]["entry_offset"], b"layers.0.attention.wk"))
    add("unterminated-tensor-name.qkv", "first tensor name fills all 64 bytes with no NUL",
        _patch(good, "<64s", table[0]["entry_offset"], b"x" * 64))
    add("tensor-table-past-end.qkv", "n_tensors = 2^32-1: the tensor table runs past the end of the file",
        _patch(good, "<I", off("n_tensors"), 0xFFFFFFFF))
    add("file-bytes-too-large.qkv", "header file_bytes is 64 more than the real file length",
        _patch(good, "<Q", off("file_bytes"), size + 64))
    # tokenizer: the last token's length is made to run past the section (but not the file)
    tok_off, tok_len = h["tokenizer_offset"], h["tokenizer_bytes"]
    last_piece = tokenizer.pieces[-1][0]
    len_pos = tok_off + tok_len - len(last_piece) - 4
    assert struct.unpack_from("<i", good, len_pos)[0] == len(last_piece)
    add("tokenizer-piece-past-section.qkv",
        "the last token's length is 100: it runs past the tokenizer section (into the tensor table)",
        _patch(good, "<i", len_pos, 100))
    add("tokenizer-negative-length.qkv", "the last token's byte length is -5",
        _patch(good, "<i", len_pos, -5))
    add("tokenizer-section-too-short.qkv",
        "tokenizer_bytes is 1000 less than needed for vocab_size tokens",
        _patch(good, "<Q", off("tokenizer_bytes"), tok_len - 1000))
    add("tokenizer-section-past-end.qkv", "tokenizer_bytes = 2^63: the section runs past the end of the file",
        _patch(good, "<Q", off("tokenizer_bytes"), 2 ** 63))

    # ---- qkv with float16 matrices
    cfg16 = dict(cfg, weight_type=qkvfile.WEIGHT_F16)
    good16 = qkv_bytes(cfg16, t)
    table16 = {e["name"]: e for e in qkvfile.parse_tensor_table(good16, qkvfile.parse_qkv_header(good16))}
    add("truncated-last-byte.f16.qkv", "float16 qkv file missing only its final byte", good16[:-1])
    add("f16-norm.f16.qkv", "float16 file whose layers.0.ffn_norm is marked type 1 (norms are always float32)",
        _patch(good16, "<I", table16["layers.0.ffn_norm"]["entry_offset"] + 64, 1))
    last16 = max(table16.values(), key=lambda e: e["offset"])
    add("tensor-past-end.f16.qkv",
        "float16 file whose last tensor (%s) starts 64 bytes later: it runs past the end" % last16["name"],
        _patch(good16, "<Q", last16["entry_offset"] + 88, last16["offset"] + 64))

    # ---- llama2.c legacy (separate classifier, vocab_size < 0)
    add("truncated.legacy.bin", "legacy file 1 byte shorter than its header implies", legacy[:-1])
    add("truncated-half.legacy.bin", "legacy file cut to half of what its header implies", legacy[:len(legacy) // 2])
    add("header-only.legacy.bin", "only the 28-byte legacy header", legacy[:28])
    add("dim-not-divisible-by-heads.legacy.bin", "legacy dim %d with n_heads 3" % cfg["dim"],
        _patch(legacy, "<i", 12, 3))
    add("heads-not-multiple-of-kv-heads.legacy.bin", "legacy n_heads 2 with n_kv_heads 3",
        _patch(legacy, "<i", 16, 3))
    add("zero-dim.legacy.bin", "legacy dim = 0", _patch(legacy, "<i", 0, 0))
    add("negative-n-layers.legacy.bin", "legacy n_layers = -1", _patch(legacy, "<i", 8, -1))
    add("huge-dims-overflow.legacy.bin",
        "legacy dim 2^31-4, hidden_dim, n_layers, seq_len 2^31-1, vocab_size -(2^31-1), n_heads 2: "
        "sizes overflow 64 bits",
        struct.pack("<7i", imax - 3, imax, imax, 2, 2, -imax, imax) + legacy[28:])
    add("large-dims-32bit-wrap.legacy.bin",
        "legacy dim 32768, hidden_dim 131072, 1 layer, n_heads 256, n_kv_heads 128, vocab 300, seq_len 4096: "
        "byte counts wrap to 0 in 32 bits; the data is not there",
        struct.pack("<7i", 32768, 131072, 1, 256, 128, vocab, 4096) + legacy[28:])
    # ---- llama2.c version 1
    add("truncated.v1.bin", "version 1 file 1 byte shorter than its header implies", v1[:-1])
    add("wrong-version.v1.bin", "'ak42' magic with version 2", _patch(v1, "<i", 4, 2))
    add("negative-vocab.v1.bin", "version 1 with vocab_size -300 (only legacy uses the sign)",
        _patch(v1, "<i", 28, -vocab))
    os.remove(tmp)
    return out


# ---------------------------------------------------------------- main --

def write_all():
    os.makedirs(DATA, exist_ok=True)
    os.makedirs(BAD, exist_ok=True)
    os.makedirs(GOLDEN, exist_ok=True)
    tok = tiny_tokenizer()
    tok_path = os.path.join(DATA, "tiny-tokenizer.bin")
    qkvfile.write_tokenizer_bin(tok_path, tok)
    assert qkvfile.read_tokenizer_bin(tok_path) == tok
    vocab = len(tok.pieces)
    print("tests/data/tiny-tokenizer.bin: %d tokens" % vocab)

    for name, seed, n_kv, shared, formats in TEST_MODELS:
        config = qkvfile.default_config(vocab_size=vocab, n_kv_heads=n_kv, shared_classifier=shared,
                                        weight_type=WEIGHT_TYPES.get(name, qkvfile.WEIGHT_F32),
                                        **QUANT_SHAPES.get(name, TEST_SHAPE))
        tensors = random_tensors(config, seed, TEST_SHAPE["dim"] if name in QUANT_SHAPES else None)
        paths = []
        for fmt in formats:
            path = os.path.join(DATA, "%s.%s" % (name, fmt))
            write_model(path, fmt, config, tensors, tok)
            paths.append(path)
            back = qkvfile.read_model(path, tok_path)
            assert same_model(back, (config, as_stored(config, tensors), None)), path
            assert back[2] == tok, path
            print("tests/data/%s.%s: %d bytes" % (name, fmt, os.path.getsize(path)))
        # golden from the qkv file, via the same code path as the reference.py CLI
        rel = os.path.relpath(paths[0], ROOT)
        cfg_q, t_q, _ = qkvfile.read_model(paths[0])
        quantized = reference.quantized_matrices(qkvfile.read_tensor_types(paths[0]))
        result = reference.forward(cfg_q, t_q, GOLDEN_TOKENS, quantized)
        for other in paths[1:]:
            c_o, t_o, _ = qkvfile.read_model(other)
            r_o = reference.forward(c_o, t_o, GOLDEN_TOKENS)
            assert all(np.array_equal(x, y) for x, y in zip(result.logits, r_o.logits)), other
        comments = [
            "golden vectors of export/reference.py (NumPy float64) for %s; do not edit." % rel,
            "regenerate all of tests/data and tests/golden with: " + REGEN_COMMAND,
            "equivalent to: /usr/bin/python3 export/reference.py %s --tokens %s --positions %s%s"
            % (rel, ",".join(map(str, GOLDEN_TOKENS)), ",".join(map(str, GOLDEN_POSITIONS)),
               " --quantized-activations" if quantized else ""),
        ]
        text = reference.golden_text(name, cfg_q, GOLDEN_TOKENS, GOLDEN_POSITIONS, result, comments)
        with open(os.path.join(GOLDEN, name + ".txt"), "w") as f:
            f.write(text)
        top = [float(np.max(w)) for p in GOLDEN_POSITIONS[1:] for lw in result.weights[p] for w in lw]
        lg = np.array([result.logits[p] for p in GOLDEN_POSITIONS])
        print("tests/golden/%s.txt: logits std %.2f range [%.2f, %.2f]; attention max weight median %.2f"
              % (name, lg.std(), lg.min(), lg.max(), float(np.median(top))))

    write_heads_fixture(tok)

    for old in os.listdir(BAD):
        os.remove(os.path.join(BAD, old))
    bad = make_bad_files(tok)
    lines = ["# Hostile checkpoints: every file here must be rejected by the loader (exit 1, one-line error).",
             "# Generated by " + REGEN_COMMAND + "; each breaks one thing in an otherwise valid",
             "# tiny model (%s, vocab 300 =" % ", ".join("%s %d" % kv for kv in BAD_SHAPE.items()),
             "# tests/data/tiny-tokenizer.bin; the legacy one has a separate classifier).",
             "# file<TAB>what is wrong"]
    for fname, what, data in bad:
        with open(os.path.join(BAD, fname), "wb") as f:
            f.write(data)
        try:
            qkvfile.read_model(os.path.join(BAD, fname))
        except (qkvfile.FormatError, ValueError) as e:
            why = str(e)
        else:
            raise AssertionError("qkvfile accepts bad file " + fname)
        lines.append("%s\t%s" % (fname, what))
        print("tests/data/bad/%s: %d bytes; qkvfile: %s" % (fname, len(data), why))
    with open(os.path.join(BAD, "README.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(DATA) for f in fs)
    print("tests/data total: %d bytes" % total)


# One layer whose four heads are built by hand (tests/test_heads.sh):
# head 0 attends to its own position, head 1 to the previous one, head 2 to
# position 0 (BOS), head 3 spreads evenly. Every token but BOS has the same
# embedding, so queries and keys are the same vectors at every position and
# only RoPE tells positions apart: with key pair (1, 0) and query pair
# (cos f, -sin f) for a pair turning f radians a position, q.k at distance d
# is the sum over pairs of cos((d - 1) f), largest at d = 1 (and with query
# pair (1, 0) at d = 0). The first-token head's keys read the one dimension
# where BOS differs. Scaled so every other key is at least SCORE_GAP below.
HEADS_SHAPE = dict(dim=32, hidden_dim=8, n_layers=1, n_heads=4, n_kv_heads=4, seq_len=80)
SCORE_GAP = 40.0  # in units of q.k / sqrt(head_size): other keys get < e^-40 of the weight


def heads_fixture_tensors(config):
    c = qkvfile.complete_config(config)
    d, hs, theta = c["dim"], c["head_size"], c["rope_theta"]
    t = {name: np.zeros(shape, dtype=np.float64) for name, shape in qkvfile.tensor_shapes(c)}
    for name in t:
        if name.endswith("norm"):
            t[name][:] = 1.0
    t["tok_embeddings"][:, 0:2] = 1.0                     # every token: (1, 1, 0, ...)
    t["tok_embeddings"][c["bos_id"], 1] = -1.0            # BOS: (1, -1, 0, ...), the same norm
    a = 1.0 / np.sqrt(2.0 / d + c["norm_eps"])            # x[0] after rmsnorm, at every position
    freqs = theta ** (-2.0 * np.arange(hs // 2) / hs)
    dists = np.arange(c["seq_len"])
    wq, wk = t["layers.0.attention.wq"], t["layers.0.attention.wk"]
    for head, peak in ((0, 0), (1, 1)):
        score = np.cos(np.outer(dists - peak, freqs)).sum(1)  # q.k per unit scale, by distance
        gap = score[peak] - np.delete(score, peak).max()
        scale = SCORE_GAP * np.sqrt(hs) / gap              # q.k scale: |q| |k| per pair
        for i, f in enumerate(freqs):
            row = head * hs + 2 * i
            wk[row, 0] = 1.0 / a                           # key pair (1, 0)
            wq[row, 0] = scale * np.cos(peak * f) / a      # query pair turned back by peak positions
            wq[row + 1, 0] = -scale * np.sin(peak * f) / a
    slow = 2 * hs + 2 * (hs // 2 - 1)                      # head 2's slowest pair: under 0.1 rad over the context
    wq[slow, 0] = SCORE_GAP * np.sqrt(hs) / a              # query (s, 0); key +1 at BOS, -1 elsewhere
    wk[slow, 1] = -1.0 / a
    t["output"][c["bos_id"], 0] = -100.0                   # sampled text: any token but BOS, evenly
    return {n: v.astype(np.float32) for n, v in t.items()}  # head 3: no query, so uniform weights


def write_heads_fixture(tok):
    config = qkvfile.default_config(vocab_size=len(tok.pieces), shared_classifier=0, **HEADS_SHAPE)
    tensors = heads_fixture_tensors(config)
    for fmt in ("qkv", "legacy.bin"):
        path = os.path.join(DATA, "heads." + fmt)
        write_model(path, fmt, config, tensors, tok)
        print("tests/data/heads.%s: %d bytes" % (fmt, os.path.getsize(path)))


def write_random_legacy(args):
    """Stream a random legacy checkpoint: one tensor at a time, numpy tofile."""
    c = qkvfile.default_config(dim=args.dim, hidden_dim=args.hidden, n_layers=args.layers, n_heads=args.heads,
                               n_kv_heads=args.kv_heads, vocab_size=args.vocab, seq_len=args.seq,
                               shared_classifier=0 if args.separate_classifier else 1)
    qkvfile.check_config(c)
    if c["dim"] % c["n_heads"]:
        sys.exit("dim must be divisible by heads")
    rng = np.random.default_rng(args.seed)
    shapes = dict(qkvfile.tensor_shapes(c))
    L = range(c["n_layers"])
    order = ["tok_embeddings"]
    for key in ("attention_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo",
                "ffn_norm", "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"):
        order += ["layers.%d.%s" % (layer, key) for layer in L]
    order.append("norm")
    with open(args.random_legacy, "wb") as f:
        f.write(struct.pack("<7i", c["dim"], c["hidden_dim"], c["n_layers"], c["n_heads"], c["n_kv_heads"],
                            c["vocab_size"] if c["shared_classifier"] else -c["vocab_size"], c["seq_len"]))

        def emit(name):
            shape = shapes[name]
            if len(shape) == 1:
                a = 1.0 + NORM_STD * rng.standard_normal(shape, dtype=np.float32)
            else:  # 1/sqrt(fan_in) scale keeps activations sane at any size
                a = rng.standard_normal(shape, dtype=np.float32) * np.float32(1.0 / np.sqrt(shape[1]))
            a.astype("<f4", copy=False).tofile(f)

        for name in order:
            emit(name)
        cos, sin = qkvfile.rope_tables(c["seq_len"], c["head_size"])
        cos.astype("<f4").tofile(f)
        sin.astype("<f4").tofile(f)
        if not c["shared_classifier"]:
            emit("output")
        n = f.tell()
    print("%s: %d bytes" % (args.random_legacy, n))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--random-legacy", metavar="OUT", help="write one random llama2.c legacy checkpoint")
    ap.add_argument("--dim", type=int, default=288)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=None, help="default: --heads")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--separate-classifier", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    if args.random_legacy:
        if args.kv_heads is None:
            args.kv_heads = args.heads
        write_random_legacy(args)
    else:
        write_all()


if __name__ == "__main__":
    cli.run(main)
