"""PyTorch model with exactly the qkv engine's forward pass (README: How it works).

Parameter names follow llama2.c's model.py (tok_embeddings.weight,
layers.N.attention.wq.weight, ..., norm.weight, output.weight), so a
state_dict maps 1:1 onto the qkv tensor table (names without ".weight").
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelArgs:
    dim: int = 288
    hidden_dim: int = 768
    n_layers: int = 6
    n_heads: int = 6
    n_kv_heads: int = 6
    head_size: int = 0          # 0: dim // n_heads
    vocab_size: int = 4096
    seq_len: int = 256
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    shared_classifier: bool = True
    bos_id: int = 1
    eos_id: int = 2

    def __post_init__(self):
        if not self.head_size:
            self.head_size = self.dim // self.n_heads
        assert self.head_size % 2 == 0
        assert self.n_heads % self.n_kv_heads == 0

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope_tables(head_size, seq_len, theta, dtype=torch.float32):
    # freq_i = theta^(-2i/head_size) for pairs (2i, 2i+1); angle = pos * freq_i
    i = torch.arange(0, head_size // 2, dtype=torch.float64)
    freq = theta ** (-2.0 * i / head_size)
    pos = torch.arange(seq_len, dtype=torch.float64)
    ang = torch.outer(pos, freq)
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def apply_rope(x, cos, sin):
    # x: (B, T, H, S); rotate adjacent pairs (a, b) -> (a cos - b sin, a sin + b cos)
    a = x[..., 0::2]
    b = x[..., 1::2]
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)


def causal_attention(q, k, v, mask, return_att):
    """q, k, v: (B, T, H, S), one key/value head per query head -> (B, T, H*S), weights (B, H, T, T) or None."""
    B, T, H, S = q.shape
    q, k, v = (t.transpose(1, 2).reshape(B * H, T, S) for t in (q, k, v))
    # scores = q.k / sqrt(head_size) + causal mask, fused into one baddbmm
    att = torch.baddbmm(mask[:T, :T].unsqueeze(0), q, k.transpose(1, 2), alpha=1.0 / math.sqrt(S))
    att = torch.softmax(att, dim=-1)
    out = torch.bmm(att, v).view(B, H, T, S).transpose(1, 2).reshape(B, T, H * S)
    return out, (att.view(B, H, T, T) if return_att else None)


class Attention(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        self.a = a
        self.wq = nn.Linear(a.dim, a.n_heads * a.head_size, bias=False)
        self.wk = nn.Linear(a.dim, a.n_kv_heads * a.head_size, bias=False)
        self.wv = nn.Linear(a.dim, a.n_kv_heads * a.head_size, bias=False)
        self.wo = nn.Linear(a.n_heads * a.head_size, a.dim, bias=False)

    def forward(self, x, cos, sin, mask, return_att=False):
        a = self.a
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, a.n_heads, a.head_size)
        k = self.wk(x).view(B, T, a.n_kv_heads, a.head_size)
        v = self.wv(x).view(B, T, a.n_kv_heads, a.head_size)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        rep = a.n_heads // a.n_kv_heads
        if rep > 1:  # query head h uses kv head h // rep
            k = k.repeat_interleave(rep, dim=2)
            v = v.repeat_interleave(rep, dim=2)
        out, att = causal_attention(q, k, v, mask, return_att)
        return self.wo(out), att


class FeedForward(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        self.w1 = nn.Linear(a.dim, a.hidden_dim, bias=False)
        self.w2 = nn.Linear(a.hidden_dim, a.dim, bias=False)
        self.w3 = nn.Linear(a.dim, a.hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        self.attention_norm = RMSNorm(a.dim, a.norm_eps)
        self.attention = Attention(a)
        self.ffn_norm = RMSNorm(a.dim, a.norm_eps)
        self.feed_forward = FeedForward(a)
        self.dropout = 0.0  # training only: dropout on each branch before it joins the residual

    def forward(self, x, cos, sin, mask, return_att=False):
        h, att = self.attention(self.attention_norm(x), cos, sin, mask, return_att)
        x = x + F.dropout(h, self.dropout, self.training)
        x = x + F.dropout(self.feed_forward(self.ffn_norm(x)), self.dropout, self.training)
        return x, att


class Transformer(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        self.args = a
        self.tok_embeddings = nn.Embedding(a.vocab_size, a.dim)
        self.layers = nn.ModuleList(Block(a) for _ in range(a.n_layers))
        self.norm = RMSNorm(a.dim, a.norm_eps)
        self.output = nn.Linear(a.dim, a.vocab_size, bias=False)
        if a.shared_classifier:
            self.output.weight = self.tok_embeddings.weight
        cos, sin = rope_tables(a.head_size, a.seq_len, a.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        mask = torch.full((a.seq_len, a.seq_len), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def init_weights(self, seed):
        g = torch.Generator().manual_seed(seed)
        std = 0.02
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif name.endswith("wo.weight") or name.endswith("w2.weight"):
                with torch.no_grad():
                    p.normal_(0.0, std / math.sqrt(2 * self.args.n_layers), generator=g)
            else:
                with torch.no_grad():
                    p.normal_(0.0, std, generator=g)

    def forward(self, tokens, targets=None, return_att=False):
        B, T = tokens.shape
        assert T <= self.args.seq_len
        x = self.tok_embeddings(tokens)
        cos = self.rope_cos[:T].to(x.dtype)
        sin = self.rope_sin[:T].to(x.dtype)
        mask = self.mask.to(x.dtype)
        atts = []
        for layer in self.layers:
            x, att = layer(x, cos, sin, mask, return_att)
            atts.append(att)
        return finish(self.output(self.norm(x)), targets, atts, return_att)

    def set_dropout(self, p):
        for layer in self.layers:
            layer.dropout = p

    def n_params(self):
        return sum(p.numel() for p in self.parameters())  # shared weight counted once


# ---------------------------------------------------------------------------
# GPT-2 / nanoGPT: learned position embedding, LayerNorm with bias, GELU MLP,
# a bias on every linear layer, tied classifier.  Parameter names and
# model_args are nanoGPT's (model.py: GPTConfig, GPT), so a checkpoint saved
# by train.py is a nanoGPT ckpt.pt and export.py reads it the same way.

@dataclass
class GPTConfig:
    block_size: int = 256
    vocab_size: int = 65
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True

    def to_dict(self):
        return asdict(self)


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (nanoGPT's; torch 1.13's nn.LayerNorm always has one)."""

    def __init__(self, dim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class GPTAttention(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.n_head = c.n_head
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)   # q, k, v stacked: [3 dim, dim]
        self.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=c.bias)

    def forward(self, x, mask, return_att=False):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head) for t in self.c_attn(x).split(C, dim=2))
        out, att = causal_attention(q, k, v, mask, return_att)
        return self.c_proj(out), att


class GPTMLP(nn.Module):
    def __init__(self, c: GPTConfig, gelu="none"):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
        self.gelu = nn.GELU(approximate=gelu)   # "none": exact erf GELU (nanoGPT); "tanh": HF GPT-2
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class GPTBlock(nn.Module):
    def __init__(self, c: GPTConfig, gelu="none"):
        super().__init__()
        self.ln_1 = LayerNorm(c.n_embd, c.bias)
        self.attn = GPTAttention(c)
        self.ln_2 = LayerNorm(c.n_embd, c.bias)
        self.mlp = GPTMLP(c, gelu)

    def forward(self, x, mask, return_att=False):
        h, att = self.attn(self.ln_1(x), mask, return_att)
        x = x + h
        x = x + self.mlp(self.ln_2(x))
        return x, att


class GPT(nn.Module):
    def __init__(self, c: GPTConfig, gelu="none"):
        super().__init__()
        self.args = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd),
            wpe=nn.Embedding(c.block_size, c.n_embd),
            h=nn.ModuleList(GPTBlock(c, gelu) for _ in range(c.n_layer)),
            ln_f=LayerNorm(c.n_embd, c.bias)))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight   # tied, as in nanoGPT and GPT-2
        mask = torch.full((c.block_size, c.block_size), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def init_weights(self, seed):
        """nanoGPT's init: N(0, 0.02), residual projections 0.02/sqrt(2 n_layer), biases 0, LayerNorm 1."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "ln_" in name:
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                elif name.endswith("bias"):
                    p.zero_()
                elif name.endswith("c_proj.weight"):
                    p.normal_(0.0, 0.02 / math.sqrt(2 * self.args.n_layer), generator=g)
                else:
                    p.normal_(0.0, 0.02, generator=g)

    def forward(self, tokens, targets=None, return_att=False):
        B, T = tokens.shape
        assert T <= self.args.block_size
        x = self.transformer.wte(tokens) + self.transformer.wpe(torch.arange(T))
        atts = []
        for block in self.transformer.h:
            x, att = block(x, self.mask, return_att)
            atts.append(att)
        return finish(self.lm_head(self.transformer.ln_f(x)), targets, atts, return_att)

    def n_params(self):
        return sum(p.numel() for p in self.parameters())


def finish(logits, targets, atts, return_att):
    """The tail both models share: the loss, and the attention weights when asked for."""
    loss = None
    if targets is not None:
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))
    if return_att:
        return logits, loss, atts
    return logits, loss


def qkv_state_dict(model):
    """name (README tensor name, no '.weight') -> float32 tensor."""
    out = {}
    for k, v in model.state_dict().items():
        name = k[:-len(".weight")] if k.endswith(".weight") else k
        if name == "output" and model.args.shared_classifier:
            continue
        out[name] = v.detach().float().contiguous()
    return out


def load_checkpoint(path, map_location="cpu"):
    ck = torch.load(path, map_location=map_location)
    args = ModelArgs(**ck["model_args"])
    model = Transformer(args)
    model.load_state_dict(ck["model"])
    return model, ck
