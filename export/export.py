#!/usr/bin/python3
"""Export a PyTorch checkpoint to the qkv format (default) or llama2.c's formats.

    python3 export/export.py out/stories/ckpt.pt models/stories.bin --dtype f16
    python3 export/export.py out/stories/ckpt.pt /tmp/stories_legacy.bin --format legacy
    python3 export/export.py out/stories/ckpt.pt /tmp/stories_v1.bin --format v1
    python3 export/export.py llama_state_dict.pt out.bin --tokenizer tok.bin --seq-len 256

Input: a checkpoint written by export/train.py (ckpt.pt or init.pt: dict with
"model", "model_args", "tokenizer"), or a plain Llama-style state dict using
llama2.c model.py names (tok_embeddings.weight, layers.N.attention.wq.weight,
..., norm.weight, output.weight).  For a plain state dict the shape is
inferred from the tensors; give --tokenizer (tokenizer.bin), --seq-len, and
--n-heads/--n-kv-heads (defaults: head_size 64 if dim divisible by 64 ...
pass them explicitly), plus --norm-eps/--rope-theta if not llama2.c's.

--dtype f16 stores the matrices (embedding and classifier included) as IEEE
float16, rounded to nearest: half the bytes, the same engine arithmetic
(float32); norms stay float32.  --dtype q8 / q4 stores them as ggml's Q8_0 /
Q4_0 blocks of 32 (34 / 18 bytes; export/qkvfile.py quantizes, bit for bit as
./run IN -m quantize -o OUT --dtype q8|q4); a matrix whose width is not a
multiple of 32 is kept in float16, with a note on stderr.  Only the qkv format
has these types.

qkv output embeds the tokenizer; legacy/v1 need a separate tokenizer.bin
(write it with --write-tokenizer PATH).  legacy/v1 can only express
head_size = dim/n_heads, eps 1e-5, theta 10000, BOS 1, EOS 2.
"""
import argparse
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import ModelArgs  # noqa: E402
import qkvfile  # noqa: E402



def load_any(path, opts):
    """Returns (args: ModelArgs, tensors: {qkv name: np.float32 array}, tokenizer bytes or None)."""
    try:
        ck = torch.load(path, map_location="cpu")
    except Exception:  # not a PyTorch file: a qkv / llama2.c model file (conversion)
        a, t, tok = read_qkv(path, opts.tokenizer)
        return a, t, tok
    tok = None
    if isinstance(ck, dict) and "model" in ck and "model_args" in ck:
        sd, margs, tok = ck["model"], dict(ck["model_args"]), ck.get("tokenizer")
    else:
        sd = ck.get("model", ck) if isinstance(ck, dict) else ck
        margs = None
    sd = {re.sub(r"^(_orig_mod\.|module\.)", "", k): v for k, v in sd.items()}
    t = {}
    for k, v in sd.items():
        if not torch.is_tensor(v):
            continue
        name = k[:-len(".weight")] if k.endswith(".weight") else k
        t[name] = v.detach().to(torch.float32).cpu().numpy()
    if margs is None:
        dim = t["tok_embeddings"].shape[1]
        vocab = t["tok_embeddings"].shape[0]
        n_layers = 1 + max(int(m.group(1)) for k in t for m in [re.match(r"layers\.(\d+)\.", k)] if m)
        q_out = t["layers.0.attention.wq"].shape[0]
        kv_out = t["layers.0.attention.wk"].shape[0]
        hidden = t["layers.0.feed_forward.w1"].shape[0]
        if opts.n_heads:
            n_heads = opts.n_heads
        else:
            raise SystemExit("plain state dict: pass --n-heads (and --n-kv-heads if GQA)")
        head_size = q_out // n_heads
        n_kv = opts.n_kv_heads or kv_out // head_size
        shared = "output" not in t or np.array_equal(t["output"], t["tok_embeddings"])
        margs = dict(dim=dim, hidden_dim=hidden, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
                     head_size=head_size, vocab_size=vocab, seq_len=opts.seq_len or 256,
                     shared_classifier=shared)
    for key in ("norm_eps", "rope_theta", "seq_len"):
        v = getattr(opts, key, None)
        if v:
            margs[key] = v
    args = ModelArgs(**margs)
    if args.shared_classifier:
        t.pop("output", None)
    if opts.tokenizer:
        tok = open(opts.tokenizer, "rb").read()
    return args, t, tok


def qkv_config(a: ModelArgs):
    return dict(dim=a.dim, hidden_dim=a.hidden_dim, n_layers=a.n_layers, n_heads=a.n_heads,
                n_kv_heads=a.n_kv_heads, head_size=a.head_size, vocab_size=a.vocab_size,
                seq_len=a.seq_len, norm_eps=a.norm_eps, rope_theta=a.rope_theta,
                shared_classifier=1 if a.shared_classifier else 0, bos_id=a.bos_id, eos_id=a.eos_id)


DTYPES = {"f32": qkvfile.WEIGHT_F32, "f16": qkvfile.WEIGHT_F16, "q8": qkvfile.WEIGHT_Q8_0,
          "q4": qkvfile.WEIGHT_Q4_0}


def write(path, fmt, a: ModelArgs, t, tok, dtype="f32"):
    """Write with export/qkvfile.py (strict: config and every tensor checked)."""
    cfg = qkv_config(a)
    cfg["weight_type"] = DTYPES[dtype]
    if fmt == "qkv":
        if tok is None:
            raise SystemExit("qkv format embeds a tokenizer: pass --tokenizer")
        for name, shape in qkvfile.tensor_shapes(cfg):
            if len(shape) == 2 and qkvfile.matrix_type(cfg["weight_type"], shape[1]) != cfg["weight_type"]:
                kind = qkvfile.WEIGHT_TYPES[cfg["weight_type"]]
                print("note: %s has %d columns, not a whole number of %s blocks of %d: kept in float16"
                      % (name, shape[1], kind[0], kind[1]), file=sys.stderr)
        return qkvfile.write_qkv(path, cfg, t, qkvfile.parse_tokenizer(tok, a.vocab_size))
    if fmt == "legacy":
        return qkvfile.write_llama2c_legacy(path, cfg, t)
    return qkvfile.write_llama2c_v1(path, cfg, t)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("output")
    ap.add_argument("--format", choices=["qkv", "legacy", "v1"], default="qkv")
    ap.add_argument("--dtype", choices=list(DTYPES), default="f32",
                    help="matrix weight type: f32, f16, q8 (Q8_0), q4 (Q4_0); all but f32 qkv only")
    ap.add_argument("--tokenizer", help="tokenizer.bin (overrides the one in the checkpoint)")
    ap.add_argument("--write-tokenizer", metavar="PATH", help="also write the tokenizer.bin here")
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--n-heads", type=int)
    ap.add_argument("--n-kv-heads", type=int)
    ap.add_argument("--norm-eps", type=float)
    ap.add_argument("--rope-theta", type=float)
    opts = ap.parse_args()
    a, t, tok = load_any(opts.checkpoint, opts)
    if opts.dtype != "f32" and opts.format != "qkv":
        raise SystemExit("--dtype %s needs --format qkv (llama2.c files are float32)" % opts.dtype)
    write(opts.output, opts.format, a, t, tok, opts.dtype)
    if opts.write_tokenizer:
        if tok is None:
            raise SystemExit("no tokenizer available")
        qkvfile.write_tokenizer_bin(opts.write_tokenizer, qkvfile.parse_tokenizer(tok, a.vocab_size))
    n = sum(v.size for v in t.values())
    print("wrote %s (%s %s, %d bytes): %s, %d params"
          % (opts.output, opts.format, opts.dtype, os.path.getsize(opts.output), a.to_dict(), n))



def read_qkv(path, tokenizer_path=None):
    """Any model file qkvfile reads -> (ModelArgs, {name: np.float32 array}, tokenizer bytes or None)."""
    c, t, tk = qkvfile.read_model(path, tokenizer_path)
    a = ModelArgs(dim=c["dim"], hidden_dim=c["hidden_dim"], n_layers=c["n_layers"], n_heads=c["n_heads"],
                  n_kv_heads=c["n_kv_heads"], head_size=c["head_size"], vocab_size=c["vocab_size"],
                  seq_len=c["seq_len"], norm_eps=c["norm_eps"], rope_theta=c["rope_theta"],
                  shared_classifier=bool(c["shared_classifier"]), bos_id=c["bos_id"], eos_id=c["eos_id"])
    return a, t, (qkvfile.tokenizer_to_bytes(tk) if tk is not None else None)


def torch_model(a, t, dtype=torch.float32):
    """Build export/model.py's Transformer from qkv tensors."""
    from model import Transformer
    m = Transformer(a)
    sd = {}
    for k in m.state_dict():
        name = k[:-len(".weight")]
        if name == "output" and a.shared_classifier:
            name = "tok_embeddings"
        sd[k] = torch.from_numpy(t[name])
    m.load_state_dict(sd)
    return m.to(dtype).eval()


if __name__ == "__main__":
    main()
