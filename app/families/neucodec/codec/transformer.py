"""Transformer block of the NeuCodec backbone: RMSNorm, head-indexed rotary, attention, MLP."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from app.families.neucodec.codec.packed import Spans

NORM_EPS = 1e-6
ROPE_BASE = 10_000.0


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last dim. Shape: ``[..., dim]`` -> same."""

    def __init__(self, dim: int, eps: float = NORM_EPS) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class HeadIndexedRotary(nn.Module):
    """Rotary embedding whose angle depends on the attention head, not on the time step.

    The published model applies a rotary module that expects ``[b, seq, heads, d]`` to q and k laid
    out as ``[b, heads, t, d]``, so the "position" it sees is the head index. For head ``h`` and
    interleaved pair ``(x[2i], x[2i+1])`` the pair is rotated by ``h * theta_i`` with
    ``theta_i = 10000 ** (-2i / d)``, the same angle at every time step. Because q and k of one head
    get the same rotation, ``q.k`` is unchanged in exact arithmetic: attention carries no position
    information (the convolutions around it do). We still apply it, in float32 as the original does,
    so that our float results follow the checkpoint's; it costs two multiplies per element.

    Input and output: ``[B, H, T, D]``.
    """

    def __init__(self, heads: int, head_dim: int, base: float = ROPE_BASE) -> None:
        super().__init__()
        theta = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))  # [D/2]
        angles = torch.outer(torch.arange(heads).float(), theta)  # [H, D/2]
        self.register_buffer("cos", angles.cos()[:, None, :], persistent=False)  # [H, 1, D/2]
        self.register_buffer("sin", angles.sin()[:, None, :], persistent=False)  # [H, 1, D/2]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pairs = x.float().unflatten(-1, (-1, 2))  # [B, H, T, D/2, 2]
        even, odd = pairs[..., 0], pairs[..., 1]
        rotated = torch.stack(
            (even * self.cos - odd * self.sin, odd * self.cos + even * self.sin), dim=-1
        )  # [B, H, T, D/2, 2]
        return rotated.flatten(-2).type_as(x)


class Attention(nn.Module):
    """Non-causal multi-head self-attention without biases. ``[B, T, C]`` -> ``[B, T, C]``.

    ``float32_attention`` (off by default) computes ``softmax(q kᵀ / √d) v`` in float32 on q, k, v of
    the weights' dtype and rounds the output back: the precision tool's attention A/B.
    """

    float32_attention = False

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(dim, 3 * dim, bias=False)
        self.c_proj = nn.Linear(dim, dim, bias=False)
        self.rotary = HeadIndexedRotary(heads, dim // heads)

    def forward(self, x: torch.Tensor, spans: Spans | None = None) -> torch.Tensor:
        """``spans``: packed windows (``app.families.neucodec.codec.packed``), each attending to itself."""
        batch, time, dim = x.shape
        qkv = self.c_attn(x).view(batch, time, 3, self.heads, dim // self.heads)  # [B, T, 3, H, D]
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each [B, H, T, D]
        q, k = self.rotary(q), self.rotary(k)
        if self.float32_attention:
            q, k, v = q.float(), k.float(), v.float()
        attend = F.scaled_dot_product_attention if spans is None else spans.attend
        y = attend(q, k, v).to(x.dtype)  # [B, H, T, D]
        y = y.transpose(1, 2).reshape(batch, time, dim)  # [B, H, T, D] -> [B, T, H*D]
        return self.c_proj(y)


class MLP(nn.Module):
    """``fc2(silu(fc1(x)))`` with a 4x hidden width, no biases. ``[..., C]`` -> ``[..., C]``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim, bias=False)
        self.fc2 = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.silu(self.fc1(x)))


class TransformerBlock(nn.Module):
    """Pre-norm block: ``x + att(att_norm(x))`` then ``x + mlp(ffn_norm(x))``. ``[B, T, C]`` -> same."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.att_norm = RMSNorm(dim)
        self.ffn_norm = RMSNorm(dim)
        self.att = Attention(dim, heads)
        self.mlp = MLP(dim)

    def forward(self, x: torch.Tensor, spans: Spans | None = None) -> torch.Tensor:
        x = x + self.att(self.att_norm(x), spans)
        return x + self.mlp(self.ffn_norm(x))
