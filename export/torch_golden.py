#!/usr/bin/python3
"""Write PyTorch reference logits of a shipped qkv model for the C tests.

    python3 export/torch_golden.py models/stories.bin
    python3 export/torch_golden.py models/grammar.bin --text "the cat that the dogs chase sleeps ."

Reads the .bin itself (so the golden matches exactly the shipped weights),
encodes --text with the embedded tokenizer (BOS first, llama2.c encoding),
runs export/model.py's forward in float64 over the whole sequence, and writes
tests/golden/models/NAME.txt:

    # <command that regenerates this file>
    model NAME
    config dim D hidden_dim H n_layers L n_heads N n_kv_heads K head_size S vocab_size V seq_len T
    tokens COUNT id id id ...
    logits POS v0 v1 ... v{V-1}      (%.9g; one line per checked position)
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export  # noqa: E402
import qkvfile  # noqa: E402
import tokenizer_train as tt  # noqa: E402
import cli  # noqa: E402  (one-line errors)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TEXT = {
    "grammar": "the cat that the dogs chase sleeps on the mat . an old owl saw two foxes .",
    "grammar-random": "the cat that the dogs chase sleeps on the mat . an old owl saw two foxes .",
    "shakespeare": "ROMEO:\nBut, soft! what light through yonder window breaks?\nIt is the east, and Juliet is the sun.\n",
}
STORY_TEXT = ("once upon a time, there was a little girl named lily. she loved to play outside "
              "with her red ball. one day, she saw a big dog in the park.")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="qkv .bin")
    ap.add_argument("--text", help="prompt text (default depends on the model name)")
    ap.add_argument("--name", help="model name (default: file name without .bin)")
    ap.add_argument("--positions", help="comma-separated positions (default: 0,1,2,mid,last)")
    ap.add_argument("--out", help="output file (default tests/golden/models/NAME.txt)")
    ap.add_argument("--float32", action="store_true", help="compute in float32 instead of float64")
    args = ap.parse_args()

    torch.set_num_threads(2)
    name = args.name or os.path.splitext(os.path.basename(args.model))[0]
    text = args.text or DEFAULT_TEXT.get(name, STORY_TEXT)
    c, t, qtok = qkvfile.read_model(args.model)
    if c["arch"] == qkvfile.ARCH_GPT2:  # a character model: one id per character, no BOS
        ids = {p.decode(): i for i, (p, _) in enumerate(qtok.pieces)}
        ids = [ids[ch] for ch in text][: c["seq_len"]]
        m = export.torch_gpt2(c, t, torch.float32 if args.float32 else torch.float64)
        a = export.ModelArgs(dim=c["dim"], hidden_dim=c["hidden_dim"], n_layers=c["n_layers"], n_heads=c["n_heads"],
                             n_kv_heads=c["n_kv_heads"], head_size=c["head_size"], vocab_size=c["vocab_size"],
                             seq_len=c["seq_len"])  # for the config line
    else:
        a, t, tokb = export.read_qkv(args.model)
        tok = tt.Tokenizer(*tt.parse_tokenizer(tokb, a.vocab_size))
        ids = tok.encode(text, bos=True)[: a.seq_len]
        m = None
    n = len(ids)
    if args.positions:
        pos = [int(p) for p in args.positions.split(",")]
    else:
        pos = sorted({0, 1, 2, n // 2, n - 1})
    assert all(0 <= p < n for p in pos)
    dtype = torch.float32 if args.float32 else torch.float64
    m = m or export.torch_model(a, t, dtype)
    with torch.no_grad():
        logits, _ = m(torch.tensor([ids]))
    logits = logits[0]

    out = args.out or os.path.join(REPO, "tests", "golden", "models", name + ".txt")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cmd = ["python3", "export/torch_golden.py", os.path.relpath(os.path.abspath(args.model), REPO)]
    if args.text:
        cmd += ["--text", '"%s"' % args.text]
    if args.name:
        cmd += ["--name", args.name]
    if args.positions:
        cmd += ["--positions", args.positions]
    if args.float32:
        cmd += ["--float32"]
    with open(out, "w") as f:
        f.write("# " + " ".join(cmd) + "\n")
        f.write("model %s\n" % name)
        f.write("config dim %d hidden_dim %d n_layers %d n_heads %d n_kv_heads %d head_size %d "
                "vocab_size %d seq_len %d\n" % (a.dim, a.hidden_dim, a.n_layers, a.n_heads, a.n_kv_heads,
                                                a.head_size, a.vocab_size, a.seq_len))
        f.write("tokens %d %s\n" % (n, " ".join(map(str, ids))))
        for p in pos:
            f.write("logits %d %s\n" % (p, " ".join("%.9g" % v for v in logits[p].tolist())))
    print("wrote %s: %d tokens, positions %s (%s)" % (out, n, pos, dtype))


if __name__ == "__main__":
    cli.run(main)
