#!/usr/bin/python3
"""The GPT-2 test fixtures, made the way a user's checkpoints arrive: random
PyTorch models saved as a nanoGPT ckpt.pt and as a Hugging Face state dict,
then converted by export.py; golden vectors from NumPy (reference.py) and
PyTorch (model.py's GPT, nanoGPT's modules).  Deterministic (fixed seeds).

    /usr/bin/python3 export/make_gpt2_fixtures.py          # rewrites the files below
    /usr/bin/python3 export/make_gpt2_fixtures.py --check  # re-exports into a temporary
                                                           # directory, compares bytes

  tests/data/gpt2.qkv       nanoGPT ckpt.pt (keys with torch.compile's "_orig_mod."),
                            meta.pkl beside it: 66 characters (multi-byte ones
                            too), dim 45, 5 heads of 9, 3 layers, context 19,
                            exact GELU
  tests/data/gpt2-bpe.qkv   Hugging Face GPT-2 state dict (Conv1D [in, out] weights,
                            "transformer." names, attention mask buffers),
                            config.json (gelu_new), vocab.json + merges.txt of
                            a byte-level BPE trained here; dim 32, 4 heads, 2 layers,
                            context 64, tanh GELU
  tests/data/gpt2-nobias.qkv  nanoGPT ckpt.pt with bias=False (no LayerNorm or linear
                            biases: the exporter writes zeros), the same characters,
                            dim 24, 2 heads, 2 layers, context 16
  tests/golden/gpt2.txt, gpt2-bpe.txt        reference.py's logits, scores, weights
  tests/golden/models/gpt2-torch.txt, gpt2-bpe-torch.txt, gpt2-nobias-torch.txt   PyTorch's logits
  tests/golden/gpt2-bpe-tokens.txt           texts and the ids gpt2_bpe.py gives them
  tests/data/gpt2-vocab.json, gpt2-merges.txt   the BPE, in GPT-2's format
"""
import argparse
import contextlib
import io
import json
import os
import pickle
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export as export_py  # noqa: E402
import gpt2_bpe  # noqa: E402
import qkvfile  # noqa: E402
import reference  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
import cli  # noqa: E402  (one-line errors)

ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "tests", "data")
GOLDEN = os.path.join(ROOT, "tests", "golden")
COMMAND = "/usr/bin/python3 export/make_gpt2_fixtures.py"

CHARS = list("\n !',.:;?ABCDEFGHIJKLMNOPRSTUWYabcdefghijklmnopqrstuvwxyz") + ["é", "ü", "—", "’", "€", "日", "本", "語", "🙂"]
CHAR_TEXT = "ROMEO: the sun — 日本語, é ü 🙂!"
BPE_TRAIN = ("The quick brown fox jumps over the lazy dog. It's what they'll say, isn't it? "
             "Café crème, naïve façade, jalapeño, Ærø — 日本語のテキスト, 中文, Ελληνικά, русский текст. "
             "Numbers 1234 and ٣٤٥ and Ⅻ; emoji 🙂🚀 and tabs\tand  double  spaces, newlines\n\n  indented.\n") * 3
BPE_TEXTS = [
    "Hello world! It's a naïve café — 日本語 🙂",
    "  leading spaces,\ttabs and\n\nnewlines  \n",
    "they'll say 'twas 1234 ٣٤٥ Ⅻ; Ελληνικά русский",
    "ÆØÅ æøå ǅ ʰ ﬁ x²³ ½ 𝔘𝔫𝔦 🚀🚀!!",
]


def randomize(model, seed):
    """Weights large enough that attention is peaky and the logits spread."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln_" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "wte" in name or "wpe" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (2.0 / p.shape[1]) ** 0.5)


def nanogpt_checkpoint(directory, bias=True):
    if bias:
        c = GPTConfig(block_size=19, vocab_size=len(CHARS), n_layer=3, n_head=5, n_embd=45, bias=True)
    else:
        c = GPTConfig(block_size=16, vocab_size=len(CHARS), n_layer=2, n_head=2, n_embd=24, bias=False)
    m = GPT(c)
    randomize(m, 4001 if bias else 4003)
    ck = dict(model={"_orig_mod." + k: v for k, v in m.state_dict().items()}, model_args=c.to_dict(),
              iter_num=0, best_val_loss=0.0, config={})
    torch.save(ck, os.path.join(directory, "ckpt.pt"))
    with open(os.path.join(directory, "meta.pkl"), "wb") as f:
        pickle.dump(dict(vocab_size=len(CHARS), itos=dict(enumerate(CHARS)), stoi={ch: i for i, ch in enumerate(CHARS)}), f)
    return m, [CHARS.index(ch) for ch in CHAR_TEXT][:c.block_size]


def hf_checkpoint(directory, vocab):
    c = GPTConfig(block_size=64, vocab_size=len(vocab), n_layer=2, n_head=4, n_embd=32, bias=True)
    m = GPT(c, gelu="tanh")
    randomize(m, 4002)
    sd = {}
    for k, v in m.state_dict().items():  # Hugging Face's GPT2LMHeadModel layout
        conv1d = any(k.endswith(s) for s in ("c_attn.weight", "c_proj.weight", "c_fc.weight"))
        sd[k] = v.t().contiguous() if conv1d else v
    for layer in range(c.n_layer):  # HF's causal-mask buffers, which the exporter must skip
        sd["transformer.h.%d.attn.bias" % layer] = torch.tril(torch.ones(c.block_size, c.block_size)).view(
            1, 1, c.block_size, c.block_size).to(torch.uint8)
        sd["transformer.h.%d.attn.masked_bias" % layer] = torch.tensor(-1e4)
    torch.save(sd, os.path.join(directory, "pytorch_model.bin"))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(dict(model_type="gpt2", n_embd=32, n_head=4, n_layer=2, n_positions=64, vocab_size=len(vocab),
                       layer_norm_epsilon=1e-5, activation_function="gelu_new"), f)
    return m


def export(ckpt, out):
    """export.py CKPT OUT, run in this process (its command line, parsed by
    its main): a new interpreter for each would import PyTorch again."""
    with contextlib.redirect_stdout(io.StringIO()):
        export_py.main([ckpt, out])


def torch_golden(path, name, model, tokens):
    with torch.no_grad():
        logits, _ = model.double()(torch.tensor([tokens]))
    c = qkvfile.read_model(path)[0]
    lines = ["# PyTorch float64 logits of export/model.py's GPT (nanoGPT's modules) for %s; do not edit." % name,
             "# regenerate with: " + COMMAND, "model %s" % name,
             "config dim %d hidden_dim %d n_layers %d n_heads %d n_kv_heads %d head_size %d vocab_size %d seq_len %d"
             % tuple(c[k] for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "head_size",
                                    "vocab_size", "seq_len")),
             "tokens %d %s" % (len(tokens), " ".join(map(str, tokens)))]
    for pos in sorted({0, 1, len(tokens) // 2, len(tokens) - 1}):
        lines.append("logits %d %s" % (pos, " ".join("%.9g" % v for v in logits[0, pos].tolist())))
    return "\n".join(lines) + "\n"


def numpy_golden(path, name, tokens):
    config, tensors, _ = qkvfile.read_model(path)
    result = reference.forward(config, tensors, tokens)
    positions = sorted({0, 1, 5, len(tokens) // 2, len(tokens) - 1})
    rel = "tests/data/" + os.path.basename(path)
    comments = ["golden vectors of export/reference.py (NumPy float64) for %s; do not edit." % rel,
                "regenerate with: " + COMMAND,
                "equivalent to: /usr/bin/python3 export/reference.py %s --tokens %s --positions %s"
                % (rel, ",".join(map(str, tokens)), ",".join(map(str, positions)))]
    return reference.golden_text(name, config, tokens, positions, result, comments)


def make(out_data, out_golden):
    os.makedirs(os.path.join(out_golden, "models"), exist_ok=True)
    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        nano_dir, hf_dir = os.path.join(tmp, "nanogpt"), os.path.join(tmp, "hf")
        os.makedirs(nano_dir)
        os.makedirs(hf_dir)
        torch.manual_seed(0)
        model, char_tokens = nanogpt_checkpoint(nano_dir)
        export(os.path.join(nano_dir, "ckpt.pt"), os.path.join(out_data, "gpt2.qkv"))
        nobias, _ = nanogpt_checkpoint(nano_dir, bias=False)
        export(os.path.join(nano_dir, "ckpt.pt"), os.path.join(out_data, "gpt2-nobias.qkv"))

        vocab, merges = gpt2_bpe.train(BPE_TRAIN, 150)
        gpt2_bpe.save(vocab, merges, os.path.join(hf_dir, "vocab.json"), os.path.join(hf_dir, "merges.txt"))
        gpt2_bpe.save(vocab, merges, os.path.join(out_data, "gpt2-vocab.json"), os.path.join(out_data, "gpt2-merges.txt"))
        hf = hf_checkpoint(hf_dir, vocab)
        export(os.path.join(hf_dir, "pytorch_model.bin"), os.path.join(out_data, "gpt2-bpe.qkv"))
    bpe_tokens = gpt2_bpe.encode(BPE_TEXTS[0], vocab, merges)[:64]
    for text in BPE_TEXTS:  # the reference round-trips every text
        assert gpt2_bpe.decode(gpt2_bpe.encode(text, vocab, merges), vocab) == text
    gpath, bpath = os.path.join(out_data, "gpt2.qkv"), os.path.join(out_data, "gpt2-bpe.qkv")
    files["gpt2.txt"] = numpy_golden(gpath, "gpt2", char_tokens)
    files["gpt2-bpe.txt"] = numpy_golden(bpath, "gpt2-bpe", bpe_tokens)
    files["models/gpt2-torch.txt"] = torch_golden(gpath, "gpt2", model, char_tokens)
    files["models/gpt2-bpe-torch.txt"] = torch_golden(bpath, "gpt2-bpe", hf, bpe_tokens)
    files["models/gpt2-nobias-torch.txt"] = torch_golden(os.path.join(out_data, "gpt2-nobias.qkv"), "gpt2-nobias",
                                                         nobias, char_tokens[:16])
    lines = ["# GPT-2 byte-level BPE of tests/data/gpt2-vocab.json + gpt2-merges.txt (export/gpt2_bpe.py); do not edit.",
             "# regenerate with: " + COMMAND, "# each text is one JSON string line, then its ids"]
    for text in BPE_TEXTS:
        lines += [json.dumps(text, ensure_ascii=False), " ".join(map(str, gpt2_bpe.encode(text, vocab, merges)))]
    files["gpt2-bpe-tokens.txt"] = "\n".join(lines) + "\n"
    for name, text in files.items():
        with open(os.path.join(out_golden, name), "w", encoding="utf-8") as f:
            f.write(text)
    return ["gpt2.qkv", "gpt2-bpe.qkv", "gpt2-nobias.qkv", "gpt2-vocab.json", "gpt2-merges.txt"], list(files)


def refused(args, expected):
    """None if export.py ARGS (args[1]: the output) stops with one line
    containing expected and leaves no output, else what it did"""
    if os.path.exists(args[1]):
        os.remove(args[1])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            export_py.main(args)
    except SystemExit as e:
        message = str(e.code)
        if expected not in message or "\n" in message:
            return "said %r" % message
        return "left %s" % args[1] if os.path.exists(args[1]) else None
    return "wrote the file"


def check_llama_refusals(directory):
    """Llama state dicts export.py must refuse, not export as another model:
    a tensor the engine does not use, no classifier, a classifier model_args
    calls tied that is not the embedding"""
    cfg = dict(dim=32, hidden_dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=300, seq_len=32,
               shared_classifier=0)
    g = torch.Generator().manual_seed(4004)
    sd = {name + ("" if name.endswith("bias") else ".weight"): torch.randn(shape, generator=g)
          for name, shape in qkvfile.tensor_shapes(cfg)}
    plain, ckpt, out = (os.path.join(directory, n) for n in ("llama.pt", "llama-ckpt.pt", "llama.qkv"))
    tokenizer = os.path.join(DATA, "tiny-tokenizer.bin")
    args = [plain, out, "--n-heads", "4", "--tokenizer", tokenizer, "--seq-len", "32"]
    failures = []
    for what, state, expected in (("a bias the engine does not use", dict(sd, **{"layers.0.attention.wq.bias":
                                   torch.zeros(32)}), "layers.0.attention.wq.bias"),
                                  ("a plain state dict without output.weight",
                                   {k: v for k, v in sd.items() if k != "output.weight"}, "no tensor output.weight")):
        torch.save(state, plain)
        why = refused(args, expected)
        if why:
            failures.append("%s: %s" % (what, why))
    # llama2.c's own ckpt.pt: its model_args' names (max_seq_len, multiple_of, dropout), the classifier tied
    llama2c = dict(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=300, multiple_of=32, norm_eps=1e-5,
                   max_seq_len=32, dropout=0.0)
    torch.save(dict(model=dict(sd, **{"output.weight": sd["tok_embeddings.weight"]}), model_args=llama2c), ckpt)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            export_py.main([ckpt, out, "--tokenizer", tokenizer])
        c = qkvfile.read_model(out)[0]
        if (c["hidden_dim"], c["seq_len"], c["n_kv_heads"], c["shared_classifier"]) != (64, 32, 2, 1):
            failures.append("llama2.c's ckpt.pt: read as %r" % c)
        os.remove(out)
    except (SystemExit, Exception) as e:
        failures.append("llama2.c's ckpt.pt: %s: %s" % (type(e).__name__, e))
    margs = {k: v for k, v in cfg.items() if k != "shared_classifier"}  # ModelArgs' default: tied
    torch.save(dict(model=sd, model_args=margs, tokenizer=open(tokenizer, "rb").read()), ckpt)
    why = refused([ckpt, out], "output.weight differs from tok_embeddings.weight")
    if why:
        failures.append("a classifier model_args calls tied that is not the embedding: %s" % why)
    return failures


def check_refusals(tmp):
    """Checkpoints export.py must refuse with one line, not a traceback or a
    wrong file: (what, its failure) for each it did not"""
    directory = os.path.join(tmp, "broken")
    os.makedirs(directory)
    ckpt, out = os.path.join(directory, "ckpt.pt"), os.path.join(directory, "out.qkv")
    nanogpt_checkpoint(directory)
    good = torch.load(ckpt)

    with open(ckpt, "rb") as f:
        whole = f.read()
    cut = os.path.join(directory, "cut.pt")
    with open(cut, "wb") as f:
        f.write(whole[:len(whole) // 2])
    cases = [("a lost bias", lambda ck: ck["model"].pop("_orig_mod.transformer.h.0.ln_1.bias"), [ckpt],
              "no tensor h.0.ln_1.bias"),
             ("a lost matrix", lambda ck: ck["model"].pop("_orig_mod.transformer.h.1.mlp.c_fc.weight"), [ckpt],
              "no tensor h.1.mlp.c_fc.weight"),
             ("heads that do not divide n_embd", lambda ck: ck["model_args"].update(n_head=4), [ckpt],
              "n_embd 45 is not a multiple of n_head 4"),
             ("RoPE's theta for learned positions", None, [ckpt, "--rope-theta", "500000"], "--rope-theta:"),
             ("a cut ckpt.pt", None, [cut], "not a PyTorch checkpoint torch.load can read"),
             ("a GPT-2 qkv file to convert", None, [os.path.join(DATA, "gpt2.qkv")], "-m quantize")]
    failures = []
    for what, edit, args, expected in cases:
        ck = dict(good, model=dict(good["model"]), model_args=dict(good["model_args"]))
        if edit:
            edit(ck)
        torch.save(ck, ckpt)
        why = refused(args[:1] + [out] + args[1:], expected)
        if why:
            failures.append("%s: %s" % (what, why))
    failures += check_llama_refusals(directory)
    for key, value in (("activation_function", "relu"), ("scale_attn_by_inverse_layer_idx", True)):
        try:
            export_py.hf_gelu(dict({"n_head": 4, "activation_function": "gelu"}, **{key: value}))
            failures.append("config.json's %s %r: taken" % (key, value))
        except SystemExit as e:
            if key not in str(e.code):
                failures.append("config.json's %s %r: said %r" % (key, value, str(e.code)))
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="rebuild in a temporary directory and compare")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not args.check:
        data, golden = make(DATA, GOLDEN)
        print("wrote tests/data/{%s} and tests/golden/{%s}" % (",".join(data), ",".join(golden)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        data, golden = make(tmp, tmp)
        bad = [n for n in data if open(os.path.join(tmp, n), "rb").read() != open(os.path.join(DATA, n), "rb").read()]
        bad += [n for n in golden if open(os.path.join(tmp, n), "rb").read() != open(os.path.join(GOLDEN, n), "rb").read()]
        if bad:
            sys.exit("differ from the committed fixtures: " + ", ".join(bad))
        failures = check_refusals(tmp)
    if failures:
        sys.exit("export.py on broken or foreign checkpoints: " + "; ".join(failures))
    print("the exporter rebuilt tests/data/{%s} and tests/golden/{%s} byte for byte, and refused broken checkpoints"
          % (",".join(data), ",".join(golden)))


if __name__ == "__main__":
    cli.run(main)
