#!/usr/bin/python3
"""Attention sinks on qkv's own models, measured: the README's tables.

    /usr/bin/python3 export/sinks_measure.py models/stories.bin models/grammar.bin > build/sinks.md

For each model, a held-out text at least 10x its context (stories: the
stories export/train.py holds out, in order, joined by newlines; grammar: the
first sentences of the grammar corpus, which train.py holds out), scored by
./run -m ppl, one thread, with:
  (d) restart when full (no window: -m ppl's default),
  (a) a sliding window without sinks (--window W),
  (b) with sinks (--window W --sinks 1, 2, 4),
  (c) each window recomputed from scratch (--recompute, with 0 and 4 sinks),
for W = the context and W = a quarter of it; bits/byte and tokens/s for each.
Then how much attention the first token gets, per layer and head: with full
attention over windows that start with BOS (positions 1..T-1 of each), and
as the sink of --window T --sinks 1 past the context (positions T..3T-1),
beside what a uniform spread would give.  Every ./run command is printed
with its result, so any line can be run again by hand.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import cli  # one-line errors

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(REPO, "run")
OUT = os.path.join(REPO, "build", "sinks")


def run(args):
    return subprocess.run([RUN] + args, check=True, capture_output=True, text=True, cwd=REPO).stdout


def n_tokens(model, path):
    return len(run([model, "-m", "tokenize", "--prompt-file", path]).split("\n")[0].split())


def info(model):
    text = run([model, "-m", "info"])
    seq_len = int(re.search(r"seq_len (\d+)", text).group(1))
    layers = int(re.search(r"n_layers (\d+)", text).group(1))
    heads = int(re.search(r"n_heads (\d+)", text).group(1))
    return seq_len, layers, heads


def heldout_pieces(model):
    """The held-out text in pieces: stories, or grammar sentences."""
    sys.path.insert(0, os.path.join(REPO, "export"))
    if "grammar" in os.path.basename(model):
        import grammar
        return [s for s in grammar.generate(3000, 1234)], " "  # the first 5% are train.py's held-out split
    import train
    cfg = train.CONFIGS["stories"]
    # the held-out stories of every source, joined by newlines: one stream
    val = [s for _, _, held_out, _ in train.split_sources(cfg["stories_sources"]) for s in held_out]
    return val, "\n"


def write_text(model, pieces, joiner, min_tokens, name):
    """The first pieces, joined, until the text has min_tokens tokens."""
    path = os.path.join(OUT, name)
    take = 1
    while True:
        with open(path, "w", encoding="utf-8") as f:
            f.write(joiner.join(pieces[:take]))
        if n_tokens(model, path) >= min_tokens or take >= len(pieces):
            return path
        take = int(take * 1.3) + 1


def ppl(model, path, flags):
    cmd = [model, "-m", "ppl", "-f", path, "--threads", "1"] + flags
    out = run(cmd)
    tok_s = float(re.search(r"([0-9.]+) tok/s", out).group(1))
    bpb = float(re.search(r"bits/byte ([0-9.]+)", out).group(1))
    tokens = int(re.search(r"tokens (\d+)", out).group(1))
    return "./run " + " ".join(os.path.relpath(a, REPO) if os.path.isabs(a) else a for a in cmd), bpb, tok_s, tokens


def ppl_table(model, path, T):
    print("\n#### %s: `-m ppl` over %s\n" % (os.path.basename(model), os.path.relpath(path, REPO)))
    print("| variant | W | S | bits/byte | tok/s | command |")
    print("|---|---|---|---|---|---|")
    rows = [("(d) restart when full", None, 0, [])]
    for W in (T, T // 4):
        rows.append(("(a) sliding window, no sinks", W, 0, ["--window", str(W)]))
        for S in (1, 2, 4):
            rows.append(("(b) window + sinks", W, S, ["--window", str(W), "--sinks", str(S)]))
        rows.append(("(c) recompute each window", W, 0, ["--window", str(W), "--recompute"]))
        rows.append(("(c) recompute, sinks kept", W, 4, ["--window", str(W), "--sinks", "4", "--recompute"]))
    tokens = 0
    for name, W, S, flags in rows:
        cmd, bpb, tok_s, tokens = ppl(model, path, flags)
        print("| %s | %s | %d | %.5f | %.0f | `%s` |" % (name, W if W else "(%d)" % T, S, bpb, tok_s, cmd))
        sys.stdout.flush()
    print("\n%d tokens scored (%.1f contexts of %d)." % (tokens, tokens / T, T))


def trace(model, path, n, flags, positions):
    """Steps of --trace-json over the prompt file, teacher-forced."""
    with tempfile.NamedTemporaryFile(suffix=".json", dir=OUT) as f:
        run([model, "--prompt-file", path, "-t", "0", "-n", str(n + 1), "--threads", "1",
             "--trace-json", f.name, "--pos", positions] + flags)
        return [json.loads(line) for line in open(f.name)]


def first_token_attention(model, pieces, joiner, T, layers, heads):
    """Mean weight on position 0 (BOS) per layer and head."""
    full = [[0.0] * heads for _ in range(layers)]
    uniform, count = 0.0, 0
    windows = 0
    for i in range(0, len(pieces)):  # windows of whole pieces from BOS, each at most T tokens
        path = os.path.join(OUT, "window.txt")
        text = pieces[i]
        j = i + 1
        while j < len(pieces) and n_tokens_text(model, path, text + joiner + pieces[j]) <= T:
            text += joiner + pieces[j]
            j += 1
        n = n_tokens_text(model, path, text)
        if n > T or n < T // 2:
            continue
        for st in trace(model, path, n, [], "1-%d" % (n - 1)):
            for L in st["layers"]:
                for H in L["heads"]:
                    full[L["layer"]][H["head"]] += H["weights"][0]
            uniform += 1.0 / (st["pos"] + 1)
            count += 1
        windows += 1
        if windows == 8:
            break
    return [[v / count for v in row] for row in full], uniform / count, windows, count


def n_tokens_text(model, path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return n_tokens(model, path)


def sink_attention(model, path, T, layers, heads):
    """Mean sink_share of --window T --sinks 1 over positions T..3T-1."""
    n = min(n_tokens(model, path), 3 * T)
    share = [[0.0] * heads for _ in range(layers)]
    steps = trace(model, path, n, ["--window", str(T), "--sinks", "1"], "%d-%d" % (T, n - 1))
    for st in steps:
        for L in st["layers"]:
            for H in L["heads"]:
                share[L["layer"]][H["head"]] += H["sink_share"]
    return [[v / len(steps) for v in row] for row in share], 1.0 / T, len(steps)


def attention_table(model, pieces, joiner, path, T, layers, heads):
    full, uniform, windows, count = first_token_attention(model, pieces, joiner, T, layers, heads)
    sink, sink_uniform, n_sink = sink_attention(model, path, T, layers, heads)
    print("\n#### %s: mean attention on the first token (BOS), per layer and head\n" % os.path.basename(model))
    print("Full attention: %d positions of %d held-out windows that start with BOS (positions 1..n-1, "
          "n <= %d); a uniform spread would give %.3f. Sink: `--window %d --sinks 1` streaming the held-out "
          "text, positions %d..%d (%d); a uniform spread would give %.4f.\n"
          % (count, windows, T, uniform, T, T, T + n_sink - 1, n_sink, sink_uniform))
    print("| layer | " + " | ".join("head %d full / sink" % h for h in range(heads)) + " |")
    print("|---|" + "---|" * heads)
    for l in range(layers):
        print("| %d | " % l + " | ".join("%.3f / %.3f" % (full[l][h], sink[l][h]) for h in range(heads)) + " |")
    sys.stdout.flush()


def main():
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__.strip())
        return
    models = sys.argv[1:] or ["models/stories.bin", "models/grammar.bin"]
    os.makedirs(OUT, exist_ok=True)
    for model in models:
        model = os.path.join(REPO, model) if not os.path.isabs(model) else model
        T, layers, heads = info(model)
        pieces, joiner = heldout_pieces(model)
        name = os.path.basename(model).split(".")[0] + "-heldout.txt"
        path = write_text(model, pieces, joiner, 10 * T + 1, name)
        ppl_table(model, path, T)
        attention_table(model, pieces, joiner, path, T, layers, heads)


if __name__ == "__main__":
    cli.run(main)
