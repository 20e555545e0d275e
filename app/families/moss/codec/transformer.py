"""The codec's causal transformer stages and patch reshapes, on a packed time-major layout.

Every stage works on ``x [N, C]``: the positions of several sequences (streams) one after another,
``segments`` giving each one's length and, when streaming, its cache. Everything but attention is
row-wise, so it runs on all rows at once (the batch across streams); attention runs per sequence.

Attention (per layer): pre-norm, fused ``in_projs.0`` [q | k | v] (head-major), interleaved-pair RoPE
(angle = position x 10000^(-2i/head_dim), fp32), scaled dot-product attention over the exact causal
window ``0 <= q_pos - k_pos < context``, ``out_projs.0``, per-channel layer scales, then an exact-GELU MLP.

Streaming keeps, per stage and sequence, a ring of ``capacity = context + max_step - 1`` key/value slots
(``StageCache``): a call of at most ``max_step`` new positions writes them and still finds every key its
earliest query may see. So a streamed sequence sees exactly the keys the one-shot window sees, at any
length: streamed and one-shot decodes agree everywhere, also past the context (unlike the upstream ring of
``context`` slots, which drops up to ``step - 1`` keys of a chunk's earliest queries once it has wrapped).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from app.families.moss.codec.config import TransformerStage


@dataclass
class StageCache:
    """One sequence's keys/values of one transformer stage: ``kv [layers, 2, heads, capacity, head_dim]``
    (ring slot = position mod capacity) and ``offset``, the number of positions seen so far."""

    kv: torch.Tensor
    offset: int = 0

    @property
    def capacity(self) -> int:
        return self.kv.shape[3]


@dataclass
class Segment:
    """One sequence in a packed batch: its ``length`` in positions and its cache (None: one-shot from 0)."""

    length: int
    cache: StageCache | None = None


@dataclass
class _Plan:
    """How one sequence attends in this stage call (the same for every layer)."""

    start: int
    length: int
    cache: StageCache | None
    slots: torch.Tensor | None  # streaming: ring slots written, [length]
    keys: int  # streaming: slots read, [0, keys)
    blocks: list[tuple[int, int, int, torch.Tensor]]  # (q0, q1, k0, mask [q1-q0, k1-k0]); streaming: one


def _window_mask(q_pos: torch.Tensor, k_pos: torch.Tensor, context: int) -> torch.Tensor:
    """``[Tq, Tk]`` True where the key is visible: ``0 <= q - k < context``."""
    delta = q_pos[:, None] - k_pos[None, :]
    return (delta >= 0) & (delta < context)


def plan_attention(segments: list[Segment], context: int, device: torch.device) -> list[_Plan]:
    """Slots, key ranges and masks of each segment for one call of a stage."""
    plans, start = [], 0
    for seg in segments:
        t = seg.length
        if seg.cache is None:  # one-shot: query blocks of `context`, keys from the window's start
            blocks = []
            for q0 in range(0, t, max(context, 1)):
                q1 = min(t, q0 + context)
                k0 = max(0, q0 - context + 1)
                q_pos = torch.arange(q0, q1, device=device)
                mask = _window_mask(q_pos, torch.arange(k0, q1, device=device), context)
                blocks.append((q0, q1, k0, mask))
            plans.append(_Plan(start, t, None, None, 0, blocks))
        else:
            cache, o = seg.cache, seg.cache.offset
            capacity = cache.capacity
            if t > capacity - context + 1:
                raise ValueError(
                    f"a step of {t} positions exceeds the ring ({capacity} slots, context {context})"
                )
            last = o + t - 1
            slots = torch.arange(o, o + t, device=device) % capacity
            s = torch.arange(min(last + 1, capacity), device=device)
            k_pos = s if last < capacity else last - torch.remainder(last - s, capacity)
            mask = _window_mask(torch.arange(o, o + t, device=device), k_pos, context)
            plans.append(_Plan(start, t, cache, slots, s.shape[0], [(0, t, 0, mask)]))
        start += t
    return plans


def rope_tables(
    positions: torch.Tensor, head_dim: int, max_period: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin ``[N, 1, head_dim/2]`` (fp32) of the absolute ``positions [N]``: pair i turns at
    ``max_period^(-2i/head_dim)`` radians a position."""
    ds = torch.arange(head_dim // 2, device=positions.device, dtype=torch.float32)
    freqs = torch.exp(ds * (-math.log(max_period) * 2 / head_dim))
    angles = positions.float()[:, None] * freqs
    return torch.cos(angles)[:, None], torch.sin(angles)[:, None]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs (2i, 2i+1) of ``x [N, H, D]`` (not rotate-half), in fp32."""
    n, h, d = x.shape
    pairs = x.view(n, h, d // 2, 2)
    re, im = pairs[..., 0].float(), pairs[..., 1].float()
    out = torch.stack([re * cos - im * sin, re * sin + im * cos], dim=-1)
    return out.to(x.dtype).view(n, h, d)


class LayerScale(nn.Module):
    """Per-channel scale (key ``scale``)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.empty(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


class Attention(nn.Module):
    """Multi-head self-attention; official keys ``in_projs.0`` (3d x d) and ``out_projs.0`` (d x d)."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.in_projs = nn.ModuleList([nn.Linear(d_model, 3 * d_model, bias=False)])
        self.out_projs = nn.ModuleList([nn.Linear(d_model, d_model, bias=False)])

    def forward(
        self, x: torch.Tensor, plans: list[_Plan], layer: int, rope: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        """``x [N, d]`` (normed) -> ``[N, d]``; writes this layer's keys/values into streaming caches."""
        n = x.shape[0]
        qkv = self.in_projs[0](x).view(n, 3, self.num_heads, self.head_dim)
        q = apply_rope(qkv[:, 0], *rope)
        k = apply_rope(qkv[:, 1], *rope)
        v = qkv[:, 2]
        out = torch.empty_like(q)  # [N, H, D]
        for plan in plans:
            rows = slice(plan.start, plan.start + plan.length)
            qs, ks, vs = (t[rows].transpose(0, 1) for t in (q, k, v))  # [H, T, D]
            if plan.cache is not None and plan.slots is not None:  # streaming: slots come with the cache
                ring = plan.cache.kv[layer]  # [2, H, capacity, D]
                ring[0].index_copy_(1, plan.slots, ks.to(ring.dtype))
                ring[1].index_copy_(1, plan.slots, vs.to(ring.dtype))
                ks, vs = ring[0, :, : plan.keys], ring[1, :, : plan.keys]
                mask = plan.blocks[0][3]
                out[rows] = F.scaled_dot_product_attention(qs[None], ks[None], vs[None], mask)[0].transpose(
                    0, 1
                )
                continue
            for q0, q1, k0, mask in plan.blocks:
                attended = F.scaled_dot_product_attention(
                    qs[None, :, q0:q1], ks[None, :, k0:q1], vs[None, :, k0:q1], mask
                )
                out[plan.start + q0 : plan.start + q1] = attended[0].transpose(0, 1)
        return self.out_projs[0](out.reshape(n, -1))


class TransformerLayer(nn.Module):
    """Pre-norm block: ``x += ls1 * attn(norm1(x))``; ``x += ls2 * linear2(gelu(linear1(norm2(x))))``."""

    def __init__(self, stage: TransformerStage) -> None:
        super().__init__()
        d = stage.d_model
        self.self_attn = Attention(d, stage.num_heads)
        self.norm1 = nn.LayerNorm(d, eps=1e-5)
        self.norm2 = nn.LayerNorm(d, eps=1e-5)
        self.linear1 = nn.Linear(d, stage.dim_feedforward, bias=False)
        self.linear2 = nn.Linear(stage.dim_feedforward, d, bias=False)
        self.layer_scale_1 = LayerScale(d)
        self.layer_scale_2 = LayerScale(d)

    def forward(
        self, x: torch.Tensor, plans: list[_Plan], layer: int, rope: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        x = x + self.layer_scale_1(self.self_attn(self.norm1(x), plans, layer, rope))
        return x + self.layer_scale_2(self.linear2(F.gelu(self.linear1(self.norm2(x)))))


class Transformer(nn.Module):
    """The layer stack (key ``layers.{i}``); no final norm, no additive position embedding."""

    def __init__(self, stage: TransformerStage) -> None:
        super().__init__()
        self.layers = nn.ModuleList([TransformerLayer(stage) for _ in range(stage.num_layers)])


class ProjectedTransformer(nn.Module):
    """``[N, input_dim]`` -> ``input_proj`` -> transformer -> ``output_proj`` -> ``[N, output_dim]``
    (each projection a bias-free Linear, or Identity where the width already equals ``d_model``)."""

    def __init__(self, stage: TransformerStage) -> None:
        super().__init__()
        self.stage = stage
        d = stage.d_model
        self.input_proj = nn.Linear(stage.input_dim, d, bias=False) if stage.input_dim != d else nn.Identity()
        self.transformer = Transformer(stage)
        self.output_proj = (
            nn.Linear(d, stage.output_dim, bias=False) if stage.output_dim != d else nn.Identity()
        )

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def new_cache(self, max_step: int, device: torch.device, dtype: torch.dtype) -> StageCache:
        """An empty cache for a sequence that adds at most ``max_step`` positions a call."""
        s = self.stage
        shape = (s.num_layers, 2, s.num_heads, s.context + max_step - 1, s.head_dim)
        return StageCache(torch.zeros(shape, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor, segments: list[Segment]) -> torch.Tensor:
        s = self.stage
        plans = plan_attention(segments, s.context, x.device)
        positions = torch.cat(
            [
                torch.arange(p.length, device=x.device) + (p.cache.offset if p.cache is not None else 0)
                for p in plans
            ]
        )
        rope = rope_tables(positions, s.head_dim, s.max_period)
        h = self.input_proj(x)
        for i, layer in enumerate(self.transformer.layers):
            h = layer(h, plans, i, rope)
        for seg in segments:
            if seg.cache is not None:
                seg.cache.offset += seg.length
        return self.output_proj(h)


class Patch(nn.Module):
    """Time <-> channel reshape of each sequence (no weights).

    Down (encoder): ``[N*h, C] -> [N, C*h]`` with ``out[n, c*h + j] = in[n*h + j, c]``.
    Up (decoder): ``[N, C*h] -> [N*h, C]``, the inverse. Segment lengths divide / multiply by ``h``.
    """

    def __init__(self, patch_size: int, down: bool) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.down = down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.patch_size
        if self.down:
            n, c = x.shape[0] // h, x.shape[1]
            return x.reshape(n, h, c).transpose(1, 2).reshape(n, c * h)
        n, c = x.shape[0], x.shape[1] // h
        return x.reshape(n, c, h).transpose(1, 2).reshape(n * h, c)
