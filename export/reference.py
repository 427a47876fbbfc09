#!/usr/bin/python3
"""Reference forward pass for qkv models, in plain NumPy float64.

This is the project's oracle: a direct, deliberately simple transcription of
the forward pass in README ("How it works", "Checkpoint format"), with no tricks.  It reads any of the three
checkpoint formats (qkv, llama2.c legacy, llama2.c version 1) through
qkvfile.py and computes, for every position of a token sequence,

  - the logits,
  - per layer and query head, the raw attention scores q.k (NOT divided by
    sqrt(head_size)) over the visible positions 0..pos,
  - and the attention weights softmax(q.k / sqrt(head_size)).

Quantized weights (Q8_0, Q4_0) are read dequantized, exactly.  By default
the inputs of the matrix products stay float64.  With --quantized-activations
(forward(..., quantized=names)) the input of each product by a matrix stored
as Q8_0 or Q4_0 is first quantized as the engine's activations_quantize does
(float32 x; per block of 32: d = max|x| / 127, q = roundf(x * (1/d)), in
float32), and the product is W_dequantized . (q * d) in float64: the engine's
integer kernels up to float32 rounding, so these logits are their golden
values while no activation lies within that rounding of a rounding boundary
of q. Where one does (more likely the deeper the model and the longer the
run: models/stories.bin agrees to 1e-7 for 9 positions, then by 0.045 of
logits of 17), the engine and this reference round it apart, and the step
of q carries on through the KV cache; the tests use shallow models.

Usage as a program (prints a golden file, format below):

    python3 export/reference.py MODEL [-z TOKENIZER] --tokens 1,5,9,... --positions 0,3,7 \
        [--quantized-activations] [--kv-type f32|f16|q8] > golden.txt

Golden file format (one item per line, numbers printed with %.9g):

    # comment lines (ignored)
    model NAME
    config dim D hidden_dim H n_layers L n_heads NH n_kv_heads NKV head_size HS vocab_size V seq_len S
    tokens COUNT id0 id1 ...
    logits POS v0 ... v{V-1}                      one line per checked position
    scores POS LAYER HEAD s0 ... sPOS             raw q.k, every layer and head, at every checked position
    weights POS LAYER HEAD w0 ... wPOS            softmax weights

Usage as a module:

    import reference
    config, tensors, tokenizer = qkvfile.read_model(path)
    result = reference.forward(config, tensors, tokens)
    # or, as the engine's int8 kernels compute a file's Q8_0/Q4_0 matrices:
    result = reference.forward(config, tensors, tokens,
                               reference.quantized_matrices(qkvfile.read_tensor_types(path)))
    result.logits[pos]              # float64 [vocab_size]
    result.scores[pos][layer][head]  # float64 [pos+1], raw q.k
    result.weights[pos][layer][head] # float64 [pos+1], softmax
    result.outputs[pos][layer][head] # float64 [head_size], sum of weight * value
    result.queries[pos][layer]       # float64 [n_heads, head_size], q (rotated as it meets the keys)
    result.keys[layer][t]            # float64 [n_kv_heads, head_size], the keys as cached (kv_type)
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qkvfile  # noqa: E402
import cli  # noqa: E402  (one-line errors)


def rmsnorm(x, weight, eps):
    """weight * x / sqrt(mean(x^2) + eps)"""
    return weight * (x / np.sqrt(np.mean(x * x) + eps))


def rope(vectors, pos, theta):
    """Rotate each head vector (rows of `vectors`, shape [n, head_size]) by
    position pos: pair (2i, 2i+1) turns by angle pos * theta^(-2i/head_size)."""
    n, head_size = vectors.shape
    out = vectors.copy()
    for i in range(head_size // 2):
        freq = theta ** (-2.0 * i / head_size)
        angle = pos * freq
        c, s = np.cos(angle), np.sin(angle)
        a = vectors[:, 2 * i]
        b = vectors[:, 2 * i + 1]
        out[:, 2 * i] = a * c - b * s
        out[:, 2 * i + 1] = a * s + b * c
    return out


def layernorm(x, weight, bias, eps):
    """GPT-2's LayerNorm: (x - mean) / sqrt(var + eps) * weight + bias, var the biased variance."""
    mu = np.mean(x)
    return (x - mu) / np.sqrt(np.mean((x - mu) ** 2) + eps) * weight + bias


def gelu(x, tanh_approximation):
    """GELU (Hendrycks & Gimpel 2016): x * Phi(x), Phi the standard normal CDF
    (nanoGPT's nn.GELU()); or GPT-2's approximation
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hugging Face's gelu_new)."""
    if tanh_approximation:
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
    from math import erf
    return x * 0.5 * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))


def softmax(x):
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


def silu(x):
    return x / (1.0 + np.exp(-x))


QUANTIZED_TYPES = (qkvfile.WEIGHT_Q8_0, qkvfile.WEIGHT_Q4_0)


def quantized_matrices(types):
    """Names of the matrices stored as Q8_0/Q4_0, from {name: type}."""
    return {name for name, t in types.items() if t in QUANTIZED_TYPES}


def quantize_activation(x):
    """The engine's activations_quantize on one vector (length a multiple of
    32), returned as the values the int8 kernels multiply by: q * d (exact in
    float64).  float32 throughout, as the C code: amax, d = amax / 127,
    id = 1/d (0 if d is 0), q = roundf(x * id)."""
    b = np.asarray(x, dtype=np.float32).reshape(-1, qkvfile.QBLOCK)
    d = np.abs(b).max(axis=1, keepdims=True) / np.float32(127)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    q = qkvfile.roundf(b * inv)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(-1)


KV_TYPES = ("f32", "f16", "q8")


def kv_stored(x, kv_type):
    """A key or value row of one kv head as the engine's KV cache stores it
    (--kv-type): float32 (f32: kept in float64 here, as every product is),
    float16 (f16: the float32 the engine holds, rounded to nearest even;
    straight from float64 it would round twice apart near a tie), or int8
    with a scale per row (q8: as kv_cache.h's q8_scale and kv_store_row in
    float32: scale = max|x| / 127, q = roundf(x * (1/scale)), the row read
    back as q * scale; a row of zeros, or one whose 1/scale overflows
    (inverse_scale: max|x| under about 3.7e-37), is stored as zeros; a row
    with a NaN or an infinity gets a NaN scale, so it reads back as NaNs).
    Only the storage: the engine's int8 kernels also round q and the
    softmax weights to int16 (kv_int8.h), a relative 3e-5 and 1.5e-5 that
    this leaves out."""
    if kv_type == "f32":
        return x
    if kv_type not in KV_TYPES:
        raise ValueError("kv_type %r is not one of %s" % (kv_type, ", ".join(KV_TYPES)))
    row = np.asarray(x, dtype=np.float32)
    if kv_type == "f16":
        return row.astype(np.float16).astype(np.float64)
    amax = np.abs(row).max()
    if not np.isfinite(amax):
        return np.full(len(row), np.nan)
    scale = amax / np.float32(127)
    with np.errstate(divide="ignore", over="ignore"):
        inverse = np.float32(1) / scale if scale > 0 else np.float32(0)
    if not 0 < inverse < np.inf:
        return np.zeros(len(row))
    q = qkvfile.roundf(row * inverse)
    return q.astype(np.float64) * np.float64(scale)


class Result:
    """Per-position outputs of forward()."""

    def __init__(self):
        self.logits = []   # [pos] -> array [vocab_size]
        self.scores = []   # [pos][layer][head] -> array [pos+1], raw q.k
        self.weights = []  # [pos][layer][head] -> array [pos+1], softmax weights
        self.outputs = []  # [pos][layer][head] -> array [head_size], the head's sum of weight * value
        self.queries = []  # [pos][layer] -> array [n_heads, head_size], q as it meets the keys
        self.keys = []     # [layer][t] -> array [n_kv_heads, head_size], the cache's keys as stored


def cached_positions(pos, window, sinks):
    """The positions a StreamingLLM cache of `window` entries holds when the
    query at pos is added: the first `sinks` and the most recent
    window - sinks (all of 0..pos while they fit)."""
    if window is None or pos + 1 <= window:
        return list(range(pos + 1))
    return list(range(sinks)) + list(range(pos + 1 - (window - sinks), pos + 1))


def forward(config, tensors, tokens, quantized=(), window=None, sinks=0, kv_type="f32"):
    """Run tokens[0], tokens[1], ... at positions 0, 1, ... and return a Result.

    quantized: names of matrices (the classifier as "tok_embeddings" or
    "output") whose input is quantized per block of 32 as the engine does for
    Q8_0/Q4_0 matrices (see quantize_activation).

    kv_type: "f32", "f16" or "q8", the KV cache's rows as the engine stores
    them (kv_stored), every later product in float64; without a window.

    window, sinks: attention sinks and a sliding window as StreamingLLM's
    paper states them (Xiao et al. 2023, section 3.2): the cache keeps the
    keys and values of cached_positions(pos); keys are kept before RoPE, and
    at each step every cached key is rotated by its place in the cache
    (0..n-1) and the query by n-1, so positions stay below the window.
    Scores and weights list the cached positions in order."""
    n_layers = config["n_layers"]
    n_heads = config["n_heads"]
    n_kv_heads = config["n_kv_heads"]
    head_size = config["head_size"]
    eps = float(config["norm_eps"])
    theta = float(config["rope_theta"])
    heads_per_kv = n_heads // n_kv_heads
    if window is None and len(tokens) > config["seq_len"]:
        raise ValueError("%d tokens exceed seq_len %d" % (len(tokens), config["seq_len"]))

    w = {name: np.asarray(a, dtype=np.float64) for name, a in tensors.items()}
    classifier = "tok_embeddings" if config["shared_classifier"] else "output"

    def mm(name, x):
        return w[name] @ (quantize_activation(x) if name in quantized else x)

    # GPT-2 (nanoGPT's model.py, Radford et al. 2019): LayerNorm with a bias,
    # a bias on every linear layer, GELU MLP, learned positions
    gpt2 = config.get("arch", qkvfile.ARCH_LLAMA) == qkvfile.ARCH_GPT2
    tanh_gelu = config.get("activation") == qkvfile.ACT_GELU_TANH

    def linear(name, x):
        return mm(name, x) + w[name + ".bias"] if gpt2 else mm(name, x)

    def norm(x, name):
        return layernorm(x, w[name], w[name + ".bias"], eps) if gpt2 else rmsnorm(x, w[name], eps)

    # keys[layer][t], values[layer][t]: arrays [n_kv_heads, head_size]
    # (with a window the keys are kept unrotated)
    if window is not None and kv_type != "f32":
        raise ValueError("kv_type %s with a window is not modelled" % kv_type)
    keys = [[] for _ in range(n_layers)]
    values = [[] for _ in range(n_layers)]
    result = Result()

    for pos, token in enumerate(tokens):
        if not 0 <= token < config["vocab_size"]:
            raise ValueError("token %d outside the vocabulary" % token)
        x = w["tok_embeddings"][token].copy()
        if gpt2:  # GPT-2: a learned embedding of the position is added; no RoPE
            x = x + w["pos_embeddings"][pos]
        pos_scores, pos_weights, pos_outputs, pos_queries = [], [], [], []
        for layer in range(n_layers):
            p = "layers.%d." % layer
            h = norm(x, p + "attention_norm")
            q = linear(p + "attention.wq", h).reshape(n_heads, head_size)
            k = linear(p + "attention.wk", h).reshape(n_kv_heads, head_size)
            v = linear(p + "attention.wv", h).reshape(n_kv_heads, head_size)
            if window is None and not gpt2:
                q = rope(q, pos, theta)
                k = rope(k, pos, theta)
            keys[layer].append(np.array([kv_stored(row, kv_type) for row in k]))
            values[layer].append(np.array([kv_stored(row, kv_type) for row in v]))
            seen = cached_positions(pos, window, sinks)
            if window is None:
                cached = [keys[layer][t] for t in seen]
            else:
                cached = [rope(keys[layer][t], slot, theta) for slot, t in enumerate(seen)]
                q = rope(q, len(seen) - 1, theta)

            pos_queries.append(q)
            out = np.zeros((n_heads, head_size))
            layer_scores, layer_weights = [], []
            for head in range(n_heads):
                kv = head // heads_per_kv
                raw = np.array([np.dot(q[head], key[kv]) for key in cached])
                att = softmax(raw / np.sqrt(head_size))
                for a, t in zip(att, seen):
                    out[head] += a * values[layer][t][kv]
                layer_scores.append(raw)
                layer_weights.append(att)
            pos_scores.append(layer_scores)
            pos_weights.append(layer_weights)
            pos_outputs.append(out.copy())

            x = x + linear(p + "attention.wo", out.reshape(n_heads * head_size))
            h = norm(x, p + "ffn_norm")
            if gpt2:  # c_proj(gelu(c_fc(h)))
                x = x + linear(p + "feed_forward.w2", gelu(linear(p + "feed_forward.w1", h), tanh_gelu))
            else:
                gate = mm(p + "feed_forward.w1", h)
                up = mm(p + "feed_forward.w3", h)
                x = x + mm(p + "feed_forward.w2", silu(gate) * up)

        x = norm(x, "norm")
        result.logits.append(mm(classifier, x))
        result.scores.append(pos_scores)
        result.weights.append(pos_weights)
        result.outputs.append(pos_outputs)
        result.queries.append(pos_queries)
    result.keys = keys
    return result


def nll(logits, target):
    """-log softmax(logits)[target]"""
    m = np.max(logits)
    return m + np.log(np.sum(np.exp(logits - m))) - logits[target]


def mean_nll(config, tensors, tokens, window=None, sinks=0, recompute=False, quantized=(), kv_type="f32"):
    """Mean -log p(tokens[p+1]) over p = 0..n-2: the engine's -m ppl with
    --window and --sinks (one stream through the cache) or --recompute (each
    p past the window from scratch over tokens[:sinks] + the window - sinks
    tokens up to p, at positions 0..window-1)."""
    n = len(tokens)
    stream = forward(config, tensors, tokens[:-1], quantized, window, sinks, kv_type)
    total = 0.0
    for p in range(n - 1):
        if recompute and p + 1 > window:
            view = tokens[:sinks] + tokens[p + 1 - (window - sinks):p + 1]
            logits = forward(config, tensors, view, quantized, kv_type=kv_type).logits[-1]
        else:
            logits = stream.logits[p]
        total += nll(logits, tokens[p + 1])
    return total / (n - 1)


def _fmt(values):
    return " ".join("%.9g" % v for v in values)


def golden_text(name, config, tokens, positions, result, comments=()):
    """The golden file (see the module docstring) as a string."""
    lines = ["# " + c for c in comments]
    lines.append("model %s" % name)
    lines.append("config dim %d hidden_dim %d n_layers %d n_heads %d n_kv_heads %d head_size %d "
                 "vocab_size %d seq_len %d" % (config["dim"], config["hidden_dim"], config["n_layers"],
                                               config["n_heads"], config["n_kv_heads"], config["head_size"],
                                               config["vocab_size"], config["seq_len"]))
    lines.append("tokens %d %s" % (len(tokens), " ".join(str(t) for t in tokens)))
    for pos in positions:
        lines.append("logits %d %s" % (pos, _fmt(result.logits[pos])))
    for pos in positions:
        for layer in range(config["n_layers"]):
            for head in range(config["n_heads"]):
                lines.append("scores %d %d %d %s" % (pos, layer, head, _fmt(result.scores[pos][layer][head])))
    for pos in positions:
        for layer in range(config["n_layers"]):
            for head in range(config["n_heads"]):
                lines.append("weights %d %d %d %s" % (pos, layer, head, _fmt(result.weights[pos][layer][head])))
    return "\n".join(lines) + "\n"


def _int_list(s):
    return [int(v) for v in s.split(",") if v.strip() != ""]


def main(argv=None):
    ap = argparse.ArgumentParser(description="NumPy float64 reference forward; prints a golden file.")
    ap.add_argument("model", help="checkpoint: qkv, llama2.c legacy or version 1")
    ap.add_argument("-z", dest="tokenizer", help="tokenizer.bin (only read, not needed for logits)")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids, run at positions 0, 1, ...")
    ap.add_argument("--positions", help="comma-separated positions to print (default: all)")
    ap.add_argument("--name", help="model name for the 'model' line (default: file name up to the first dot)")
    ap.add_argument("--comment", action="append", default=[], help="a '# ' comment line at the top (repeatable)")
    ap.add_argument("--quantized-activations", action="store_true",
                    help="quantize the input of each Q8_0/Q4_0 matrix to int8 per block of 32, as the engine")
    ap.add_argument("--window", type=int, help="StreamingLLM's cache of W positions (see forward)")
    ap.add_argument("--sinks", type=int, default=0, help="with --window: positions kept from the start")
    ap.add_argument("--ppl", action="store_true",
                    help="print 'nats/token X', the mean loss of predicting each token from those before")
    ap.add_argument("--recompute", action="store_true", help="with --ppl --window: each window from scratch")
    ap.add_argument("--kv-type", choices=KV_TYPES, default="f32",
                    help="the KV cache's rows as the engine stores them (kv_stored; without --window)")
    args = ap.parse_args(argv)
    if args.window is not None and args.kv_type != "f32":
        ap.error("--kv-type %s with --window is not modelled" % args.kv_type)
    if args.window is None and args.sinks:
        ap.error("--sinks needs --window")
    if args.window is not None and not 0 <= args.sinks < args.window:  # the engine's rule
        ap.error("--window %d --sinks %d: the window must be at least 1 and hold more than the sinks"
                 % (args.window, args.sinks))

    config, tensors, _ = qkvfile.read_model(args.model, args.tokenizer)
    if args.window is not None and config.get("arch", qkvfile.ARCH_LLAMA) == qkvfile.ARCH_GPT2:
        ap.error("--window: a GPT-2 model's learned positions end at its context (the engine refuses it too)")
    if args.window is not None and args.window > config["seq_len"]:
        ap.error("--window %d is beyond the model's context of %d" % (args.window, config["seq_len"]))
    tokens = _int_list(args.tokens)
    if not tokens:
        ap.error("--tokens is empty")
    positions = _int_list(args.positions) if args.positions else list(range(len(tokens)))
    for pos in positions:
        if not 0 <= pos < len(tokens):
            ap.error("position %d outside 0..%d" % (pos, len(tokens) - 1))
    name = args.name or os.path.basename(args.model).split(".")[0]
    quantized = quantized_matrices(qkvfile.read_tensor_types(args.model)) if args.quantized_activations else ()
    if args.ppl:
        print("nats/token %.9g" % mean_nll(config, tensors, tokens, args.window, args.sinks, args.recompute, quantized,
                                           args.kv_type))
        return
    result = forward(config, tensors, tokens, quantized, args.window, args.sinks, args.kv_type)
    sys.stdout.write(golden_text(name, config, tokens, positions, result, args.comment))


if __name__ == "__main__":
    cli.run(main)
