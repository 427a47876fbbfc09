#!/usr/bin/python3
"""Train a qkv model (PyTorch, CPU).

    python3 export/train.py --config grammar            # models/grammar.bin's run (1 thread)
    python3 export/train.py --config stories            # models/stories.bin's run
    python3 export/train.py --config grammar --init-only   # untrained init (grammar-random)
    python3 export/train.py --config stories --resume      # continue from out/stories/ckpt.pt
    python3 export/train.py --config induction          # models/induction.bin's run (1 thread)
    nice -n 5 python3 export/train.py --config shakespeare # models/shakespeare.bin's run (GPT-2 style, 1 thread)

Everything (tokenizer, data split, init, batch order) is derived from the
config's seed, so a run is reproducible.  Writes into out_dir:
    tokenizer.bin, data_*.npy (token cache), ckpt.pt (latest), log.txt
Export with:  python3 export/export.py out/NAME/ckpt.pt models/NAME.bin
The shakespeare config trains nanoGPT's architecture (export/model.py GPT) on
characters and writes a nanoGPT ckpt.pt (model_args, state dict) with
nanoGPT's meta.pkl (stoi/itos) beside it, which export.py finds there.
Override any config value with --set key=value (e.g. --set max_iters=100).
"""
import argparse
import hashlib
import json
import math
import os
import re
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import GPT, GPTConfig, ModelArgs, Transformer  # noqa: E402
import tokenizer_train as tt  # noqa: E402
import cli  # noqa: E402  (one-line errors)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------
# named configs
CONFIGS = {
    "grammar": dict(
        data="grammar",
        grammar_sentences=2_400_000,  # generated corpus size (sentences), 5% held out
        grammar_seed=1234,
        dim=96, hidden_dim=224, n_layers=3, n_heads=4, n_kv_heads=4,
        seq_len=64, shared_classifier=True,
        batch_size=64, grad_accum=1,
        lr=3e-3, min_lr=1e-4, warmup_iters=200, max_iters=20000,
        weight_decay=0.1, beta1=0.9, beta2=0.95, grad_clip=1.0,
        eval_interval=500, eval_tokens=100_000,
        seed=1337, out_dir="out/grammar",
        threads=1,  # this small model trains faster on one thread than on two (15k vs 10k tok/s)
        grammar_stream=False,  # True: the rows joined into one stream, trained on random windows of it,
                               # so position 0 is rarely BOS (as the stories run); held-out rows stay
                               # from BOS (README: attention sinks)
    ),
    "stories": dict(
        data="stories",
        # cased TinyStories, stories between "<|endoftext|>" lines; story i of a
        # file is held out iff i % heldout_every == 0; the training split of a
        # file is repeated `repeat` times in the training stream
        stories_sources=[
            dict(path=os.path.join(REPO, "..", "shared", "data", "tinystories-gpt4clean.txt"),
                 heldout_every=20, repeat=1),
            dict(path=os.path.join(REPO, "..", "shared", "data", "tinystories-v1-cased.txt"),
                 heldout_every=10, repeat=2),
        ],
        vocab_size=4096,
        dim=288, hidden_dim=768, n_layers=6, n_heads=6, n_kv_heads=6,
        seq_len=256, shared_classifier=True,
        batch_size=16, grad_accum=1,
        lr=2e-3, min_lr=1e-4, warmup_iters=100, max_iters=1200,
        weight_decay=0.1, beta1=0.9, beta2=0.95, grad_clip=1.0, dropout=0.1,
        bf16=True,                   # bfloat16 autocast: AMX/AVX-512 BF16 matmuls (~3.7x on Sapphire Rapids)
        eval_interval=300, eval_tokens=1_000_000,   # eval = the whole held-out split of each file
        seed=1337, out_dir="out/stories",
        threads=1,  # one thread: with other work on the machine, two OpenMP threads ran 4x slower than one
    ),
    # Two layers on grammar text mixed with rows of random tokens repeated
    # (A B C ... A B C ...): the repeats can only be predicted by copying
    # from earlier in the row, which is what an induction head does.
    "induction": dict(
        data="induction",
        grammar_sentences=300_000,
        grammar_seed=4321,
        repeat_fraction=0.5,         # share of rows that are repeated random tokens
        repeat_min=6, repeat_max=40,  # length of the repeated block, uniform
        grammar_stream=False,        # prepare_grammar's rows, as the grammar config's default
        dim=96, hidden_dim=224, n_layers=2, n_heads=4, n_kv_heads=4,
        seq_len=128, shared_classifier=True,
        batch_size=32, grad_accum=1,
        lr=3e-3, min_lr=1e-4, warmup_iters=100, max_iters=1200,
        weight_decay=0.1, beta1=0.9, beta2=0.95, grad_clip=1.0,
        eval_interval=100, eval_tokens=65_536,
        seed=1337, out_dir="out/induction",
        threads=1,
        keep_checkpoints=True,       # ckpt_NNNNN.pt at every eval: the induction score's curve
    ),
    # nanoGPT's shakespeare_char recipe (config/train_shakespeare_char.py: 6 layers,
    # 6 heads, 384 wide, context 256, batch 64, 5000 iters, dropout 0.2: 10.7M
    # parameters, 82M tokens) scaled to one core shared with other jobs and 25
    # minutes: 4 layers, 4 heads, 128 wide, context 128, batch 16, 1600 iters
    # (0.82M parameters, 3.3M tokens, about 3.3 epochs), no dropout.
    "shakespeare": dict(
        data="shakespeare_char", arch="gpt2",
        text_path=os.path.join(REPO, "..", "shared", "data", "tinyshakespeare.txt"),
        n_layer=4, n_head=4, n_embd=128, block_size=128, bias=True, dropout=0.0,
        batch_size=16, grad_accum=1,
        lr=2e-3, min_lr=1e-4, warmup_iters=50, max_iters=1600,
        weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0,
        eval_interval=800, eval_tokens=1_000_000,   # eval = the whole held-out 10%
        seed=1337, out_dir="out/shakespeare",
        threads=1,
    ),
}


# ---------------------------------------------------------------------------
# data
STORY_SEPARATOR = "<|endoftext|>"


def read_stories(path):
    """Stories between lines that read <|endoftext|>; a story's own newlines
    (its paragraphs) are kept."""
    text = open(path, encoding="utf-8").read()
    stories = [s.strip() for s in re.split(r"^" + re.escape(STORY_SEPARATOR) + r"\s*$", text, flags=re.M)]
    return [s for s in stories if s]


def source_name(path):
    return os.path.splitext(os.path.basename(path))[0]


def split_sources(sources):
    """[(name, train stories, held-out stories, repeat)] of each source file."""
    out = []
    for src in sources:
        stories = read_stories(src["path"])
        k = src["heldout_every"]
        train = [s for i, s in enumerate(stories) if i % k != 0]
        val = [s for i, s in enumerate(stories) if i % k == 0]
        out.append((source_name(src["path"]), train, val, src.get("repeat", 1)))
    return out


def write_heldout_text(path, stories):
    """The held-out stories in the data's own layout, for ./run -m ppl -f."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(("\n" + STORY_SEPARATOR + "\n").join(stories) + "\n")


def encode_stories(tok, stories):
    ids = []
    for d in stories:  # llama2.c style: BOS + tokens per story, concatenated
        ids.extend(tok.encode(d, bos=True))
    return np.array(ids, dtype=np.int16 if tok.vocab_size < 32768 else np.int32)


def prepare_stories(cfg, out_dir):
    """Tokenizer trained on the training stories; token caches; held-out texts.
    Returns (tokenizer, training tokens, [(name, held-out tokens)])."""
    tok_path = os.path.join(out_dir, "tokenizer.bin")
    tr_path = os.path.join(out_dir, "data_train.npy")
    stamp_path = os.path.join(out_dir, "data_config.json")
    parts = split_sources(cfg["stories_sources"])
    va_paths = [os.path.join(out_dir, "data_val_%s.npy" % name) for name, _, _, _ in parts]
    # the caches are reused only when made from the same sources and vocabulary
    # (a run with another --set vocab_size trained on the old tokenizer's ids)
    stamp = json.dumps({"vocab_size": cfg["vocab_size"], "stories_sources": cfg["stories_sources"],
                        "sha256": [hashlib.sha256(open(src["path"], "rb").read()).hexdigest()
                                   for src in cfg["stories_sources"]]}, sort_keys=True)
    made = os.path.exists(stamp_path) and open(stamp_path).read() == stamp
    if not made or not all(os.path.exists(p) for p in [tok_path, tr_path] + va_paths):
        if os.path.exists(stamp_path):  # gone before the caches change: a rebuild cut short leaves none
            os.remove(stamp_path)
        every_train = [s for _, train, _, _ in parts for s in train]
        print("stories: %s; training BPE vocab %d on the %d training stories"
              % (", ".join("%s %d train + %d held out" % (n, len(t), len(v)) for n, t, v, _ in parts),
                 cfg["vocab_size"], len(every_train)), flush=True)
        pieces, scores = tt.train_bpe(every_train, cfg["vocab_size"], verbose=False)
        tt.write_tokenizer(tok_path, pieces, scores)
        tok = tt.Tokenizer(pieces, scores)
        np.save(tr_path, np.concatenate([encode_stories(tok, train) for _, train, _, r in parts
                                         for _ in range(r)]))
        for (name, _, val, _), va_path in zip(parts, va_paths):
            np.save(va_path, encode_stories(tok, val))
            write_heldout_text(os.path.join(out_dir, "heldout-%s.txt" % name), val)
        with open(stamp_path, "w") as f:
            f.write(stamp)
    tok = tt.Tokenizer.load(tok_path)
    vals = [(name, np.load(p).astype(np.int64)) for (name, _, _, _), p in zip(parts, va_paths)]
    return tok, np.load(tr_path).astype(np.int64), vals


def prepare_shakespeare_char(cfg, out_dir):
    """nanoGPT's data/shakespeare_char/prepare.py: the sorted characters of the
    text are the vocabulary; the first 90% trains, the last 10% is held out.
    meta.pkl (vocab_size, itos, stoi) is written beside the checkpoint."""
    import pickle
    text = open(cfg["text_path"], encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    with open(os.path.join(out_dir, "meta.pkl"), "wb") as f:
        pickle.dump(dict(vocab_size=len(chars), itos=dict(enumerate(chars)), stoi=stoi), f)
    ids = np.array([stoi[c] for c in text], dtype=np.int64)
    n = int(len(ids) * 0.9)
    return CharVocab(len(chars)), ids[:n], ids[n:]


class CharVocab:
    """What main() needs of a tokenizer for a character model (it has no tokenizer.bin)."""

    def __init__(self, n):
        self.vocab_size = n


def grammar_rows(tok, sentences, seq_len):
    """Rows of seq_len+1 ids, each BOS + consecutive sentences (last one cut)."""
    rows = []
    cur = [tt.BOS_ID]
    for s in sentences:
        cur.extend(tok.encode(s)[0:] if len(cur) == 1 else tok.encode(s))
        if len(cur) >= seq_len + 1:
            rows.append(cur[:seq_len + 1])
            cur = [tt.BOS_ID]
    return np.array(rows, dtype=np.int64)


def prepare_grammar(cfg, out_dir):
    import grammar
    tok_path = os.path.join(out_dir, "tokenizer.bin")
    pieces, scores = tt.build_word_vocab(grammar.vocabulary())
    tt.write_tokenizer(tok_path, pieces, scores)
    tok = tt.Tokenizer(pieces, scores)
    sents = grammar.generate(cfg["grammar_sentences"], cfg["grammar_seed"])
    n_val = len(sents) // 20
    train = grammar_rows(tok, sents[n_val:], cfg["seq_len"])
    val = grammar_rows(tok, sents[:n_val], cfg["seq_len"])
    if cfg["grammar_stream"]:
        train = train.reshape(-1)  # Batches then takes windows at random offsets
    return tok, train, val


def repeat_rows(n, vocab_size, cfg, rng):
    """Rows of seq_len+1 ids: BOS, then one block of random tokens (ids 3 and
    up, no id twice in a block) repeated until the row is full."""
    width = cfg["seq_len"] + 1
    rows = np.empty((n, width), dtype=np.int64)
    for r in range(n):
        length = int(rng.integers(cfg["repeat_min"], cfg["repeat_max"] + 1))
        block = rng.choice(np.arange(3, vocab_size), size=length, replace=False)
        rows[r, 0] = tt.BOS_ID
        rows[r, 1:] = np.resize(block, width - 1)
    return rows


def prepare_induction(cfg, out_dir):
    """Grammar rows and as many repeated-random-token rows times
    repeat_fraction / (1 - repeat_fraction), shuffled together."""
    tok, train, val = prepare_grammar(cfg, out_dir)
    rng = np.random.default_rng(cfg["seed"])
    share = cfg["repeat_fraction"] / (1 - cfg["repeat_fraction"])
    mixed = []
    for rows in (train, val):
        both = np.concatenate([rows, repeat_rows(int(len(rows) * share), tok.vocab_size, cfg, rng)])
        mixed.append(both[rng.permutation(len(both))])
    return tok, mixed[0], mixed[1]


class Batches:
    """Deterministic batches: batch k depends only on (seed, k) -> resumable."""

    def __init__(self, data, seq_len, batch_size, seed):
        self.data, self.T, self.B, self.seed = data, seq_len, batch_size, seed
        self.rows = data.ndim == 2

    def get(self, k):
        rng = np.random.default_rng([self.seed, k])
        if self.rows:
            idx = rng.integers(0, len(self.data), self.B)
            xy = self.data[idx]
        else:
            start = rng.integers(0, len(self.data) - self.T - 1, self.B)
            xy = np.stack([self.data[s:s + self.T + 1] for s in start])
        xy = torch.from_numpy(xy)
        return xy[:, :-1], xy[:, 1:]


def eval_windows(data, seq_len, max_tokens):
    """Fixed held-out windows: non-overlapping, from position 0."""
    if data.ndim == 2:
        n = max(1, min(len(data), max_tokens // seq_len))
        xy = torch.from_numpy(data[:n])
        return [(xy[i:i + 32, :-1], xy[i:i + 32, 1:]) for i in range(0, n, 32)]
    n = min((len(data) - 1) // seq_len, max(1, max_tokens // seq_len))
    xy = np.stack([data[i * seq_len:i * seq_len + seq_len + 1] for i in range(n)])
    xy = torch.from_numpy(xy)
    return [(xy[i:i + 16, :-1], xy[i:i + 16, 1:]) for i in range(0, n, 16)]


@torch.no_grad()
def evaluate(model, windows):
    model.eval()
    tot, cnt = 0.0, 0
    for x, y in windows:
        _, loss = model(x, y)
        tot += loss.item() * y.numel()
        cnt += y.numel()
    model.train()
    return tot / cnt


def lr_at(it, cfg):
    if it < cfg["warmup_iters"]:
        return cfg["lr"] * (it + 1) / cfg["warmup_iters"]
    if it >= cfg["max_iters"]:
        return cfg["min_lr"]
    r = (it - cfg["warmup_iters"]) / max(1, cfg["max_iters"] - cfg["warmup_iters"])
    return cfg["min_lr"] + 0.5 * (1 + math.cos(math.pi * r)) * (cfg["lr"] - cfg["min_lr"])


def make_optimizer(model, cfg):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [dict(params=decay, weight_decay=cfg["weight_decay"]),
              dict(params=no_decay, weight_decay=0.0)]
    return torch.optim.AdamW(groups, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]))


def save(path, model, opt, cfg, it, tok, best_val, history):
    ck = dict(model=model.state_dict(), optimizer=opt.state_dict() if opt else None,
              model_args=model.args.to_dict(), config=cfg, iter=it, best_val=best_val,
              history=history)
    if hasattr(tok, "pieces"):   # a character model's vocabulary is meta.pkl beside it
        ck["tokenizer"] = tt.tokenizer_bytes(tok.pieces, tok.scores)
    tmp = path + ".tmp"
    torch.save(ck, tmp)
    os.replace(tmp, path)


def parse_value(v):
    try:
        return json.loads(v)
    except json.JSONDecodeError:
        return v


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--init-only", action="store_true", help="save the untrained init as init.pt and exit")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--threads", type=int, default=None, help="default: the config's")
    args = ap.parse_args()

    cfg = dict(CONFIGS[args.config])
    for kv in args.set:
        k, eq, v = kv.partition("=")
        if not eq or k not in cfg:
            ap.error("--set %s: %s (keys: %s)" % (kv, "not KEY=VALUE" if not eq else "unknown config key %s" % k,
                                                  ", ".join(sorted(cfg))))
        cfg[k] = parse_value(v)
    torch.set_num_threads(args.threads or cfg["threads"])
    out_dir = cfg["out_dir"] if os.path.isabs(cfg["out_dir"]) else os.path.join(REPO, cfg["out_dir"])
    os.makedirs(out_dir, exist_ok=True)
    ck_path = os.path.join(out_dir, "ckpt.pt")

    t0 = time.time()
    if cfg["data"] == "stories":
        tok, train, vals = prepare_stories(cfg, out_dir)
    elif cfg["data"] == "induction":
        tok, train, val = prepare_induction(cfg, out_dir)
        vals = [("eval", val)]
    elif cfg["data"] == "shakespeare_char":
        tok, train, val = prepare_shakespeare_char(cfg, out_dir)
        vals = [("eval", val)]
    else:
        tok, train, val = prepare_grammar(cfg, out_dir)
        vals = [("eval", val)]
    ntrain = train.size
    print("data: %d train tokens, %s held-out tokens, vocab %d (%.1fs)"
          % (ntrain, " + ".join("%d (%s)" % (v.size, n) for n, v in vals), tok.vocab_size,
             time.time() - t0), flush=True)

    torch.manual_seed(cfg["seed"])
    if cfg.get("arch") == "gpt2":
        margs = GPTConfig(block_size=cfg["block_size"], vocab_size=tok.vocab_size, n_layer=cfg["n_layer"],
                          n_head=cfg["n_head"], n_embd=cfg["n_embd"], dropout=cfg["dropout"], bias=cfg["bias"])
        model = GPT(margs)
        cfg["seq_len"] = cfg["block_size"]
    else:
        margs = ModelArgs(dim=cfg["dim"], hidden_dim=cfg["hidden_dim"], n_layers=cfg["n_layers"],
                          n_heads=cfg["n_heads"], n_kv_heads=cfg["n_kv_heads"], vocab_size=tok.vocab_size,
                          seq_len=cfg["seq_len"], shared_classifier=cfg["shared_classifier"])
        model = Transformer(margs)
        model.set_dropout(cfg.get("dropout", 0.0))
    model.init_weights(cfg["seed"])
    print("model: %s\nparams: %d" % (margs.to_dict(), model.n_params()), flush=True)

    if args.init_only:
        path = os.path.join(out_dir, "init.pt")
        save(path, model, None, cfg, 0, tok, None, [])
        print("wrote untrained init to", path)
        return

    opt = make_optimizer(model, cfg)
    it, best_val, history = 0, None, []
    if args.resume and os.path.exists(ck_path):
        ck = torch.load(ck_path)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        it, best_val, history = ck["iter"], ck["best_val"], ck.get("history", [])
        print("resumed from %s at iter %d" % (ck_path, it), flush=True)

    batches = Batches(train, cfg["seq_len"], cfg["batch_size"], cfg["seed"])
    # every held-out split is evaluated; the last one listed is the one "eval" and best_val track
    windows = [(name, eval_windows(v, cfg["seq_len"], cfg["eval_tokens"])) for name, v in vals]
    tokens_per_iter = cfg["batch_size"] * cfg["grad_accum"] * cfg["seq_len"]
    log = open(os.path.join(out_dir, "log.txt"), "a")
    start_it = it
    t_start = time.time()
    train_loss_acc, n_acc = 0.0, 0
    while True:
        last = it >= cfg["max_iters"]
        if (it % cfg["eval_interval"] == 0 and it > start_it) or last:
            losses = [(name, evaluate(model, w)) for name, w in windows]
            vl = losses[-1][1]
            best_val = vl if best_val is None else min(best_val, vl)
            el = time.time() - t_start
            tps = (it - start_it) * tokens_per_iter / max(el, 1e-9)
            eta = (cfg["max_iters"] - it) * tokens_per_iter / max(tps, 1e-9)
            tl = train_loss_acc / max(n_acc, 1)
            line = ("step %d/%d  train %.4f  eval %.4f%s  lr %.2e  tok/s %.0f  elapsed %.0fs  ETA %.0fs"
                    % (it, cfg["max_iters"], tl, vl,
                       "".join("  %s %.4f" % nl for nl in losses) if len(losses) > 1 else "",
                       lr_at(it, cfg), tps, el, eta))
            print(line, flush=True)
            log.write(line + "\n")
            log.flush()
            # each held-out split's loss by name; a split named "eval" is vl itself
            history.append({**dict(losses), "iter": it, "train": tl, "eval": vl, "elapsed": el})
            train_loss_acc, n_acc = 0.0, 0
            save(ck_path, model, opt, cfg, it, tok, best_val, history)
            if vl == best_val:  # the checkpoint with the lowest held-out loss so far
                save(os.path.join(out_dir, "best.pt"), model, None, cfg, it, tok, best_val, history)
            if cfg.get("keep_checkpoints"):
                save(os.path.join(out_dir, "ckpt_%05d.pt" % it), model, None, cfg, it, tok, best_val, history)
        if last:
            break
        lr = lr_at(it, cfg)
        for g in opt.param_groups:
            g["lr"] = lr
        for micro in range(cfg["grad_accum"]):
            x, y = batches.get(it * cfg["grad_accum"] + micro)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.get("bf16", False)):
                _, loss = model(x, y)
            (loss / cfg["grad_accum"]).backward()
            train_loss_acc += loss.item()
            n_acc += 1
        if cfg["grad_clip"]:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        it += 1
        if it % 10 == 0 and it % cfg["eval_interval"] != 0:
            el = time.time() - t_start
            tps = (it - start_it) * tokens_per_iter / max(el, 1e-9)
            eta = (cfg["max_iters"] - it) * tokens_per_iter / max(tps, 1e-9)
            print("step %d/%d  train %.4f  lr %.2e  tok/s %.0f  ETA %.0fs"
                  % (it, cfg["max_iters"], loss.item(), lr, tps, eta), flush=True)
    print("done: final eval %.4f  best %.4f  wall %.0fs" % (vl, best_val, time.time() - t_start), flush=True)


if __name__ == "__main__":
    cli.run(main)
