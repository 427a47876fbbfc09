"""Read and write qkv checkpoints and llama2.c's checkpoint and tokenizer files.

The byte layouts are specified in the README (Checkpoint format); this module follows it exactly and
needs nothing but the Python standard library and NumPy.

Data model
----------
A model is three things:

config : dict with the keys
    dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_size, vocab_size,
    seq_len (ints), norm_eps, rope_theta (floats), shared_classifier (0/1),
    bos_id, eos_id (ints), weight_type (the header's: the type of most
    matrices, 0 float32, 1 float16, 2 Q8_0, 3 Q4_0; norms are float32 always).
    For writing, head_size defaults to dim // n_heads, norm_eps to 1e-5,
    rope_theta to 10000, bos_id/eos_id to 1/2, weight_type to 0 and shared_classifier to
    ("output" not in tensors).  The readers always return every key, with
    norm_eps and rope_theta rounded to float32 (the value stored in / implied
    by the file), so the config read from the three formats compares equal.
    Use default_config(...) / complete_config(config) to fill the defaults.

tensors : dict  name -> numpy float32 array, names and shapes as the README (Checkpoint format)
    (float16, Q8_0 and Q4_0 matrices are read back dequantized to float32,
    exactly: every stored value is a float32):
    tok_embeddings [vocab_size, dim], layers.L.attention_norm [dim],
    layers.L.attention.wq [n_heads*head_size, dim], ... , norm [dim],
    output [vocab_size, dim] (only with shared_classifier = 0).
    tensor_shapes(config) lists the required (name, shape) pairs in the
    canonical order.

tokenizer : Tokenizer(pieces, max_token_length), a namedtuple where pieces is a
    list of (bytes piece, float score) indexed by token id.  Writers also
    accept a plain list of (piece, score); max_token_length is then the
    longest piece.  Pieces may be given as str (encoded UTF-8).

Weight types
------------
Each 2-D tensor's table entry carries its own type.  write_qkv stores every
matrix in the config's weight_type, except that a matrix whose cols is not a
multiple of 32 cannot be Q8_0/Q4_0 and is stored as float16 (the C
quantizer's policy; matrix_type(weight_type, cols) says which).  Q8_0 and
Q4_0 are ggml's block layouts and reference quantizers (quantize_row_q8_0_ref,
quantize_row_q4_0_ref) in float32 arithmetic, bit for bit the engine's
weight_row_from_float:
  Q8_0, 34 bytes per 32 weights: f16 d, 32 x i8 q; w = q * d.
        d = max|x| / 127, q = roundf(x * (1/d)) (half away from zero).
  Q4_0, 18 bytes per 32 weights: f16 d, 16 bytes, byte j = q[j] | q[j+16] << 4;
        w = (q - 8) * d.  d = m / -8 where m is the first value of largest
        magnitude (sign kept), q = min(15, trunc(x * (1/d) + 8.5)).
  d is rounded to float16 to nearest even; 1/d is taken of the float32 d
  (0 when d is 0).

API
---
write_qkv(path, config, tensors, tokenizer, alignment=64, strict=True) -> bytes written
write_llama2c_legacy(path, config, tensors, strict=True) -> bytes written
write_llama2c_v1(path, config, tensors, strict=True) -> bytes written
write_llama2c_v2(path, config, tensors, group_size=64) -> bytes written (runq.c's int8)
write_tokenizer_bin(path, tokenizer)
read_tokenizer_bin(path, vocab_size=None) -> Tokenizer  (None: read to end of file)
tokenizer_to_bytes(tokenizer) -> bytes       (the tokenizer.bin / qkv section bytes)
parse_tokenizer(buf, vocab_size=None) -> Tokenizer

read_model(path, tokenizer_path=None) -> (config, tensors, tokenizer)
    Detects the format by its first bytes: b"QKVM" -> qkv, u32 0x616b3432
    ("ak42") -> llama2.c version 1, anything else -> llama2.c legacy.
    For qkv the embedded tokenizer is returned (tokenizer_path, if given,
    overrides it); for llama2.c files the tokenizer is read from
    tokenizer_path with config["vocab_size"] tokens, or is None.
read_qkv(path), read_llama2c_legacy(path), read_llama2c_v1(path)
    -> (config, tensors, tokenizer-or-None)
read_tensor_types(path) -> {name: type as stored} (llama2.c files: all 0)
detect_format(path) -> "qkv" | "v1" | "legacy"

Lower level, for tools that build or inspect files byte by byte:
parse_qkv_header(buf) -> dict of all header fields (no validation)
parse_tensor_table(buf, header) -> list of dicts (name, type, ndim, shape,
    offset, entry_offset); no validation
check_config(config) -> raises FormatError if the config is invalid
n_params(config) -> number of float32 weights the required tensors hold
rope_tables(seq_len, head_size) -> llama2.c's (freq_cis_real, freq_cis_imag)
HEADER_BYTES (256), TENSOR_ENTRY_BYTES (96), QKV_MAGIC, V1_MAGIC
WEIGHT_F32, WEIGHT_F16, WEIGHT_Q8_0, WEIGHT_Q4_0 (0..3), QBLOCK (32)
matrix_type(weight_type, cols) -> the type write_qkv stores such a matrix in
row_bytes(type, cols) -> bytes of one stored row (0: cols does not suit the type)
encode_matrix(a, type) -> uint8 array [rows, row_bytes]: a as stored
decode_matrix(raw, type, cols) -> float32 [rows, cols]: stored rows dequantized
quantize_q8_0(a), quantize_q4_0(a) -> uint8 [rows, blocks * 34 or 18]
roundf(x) -> C's roundf (half away from zero) of a float32 array

Every reader validates what it reads (sizes, offsets, shapes, truncation) and
raises FormatError (a ValueError) with a one-line message on any problem.
Writers with strict=True check the config and that every tensor listed in
tensor_shapes(config) is present with the right shape; strict=False writes
whatever it is given (used to make deliberately broken test files).

Example
-------
    import qkvfile
    cfg = qkvfile.default_config(dim=64, hidden_dim=160, n_layers=2, n_heads=4,
                                 n_kv_heads=2, vocab_size=300, seq_len=32)
    tok = qkvfile.read_tokenizer_bin("tokenizer.bin", cfg["vocab_size"])
    qkvfile.write_qkv("m.qkv", cfg, tensors, tok)
    cfg2, tensors2, tok2 = qkvfile.read_model("m.qkv")
"""

import collections
import contextlib
import os
import struct

import numpy as np


@contextlib.contextmanager
def _replacing(path):
    """A file written whole beside path, then renamed over it: an engine that
    has the old file mapped keeps reading the old bytes (a file rewritten
    in place under a mapping can stop the reader with SIGBUS)."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            yield f
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


QKV_MAGIC = b"QKVM"
QKV_VERSION = 1
V1_MAGIC = 0x616B3432  # "ak42" as a little-endian u32
HEADER_BYTES = 256
TENSOR_ENTRY_BYTES = 96
DEFAULT_ALIGNMENT = 64
LLAMA2C_EPS = 1e-5
LLAMA2C_THETA = 10000.0

# Header layout (README "Checkpoint format", header table), offsets 0..115.
_HEADER_STRUCT = struct.Struct("<4sIiiiiiiiiffiiiiIIQQQQiii")
_HEADER_FIELDS = ("magic", "version", "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
                  "head_size", "vocab_size", "seq_len", "norm_eps", "rope_theta",
                  "shared_classifier", "weight_type", "bos_id", "eos_id", "n_tensors",
                  "alignment", "tokenizer_offset", "tokenizer_bytes", "tensor_table_offset",
                  "file_bytes", "arch", "activation", "tokenizer_kind")
assert _HEADER_STRUCT.size == 116
# architecture, activation and tokenizer kinds (bytes 104, 108, 112; zero in older files)
ARCH_LLAMA, ARCH_GPT2 = 0, 1
ACT_SWIGLU, ACT_GELU_ERF, ACT_GELU_TANH = 0, 1, 2
TOKENIZER_LLAMA, TOKENIZER_CHAR, TOKENIZER_GPT2_BPE = 0, 1, 2
_ENTRY_STRUCT = struct.Struct("<64sII4IQ")
assert _ENTRY_STRUCT.size == TENSOR_ENTRY_BYTES
_LLAMA2C_HEADER = struct.Struct("<7i")
WEIGHT_F32, WEIGHT_F16, WEIGHT_Q8_0, WEIGHT_Q4_0 = 0, 1, 2, 3
QBLOCK = 32  # weights per Q8_0 / Q4_0 block
# type -> (name, elements per block, bytes per block)
WEIGHT_TYPES = {WEIGHT_F32: ("float32", 1, 4), WEIGHT_F16: ("float16", 1, 2),
                WEIGHT_Q8_0: ("q8_0", QBLOCK, 2 + QBLOCK), WEIGHT_Q4_0: ("q4_0", QBLOCK, 2 + QBLOCK // 2)}
_V1_HEADER = struct.Struct("<Ii7iB")  # magic, version, 7 params, shared_classifier

_LAYER_KEYS = ("attention_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo",
               "ffn_norm", "feed_forward.w1", "feed_forward.w2", "feed_forward.w3")
# GPT-2: no w3; a bias for each norm and matrix (float32 vectors)
_GPT2_LAYER_KEYS = ("attention_norm", "attention_norm.bias", "attention.wq", "attention.wq.bias",
                    "attention.wk", "attention.wk.bias", "attention.wv", "attention.wv.bias",
                    "attention.wo", "attention.wo.bias", "ffn_norm", "ffn_norm.bias",
                    "feed_forward.w1", "feed_forward.w1.bias", "feed_forward.w2", "feed_forward.w2.bias")

# merges: None, or GPT-2's list of (left id, right id, merged id) in rank order
Tokenizer = collections.namedtuple("Tokenizer", ["pieces", "max_token_length", "merges"], defaults=(None,))


class FormatError(ValueError):
    """A file (or config) does not follow the README (Checkpoint format)."""


# ---------------------------------------------------------------- config --

def _f32(x):
    return float(np.float32(x))


def default_config(dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len,
                   head_size=None, norm_eps=LLAMA2C_EPS, rope_theta=LLAMA2C_THETA,
                   shared_classifier=1, bos_id=1, eos_id=2, weight_type=WEIGHT_F32):
    """A complete config dict (llama2.c defaults for everything optional)."""
    return complete_config(dict(dim=dim, hidden_dim=hidden_dim, n_layers=n_layers, n_heads=n_heads,
                                n_kv_heads=n_kv_heads, vocab_size=vocab_size, seq_len=seq_len,
                                head_size=head_size, norm_eps=norm_eps, rope_theta=rope_theta,
                                shared_classifier=shared_classifier, bos_id=bos_id, eos_id=eos_id,
                                weight_type=weight_type))


def complete_config(config, tensors=None):
    """Copy of config with missing/None optional keys filled in.

    shared_classifier defaults to ("output" not in tensors) when tensors is
    given, else 1.  Integers are made int, floats are rounded to float32.
    """
    c = dict(config)
    for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"):
        if k not in c:
            raise FormatError("config is missing %s" % k)
    if c.get("head_size") is None:
        c["head_size"] = c["dim"] // c["n_heads"] if c["n_heads"] else 0
    if c.get("norm_eps") is None:
        c["norm_eps"] = LLAMA2C_EPS
    c["arch"] = int(c.get("arch") or ARCH_LLAMA)
    c["tokenizer_kind"] = int(c.get("tokenizer_kind") or TOKENIZER_LLAMA)
    if c.get("activation") is None:
        c["activation"] = ACT_GELU_ERF if c["arch"] == ARCH_GPT2 else ACT_SWIGLU
    c["activation"] = int(c["activation"])
    if c.get("rope_theta") is None:
        c["rope_theta"] = 0.0 if c["arch"] == ARCH_GPT2 else LLAMA2C_THETA
    if c.get("shared_classifier") is None:
        c["shared_classifier"] = 0 if (tensors is not None and "output" in tensors) else 1
    if c.get("bos_id") is None:
        c["bos_id"] = 1
    if c.get("eos_id") is None:
        c["eos_id"] = 2
    if c.get("weight_type") is None:
        c["weight_type"] = WEIGHT_F32
    for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "head_size", "vocab_size",
              "seq_len", "bos_id", "eos_id", "weight_type"):
        c[k] = int(c[k])
    c["shared_classifier"] = 1 if c["shared_classifier"] else 0
    c["norm_eps"] = _f32(c["norm_eps"])
    c["rope_theta"] = _f32(c["rope_theta"])
    return c


def check_config(c):
    """Raise FormatError unless config c (complete) describes a valid model."""
    for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "head_size", "vocab_size",
              "seq_len"):
        if c[k] <= 0:
            raise FormatError("%s must be positive, got %d" % (k, c[k]))
        if c[k] > 0x7FFFFFFF:
            raise FormatError("%s too large: %d" % (k, c[k]))
    if c["n_heads"] % c["n_kv_heads"]:
        raise FormatError("n_heads %d is not a multiple of n_kv_heads %d" % (c["n_heads"], c["n_kv_heads"]))
    gpt2 = c["arch"] == ARCH_GPT2
    if c["arch"] not in (ARCH_LLAMA, ARCH_GPT2):
        raise FormatError("unknown architecture %d (0 Llama, 1 GPT-2)" % c["arch"])
    if c["activation"] not in ((ACT_GELU_ERF, ACT_GELU_TANH) if gpt2 else (ACT_SWIGLU,)):
        raise FormatError("activation %d does not go with architecture %d" % (c["activation"], c["arch"]))
    if c["tokenizer_kind"] not in (TOKENIZER_LLAMA, TOKENIZER_CHAR, TOKENIZER_GPT2_BPE):
        raise FormatError("unknown tokenizer kind %d" % c["tokenizer_kind"])
    if c["head_size"] % 2 and not gpt2:
        raise FormatError("head_size %d is odd" % c["head_size"])
    if not (c["norm_eps"] > 0 and np.isfinite(c["norm_eps"])):
        raise FormatError("norm_eps must be positive, got %r" % c["norm_eps"])
    if gpt2 and c["rope_theta"] != 0:
        raise FormatError("a GPT-2 file has no RoPE: rope_theta must be 0, got %r" % c["rope_theta"])
    if not gpt2 and not (c["rope_theta"] > 0 and np.isfinite(c["rope_theta"])):
        raise FormatError("rope_theta must be positive, got %r" % c["rope_theta"])
    lowest = -1 if c["tokenizer_kind"] == TOKENIZER_CHAR else 0
    for k in ("bos_id", "eos_id"):
        if not lowest <= c[k] < c["vocab_size"]:
            raise FormatError("%s %d outside the vocabulary (%d)" % (k, c[k], c["vocab_size"]))
    if c["weight_type"] not in WEIGHT_TYPES:
        raise FormatError("unsupported weight_type %d (0 float32, 1 float16, 2 q8_0, 3 q4_0)" % c["weight_type"])


def tensor_shapes(config):
    """Required tensors as a list of (name, shape tuple), in canonical order:
    tok_embeddings, then layer by layer, then norm, then output if separate."""
    c = complete_config(config)
    d, hd, hs = c["dim"], c["hidden_dim"], c["head_size"]
    q, kv = c["n_heads"] * hs, c["n_kv_heads"] * hs
    per_layer = {
        "attention_norm": (d,), "attention.wq": (q, d), "attention.wk": (kv, d),
        "attention.wv": (kv, d), "attention.wo": (d, q), "ffn_norm": (d,),
        "feed_forward.w1": (hd, d), "feed_forward.w2": (d, hd), "feed_forward.w3": (hd, d),
    }
    out = [("tok_embeddings", (c["vocab_size"], d))]
    keys = _LAYER_KEYS
    if c["arch"] == ARCH_GPT2:
        keys = _GPT2_LAYER_KEYS
        out.append(("pos_embeddings", (c["seq_len"], d)))
        per_layer.update({"attention_norm.bias": (d,), "attention.wq.bias": (q,), "attention.wk.bias": (kv,),
                          "attention.wv.bias": (kv,), "attention.wo.bias": (d,), "ffn_norm.bias": (d,),
                          "feed_forward.w1.bias": (hd,), "feed_forward.w2.bias": (d,)})
    for layer in range(c["n_layers"]):
        for key in keys:
            out.append(("layers.%d.%s" % (layer, key), per_layer[key]))
    out.append(("norm", (d,)))
    if c["arch"] == ARCH_GPT2:
        out.append(("norm.bias", (d,)))
    if not c["shared_classifier"]:
        out.append(("output", (c["vocab_size"], d)))
    return out


def n_params(config):
    """Number of float32 values the required tensors hold (a Python int: no
    overflow), computed without listing them."""
    c = complete_config(config)
    d, hd, hs = c["dim"], c["hidden_dim"], c["head_size"]
    q, kv = c["n_heads"] * hs, c["n_kv_heads"] * hs
    per_layer = 2 * d + q * d + 2 * kv * d + d * q + 3 * hd * d
    n = c["vocab_size"] * d + c["n_layers"] * per_layer + d
    if c["arch"] == ARCH_GPT2:  # no w3; biases q + 2 kv + 2 d + hd, norm biases 2 d; positions; final bias
        n += c["n_layers"] * (q + 2 * kv + 4 * d + hd - hd * d) + c["seq_len"] * d + d
    if not c["shared_classifier"]:
        n += c["vocab_size"] * d
    return n


def weight_bytes(config):
    """Bytes the required tensors take in a qkv file written by write_qkv:
    each matrix in matrix_type(weight_type, cols), the norm vectors in float32."""
    c = complete_config(config)
    total = 0
    for _, shape in tensor_shapes(c):
        rows, cols = shape if len(shape) == 2 else (shape[0], 0)
        total += rows * (row_bytes(matrix_type(c["weight_type"], cols), cols) if cols else 4)
    return total


def _min_weight_bytes(config):
    """A lower bound of the bytes any qkv file of this config holds: the
    matrices in the narrowest type (Q4_0, 18 bytes per 32 weights)."""
    c = complete_config(config)
    n_norms = (2 * c["n_layers"] + 1) * c["dim"] * (2 if c["arch"] == ARCH_GPT2 else 1)
    return 4 * n_norms + (n_params(c) - n_norms) * 18 // QBLOCK


# ---------------------------------------------------------- weight types --

def row_bytes(ttype, cols):
    """Bytes of one row of cols elements stored as type ttype; 0 if cols is
    not a whole number of the type's blocks (or the type is unknown)."""
    if ttype not in WEIGHT_TYPES or cols <= 0:
        return 0
    _, block, nbytes = WEIGHT_TYPES[ttype]
    return 0 if cols % block else cols // block * nbytes


def matrix_type(weight_type, cols):
    """The type a matrix of this width is stored in when the file's weight
    type is weight_type: that type, or float16 when cols is not a whole
    number of its blocks (as the C quantizer does)."""
    return weight_type if row_bytes(weight_type, cols) else WEIGHT_F16


def roundf(x):
    """C's roundf on a float32 array: to nearest, halves away from zero
    (numpy's round goes to even).  x - trunc(x) is exact in float32."""
    x = np.asarray(x, dtype=np.float32)
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= np.float32(0.5), t + np.sign(x), t).astype(np.float32)


def _blocks(a):
    a = np.ascontiguousarray(a, dtype=np.float32)
    if a.ndim != 2 or a.shape[1] % QBLOCK:
        raise FormatError("shape %s is not rows of whole blocks of %d" % (a.shape, QBLOCK))
    return a.reshape(a.shape[0], a.shape[1] // QBLOCK, QBLOCK)


def _inverse(d):
    """1/d in float32, 0 where d is 0 (ggml's id)."""
    return np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)


def _pack(d, q):
    """Blocks [rows, nb, ...]: float16 d (rounded to nearest even) then the
    quant bytes, flattened to rows of bytes."""
    d16 = np.ascontiguousarray(d.astype("<f2")).view(np.uint8)
    return np.concatenate([d16, q], axis=2).reshape(d.shape[0], -1)


def quantize_q8_0(a):
    """ggml's quantize_row_q8_0_ref on each row of a [rows, cols]: uint8 [rows, cols/32*34]."""
    b = _blocks(a)
    d = np.abs(b).max(axis=2, keepdims=True) / np.float32(127)
    q = roundf(b * _inverse(d)).astype(np.int8)
    return _pack(d, q.view(np.uint8))


def quantize_q4_0(a):
    """ggml's quantize_row_q4_0_ref on each row of a [rows, cols]: uint8 [rows, cols/32*18]."""
    b = _blocks(a)
    first = np.abs(b).argmax(axis=2)[..., None]   # the first of largest magnitude, as C's strict >
    m = np.take_along_axis(b, first, axis=2)
    m = np.where(m != 0, m, np.float32(0))          # an all-zero block: C's max stays +0
    d = m / np.float32(-8)
    q = np.minimum(np.trunc(b * _inverse(d) + np.float32(8.5)), 15).astype(np.uint8)
    half = QBLOCK // 2
    return _pack(d, q[..., :half] | (q[..., half:] << np.uint8(4)))


def encode_matrix(a, ttype):
    """a [rows, cols] as stored in type ttype: a uint8 array [rows, row_bytes]."""
    a = np.asarray(a)
    if ttype == WEIGHT_Q8_0:
        return quantize_q8_0(a)
    if ttype == WEIGHT_Q4_0:
        return quantize_q4_0(a)
    dtype = {WEIGHT_F32: "<f4", WEIGHT_F16: "<f2"}[ttype]
    return np.ascontiguousarray(a, dtype=dtype).view(np.uint8).reshape(a.shape[0], -1)


def decode_matrix(raw, ttype, cols):
    """Rows of stored bytes (uint8 [rows, row_bytes(ttype, cols)]) -> float32
    [rows, cols], dequantized as the engine's weight_row_to_float (exact)."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    rows = raw.shape[0]
    if ttype in (WEIGHT_F32, WEIGHT_F16):
        return raw.view("<f4" if ttype == WEIGHT_F32 else "<f2").reshape(rows, cols).astype(np.float32)
    blk = raw.reshape(rows, cols // QBLOCK, WEIGHT_TYPES[ttype][2])
    d = np.ascontiguousarray(blk[..., :2]).view("<f2").astype(np.float32)
    if ttype == WEIGHT_Q8_0:
        q = blk[..., 2:].view(np.int8).astype(np.float32)
    else:
        q = np.concatenate([blk[..., 2:] & 0x0F, blk[..., 2:] >> 4], axis=2).astype(np.float32) - 8
    return (q * d).reshape(rows, cols)


def _check_tensors(config, tensors):
    for name, shape in tensor_shapes(config):
        if name not in tensors:
            raise FormatError("missing tensor %s" % name)
        got = tuple(np.shape(tensors[name]))
        if got != shape:
            raise FormatError("tensor %s has shape %s, expected %s" % (name, got, shape))


def _f32_bytes(a):
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


# ------------------------------------------------------------- tokenizer --

def _as_tokenizer(tok):
    merges = None
    if isinstance(tok, Tokenizer):
        pieces, mtl, merges = tok.pieces, tok.max_token_length, tok.merges
    else:
        pieces, mtl = tok, None
    norm = []
    for piece, score in pieces:
        if isinstance(piece, str):
            piece = piece.encode("utf-8")
        norm.append((bytes(piece), float(score)))
    if mtl is None:
        mtl = max((len(p) for p, _ in norm), default=0)
    return Tokenizer(norm, int(mtl), merges)


def tokenizer_to_bytes(tokenizer):
    """llama2.c tokenizer.bin bytes: i32 max_token_length, then per token
    f32 score, i32 length n, n bytes; for GPT-2's BPE then u32 n_merges and
    n_merges x (i32 left, i32 right, i32 merged) in rank order."""
    t = _as_tokenizer(tokenizer)
    parts = [struct.pack("<i", t.max_token_length)]
    for piece, score in t.pieces:
        parts.append(struct.pack("<fi", score, len(piece)))
        parts.append(piece)
    if t.merges is not None:
        parts.append(struct.pack("<I", len(t.merges)))
        parts.extend(struct.pack("<iii", *m) for m in t.merges)
    return b"".join(parts)


def parse_tokenizer(buf, vocab_size=None, kind=TOKENIZER_LLAMA):
    """Parse tokenizer.bin bytes.  vocab_size None: read tokens until the end
    of buf (which must then end exactly on a token).  Bytes after vocab_size
    tokens (and, for kind TOKENIZER_GPT2_BPE, the merges after them) are
    refused, as the engine refuses them: a tokenizer of a larger vocabulary
    (llama2.c ignores them, and a model would get another's first pieces)."""
    buf = memoryview(buf)
    if len(buf) < 4:
        raise FormatError("tokenizer truncated: no max_token_length")
    (mtl,) = struct.unpack_from("<i", buf, 0)
    if mtl < 0:
        raise FormatError("tokenizer max_token_length %d is negative" % mtl)
    off, pieces = 4, []
    while (vocab_size is None and off < len(buf)) or (vocab_size is not None and len(pieces) < vocab_size):
        if off + 8 > len(buf):
            raise FormatError("tokenizer truncated at token %d" % len(pieces))
        score, n = struct.unpack_from("<fi", buf, off)
        off += 8
        if n < 0 or off + n > len(buf):
            raise FormatError("tokenizer token %d length %d runs past the end" % (len(pieces), n))
        pieces.append((bytes(buf[off:off + n]), float(score)))
        off += n
    if kind != TOKENIZER_GPT2_BPE:
        _check_tokenizer_end(buf, off, len(pieces))
        return Tokenizer(pieces, mtl)
    if off + 4 > len(buf):
        raise FormatError("GPT-2 tokenizer: no merge count")
    (count,) = struct.unpack_from("<I", buf, off)
    if off + 4 + 12 * count > len(buf):
        raise FormatError("GPT-2 tokenizer: merges truncated")
    merges = [struct.unpack_from("<iii", buf, off + 4 + 12 * i) for i in range(count)]
    _check_tokenizer_end(buf, off + 4 + 12 * count, len(pieces))
    return Tokenizer(pieces, mtl, merges)


def _check_tokenizer_end(buf, off, n_pieces):
    if off != len(buf):
        raise FormatError("tokenizer has more than the model's %d tokens (%d bytes after them): a tokenizer of "
                          "another model?" % (n_pieces, len(buf) - off))


def write_tokenizer_bin(path, tokenizer):
    """Write llama2.c's tokenizer.bin."""
    data = tokenizer_to_bytes(tokenizer)
    with _replacing(path) as f:
        f.write(data)
    return len(data)


def read_tokenizer_bin(path, vocab_size=None):
    """Read llama2.c's tokenizer.bin (vocab_size tokens, or all of the file)."""
    with open(path, "rb") as f:
        return parse_tokenizer(f.read(), vocab_size)


# ------------------------------------------------------------------- qkv --

def write_qkv(path, config, tensors, tokenizer, alignment=DEFAULT_ALIGNMENT, strict=True):
    """Write a qkv version 1 file.  Layout: header (256 bytes), tokenizer
    section, tensor table (8-byte aligned), tensor data (each tensor at a
    multiple of alignment), in tensor_shapes order followed by any extra
    tensors in sorted name order.  Returns the file size.  Each 2-D tensor
    is stored in matrix_type(config weight_type, cols), 1-D ones in float32.

    strict=False skips the config/tensor checks and writes the tensors that
    are present (in the canonical order, then the others)."""
    c = complete_config(config, tensors)
    tok = _as_tokenizer(tokenizer)
    if strict:
        check_config(c)
        _check_tensors(c, tensors)
        if len(tok.pieces) != c["vocab_size"]:
            raise FormatError("tokenizer has %d tokens, vocab_size is %d" % (len(tok.pieces), c["vocab_size"]))
    canonical = [n for n, _ in tensor_shapes(c)] if c["n_layers"] >= 0 else []
    names = [n for n in canonical if n in tensors] + sorted(set(tensors) - set(canonical))
    tok_bytes = tokenizer_to_bytes(tok)
    tok_off = HEADER_BYTES
    table_off = (tok_off + len(tok_bytes) + 7) // 8 * 8
    pos = table_off + TENSOR_ENTRY_BYTES * len(names)
    offsets, arrays, types, shapes = [], [], [], []
    for name in names:
        a = np.asarray(tensors[name])
        ttype = matrix_type(c["weight_type"], a.shape[1]) if a.ndim == 2 else WEIGHT_F32
        if strict and ttype == WEIGHT_F16 and np.abs(a[np.isfinite(a)]).max(initial=0) >= 65520:
            raise FormatError("tensor %s: a value beyond float16's range (65504)" % name)
        if a.ndim not in (1, 2) or len(name.encode()) > 63:
            if strict:
                raise FormatError("tensor %s: bad name or ndim %d" % (name, a.ndim))
        shapes.append(a.shape)
        a = encode_matrix(a, ttype) if a.ndim == 2 else np.ascontiguousarray(a, dtype="<f4")
        types.append(ttype)
        pos = (pos + alignment - 1) // alignment * alignment
        offsets.append(pos)
        arrays.append(a)
        pos += a.nbytes
    file_bytes = pos
    header = bytearray(HEADER_BYTES)
    _HEADER_STRUCT.pack_into(
        header, 0, QKV_MAGIC, QKV_VERSION, c["dim"], c["hidden_dim"], c["n_layers"], c["n_heads"],
        c["n_kv_heads"], c["head_size"], c["vocab_size"], c["seq_len"], c["norm_eps"],
        c["rope_theta"], c["shared_classifier"], c["weight_type"], c["bos_id"], c["eos_id"], len(names),
        alignment, tok_off, len(tok_bytes), table_off, file_bytes, c["arch"], c["activation"],
        c["tokenizer_kind"])
    with _replacing(path) as f:
        f.write(header)
        f.write(tok_bytes)
        f.write(b"\0" * (table_off - f.tell()))
        for name, shape, off, ttype in zip(names, shapes, offsets, types):
            dims = list(shape)[:4] + [0] * (4 - min(len(shape), 4))
            f.write(_ENTRY_STRUCT.pack(name.encode()[:63], ttype, len(shape), *dims, off))
        for a, off in zip(arrays, offsets):
            f.write(b"\0" * (off - f.tell()))
            a.tofile(f)
        assert f.tell() == file_bytes
    return file_bytes


def parse_qkv_header(buf):
    """All header fields of a qkv file as a dict (no validation)."""
    if len(buf) < HEADER_BYTES:
        raise FormatError("qkv header truncated: %d of %d bytes" % (len(buf), HEADER_BYTES))
    return dict(zip(_HEADER_FIELDS, _HEADER_STRUCT.unpack_from(buf, 0)))


def parse_tensor_table(buf, header):
    """The tensor table entries as dicts (no validation beyond bounds)."""
    entries = []
    base = header["tensor_table_offset"]
    for i in range(header["n_tensors"]):
        eo = base + i * TENSOR_ENTRY_BYTES
        if eo + TENSOR_ENTRY_BYTES > len(buf):
            raise FormatError("tensor table truncated at entry %d" % i)
        raw, ttype, ndim, s0, s1, s2, s3, off = _ENTRY_STRUCT.unpack_from(buf, eo)
        entries.append(dict(raw_name=raw, name=raw.split(b"\0", 1)[0].decode("utf-8", "replace"),
                            type=ttype, ndim=ndim, shape=(s0, s1, s2, s3), offset=off,
                            entry_offset=eo))
    return entries


def read_tensor_types(path):
    """{name: type} of a model file's tensors (qkv: from its table, as
    stored; llama2.c files: all float32).  No validation beyond read_model's."""
    if detect_format(path) != "qkv":
        return {name: WEIGHT_F32 for name, _ in tensor_shapes(read_model(path)[0])}
    with open(path, "rb") as f:
        buf = f.read()
    return {e["name"]: e["type"] for e in parse_tensor_table(buf, parse_qkv_header(buf))}


def read_qkv(path):
    """Read and validate a qkv file -> (config, tensors, tokenizer)."""
    with open(path, "rb") as f:
        buf = f.read()
    h = parse_qkv_header(buf)
    if h["magic"] != QKV_MAGIC:
        raise FormatError("not a qkv file (magic %r)" % h["magic"])
    if h["version"] != QKV_VERSION:
        raise FormatError("unsupported qkv version %d" % h["version"])
    if h["file_bytes"] != len(buf):
        raise FormatError("file is %d bytes, header says %d (truncated?)" % (len(buf), h["file_bytes"]))
    if h["shared_classifier"] not in (0, 1):
        raise FormatError("shared_classifier must be 0 or 1, got %d" % h["shared_classifier"])
    align = h["alignment"]
    if align == 0 or align & (align - 1) or align < 4:
        raise FormatError("alignment %d is not a power of two >= 4" % align)
    config = {k: h[k] for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "head_size",
                                "vocab_size", "seq_len", "norm_eps", "rope_theta",
                                "shared_classifier", "bos_id", "eos_id", "weight_type", "arch",
                                "activation", "tokenizer_kind")}
    config = complete_config(config)
    check_config(config)
    if any(buf[_HEADER_STRUCT.size:HEADER_BYTES]):
        raise FormatError("reserved header bytes are not zero")
    size = len(buf)
    # tokenizer section
    to, tb = h["tokenizer_offset"], h["tokenizer_bytes"]
    if to < HEADER_BYTES or to > size or tb > size - to:
        raise FormatError("tokenizer section [%d, +%d) lies outside the file" % (to, tb))
    section = bytes(buf[to:to + tb])
    tokenizer = parse_tokenizer(section, config["vocab_size"], config["tokenizer_kind"])
    # tensor table
    tt, nt = h["tensor_table_offset"], h["n_tensors"]
    if tt < HEADER_BYTES or tt > size or nt * TENSOR_ENTRY_BYTES > size - tt:
        raise FormatError("tensor table (%d entries at %d) runs past the end of the file" % (nt, tt))
    if _min_weight_bytes(config) > size:
        raise FormatError("the config needs at least %d bytes of weights, the file has %d"
                          % (_min_weight_bytes(config), size))
    want = dict(tensor_shapes(config))
    tensors = {}
    for e in parse_tensor_table(buf, h):
        raw = e["raw_name"]
        if b"\0" not in raw:
            raise FormatError("tensor name at %d is not NUL-terminated" % e["entry_offset"])
        name = e["name"]
        if e["ndim"] not in (1, 2):
            raise FormatError("tensor %s has ndim %d" % (name, e["ndim"]))
        ttype = e["type"]
        if e["ndim"] == 1 and ttype != WEIGHT_F32:
            raise FormatError("tensor %s has type %d, expected 0 (vectors are float32)" % (name, ttype))
        if ttype not in WEIGHT_TYPES:
            raise FormatError("tensor %s has unknown type %d (0 float32, 1 float16, 2 q8_0, 3 q4_0)"
                              % (name, ttype))
        shape = tuple(e["shape"][:e["ndim"]])
        if any(e["shape"][e["ndim"]:]):
            raise FormatError("tensor %s has nonzero unused dims" % name)
        if name in tensors:
            raise FormatError("tensor %s appears twice" % name)
        if name in want and shape != want[name]:
            raise FormatError("tensor %s has shape %s, expected %s" % (name, shape, want[name]))
        rows, cols = shape if e["ndim"] == 2 else (shape[0], 1)
        nbytes = rows * row_bytes(ttype, cols)
        if cols and not nbytes and rows:
            raise FormatError("tensor %s: %d columns are not a whole number of %s blocks"
                              % (name, cols, WEIGHT_TYPES[ttype][0]))
        off = e["offset"]
        if off % align:
            raise FormatError("tensor %s offset %d is not a multiple of %d" % (name, off, align))
        if off > size or nbytes > size - off:
            raise FormatError("tensor %s data [%d, +%d) runs past the end of the file" % (name, off, nbytes))
        if off < HEADER_BYTES:
            raise FormatError("tensor %s data overlaps the header" % name)
        if nbytes == 0:  # an empty (unknown) tensor
            tensors[name] = np.zeros(shape, dtype=np.float32)
            continue
        raw = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=off).reshape(rows, -1)
        tensors[name] = decode_matrix(raw, ttype, cols).reshape(shape)
    for name in want:
        if name not in tensors:
            raise FormatError("missing tensor %s" % name)
    return config, tensors, tokenizer


# ----------------------------------------------------------- llama2.c --

def _llama2c_check(c):
    """llama2.c formats can only express a subset of configs."""
    problems = []
    if c["head_size"] * c["n_heads"] != c["dim"]:
        problems.append("head_size*n_heads != dim")
    if c["norm_eps"] != _f32(LLAMA2C_EPS):
        problems.append("norm_eps != 1e-5")
    if c["rope_theta"] != _f32(LLAMA2C_THETA):
        problems.append("rope_theta != 10000")
    if (c["bos_id"], c["eos_id"]) != (1, 2):
        problems.append("bos/eos != 1/2")
    if c["weight_type"] != WEIGHT_F32:
        problems.append("%s weights (llama2.c files are float32)" % WEIGHT_TYPES[c["weight_type"]][0])
    if problems:
        raise FormatError("config not expressible in llama2.c format: " + ", ".join(problems))


def rope_tables(seq_len, head_size, theta=LLAMA2C_THETA):
    """llama2.c's freq_cis_real / freq_cis_imag, each [seq_len, head_size/2]
    float32 (cos and sin of pos * theta^(-2i/head_size))."""
    i = np.arange(0, head_size, 2)[: head_size // 2].astype(np.float64)
    freqs = 1.0 / (theta ** (i / head_size))
    angles = np.outer(np.arange(seq_len, dtype=np.float64), freqs)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _layer_list(c, tensors, key):
    return [tensors["layers.%d.%s" % (layer, key)] for layer in range(c["n_layers"])]


def write_llama2c_legacy(path, config, tensors, strict=True):
    """Write llama2.c's legacy format (7 x i32 header, vocab_size negative for
    a separate classifier, freq_cis tables before the classifier).
    Returns the file size."""
    c = complete_config(config, tensors)
    if strict:
        check_config(c)
        _llama2c_check(c)
        _check_tensors(c, tensors)
    vocab = c["vocab_size"] if c["shared_classifier"] else -c["vocab_size"]
    hs = c["dim"] // c["n_heads"] if c["n_heads"] else 0
    with _replacing(path) as f:
        f.write(_LLAMA2C_HEADER.pack(c["dim"], c["hidden_dim"], c["n_layers"], c["n_heads"],
                                     c["n_kv_heads"], vocab, c["seq_len"]))
        seq = [tensors["tok_embeddings"]]
        for key in _LAYER_KEYS:
            seq += _layer_list(c, tensors, key)
        seq.append(tensors["norm"])
        cos, sin = rope_tables(c["seq_len"], hs)
        seq += [cos, sin]
        if not c["shared_classifier"]:
            seq.append(tensors["output"])
        for a in seq:
            np.ascontiguousarray(a, dtype="<f4").tofile(f)
        return f.tell()


def _v1_header(c, version):
    """The 256-byte header of llama2.c's versions 1 and 2."""
    header = bytearray(HEADER_BYTES)
    _V1_HEADER.pack_into(header, 0, V1_MAGIC, version, c["dim"], c["hidden_dim"], c["n_layers"], c["n_heads"],
                         c["n_kv_heads"], c["vocab_size"], c["seq_len"], c["shared_classifier"])
    return header


def _v1_matrices(c, tensors):
    """The matrices in versions 1 and 2's order: wq, wk, wv, wo, w1, w2, w3
    (each for all layers), then the classifier if it is not shared."""
    seq = []
    for key in ("attention.wq", "attention.wk", "attention.wv", "attention.wo",
                "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"):
        seq += _layer_list(c, tensors, key)
    if not c["shared_classifier"]:
        seq.append(tensors["output"])
    return seq


def write_llama2c_v1(path, config, tensors, strict=True):
    """Write llama2.c's version 1 format ("ak42" header padded to 256 bytes,
    norms first).  Returns the file size."""
    c = complete_config(config, tensors)
    if strict:
        check_config(c)
        _llama2c_check(c)
        _check_tensors(c, tensors)
    with _replacing(path) as f:
        f.write(_v1_header(c, 1))
        seq = _layer_list(c, tensors, "attention_norm") + _layer_list(c, tensors, "ffn_norm")
        seq += [tensors["norm"], tensors["tok_embeddings"]] + _v1_matrices(c, tensors)
        for a in seq:
            np.ascontiguousarray(a, dtype="<f4").tofile(f)
        return f.tell()


def write_llama2c_v2(path, config, tensors, group_size=64):
    """Write llama2.c's version 2 (runq.c's int8): the version 1 header plus
    the group size (i32 at byte 37), the norms in float32, then
    tok_embeddings and the matrices in version 1's order, each as its int8
    values then one float32 scale per group of group_size values of the
    flattened tensor: scale = max|w| / 127, q = round(w / scale).  Returns
    the file size."""
    c = dict(complete_config(config, tensors), weight_type=WEIGHT_F32)  # the float weights given
    check_config(c)
    _llama2c_check(c)
    _check_tensors(c, tensors)
    header = _v1_header(c, 2)
    struct.pack_into("<i", header, 37, group_size)
    with _replacing(path) as f:
        f.write(header)
        for a in _layer_list(c, tensors, "attention_norm") + _layer_list(c, tensors, "ffn_norm") + [tensors["norm"]]:
            np.ascontiguousarray(a, dtype="<f4").tofile(f)
        for a in [tensors["tok_embeddings"]] + _v1_matrices(c, tensors):
            g = np.asarray(a, dtype=np.float32).reshape(-1, group_size)
            scale = (np.abs(g).max(axis=1) / np.float32(127)).astype(np.float32)
            safe = np.where(scale == 0, np.float32(1), scale)
            np.round(g / safe[:, None]).astype(np.int8).tofile(f)
            scale.astype("<f4").tofile(f)
        return f.tell()


def _llama2c_config(dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, shared):
    for k, v in (("dim", dim), ("hidden_dim", hidden_dim), ("n_layers", n_layers), ("n_heads", n_heads),
                 ("n_kv_heads", n_kv_heads), ("vocab_size", vocab_size), ("seq_len", seq_len)):
        if v <= 0:
            raise FormatError("%s must be positive, got %d" % (k, v))
    if dim % n_heads:
        raise FormatError("dim %d is not divisible by n_heads %d" % (dim, n_heads))
    c = default_config(dim=dim, hidden_dim=hidden_dim, n_layers=n_layers, n_heads=n_heads,
                       n_kv_heads=n_kv_heads, vocab_size=vocab_size, seq_len=seq_len,
                       shared_classifier=shared)
    check_config(c)
    return c


def _check_llama2c_size(c, buf, start, path):
    need = start + 4 * n_params(c)
    if need > len(buf):
        raise FormatError("%s: file truncated: the header implies at least %d bytes, the file has %d"
                          % (path, need, len(buf)))


class _Cursor:
    """Sequential float32 reader over a byte buffer, with truncation checks."""

    def __init__(self, buf, offset, path):
        self.buf, self.off, self.path = buf, offset, path

    def take(self, name, shape):
        n = 1
        for s in shape:
            n *= s
        if self.off + 4 * n > len(self.buf):
            raise FormatError("%s: file truncated in %s (needs %d bytes, has %d)"
                              % (self.path, name, self.off + 4 * n, len(self.buf)))
        a = np.frombuffer(self.buf, dtype="<f4", count=n, offset=self.off).reshape(shape).astype(np.float32)
        self.off += 4 * n
        return a


def _read_layers(cur, c, shapes, key, tensors):
    for layer in range(c["n_layers"]):
        name = "layers.%d.%s" % (layer, key)
        tensors[name] = cur.take(name, shapes[name])


def read_llama2c_legacy(path):
    """Read llama2.c's legacy format -> (config, tensors, None)."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < _LLAMA2C_HEADER.size:
        raise FormatError("legacy header truncated: %d bytes" % len(buf))
    dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab, seq_len = _LLAMA2C_HEADER.unpack_from(buf, 0)
    shared = 1 if vocab > 0 else 0
    c = _llama2c_config(dim, hidden_dim, n_layers, n_heads, n_kv_heads, abs(vocab), seq_len, shared)
    _check_llama2c_size(c, buf, _LLAMA2C_HEADER.size, path)
    shapes = dict(tensor_shapes(c))
    cur = _Cursor(buf, _LLAMA2C_HEADER.size, path)
    t = {"tok_embeddings": cur.take("tok_embeddings", shapes["tok_embeddings"])}
    for key in _LAYER_KEYS:
        _read_layers(cur, c, shapes, key, t)
    t["norm"] = cur.take("norm", shapes["norm"])
    cur.take("freq_cis_real", (c["seq_len"], c["head_size"] // 2))
    cur.take("freq_cis_imag", (c["seq_len"], c["head_size"] // 2))
    if not shared:
        t["output"] = cur.take("output", shapes["output"])
    return c, t, None


def read_llama2c_v1(path):
    """Read llama2.c's version 1 format -> (config, tensors, None)."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < HEADER_BYTES:
        raise FormatError("version 1 header truncated: %d bytes" % len(buf))
    magic, version, dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab, seq_len, shared = \
        _V1_HEADER.unpack_from(buf, 0)
    if magic != V1_MAGIC:
        raise FormatError("not a llama2.c version 1 file")
    if version != 1:
        raise FormatError("unsupported llama2.c version %d" % version)
    if shared not in (0, 1):
        raise FormatError("shared_classifier must be 0 or 1, got %d" % shared)
    c = _llama2c_config(dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab, seq_len, shared)
    _check_llama2c_size(c, buf, HEADER_BYTES, path)
    shapes = dict(tensor_shapes(c))
    cur = _Cursor(buf, HEADER_BYTES, path)
    t = {}
    _read_layers(cur, c, shapes, "attention_norm", t)
    _read_layers(cur, c, shapes, "ffn_norm", t)
    t["norm"] = cur.take("norm", shapes["norm"])
    t["tok_embeddings"] = cur.take("tok_embeddings", shapes["tok_embeddings"])
    for key in ("attention.wq", "attention.wk", "attention.wv", "attention.wo",
                "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"):
        _read_layers(cur, c, shapes, key, t)
    if not shared:
        t["output"] = cur.take("output", shapes["output"])
    return c, t, None


# ---------------------------------------------------------------- any --

def detect_format(path):
    """"qkv", "v1" or "legacy", from the first bytes of the file."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head == QKV_MAGIC:
        return "qkv"
    if len(head) == 4 and struct.unpack("<I", head)[0] == V1_MAGIC:
        return "v1"
    return "legacy"


def read_model(path, tokenizer_path=None):
    """Read any of the three formats -> (config, tensors, tokenizer).

    tokenizer is the qkv file's embedded one, or read from tokenizer_path
    (vocab_size tokens) when given, or None for llama2.c files without one."""
    fmt = detect_format(path)
    reader = {"qkv": read_qkv, "v1": read_llama2c_v1, "legacy": read_llama2c_legacy}[fmt]
    config, tensors, tokenizer = reader(path)
    if tokenizer_path is not None:
        tokenizer = read_tokenizer_bin(tokenizer_path, config["vocab_size"])
    return config, tensors, tokenizer


if __name__ == "__main__":
    import sys
    usage = "usage: qkvfile.py MODEL [TOKENIZER]   (prints the config and tensor list)"
    if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
        print(usage)
        sys.exit(0)
    if len(sys.argv) not in (2, 3):
        sys.exit(usage)
    cfg, ts, tk = read_model(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
    print("format", detect_format(sys.argv[1]), "bytes", os.path.getsize(sys.argv[1]))
    for k, v in cfg.items():
        print("%-18s %r" % (k, v))
    for n, a in ts.items():
        print("%-32s %-14s mean %+.4f std %.4f" % (n, tuple(a.shape), float(a.mean()), float(a.std())))
    if tk is not None:
        print("tokenizer: %d tokens, max_token_length %d" % (len(tk.pieces), tk.max_token_length))
