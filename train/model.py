"""Qwen3-MoE-shaped decoder in PyTorch, numerically the same graph as llama.cpp's `qwen3moe`.

Per layer (x: [B, T, d] f32):
  h = x + Wo · attn(rope(qnorm(Wq·rms(x))), rope(knorm(Wk·rms(x))), Wv·rms(x))   causal, GQA, scale 1/sqrt(hd)
  y = h + Σ_{e in top-k} w_e · down_e(silu(gate_e·rms(h)) * up_e·rms(h))
      w = softmax(router·rms(h)) over all experts, keep top-k, renormalise to sum 1
RMSNorm: x / sqrt(mean(x²) + eps) * weight. RoPE is NEOX style (llama.cpp LLAMA_ROPE_TYPE_NEOX): dim i
pairs with i + hd/2, angle pos * base^(-2i/hd). Parameter layouts are chosen so export is a plain
transpose-free dump: nn.Linear weights [out, in] = ggml ne {in, out}; expert banks gate/up [E, ff, d]
(ggml {d, ff, E}), down [E, d, ff] (ggml {ff, d, E}).
"""
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Config:
    vocab_size: int = 4096
    n_layer: int = 6
    d_model: int = 256
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_expert: int = 16
    n_expert_used: int = 2
    d_ff_expert: int = 384
    ctx: int = 512
    rope_base: float = 10000.0
    rms_eps: float = 1e-6
    aux_loss_coef: float = 0.01


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(ctx, head_dim, base, device=None):
    """cos/sin [ctx, head_dim/2] for NEOX RoPE."""
    inv = base ** (-torch.arange(0, head_dim // 2, dtype=torch.float64, device=device) * 2.0 / head_dim)
    ang = torch.arange(ctx, dtype=torch.float64, device=device)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope_neox(x, cos, sin):
    """x: [B, H, T, hd]; cos/sin: [T, hd/2]. Rotates pairs (i, i + hd/2)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.wq = nn.Linear(c.d_model, c.n_head * c.head_dim, bias=False)
        self.wk = nn.Linear(c.d_model, c.n_head_kv * c.head_dim, bias=False)
        self.wv = nn.Linear(c.d_model, c.n_head_kv * c.head_dim, bias=False)
        self.wo = nn.Linear(c.n_head * c.head_dim, c.d_model, bias=False)
        self.q_norm = RMSNorm(c.head_dim, c.rms_eps)
        self.k_norm = RMSNorm(c.head_dim, c.rms_eps)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        c = self.c
        q = self.q_norm(self.wq(x).view(B, T, c.n_head, c.head_dim)).transpose(1, 2)
        k = self.k_norm(self.wk(x).view(B, T, c.n_head_kv, c.head_dim)).transpose(1, 2)
        v = self.wv(x).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        q, k = apply_rope_neox(q, cos, sin), apply_rope_neox(k, cos, sin)
        rep = c.n_head // c.n_head_kv  # query head h reads kv head h // rep (llama.cpp broadcast)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        # Scores and softmax in f32 even under bf16 autocast (training); the matmuls may be bf16.
        att = (q @ k.transpose(-1, -2)).float() * (1.0 / math.sqrt(c.head_dim)) + mask
        out = torch.softmax(att, dim=-1).to(v.dtype) @ v  # [B, H, T, hd]
        return self.wo(out.transpose(1, 2).reshape(B, T, c.n_head * c.head_dim))


class MoE(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.router = nn.Linear(c.d_model, c.n_expert, bias=False)
        s = 0.02
        self.gate = nn.Parameter(torch.randn(c.n_expert, c.d_ff_expert, c.d_model) * s)  # [E, ff, d]
        self.up = nn.Parameter(torch.randn(c.n_expert, c.d_ff_expert, c.d_model) * s)  # [E, ff, d]
        self.down = nn.Parameter(torch.randn(c.n_expert, c.d_model, c.d_ff_expert) * s)  # [E, d, ff]

    def forward(self, x):
        """x: [N, d] -> (y [N, d], aux loss scalar, expert ids [N, k])."""
        c = self.c
        with torch.autocast("cpu", enabled=False):  # routing decisions in f32, as in inference
            probs = torch.softmax(F.linear(x.float(), self.router.weight.float()), dim=-1)  # [N, E]
        w, ids = torch.topk(probs, c.n_expert_used, dim=-1)  # [N, k]
        w = w / w.sum(-1, keepdim=True)
        # Group the N*k (token, expert) assignments by expert with one gather, run each expert on its
        # contiguous slice, scatter back once: cheap forward and backward (no per-expert [N, d] zeros).
        flat_ids = ids.reshape(-1)
        order = torch.argsort(flat_ids, stable=True)
        tok = torch.div(order, c.n_expert_used, rounding_mode="floor")  # token of each sorted assignment
        counts = torch.bincount(flat_ids, minlength=c.n_expert)
        xs = x[tok]  # [N*k, d]
        outs = []
        # unbind (not self.gate[e]): indexing a parameter per expert makes autograd add 16 full-size
        # zero-padded gradients per bank; unbind's backward stacks the slices once.
        gate, up, down = self.gate.unbind(0), self.up.unbind(0), self.down.unbind(0)
        for e, xe in enumerate(xs.split(counts.tolist())):
            if xe.shape[0] == 0:
                continue
            he = F.silu(xe @ gate[e].t()) * (xe @ up[e].t())
            outs.append(he @ down[e].t())
        ys = torch.cat(outs).float() * w.reshape(-1)[order, None]
        y = torch.zeros_like(x, dtype=torch.float32).index_add(0, tok, ys)
        # Switch-style balance loss: E * Σ_e (fraction of assignments to e) * (mean router prob of e).
        frac = counts.float() / flat_ids.numel()
        aux = c.n_expert * (frac * probs.mean(0)).sum()
        return y, aux, ids


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.attn_norm = RMSNorm(c.d_model, c.rms_eps)
        self.attn = Attention(c)
        self.ffn_norm = RMSNorm(c.d_model, c.rms_eps)
        self.moe = MoE(c)

    def forward(self, x, cos, sin, mask):
        h = x + self.attn(self.attn_norm(x), cos, sin, mask).float()  # residual stream stays f32
        B, T, d = h.shape
        y, aux, ids = self.moe(self.ffn_norm(h).reshape(B * T, d))
        return h.float() + y.view(B, T, d), aux, ids


class MoETransformer(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.blocks = nn.ModuleList([Block(c) for _ in range(c.n_layer)])
        self.out_norm = RMSNorm(c.d_model, c.rms_eps)
        self.output = nn.Linear(c.d_model, c.vocab_size, bias=False)
        for name, p in self.named_parameters():
            if p.dim() >= 2 and "moe.gate" not in name and "moe.up" not in name and "moe.down" not in name:
                nn.init.normal_(p, std=0.02)
        scale = 0.02 / math.sqrt(2 * c.n_layer)  # residual-branch outputs start small (GPT-2 style)
        for b in self.blocks:
            nn.init.normal_(b.attn.wo.weight, std=scale)
            nn.init.normal_(b.moe.down, std=scale)
        cos, sin = rope_tables(c.ctx, c.head_dim, c.rope_base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens, return_routing=False):
        """tokens: [B, T] int64 (T <= ctx) -> logits [B, T, vocab] f32, aux loss, routing [n_layer][B*T, k]."""
        B, T = tokens.shape
        if T > self.c.ctx:
            raise ValueError(f"sequence of {T} tokens exceeds the model context {self.c.ctx}")
        mask = torch.full((T, T), float("-inf"), device=tokens.device).triu(1)
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.tok_emb(tokens)
        aux_total, routing = 0.0, []
        for b in self.blocks:
            x, aux, ids = b(x, cos, sin, mask)
            aux_total = aux_total + aux
            if return_routing:
                routing.append(ids)
        logits = self.output(self.out_norm(x))
        return logits, aux_total / len(self.blocks), routing

    def param_counts(self):
        total = sum(p.numel() for p in self.parameters())
        c = self.c
        per_expert = 3 * c.d_model * c.d_ff_expert
        active = total - c.n_layer * (c.n_expert - c.n_expert_used) * per_expert
        return total, active
