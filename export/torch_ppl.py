#!/usr/bin/python3
"""PyTorch mean loss (nats/token) of a qkv model over a file of token ids.

    ./run -m tokenize -z TOK -i "$(cat text.txt)" | head -1 > ids.txt
    python3 export/torch_ppl.py ids.txt models/stories.bin

ids are whitespace-separated (as the first line `./run -m tokenize` prints).
Predicted tokens are ids[1..N-1].  Non-overlapping windows of seq_len T
inputs: window w feeds ids[w*T .. w*T+T-1] from position 0 (fresh cache)
and predicts ids[w*T+1 .. w*T+T]; the last window is shorter.

Several documents (as `./run -m ppl` reads a text with <|endoftext|> lines):
one line of ids per document, each starting with BOS.  The documents are
scored one after another as one stream, windows restarting at each
document's first id; a document's last window also predicts the first id
(BOS) of the next.

Prints the mean over all predicted tokens with %.9g.  Computes in float64
(--float32 for the model's own precision).
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export  # noqa: E402
import cli  # noqa: E402  (one-line errors)


def mean_nll(model, docs, T):
    ids = [i for d in docs for i in d]
    starts = [sum(len(d) for d in docs[:k]) for k in range(len(docs) + 1)]
    total, count = 0.0, 0
    n = len(ids)
    with torch.no_grad():
        for d in range(len(docs)):
            end = min(starts[d + 1], n - 1)
            for s in range(starts[d], end, T):
                inp = ids[s:min(s + T, end)]
                tgt = ids[s + 1:s + 1 + len(inp)]
                logits, _ = model(torch.tensor([inp]))
                total += F.cross_entropy(logits[0], torch.tensor(tgt), reduction="sum").item()
                count += len(tgt)
    return total / count, count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ids_file")
    ap.add_argument("model")
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(2)
    docs = [[int(x) for x in line.split()] for line in open(args.ids_file) if line.strip()]
    if sum(len(d) for d in docs) < 2:
        raise SystemExit("need at least 2 token ids")
    a, t, _ = export.read_qkv(args.model)
    m = export.torch_model(a, t, torch.float32 if args.float32 else torch.float64)
    loss, count = mean_nll(m, docs, a.seq_len)
    if args.verbose:
        print("%d predicted tokens, seq_len %d" % (count, a.seq_len), file=sys.stderr)
    print("%.9g" % loss)


if __name__ == "__main__":
    cli.run(main)
