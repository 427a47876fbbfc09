#!/usr/bin/python3
"""Export a PyTorch checkpoint to the qkv format (default) or llama2.c's formats.

    python3 export/export.py out/stories/ckpt.pt models/stories.bin --dtype f16
    python3 export/export.py out/stories/ckpt.pt /tmp/stories_legacy.bin --format legacy
    python3 export/export.py out/stories/ckpt.pt /tmp/stories_v1.bin --format v1
    python3 export/export.py llama_state_dict.pt out.bin --tokenizer tok.bin --seq-len 256

Input: a checkpoint written by export/train.py (ckpt.pt or init.pt: dict with
"model", "model_args", "tokenizer") or by llama2.c's train.py (its
model_args: max_seq_len, multiple_of; the classifier tied; give --tokenizer),
or a plain Llama-style state dict using
llama2.c model.py names (tok_embeddings.weight, layers.N.attention.wq.weight,
..., norm.weight, output.weight).  For a plain state dict the shape is
inferred from the tensors; give --tokenizer (tokenizer.bin), --seq-len
(default 256) and --n-heads (required: the shapes cannot tell it;
--n-kv-heads is inferred from wk's rows), plus --norm-eps/--rope-theta if
not llama2.c's.

--dtype f16 stores the matrices (embedding and classifier included) as IEEE
float16, rounded to nearest: half the bytes, the same engine arithmetic
(float32); norms stay float32.  --dtype q8 / q4 stores them as ggml's Q8_0 /
Q4_0 blocks of 32 (34 / 18 bytes; export/qkvfile.py quantizes, bit for bit as
./run IN -m quantize -o OUT --dtype q8|q4); a matrix whose width is not a
multiple of 32 is kept in float16, with a note on stderr.  Only the qkv format
has these types.

A tensor the engine does not use (a bias, another architecture's norm) is
refused, not dropped; so is a plain state dict without output.weight (a tied
model's state dict holds it too), and a ckpt.pt whose model_args has the
classifier tied (shared_classifier, default True) while output.weight differs.

qkv output embeds the tokenizer; legacy/v1 need a separate tokenizer.bin
(write it with --write-tokenizer PATH).  legacy/v1 can only express
head_size = dim/n_heads, eps 1e-5, theta 10000, BOS 1, EOS 2.

GPT-2 / nanoGPT checkpoints (written as qkv files, architecture GPT-2):

    python3 export/export.py out/shakespeare/ckpt.pt models/shakespeare.bin --dtype f16
    python3 export/export.py nanogpt/ckpt.pt out.bin --meta data/shakespeare_char/meta.pkl
    python3 export/export.py gpt2/pytorch_model.bin out.bin      # with config.json, vocab.json, merges.txt beside

  (a) a nanoGPT ckpt.pt: a dict with "model_args" (n_layer, n_head, n_embd,
      block_size, bias, vocab_size) and "model", its state dict (transformer.wte,
      .wpe, .h.N.ln_1, .attn.c_attn, .attn.c_proj, .ln_2, .mlp.c_fc, .mlp.c_proj,
      .ln_f, lm_head; the "_orig_mod." prefix torch.compile adds is dropped).
      Its GELU is the exact (erf) one.
  (b) a Hugging Face GPT-2-style state dict saved with torch.save (the same
      names, with or without "transformer.", Conv1D weights stored [in, out]),
      with its config.json beside it (n_head, n_positions, layer_norm_epsilon,
      activation_function) or --n-heads; its GELU is the tanh approximation
      ("gelu_new") unless config.json or --gelu says otherwise.
  The fused c_attn [3 dim, dim] is split into wq, wk, wv; a model without
  biases (nanoGPT's bias=False) gets zero biases (one with biases needs every
  one).  --seq-len, --rope-theta, --n-kv-heads (and --n-heads for nanoGPT)
  are refused: the context is wpe's, and there is no RoPE.  The tokenizer, in this order:
  --meta META.PKL or a meta.pkl beside the checkpoint (nanoGPT's stoi/itos:
  a character model, no BOS or EOS); --vocab VOCAB.JSON --merges MERGES.TXT or
  vocab.json + merges.txt beside it (GPT-2's byte-level BPE; <|endoftext|>
  is BOS and EOS).
"""
import argparse
import dataclasses
import json
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import ModelArgs  # noqa: E402
import qkvfile  # noqa: E402
import cli  # noqa: E402  (one-line errors)



# ---------------------------------------------------------------------------
# GPT-2 / nanoGPT

def is_gpt2(ck):
    """A nanoGPT ckpt.pt (model_args with n_layer) or a GPT-2-style state dict (wte, h.N.attn.c_attn)."""
    if not isinstance(ck, dict):
        return False
    if "model_args" in ck:
        return "n_layer" in ck["model_args"]
    return any(k.endswith("wte.weight") for k in ck) and any(k.endswith("attn.c_attn.weight") for k in ck)


def gpt2_state(sd):
    """nanoGPT / Hugging Face names without their prefixes -> float32 numpy, buffers dropped."""
    out = {}
    for k, v in sd.items():
        k = re.sub(r"^(_orig_mod\.|module\.)", "", k)
        k = re.sub(r"^transformer\.", "", k)
        if not torch.is_tensor(v) or k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"):
            continue  # HF's causal-mask buffers (the attention's own bias is attn.c_attn.bias)
        out[k] = v.detach().to(torch.float32).cpu().numpy()
    return out


def beside(path, name):
    p = os.path.join(os.path.dirname(os.path.abspath(path)), name)
    return p if os.path.exists(p) else None


def gpt2_tokenizer(path, opts, vocab_size):
    """(qkvfile.Tokenizer, tokenizer kind, bos, eos) from meta.pkl or vocab.json + merges.txt."""
    import pickle
    import gpt2_bpe
    meta = opts.meta or (None if opts.vocab else beside(path, "meta.pkl"))
    if meta:
        with open(meta, "rb") as f:
            itos = pickle.load(f)["itos"]
        if len(itos) != vocab_size:
            raise SystemExit("%s has %d characters, the model's vocabulary is %d" % (meta, len(itos), vocab_size))
        pieces = [(itos[i].encode("utf-8"), 0.0) for i in range(vocab_size)]
        print("tokenizer: %d characters from %s (no BOS; an empty prompt starts from \"\\n\")" % (vocab_size, meta))
        return qkvfile.Tokenizer(pieces, max(len(p) for p, _ in pieces)), qkvfile.TOKENIZER_CHAR, -1, -1
    vocab_path, merges_path = opts.vocab or beside(path, "vocab.json"), opts.merges or beside(path, "merges.txt")
    if not (vocab_path and merges_path):
        raise SystemExit("no tokenizer: give --meta meta.pkl (a character model) or --vocab vocab.json "
                         "--merges merges.txt (GPT-2 BPE), or put them beside the checkpoint")
    vocab, merges = gpt2_bpe.load(vocab_path, merges_path)
    if max(vocab.values()) >= vocab_size:
        raise SystemExit("%s has ids up to %d, the model's vocabulary is %d" % (vocab_path, max(vocab.values()), vocab_size))
    if gpt2_bpe.END_OF_TEXT not in vocab:
        raise SystemExit("%s has no %s token (GPT-2's BOS and EOS)" % (vocab_path, gpt2_bpe.END_OF_TEXT))
    pieces, triples = gpt2_bpe.to_qkv(vocab, merges, vocab_size)
    eot = vocab[gpt2_bpe.END_OF_TEXT]
    print("tokenizer: GPT-2 byte-level BPE, %d tokens, %d merges (%s, %s); <|endoftext|> = %d"
          % (len(vocab), len(triples), vocab_path, merges_path, eot))
    tok = qkvfile.Tokenizer([(p, 0.0) for p in pieces], max(len(p) for p in pieces), triples)
    return tok, qkvfile.TOKENIZER_GPT2_BPE, eot, eot


def hf_gelu(hf):
    """config.json's activation_function as erf or tanh GELU; what qkv cannot run is refused"""
    act = hf.get("activation_function", "gelu_new")
    if act not in ("gelu", "gelu_new", "gelu_pytorch_tanh"):
        raise SystemExit("config.json: activation_function %r: qkv's GPT-2 runs gelu (erf) or gelu_new (tanh)" % act)
    for key, default in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                         ("reorder_and_upcast_attn", False)):
        if hf.get(key, default) != default:
            raise SystemExit("config.json: %s %r: qkv's GPT-2 attention is softmax(q k / sqrt(head size))"
                             % (key, hf[key]))
    return "erf" if act == "gelu" else "tanh"


def load_gpt2(ck, path, opts):
    """(qkv config, tensors, qkvfile.Tokenizer) of a nanoGPT ckpt.pt or a GPT-2-style state dict."""
    nanogpt = "model_args" in ck
    sd = gpt2_state(ck["model"] if nanogpt else ck)
    ignored = [flag for flag, v in (("--seq-len", opts.seq_len), ("--n-kv-heads", opts.n_kv_heads),
                                    ("--rope-theta", opts.rope_theta), ("--n-heads", nanogpt and opts.n_heads)) if v]
    if ignored:
        raise SystemExit("%s: a GPT-2 checkpoint takes its context from wpe, its heads from its own config, and has "
                         "no RoPE" % ignored[0])

    def tensor(name):
        if name not in sd:
            raise SystemExit("%s: no tensor %s (a GPT-2 checkpoint needs it)" % (path, name))
        return sd[name]

    d = tensor("wte.weight").shape[1]
    # nanoGPT's nn.Linear stores [out, in]; Hugging Face's Conv1D [in, out]
    conv1d = tensor("h.0.attn.c_attn.weight").shape == (d, 3 * d)
    hf = json.load(open(beside(path, "config.json"))) if not nanogpt and beside(path, "config.json") else {}
    if nanogpt:
        n_head, gelu = ck["model_args"]["n_head"], "erf"
    else:
        if opts.n_heads is not None and "n_head" in hf:
            raise SystemExit("%s: config.json beside it gives n_head %d: --n-heads is for a state dict without one"
                             % (path, hf["n_head"]))
        n_head = opts.n_heads or hf.get("n_head")
        if not n_head:
            raise SystemExit("a GPT-2 state dict without config.json beside it: pass --n-heads")
        gelu = hf_gelu(hf)
    if d % n_head:
        raise SystemExit("%s: n_embd %d is not a multiple of n_head %d" % (path, d, n_head))
    gelu = opts.gelu or gelu
    n_layer = 1 + max(int(m.group(1)) for k in sd for m in [re.match(r"h\.(\d+)\.", k)] if m)
    # nanoGPT's bias=False has none: zeros, the same arithmetic; a checkpoint
    # with biases needs every one (a lost one is not a zero)
    has_biases = any(k.endswith(".bias") for k in sd)

    def matrix(name):
        w = tensor(name)
        return np.ascontiguousarray(w.T if conv1d else w)

    def bias(name, n):
        return tensor(name) if has_biases else np.zeros(n, dtype=np.float32)

    t = {"tok_embeddings": sd["wte.weight"], "pos_embeddings": tensor("wpe.weight"),
         "norm": tensor("ln_f.weight"), "norm.bias": bias("ln_f.bias", d)}
    for layer in range(n_layer):
        p, q = "h.%d." % layer, "layers.%d." % layer
        qkv_w, qkv_b = matrix(p + "attn.c_attn.weight"), bias(p + "attn.c_attn.bias", 3 * d)
        for i, name in enumerate(("wq", "wk", "wv")):   # c_attn is q, k, v stacked
            t[q + "attention." + name] = qkv_w[i * d:(i + 1) * d]
            t[q + "attention.%s.bias" % name] = qkv_b[i * d:(i + 1) * d]
        t[q + "attention.wo"], t[q + "attention.wo.bias"] = matrix(p + "attn.c_proj.weight"), bias(p + "attn.c_proj.bias", d)
        t[q + "attention_norm"], t[q + "attention_norm.bias"] = tensor(p + "ln_1.weight"), bias(p + "ln_1.bias", d)
        t[q + "ffn_norm"], t[q + "ffn_norm.bias"] = tensor(p + "ln_2.weight"), bias(p + "ln_2.bias", d)
        hidden = matrix(p + "mlp.c_fc.weight").shape[0]
        t[q + "feed_forward.w1"], t[q + "feed_forward.w1.bias"] = matrix(p + "mlp.c_fc.weight"), bias(p + "mlp.c_fc.bias", hidden)
        t[q + "feed_forward.w2"], t[q + "feed_forward.w2.bias"] = matrix(p + "mlp.c_proj.weight"), bias(p + "mlp.c_proj.bias", d)
    vocab_size, seq_len = t["tok_embeddings"].shape[0], t["pos_embeddings"].shape[0]
    shared = "lm_head.weight" not in sd or np.array_equal(sd["lm_head.weight"], sd["wte.weight"])
    if not shared:
        t["output"] = sd["lm_head.weight"]
    tok, kind, bos, eos = gpt2_tokenizer(path, opts, vocab_size)
    cfg = dict(arch=qkvfile.ARCH_GPT2, activation=qkvfile.ACT_GELU_ERF if gelu == "erf" else qkvfile.ACT_GELU_TANH,
               tokenizer_kind=kind, dim=d, hidden_dim=hidden, n_layers=n_layer, n_heads=n_head, n_kv_heads=n_head,
               head_size=d // n_head, vocab_size=vocab_size, seq_len=seq_len,
               norm_eps=opts.norm_eps or hf.get("layer_norm_epsilon", 1e-5), rope_theta=0.0,
               shared_classifier=1 if shared else 0, bos_id=bos, eos_id=eos)
    print("%s: GPT-2 architecture, %s GELU, %d layers, %d heads, dim %d, context %d, vocab %d"
          % ("nanoGPT ckpt.pt" if nanogpt else "GPT-2 state dict" + (" (Conv1D)" if conv1d else ""),
             gelu, n_layer, n_head, d, seq_len, vocab_size))
    return cfg, t, tok


def overrides(opts):
    """--seq-len, --norm-eps, --rope-theta as given (0 too: the writer's checks refuse it)"""
    return {key: getattr(opts, key) for key in ("norm_eps", "rope_theta", "seq_len") if getattr(opts, key) is not None}


def refuse_heads(opts, path):
    """--n-heads and --n-kv-heads are for a plain state dict, which does not say its heads"""
    if opts.n_heads is not None or opts.n_kv_heads is not None:
        raise SystemExit("%s gives its own heads: --n-heads and --n-kv-heads are for a plain state dict" % path)


def load_any(path, opts):
    """Returns (args: ModelArgs, tensors: {qkv name: np.float32 array}, tokenizer bytes or None);
    for a GPT-2 checkpoint (qkv config dict, tensors, qkvfile.Tokenizer)."""
    with open(path, "rb") as f:
        zipped = f.read(4) == b"PK\x03\x04"  # torch.save's format since PyTorch 1.6
    try:
        ck = torch.load(path, map_location="cpu")
    except Exception as e:
        if zipped:
            raise SystemExit("%s: not a PyTorch checkpoint torch.load can read: %s" % (path, e))
        fmt = qkvfile.detect_format(path)  # not a PyTorch file: a model file (conversion)
        try:
            a, t, tok = read_qkv(path, opts.tokenizer)
        except qkvfile.FormatError as e:
            raise SystemExit("%s: %s%s" % (path, "not a PyTorch checkpoint, and read as llama2.c's legacy format "
                                           "(a file with no magic number): " if fmt == "legacy" else "", e))
        refuse_heads(opts, path)
        return dataclasses.replace(a, **overrides(opts)), t, tok
    if not isinstance(ck, dict):
        raise SystemExit("%s: a %s, not a checkpoint (a dict of tensors, or one under 'model')" % (path, type(ck).__name__))
    if is_gpt2(ck):
        return load_gpt2(ck, path, opts)
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
    if margs is not None:
        refuse_heads(opts, path)
    if margs is not None and "max_seq_len" in margs:  # llama2.c's own train.py: its ModelArgs' names
        margs = dict(dim=margs["dim"], n_layers=margs["n_layers"], n_heads=margs["n_heads"],
                     n_kv_heads=margs.get("n_kv_heads") or margs["n_heads"], vocab_size=margs["vocab_size"],
                     seq_len=margs["max_seq_len"], norm_eps=margs.get("norm_eps", 1e-5),
                     hidden_dim=t["layers.0.feed_forward.w1"].shape[0])  # (its multiple_of rounding, done)
    if margs is None:
        missing = [n for n in ("tok_embeddings", "layers.0.attention.wq", "layers.0.attention.wk",
                               "layers.0.feed_forward.w1") if n not in t]
        if missing:
            raise SystemExit("%s: no tensor %s.weight: not a Llama state dict export.py reads" % (path, missing[0]))
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
        if "output" not in t:  # a tied model's state dict holds it too (the embedding's tensor)
            raise SystemExit("%s: no tensor output.weight (the classifier)" % path)
        shared = np.array_equal(t["output"], t["tok_embeddings"])
        margs = dict(dim=dim, hidden_dim=hidden, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
                     head_size=head_size, vocab_size=vocab, seq_len=opts.seq_len or 256,
                     shared_classifier=shared)
    margs.update(overrides(opts))
    args = ModelArgs(**margs)
    if args.shared_classifier:
        if "output" in t and not np.array_equal(t["output"], t["tok_embeddings"]):
            raise SystemExit("%s: model_args has the classifier tied to the embedding (shared_classifier, default "
                             "True), but output.weight differs from tok_embeddings.weight" % path)
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


def write(path, fmt, a, t, tok, dtype="f32"):
    """Write with export/qkvfile.py (strict: config and every tensor checked).
    a: ModelArgs, or a qkv config dict (GPT-2)."""
    cfg = dict(a) if isinstance(a, dict) else qkv_config(a)
    cfg["weight_type"] = DTYPES[dtype]
    unused = sorted(set(t) - {name for name, _ in qkvfile.tensor_shapes(cfg)})
    if unused:  # a bias, a norm of another architecture: the engine would run without it
        raise SystemExit("the checkpoint has tensors the model qkv runs does not use: %s (refused rather than "
                         "dropped)" % ", ".join(unused[:4] + (["..."] if len(unused) > 4 else [])))
    if cfg.get("arch") == qkvfile.ARCH_GPT2 and fmt != "qkv":
        raise SystemExit("llama2.c's formats have no GPT-2 architecture: use --format qkv")
    if fmt == "qkv":
        if tok is None:
            raise SystemExit("qkv format embeds a tokenizer: pass --tokenizer")
        for name, shape in qkvfile.tensor_shapes(cfg):
            if len(shape) == 2 and qkvfile.matrix_type(cfg["weight_type"], shape[1]) != cfg["weight_type"]:
                kind = qkvfile.WEIGHT_TYPES[cfg["weight_type"]]
                print("note: %s has %d columns, not a whole number of %s blocks of %d: kept in float16"
                      % (name, shape[1], kind[0], kind[1]), file=sys.stderr)
        if not isinstance(tok, qkvfile.Tokenizer):
            tok = qkvfile.parse_tokenizer(tok, cfg["vocab_size"])
        return qkvfile.write_qkv(path, cfg, t, tok)
    if fmt == "legacy":
        return qkvfile.write_llama2c_legacy(path, cfg, t)
    return qkvfile.write_llama2c_v1(path, cfg, t)


def check_writable(path):
    """A file can be written at path: its folder exists and takes files, and it is not a folder"""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise SystemExit("%s: cannot write a file there (%s)" % (path, "a folder" if os.path.isdir(path) else
                                                                  "no such folder" if not os.path.isdir(folder)
                                                                  else "the folder is not writable"))


def main(argv=None):
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
    ap.add_argument("--meta", help="GPT-2: nanoGPT's meta.pkl (stoi/itos) of a character model")
    ap.add_argument("--vocab", help="GPT-2: vocab.json of a byte-level BPE (with --merges)")
    ap.add_argument("--merges", help="GPT-2: merges.txt of a byte-level BPE")
    ap.add_argument("--gelu", choices=["erf", "tanh"], help="GPT-2: the exact GELU or the tanh approximation "
                    "(default: erf for nanoGPT, config.json's or tanh for a state dict)")
    opts = ap.parse_args(argv)
    if opts.dtype != "f32" and opts.format != "qkv":
        raise SystemExit("--dtype %s needs --format qkv (llama2.c files are float32)" % opts.dtype)
    for path in [opts.output] + ([opts.write_tokenizer] if opts.write_tokenizer else []):
        check_writable(path)  # before minutes of loading, and before either file is written
    a, t, tok = load_any(opts.checkpoint, opts)
    try:
        if opts.write_tokenizer:  # checked before the model is written
            if tok is None:
                raise SystemExit("no tokenizer available")
            if not isinstance(tok, qkvfile.Tokenizer):
                tok = qkvfile.parse_tokenizer(tok, a.vocab_size)
        write(opts.output, opts.format, a, t, tok, opts.dtype)
        if opts.write_tokenizer:
            qkvfile.write_tokenizer_bin(opts.write_tokenizer, tok)
    except qkvfile.FormatError as e:  # the writer's checks: one line, not a traceback
        raise SystemExit("%s: %s" % (opts.checkpoint, e))
    n = sum(v.size for v in t.values())
    print("wrote %s (%s %s, %d bytes): %s, %d params"
          % (opts.output, opts.format, opts.dtype, os.path.getsize(opts.output),
             a if isinstance(a, dict) else a.to_dict(), n))



def read_qkv(path, tokenizer_path=None):
    """Any model file qkvfile reads -> (ModelArgs, {name: np.float32 array}, tokenizer bytes or None)."""
    c, t, tk = qkvfile.read_model(path, tokenizer_path)
    if c.get("arch") == qkvfile.ARCH_GPT2:
        raise SystemExit("%s is a GPT-2 qkv file: export.py converts Llama files; use ./run %s -m quantize -o OUT "
                         "--dtype T" % (path, path))
    a = ModelArgs(dim=c["dim"], hidden_dim=c["hidden_dim"], n_layers=c["n_layers"], n_heads=c["n_heads"],
                  n_kv_heads=c["n_kv_heads"], head_size=c["head_size"], vocab_size=c["vocab_size"],
                  seq_len=c["seq_len"], norm_eps=c["norm_eps"], rope_theta=c["rope_theta"],
                  shared_classifier=bool(c["shared_classifier"]), bos_id=c["bos_id"], eos_id=c["eos_id"])
    return a, t, (qkvfile.tokenizer_to_bytes(tk) if tk is not None else None)


def torch_gpt2(c, t, dtype=torch.float32):
    """export/model.py's GPT (nanoGPT's modules) from a GPT-2 qkv file's config and tensors:
    wq, wk, wv fused back into c_attn."""
    from model import GPT, GPTConfig
    m = GPT(GPTConfig(block_size=c["seq_len"], vocab_size=c["vocab_size"], n_layer=c["n_layers"],
                      n_head=c["n_heads"], n_embd=c["dim"], bias=True),
            gelu="tanh" if c["activation"] == qkvfile.ACT_GELU_TANH else "none")
    names = {"transformer.wte.weight": "tok_embeddings", "transformer.wpe.weight": "pos_embeddings",
             "transformer.ln_f.weight": "norm", "transformer.ln_f.bias": "norm.bias",
             "lm_head.weight": "tok_embeddings" if c["shared_classifier"] else "output"}
    for layer in range(c["n_layers"]):
        p, q = "transformer.h.%d." % layer, "layers.%d." % layer
        for ours, theirs in (("ln_1", "attention_norm"), ("ln_2", "ffn_norm"), ("attn.c_proj", "attention.wo"),
                             ("mlp.c_fc", "feed_forward.w1"), ("mlp.c_proj", "feed_forward.w2")):
            names[p + ours + ".weight"], names[p + ours + ".bias"] = q + theirs, q + theirs + ".bias"
        for suffix in ("", ".bias"):
            t[p + "attn.c_attn" + suffix] = np.concatenate([t[q + "attention.w%s%s" % (x, suffix)] for x in "qkv"])
            names[p + "attn.c_attn.weight" if not suffix else p + "attn.c_attn.bias"] = p + "attn.c_attn" + suffix
    m.load_state_dict({k: torch.from_numpy(t[names[k]]) for k in m.state_dict()})
    return m.to(dtype).eval()


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
    cli.run(main)
