#!/usr/bin/python3
"""Sample sentences from a grammar model (PyTorch) and check them with grammar.check.

    python3 export/grammar_eval.py models/grammar.bin            # 1000 sentences, temperature 1
    python3 export/grammar_eval.py out/grammar/ckpt.pt -n 1000 --seed 0

Each sample starts from BOS and runs until the " ." token (one sentence);
with --stream, whole seq_len-long streams are sampled and every complete
sentence in them is checked too.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export  # noqa: E402
import grammar  # noqa: E402
import tokenizer_train as tt  # noqa: E402
from model import load_checkpoint  # noqa: E402
import cli  # noqa: E402  (one-line errors)


def load(path):
    if path.endswith(".pt"):
        m, ck = load_checkpoint(path)
        tok = tt.Tokenizer(*tt.parse_tokenizer(ck["tokenizer"]))
        return m.eval(), tok
    a, t, tb = export.read_qkv(path)
    return export.torch_model(a, t), tt.Tokenizer(*tt.parse_tokenizer(tb, a.vocab_size))


@torch.no_grad()
def sample(model, n, length, temperature, seed, stop_id=None, batch=100):
    g = torch.Generator().manual_seed(seed)
    out = []
    while len(out) < n:
        b = min(batch, n - len(out))
        x = torch.full((b, 1), tt.BOS_ID, dtype=torch.long)
        done = torch.zeros(b, dtype=torch.bool)
        for _ in range(length - 1):
            logits, _ = model(x)
            p = torch.softmax(logits[:, -1].double() / temperature, dim=-1)
            nxt = torch.multinomial(p, 1, generator=g)
            x = torch.cat([x, nxt], dim=1)
            if stop_id is not None:
                done |= nxt[:, 0] == stop_id
                if done.all():
                    break
        out.extend(x.tolist())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="qkv .bin or train.py checkpoint .pt")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("-t", "--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stream", action="store_true", help="also check every sentence of full-length streams")
    ap.add_argument("--show", type=int, default=10, help="print this many samples")
    args = ap.parse_args()
    torch.set_num_threads(2)
    model, tok = load(args.model)
    end = tok.lookup[" ."]
    seqs = sample(model, args.n, model.args.seq_len, args.temperature, args.seed, stop_id=end)
    sents, bad = [], []
    for s in seqs:
        s = s[1:]
        if end in s:
            s = s[:s.index(end) + 1]
        text = tok.decode(s)
        sents.append(text)
        if not grammar.check(text):
            bad.append(text)
    print("first sentence after BOS: valid %d/%d = %.4f (T=%g)"
          % (len(sents) - len(bad), len(sents), 1 - len(bad) / len(sents), args.temperature))
    for s in sents[:args.show]:
        print("  " + s)
    for s in bad[:20]:
        print("  INVALID: " + s)
    if args.stream:
        seqs = sample(model, max(1, args.n // 5), model.args.seq_len, args.temperature, args.seed + 1)
        tot, nbad = 0, 0
        for s in seqs:
            s = s[1:]
            while end in s:
                k = s.index(end)
                text = tok.decode(s[:k + 1])
                tot += 1
                if not grammar.check(text):
                    nbad += 1
                    if nbad <= 10:
                        print("  INVALID (stream): " + text)
                s = s[k + 1:]
        print("all complete sentences in %d streams: valid %d/%d = %.4f"
              % (len(seqs), tot - nbad, tot, 1 - nbad / max(tot, 1)))


if __name__ == "__main__":
    cli.run(main)
