#!/usr/bin/python3
"""Small GGUF files for tests/test_gguf.sh and the fuzz seeds: valid ones in
the shapes qkv reads, and hostile ones that each break one thing in a valid
file. Standard library only (the weights are pseudo-random, from a seed).

    gguf_files.py valid DIR     writes DIR/NAME.gguf for each valid case
    gguf_files.py seeds DIR     writes the fuzz target's seeds (tests/fuzz/corpus/gguf), a few KB each
    gguf_files.py hostile DIR   writes DIR/NAME.gguf for each hostile case and
                                DIR/cases.txt: NAME<TAB>a word its error must contain

The GGUF layout (little-endian): "GGUF", u32 version, u64 tensor count, u64
metadata count; metadata as key string, u32 type, value; tensor infos as name
string, u32 n_dims, u64 ne[n_dims] (ne[0] the row length), u32 ggml type, u64
offset from the data start; padding to the alignment; the tensor data. A
string is a u64 length and its bytes; an array a u32 element type, a u64
count and the elements.
"""
import os
import random
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "B", U64: "Q", I64: "q",
          F64: "d"}
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0 = 0, 1, 2, 8


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STRING:
        return s(v)
    if vtype == ARRAY:
        elem, items = v
        return struct.pack("<IQ", elem, len(items)) + b"".join(value(elem, x) for x in items)
    return struct.pack("<" + SCALAR[vtype], v)


def tensor_data(rng, ggml_type, ne):
    """Random weights of a type: F32/F16 values near 0.3 in size, or Q8_0/Q4_0 blocks."""
    n = 1
    for d in ne:
        n *= d
    if ggml_type == GGML_F32:
        return struct.pack("<%df" % n, *[rng.gauss(0, 0.3) for _ in range(n)])
    if ggml_type == GGML_F16:
        return struct.pack("<%de" % n, *[rng.gauss(0, 0.3) for _ in range(n)])
    out = bytearray()
    for _ in range(n // 32):
        out += struct.pack("<e", rng.uniform(0.002, 0.02))
        out += bytes(rng.randrange(256) for _ in range(32 if ggml_type == GGML_Q8_0 else 16))
    return bytes(out)


def tokens(n):
    """A llama-style vocabulary: <unk> <s> </s>, byte tokens, then ▁ pieces."""
    toks = [("<unk>", 2), ("<s>", 3), ("</s>", 3)] + [("<0x%02X>" % b, 6) for b in range(256)]
    words = ["\u2581the", "\u2581cat", "\u2581sat", "\u2581on", "at", "\u2581a", "e", "t", "h", "\u2581"]
    toks += [(w, 1) for w in words]
    while len(toks) < n:
        toks.append(("\u2581w%d" % len(toks), 1))
    return toks[:n]


class Model:
    """A valid small llama GGUF as parts that the hostile cases edit."""

    def __init__(self, dim=32, hidden=64, layers=1, heads=2, kv_heads=1, vocab=270, seq=16, matrix_type=GGML_F32,
                 tied=True, version=3, alignment=None, seed=1, head_size=None):
        rng = random.Random(seed)
        self.version, self.alignment = version, alignment
        self.kvs = [("general.architecture", STRING, "llama"), ("general.name", STRING, "tiny")]
        if alignment is not None:
            self.kvs.append(("general.alignment", U32, alignment))
        self.kvs += [("llama.context_length", U32, seq), ("llama.embedding_length", U32, dim),
                     ("llama.block_count", U32, layers), ("llama.feed_forward_length", U32, hidden),
                     ("llama.attention.head_count", U32, heads), ("llama.attention.head_count_kv", U32, kv_heads),
                     ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
                     ("llama.rope.dimension_count", U32, head_size or dim // heads),
                     ("llama.rope.freq_base", F32, 10000.0),
                     ("tokenizer.ggml.model", STRING, "llama")]
        toks = tokens(vocab)
        self.kvs += [("tokenizer.ggml.tokens", ARRAY, (STRING, [t for t, _ in toks])),
                     ("tokenizer.ggml.scores", ARRAY, (F32, [-float(i) for i in range(vocab)])),
                     ("tokenizer.ggml.token_type", ARRAY, (I32, [k for _, k in toks])),
                     ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2)]
        if head_size:  # a head size other than dim / heads, as llama.cpp's files give it
            self.kvs += [("llama.attention.key_length", U32, head_size), ("llama.attention.value_length", U32, head_size)]
        hs = head_size or dim // heads
        self.tensors = []  # [name, ne, ggml type, data, offset or None (computed)]

        def add(name, ne, ggml_type):
            self.tensors.append([name, ne, ggml_type, tensor_data(rng, ggml_type, ne), None])

        add("token_embd.weight", [dim, vocab], matrix_type)
        for layer in range(layers):
            p = "blk.%d." % layer
            add(p + "attn_norm.weight", [dim], GGML_F32)
            add(p + "attn_q.weight", [dim, heads * hs], matrix_type)
            add(p + "attn_k.weight", [dim, kv_heads * hs], matrix_type)
            add(p + "attn_v.weight", [dim, kv_heads * hs], matrix_type)
            add(p + "attn_output.weight", [heads * hs, dim], matrix_type)
            add(p + "ffn_norm.weight", [dim], GGML_F32)
            add(p + "ffn_gate.weight", [dim, hidden], matrix_type)
            add(p + "ffn_down.weight", [hidden, dim], matrix_type)
            add(p + "ffn_up.weight", [dim, hidden], matrix_type)
        add("output_norm.weight", [dim], GGML_F32)
        if not tied:
            add("output.weight", [dim, vocab], matrix_type)
        self.n_kv = self.n_tensors = None  # None: the true counts

    def set_kv(self, key, vtype, v):
        for i, (k, _, _) in enumerate(self.kvs):
            if k == key:
                self.kvs[i] = (key, vtype, v)
                return
        self.kvs.append((key, vtype, v))

    def drop_kv(self, key):
        self.kvs = [kv for kv in self.kvs if kv[0] != key]

    def tensor(self, name):
        return next(t for t in self.tensors if t[0] == name)

    def build(self):
        """(file bytes, byte offsets where its sections and items end)"""
        align = self.alignment or 32
        out = bytearray(b"GGUF" + struct.pack("<I", self.version))
        bounds = [4, 8]
        out += struct.pack("<Q", len(self.tensors) if self.n_tensors is None else self.n_tensors)
        out += struct.pack("<Q", len(self.kvs) if self.n_kv is None else self.n_kv)
        bounds += [16, 24]
        for key, vtype, v in self.kvs:
            out += s(key) + struct.pack("<I", vtype) + value(vtype, v)
            bounds.append(len(out))
        at = 0
        for t in self.tensors:
            name, ne, ggml_type, data, offset = t
            out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
            out += struct.pack("<IQ", ggml_type, at if offset is None else offset)
            at += len(data) + (-len(data)) % align
            bounds.append(len(out))
        out += b"\0" * ((-len(out)) % align)
        start = len(out)
        bounds.append(start)
        for t in self.tensors:
            out += t[3] + b"\0" * ((-len(t[3])) % align)
            bounds.append(len(out))
        return bytes(out), bounds, start


def valid_cases():
    """name -> Model: the shapes and encodings a reader must accept."""
    mixed = Model(dim=64, hidden=96, heads=4, kv_heads=2, matrix_type=GGML_Q8_0, tied=False, seed=6)
    for name, ggml_type in (("token_embd.weight", GGML_F16), ("blk.0.attn_q.weight", GGML_Q4_0),
                            ("blk.0.ffn_down.weight", GGML_F32), ("output.weight", GGML_Q4_0)):
        t = mixed.tensor(name)
        t[2], t[3] = ggml_type, tensor_data(random.Random(7), ggml_type, t[1])
    # integer keys in other integer types, epsilon as f64, no rope.dimension_count, no rope.freq_base
    # (llama.cpp's default, 10000: test_gguf.sh reads it back)
    wide = Model(seed=8)
    wide.set_kv("llama.context_length", U64, 16)
    wide.set_kv("llama.block_count", I32, 1)
    wide.set_kv("llama.attention.layer_norm_rms_epsilon", F64, 1e-5)
    wide.drop_kv("llama.rope.dimension_count")
    wide.drop_kv("llama.rope.freq_base")
    no_tokenizer = Model(seed=9)
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        no_tokenizer.drop_kv(key)
    rope_base = Model(seed=18)  # Llama 3's RoPE base: read from the file, not the default every other case states
    rope_base.set_kv("llama.rope.freq_base", F32, 500000.0)
    value_only = Model(seed=16)  # value_length alone, equal to dim / heads: key_length's default agrees
    value_only.set_kv("llama.attention.value_length", U32, 16)
    extra = Model(seed=10)  # keys qkv does not read, nested arrays among them
    extra.kvs.insert(2, ("general.tags", ARRAY, (ARRAY, [(STRING, ["a", "b"]), (U8, [1, 2, 3])])))
    extra.kvs.insert(3, ("general.description", STRING, "x" * 100))
    stated = Model(seed=17)  # the tokenizer's and RoPE's keys stated at the values qkv follows
    for key, vtype, v in (("tokenizer.ggml.add_bos_token", BOOL, 1), ("tokenizer.ggml.add_eos_token", BOOL, 0),
                          ("tokenizer.ggml.add_space_prefix", BOOL, 1), ("tokenizer.ggml.unknown_token_id", U32, 0),
                          ("llama.rope.scaling.type", STRING, "none"), ("llama.rope.scaling.factor", F32, 8.0),
                          ("llama.rope.scale_linear", F32, 4.0)):
        stated.set_kv(key, vtype, v)
    # integer keys in the narrow types (u8, i8, u16, i16) and i64, none of them read by another case
    narrow = Model(seed=19)
    for key, vtype, v in (("llama.context_length", U16, 16), ("llama.block_count", U8, 1),
                          ("llama.feed_forward_length", I16, 64), ("llama.attention.head_count", I8, 2),
                          ("llama.attention.head_count_kv", I64, 1), ("tokenizer.ggml.eos_token_id", U8, 2)):
        narrow.set_kv(key, vtype, v)
    return {
        "tiny-f32": Model(),
        "narrow-int-keys": narrow,
        "tiny-v2": Model(version=2, seed=2),
        "tiny-f16-untied": Model(matrix_type=GGML_F16, tied=False, seed=3),
        "tiny-q8_0-align64": Model(matrix_type=GGML_Q8_0, alignment=64, seed=4),
        "tiny-q4_0-2layers": Model(layers=2, matrix_type=GGML_Q4_0, seed=5),
        "mixed-types": mixed,
        "wide-keys": wide,
        "no-tokenizer": no_tokenizer,
        "extra-keys": extra,
        "head-size-24": Model(dim=32, heads=3, kv_heads=1, head_size=24, seed=15),  # 3 x 24 = 72 columns into wo
        "value-length-only": value_only,
        "rope-base-500000": rope_base,
        "stated-defaults": stated,
    }


def seed_cases():
    """name -> Model: a few kilobytes each, the fuzz target's seeds (tests/fuzz/corpus/gguf)."""
    return {
        "seed-q4_0": Model(hidden=32, vocab=16, seq=8, matrix_type=GGML_Q4_0, seed=11),
        "seed-q8_0-untied-v2": Model(hidden=32, vocab=16, seq=8, matrix_type=GGML_Q8_0, tied=False, version=2, seed=12),
        "seed-f16-align64": Model(dim=16, hidden=16, heads=2, vocab=8, seq=4, matrix_type=GGML_F16, alignment=64, seed=13),
        "seed-f32": Model(dim=8, hidden=8, heads=2, vocab=8, seq=4, layers=2, seed=14),
    }


def hostile_cases():
    """(name, a word of the expected error, file bytes): each breaks one thing."""
    cases = []
    base, bounds, start = Model().build()
    for i, b in enumerate(bounds[:-1]):  # truncated at every section and item boundary, and one byte short of it
        cases.append(("truncated-at-%d" % b, "truncated|not a checkpoint", base[:b]))
        cases.append(("truncated-before-%d" % b, "truncated|not a checkpoint", base[:b - 1]))
    cases.append(("truncated-last-byte", "truncated", base[:-1]))

    def edit(name, word, change):
        m = Model()
        change(m)
        cases.append((name, word, m.build()[0]))

    def patch(name, word, offset, fmt, v):
        b = bytearray(base)
        struct.pack_into(fmt, b, offset, v)
        cases.append((name, word, bytes(b)))

    patch("bad-magic", "magic|not a checkpoint", 0, "<4s", b"GGUX")
    patch("version-1", "version 1", 4, "<I", 1)
    patch("version-4", "version 4", 4, "<I", 4)
    patch("big-endian", "big-endian", 4, ">I", 3)
    edit("name-not-string", "not a string", lambda m: m.set_kv("general.name", U32, 1))
    patch("tensor-count-huge", "truncated", 8, "<Q", 1 << 63)
    patch("tensor-count-plus-one", "truncated|tensor", 8, "<Q", len(Model().tensors) + 1)
    patch("tensor-count-minus-one", "missing", 8, "<Q", len(Model().tensors) - 1)
    patch("kv-count-huge", "cannot fit", 16, "<Q", 1 << 63)
    patch("kv-count-plus-one", "truncated|type|tensor|unknown", 16, "<Q", len(Model().kvs) + 1)
    patch("kv-count-minus-one", "tensor|type|truncated|unknown|missing", 16, "<Q", len(Model().kvs) - 1)
    patch("key-length-huge", "truncated", 24, "<Q", (1 << 64) - 1)
    patch("key-length-past-end", "truncated", 24, "<Q", len(base))
    key0 = 24 + 8 + len("general.architecture")
    patch("unknown-value-type", "value type", key0, "<I", 13)
    patch("value-string-length-huge", "truncated", key0 + 4, "<Q", 1 << 62)
    edit("array-count-huge", "array", lambda m: m.kvs.insert(0, ("x.list", ARRAY, (U32, [1, 2]))))
    cases[-1] = (cases[-1][0], cases[-1][1], cases[-1][2].replace(struct.pack("<IQ", U32, 2), struct.pack("<IQ", U32, 1 << 62), 1))
    edit("array-of-strings-count-huge", "array", lambda m: m.kvs.insert(0, ("x.names", ARRAY, (STRING, ["ab"]))))
    cases[-1] = (cases[-1][0], cases[-1][1], cases[-1][2].replace(struct.pack("<IQ", STRING, 1), struct.pack("<IQ", STRING, 1 << 40), 1))
    edit("unknown-array-type", "array element type", lambda m: m.kvs.insert(0, ("x.bad", ARRAY, (I16, [5, 5, 5]))))
    cases[-1] = (cases[-1][0], cases[-1][1], cases[-1][2].replace(struct.pack("<IQ", I16, 3), struct.pack("<IQ", 99, 3), 1))
    nest = (U8, [1])
    for _ in range(8):
        nest = (ARRAY, [nest])
    edit("arrays-nested-deep", "nested", lambda m: m.kvs.insert(0, ("x.deep", ARRAY, nest)))
    edit("duplicate-key", "twice", lambda m: m.kvs.append(("llama.block_count", U32, 1)))
    edit("wrong-architecture", "gpt2", lambda m: m.set_kv("general.architecture", STRING, "gpt2"))
    edit("no-architecture", "architecture", lambda m: m.drop_kv("general.architecture"))
    edit("architecture-not-string", "not a string", lambda m: m.set_kv("general.architecture", U32, 7))
    edit("missing-block-count", "block_count", lambda m: m.drop_kv("llama.block_count"))
    edit("missing-rms-epsilon", "epsilon", lambda m: m.drop_kv("llama.attention.layer_norm_rms_epsilon"))
    edit("block-count-huge", "block_count", lambda m: m.set_kv("llama.block_count", U64, 1 << 40))
    edit("context-length-zero", "context_length", lambda m: m.set_kv("llama.context_length", U32, 0))
    edit("heads-do-not-divide-dim", "divisible", lambda m: m.set_kv("llama.attention.head_count", U32, 3))
    def kv_heads_3(m):
        m.set_kv("llama.attention.head_count", U32, 4)
        m.set_kv("llama.attention.head_count_kv", U32, 3)
        m.set_kv("llama.rope.dimension_count", U32, 8)
    edit("kv-heads-do-not-divide-heads", "multiple", kv_heads_3)
    edit("key-length-not-value-length", "value_length",
         lambda m: (m.set_kv("llama.attention.key_length", U32, 16), m.set_kv("llama.attention.value_length", U32, 8)))
    edit("key-length-zero", "key_length", lambda m: m.set_kv("llama.attention.key_length", U32, 0))
    edit("key-length-not-the-tensors", "shape|dimension|size", lambda m: (
        m.set_kv("llama.attention.key_length", U32, 8), m.set_kv("llama.rope.dimension_count", U32, 8)))
    edit("rope-dims-differ", "dimension_count", lambda m: m.set_kv("llama.rope.dimension_count", U32, 8))
    edit("rope-scaling", "scaling", lambda m: m.set_kv("llama.rope.scaling.type", STRING, "yarn"))
    edit("rope-scaling-factor", "scaling.factor", lambda m: m.set_kv("llama.rope.scaling.factor", F32, 4.0))
    edit("rope-scale-linear", "scale_linear", lambda m: m.set_kv("llama.rope.scale_linear", F32, 2.0))
    edit("rope-scale-linear-not-float", "not a float", lambda m: m.set_kv("llama.rope.scale_linear", U32, 2))
    edit("tokenizer-no-bos", "add_bos_token", lambda m: m.set_kv("tokenizer.ggml.add_bos_token", BOOL, 0))
    edit("tokenizer-adds-eos", "add_eos_token", lambda m: m.set_kv("tokenizer.ggml.add_eos_token", BOOL, 1))
    edit("tokenizer-no-space-prefix", "add_space_prefix", lambda m: m.set_kv("tokenizer.ggml.add_space_prefix", BOOL, 0))
    edit("tokenizer-bool-not-bool", "not a bool", lambda m: m.set_kv("tokenizer.ggml.add_space_prefix", U8, 1))
    edit("tokenizer-bool-value-2", "not a bool", lambda m: m.set_kv("tokenizer.ggml.add_bos_token", BOOL, 2))
    edit("tokenizer-unknown-id", "unknown_token_id", lambda m: m.set_kv("tokenizer.ggml.unknown_token_id", U32, 5))
    def alignment_48(m):
        m.alignment = 48
        m.set_kv("general.alignment", U32, 48)
    edit("alignment-not-power-of-two", "power of two", alignment_48)
    edit("alignment-zero", "alignment", lambda m: m.kvs.insert(0, ("general.alignment", U32, 0)))
    edit("tokenizer-gpt2", "gpt2", lambda m: m.set_kv("tokenizer.ggml.model", STRING, "gpt2"))
    edit("tokenizer-no-scores", "scores", lambda m: m.drop_kv("tokenizer.ggml.scores"))
    edit("tokenizer-tokens-count-lies", "entries", lambda m: m.set_kv("tokenizer.ggml.tokens", ARRAY, (STRING, ["a"] * 5)))
    edit("tokenizer-tokens-not-strings", "array", lambda m: m.set_kv("tokenizer.ggml.tokens", ARRAY, (U32, list(range(270)))))
    edit("bos-outside-vocab", "bos", lambda m: m.set_kv("tokenizer.ggml.bos_token_id", U32, 270))
    edit("vocab-size-disagrees", "vocab_size", lambda m: m.set_kv("llama.vocab_size", U32, 271))
    # keys of the wrong type or past their range, where the battery above has none
    edit("context-length-not-integer", "llama.context_length has type 8, not an integer",
         lambda m: m.set_kv("llama.context_length", STRING, "16"))
    edit("rope-dims-not-integer", "llama.rope.dimension_count has type 6, not an integer",
         lambda m: m.set_kv("llama.rope.dimension_count", F32, 16.0))
    edit("unknown-id-not-integer", "tokenizer.ggml.unknown_token_id has type 7, not an integer",
         lambda m: m.set_kv("tokenizer.ggml.unknown_token_id", BOOL, 0))
    edit("context-length-u64-past-i64", "llama.context_length = 18446744073709551615 is outside 1..2147483647",
         lambda m: m.set_kv("llama.context_length", U64, (1 << 64) - 1))
    edit("rms-epsilon-not-float", "layer_norm_rms_epsilon has type 4, not a float",
         lambda m: m.set_kv("llama.attention.layer_norm_rms_epsilon", U32, 1))
    edit("eos-outside-vocab", "eos_token_id = 270 is outside 0..269",
         lambda m: m.set_kv("tokenizer.ggml.eos_token_id", U32, 270))
    edit("token-types-not-i32", "tokenizer.ggml.token_type is not an array of type 5",
         lambda m: m.set_kv("tokenizer.ggml.token_type", ARRAY, (U32, [1] * 270)))
    def heads_3_key_length(m):  # 32 / 3 has no default: value_length must be stated too
        m.set_kv("llama.attention.head_count", U32, 3)
        m.set_kv("llama.attention.key_length", U32, 16)
    edit("value-length-missing", "not divisible by head_count 3, and attention.value_length is missing",
         heads_3_key_length)
    def long_token(m):  # one piece of 65537 bytes: tokenizer.c's pieces are at most 65536
        toks = m.kvs[[k for k, _, _ in m.kvs].index("tokenizer.ggml.tokens")][2][1]
        toks[300 - 31] = "x" * 65537
        m.set_kv("tokenizer.ggml.tokens", ARRAY, (STRING, toks))
    edit("token-too-long", "GGUF token 269 is 65537 bytes long \\(at most 65536\\)", long_token)

    def tensor_edit(name, word, tensor, field, v):
        def change(m):
            t = m.tensor(tensor)
            t[field] = v
        edit(name, word, change)

    tensor_edit("tensor-type-q4_k", "Q4_K", "blk.0.attn_q.weight", 2, 12)
    tensor_edit("tensor-type-unknown", "type 99", "blk.0.ffn_up.weight", 2, 99)
    tensor_edit("norm-f16", "norm", "blk.0.ffn_norm.weight", 2, GGML_F16)
    tensor_edit("tensor-misaligned", "alignment", "blk.0.attn_k.weight", 4, 16 * 1024 + 4)
    tensor_edit("tensor-past-end", "past the end", "output_norm.weight", 4, 1 << 20)
    tensor_edit("tensor-offset-wraps", "past the end", "output_norm.weight", 4, (1 << 64) - 32)
    tensor_edit("tensor-wrong-shape", "shape", "blk.0.attn_v.weight", 1, [32, 32])
    tensor_edit("tensor-huge-shape", "shape", "blk.0.attn_v.weight", 1, [1 << 62, 1 << 62])
    tensor_edit("tensor-no-dims", "dimensions", "blk.0.attn_v.weight", 1, [])
    tensor_edit("tensor-five-dims", "dimensions", "blk.0.attn_v.weight", 1, [32, 16, 1, 1, 1])
    tensor_edit("tensor-unknown-name", "not one", "blk.0.ffn_up.weight", 0, "blk.0.ffn_upp.weight")
    tensor_edit("tensor-layer-beyond-blocks", "not one", "blk.0.ffn_up.weight", 0, "blk.1.ffn_up.weight")
    tensor_edit("tensor-name-too-long", "name", "blk.0.ffn_up.weight", 0, "x" * 65)
    tensor_edit("tensor-aliases-another", "overlaps", "blk.0.attn_q.weight", 4, 0)  # token_embd's bytes
    tensor_edit("tensor-duplicate", "twice", "blk.0.ffn_up.weight", 0, "blk.0.ffn_down.weight")
    tensor_edit("embedding-vocab-huge", "token_embd", "token_embd.weight", 1, [32, 1 << 40])
    edit("tensor-missing", "missing", lambda m: m.tensors.pop(3))
    narrow = Model(dim=48, heads=3)  # rows of 48: not a whole number of Q8_0 blocks
    narrow.tensor("token_embd.weight")[2] = GGML_Q8_0
    cases.append(("q8-rows-not-blocks", "blocks", narrow.build()[0]))
    return cases


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("valid", "seeds", "hostile"):
        sys.exit(__doc__)
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    if sys.argv[1] in ("valid", "seeds"):
        for name, model in (valid_cases() if sys.argv[1] == "valid" else seed_cases()).items():
            with open(os.path.join(out, name + ".gguf"), "wb") as f:
                f.write(model.build()[0])
        return
    with open(os.path.join(out, "cases.txt"), "w") as listing:
        for name, word, data in hostile_cases():
            with open(os.path.join(out, name + ".gguf"), "wb") as f:
                f.write(data)
            listing.write("%s\t%s\n" % (name, word))


if __name__ == "__main__":
    main()
