"""Writes the fuzzers' seed corpus (tests/fuzz/corpus/), committed: tiny
valid inputs for each target, so fuzzing starts from files that load.

    /usr/bin/python3 tests/fuzz/make_seeds.py      (numpy; deterministic)
"""
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "export"))
import qkvfile  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")


def tokenizer():
    pieces = [(b"<unk>", 0.0), (b"<s>", 0.0), (b"</s>", 0.0), (b" ", -1.0), (b"a", -2.0), (b" a", 0.5)]
    return qkvfile.Tokenizer(pieces, max(len(p) for p, _ in pieces))


def char_tokenizer():
    pieces = [(c.encode(), 0.0) for c in ["\n", " ", "a", "b", "\u00e9", "\U0001F642"]]
    return qkvfile.Tokenizer(pieces, 4)


def bpe_tokenizer():
    """The 256 bytes, merges "a"+"t", " "+"c", " c"+"at", then <|endoftext|>."""
    pieces = [bytes([b]) for b in range(256)] + [b"at", b" c", b" cat", b"<|endoftext|>"]
    merges = [(ord("a"), ord("t"), 256), (ord(" "), ord("c"), 257), (257, 256, 258)]
    return qkvfile.Tokenizer([(p, 0.0) for p in pieces], 13, merges)


def tensors(config, seed):
    rng = np.random.default_rng(seed)
    return {name: (rng.standard_normal(shape) * 0.5 + (1.0 if len(shape) == 1 else 0.0)).astype(np.float32)
            for name, shape in qkvfile.tensor_shapes(config)}


def main():
    tok = tokenizer()
    for shared in (1, 0):
        c = qkvfile.default_config(dim=4, hidden_dim=4, n_layers=1, n_heads=2, n_kv_heads=1,
                                   vocab_size=len(tok.pieces), seq_len=4, shared_classifier=shared)
        t = tensors(c, 7 + shared)
        tag = "tied" if shared else "sepcls"
        d = os.path.join(CORPUS, "checkpoint")
        qkvfile.write_qkv(os.path.join(d, tag + ".qkv"), c, t, tok, alignment=16)
        qkvfile.write_llama2c_legacy(os.path.join(d, tag + ".legacy.bin"), c, t)
        qkvfile.write_llama2c_v1(os.path.join(d, tag + ".v1.bin"), c, t)
        c16 = dict(c, weight_type=qkvfile.WEIGHT_F16)
        qkvfile.write_qkv(os.path.join(d, tag + ".f16.qkv"), c16, t, tok, alignment=16)
    # llama2.c's version 2 (runq.c's int8): dims of whole groups of 32
    c = qkvfile.default_config(dim=32, hidden_dim=32, n_layers=1, n_heads=2, n_kv_heads=1,
                               vocab_size=len(tok.pieces), seq_len=4, shared_classifier=0)
    qkvfile.write_llama2c_v2(os.path.join(CORPUS, "checkpoint", "sepcls.v2.bin"), c, tensors(c, 11), group_size=32)
    # GPT-2: a character model and a byte-level BPE one
    chars, bpe = char_tokenizer(), bpe_tokenizer()
    for tag, t_, kind, bos in (("gpt2-char", chars, qkvfile.TOKENIZER_CHAR, -1),
                               ("gpt2-bpe", bpe, qkvfile.TOKENIZER_GPT2_BPE, len(bpe.pieces) - 1)):
        c = qkvfile.default_config(dim=4, hidden_dim=8, n_layers=1, n_heads=2, n_kv_heads=2,
                                   vocab_size=len(t_.pieces), seq_len=4, bos_id=bos, eos_id=bos)
        c.update(arch=qkvfile.ARCH_GPT2, activation=qkvfile.ACT_GELU_ERF, tokenizer_kind=kind, rope_theta=0.0)
        qkvfile.write_qkv(os.path.join(CORPUS, "checkpoint", tag + ".qkv"), c, tensors(c, 9), t_, alignment=16)
    # tokenizer target: u16 text length (kind in the top 2 bits), for kinds 1
    # and 2 a u16 vocabulary size, tokenizer.bin bytes, then the text
    tok_bytes = qkvfile.tokenizer_to_bytes(tok)
    for i, text in enumerate([b"a a aa", "caf\u00e9 \U0001F642".encode(), b"\xc3\x28 \xff"]):
        with open(os.path.join(CORPUS, "tokenizer", "seed%d" % i), "wb") as f:
            f.write(struct.pack("<H", len(text)) + tok_bytes + text)
    for i, (kind, t_, text) in enumerate([(1, chars, "ab\u00e9 \U0001F642".encode()),
                                           (2, bpe, "  it's a cat\t\u00e9\u00e9 \U0001F642 123".encode())]):
        with open(os.path.join(CORPUS, "tokenizer", "seed%d" % (3 + i)), "wb") as f:
            f.write(struct.pack("<HH", len(text) | kind << 14, len(t_.pieces)) + qkvfile.tokenizer_to_bytes(t_) + text)
    # sampler target: u16 vocab, f32 temperature, f32 top-p, u16 top-k, u64 seed, then f32 logits
    for i, (temp, topp, topk) in enumerate([(1.0, 0.9, 0), (0.0, 1.0, 0), (0.8, 0.5, 3), (1e30, 1e-6, 0)]):
        logits = np.random.default_rng(i).standard_normal(16).astype(np.float32)
        with open(os.path.join(CORPUS, "sampler", "seed%d" % i), "wb") as f:
            f.write(struct.pack("<HffHQ", 16, temp, topp, topk, i + 1) + logits.tobytes())
    # prompt target: the prompt's bytes
    for i, text in enumerate([b"the cat sat on the mat", b"", "\u00e9t\u00e9 \U0001F642 <s>".encode()]):
        with open(os.path.join(CORPUS, "prompt", "seed%d" % i), "wb") as f:
            f.write(text)


if __name__ == "__main__":
    main()
