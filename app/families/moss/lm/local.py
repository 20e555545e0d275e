"""The local transformer: 4 Qwen3-style layers that turn one backbone hidden state into a frame's 16 codes.

Sub-step ``i`` (0..15) feeds one vector per row at position ``i``: the backbone's last hidden state for
``i = 0``, else ``model.embed_tokens[i - 1]`` of the code chosen at ``i - 1``; ``local_lm_heads[i]`` of the
normed output gives codebook ``i``'s 1027 logits. The maths is Qwen3's (as upstream's local module):
RMSNorm computed in float32 and scaled in the input dtype, per-head RMSNorm of q and k before a
rotate-half RoPE (θ from the config, positions 0..15), GQA, SwiGLU, no biases, scale 1/√head_dim.

The keys and values live in a ``LocalCache`` of a FIXED 16 positions, allocated once for the most rows a
step can hold and reused by every frame: sub-step ``i`` writes slot ``i`` and attends to slots ``0..i``,
so a frame never reads a slot it has not written itself (that is the reset; nothing is cleared). Shapes
never change with the history, which is what a CUDA/NPU graph capture needs later. Parameter names are
upstream's (``model.embed_tokens.{0..14}``, ``model.layers.{0..3}.…``, ``model.norm``,
``local_lm_heads.{0..15}``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional

from app.families.moss.lm.config import LocalConfig
from app.families.moss.lm.types import AUDIO_PAD, AUDIO_VOCAB, CODEBOOKS

LOCAL_ATTENTION = ("sdpa", "eager", "sdpa_fp32")


class RMSNorm(nn.Module):
    """Qwen3's RMSNorm: normalised in float32, cast back, then scaled by ``weight``."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``[-x2, x1]`` for the halves ``x1, x2`` of the last axis."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@dataclass
class LocalCache:
    """Keys and values of every local layer: ``[layers, rows, kv_heads, 16, head_dim]`` each."""

    keys: torch.Tensor
    values: torch.Tensor


class LocalAttention(nn.Module):
    def __init__(self, config: LocalConfig) -> None:
        super().__init__()
        h, d = config.hidden_size, config.head_dim
        self.heads, self.kv_heads, self.head_dim = config.num_attention_heads, config.num_key_value_heads, d
        self.q_proj = nn.Linear(h, self.heads * d, bias=False)
        self.k_proj = nn.Linear(h, self.kv_heads * d, bias=False)
        self.v_proj = nn.Linear(h, self.kv_heads * d, bias=False)
        self.o_proj = nn.Linear(self.heads * d, h, bias=False)
        self.q_norm = RMSNorm(d, config.rms_norm_eps)
        self.k_norm = RMSNorm(d, config.rms_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        keys: torch.Tensor,
        values: torch.Tensor,
        slot: int,
        attention: str,
    ) -> torch.Tensor:
        """``x`` [B, H] at position ``slot``; ``keys``/``values`` [B, kv, 16, D] (slot written here)."""
        rows = x.shape[0]
        cos, sin = rope  # [D] each, the position's angles in x's dtype
        q = self.q_norm(self.q_proj(x).view(rows, self.heads, 1, self.head_dim))
        k = self.k_norm(self.k_proj(x).view(rows, self.kv_heads, 1, self.head_dim))
        v = self.v_proj(x).view(rows, self.kv_heads, 1, self.head_dim)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        keys[:, :, slot : slot + 1] = k
        values[:, :, slot : slot + 1] = v
        k_all, v_all = keys[:, :, : slot + 1], values[:, :, : slot + 1]
        if attention == "eager":
            groups = self.heads // self.kv_heads
            k_all = k_all.repeat_interleave(groups, dim=1)
            v_all = v_all.repeat_interleave(groups, dim=1)
            scores = torch.matmul(q, k_all.transpose(2, 3)) * self.head_dim**-0.5
            weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            out = torch.matmul(weights, v_all)
        else:
            dtype = q.dtype
            if attention == "sdpa_fp32":
                q, k_all, v_all = q.float(), k_all.float(), v_all.float()
            out = functional.scaled_dot_product_attention(q, k_all, v_all, enable_gqa=True).to(dtype)
        return self.o_proj(out.reshape(rows, self.heads * self.head_dim))


class LocalMLP(nn.Module):
    def __init__(self, config: LocalConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(functional.silu(self.gate_proj(x)) * self.up_proj(x))


class LocalLayer(nn.Module):
    def __init__(self, config: LocalConfig) -> None:
        super().__init__()
        self.self_attn = LocalAttention(config)
        self.mlp = LocalMLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class LocalModel(nn.Module):
    """Input tables for codebooks 0..14 (fed at sub-steps 1..15), the layers and the final norm."""

    def __init__(self, config: LocalConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.ModuleList(
            nn.Embedding(AUDIO_VOCAB, config.hidden_size, padding_idx=AUDIO_PAD) for _ in range(CODEBOOKS - 1)
        )
        self.layers = nn.ModuleList(LocalLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class LocalTransformer(nn.Module):
    """``model`` plus one head per codebook; ``step`` is one sub-step's forward (no sampling)."""

    def __init__(self, config: LocalConfig, attention: str = "sdpa") -> None:
        super().__init__()
        if attention not in LOCAL_ATTENTION:
            raise ValueError(
                f"unknown local attention {attention!r}: use one of {', '.join(LOCAL_ATTENTION)}"
            )
        self.config = config
        self.attention = attention
        self.model = LocalModel(config)
        self.local_lm_heads = nn.ModuleList(
            nn.Linear(config.hidden_size, AUDIO_VOCAB, bias=False) for _ in range(CODEBOOKS)
        )
        self._rope: dict[tuple[torch.device, torch.dtype], tuple[torch.Tensor, torch.Tensor]] = {}

    def new_cache(self, rows: int) -> LocalCache:
        """A cache for up to ``rows`` rows on the model's device, in its dtype."""
        weight = self.model.norm.weight
        c = self.config
        shape = (c.num_hidden_layers, rows, c.num_key_value_heads, CODEBOOKS, c.head_dim)
        return LocalCache(
            torch.zeros(shape, device=weight.device, dtype=weight.dtype),
            torch.zeros(shape, device=weight.device, dtype=weight.dtype),
        )

    def rope(self, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin ``[16, head_dim]`` for positions 0..15: angles in float32, cast to ``dtype``."""
        key = (device, dtype)
        if key not in self._rope:
            d = self.config.head_dim
            inv_freq = 1.0 / (self.config.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
            angles = torch.arange(CODEBOOKS, dtype=torch.float32)[:, None] * inv_freq[None, :]
            angles = torch.cat((angles, angles), dim=-1)
            self._rope[key] = (angles.cos().to(device, dtype), angles.sin().to(device, dtype))
        return self._rope[key]

    def embed(self, index: int, codes: torch.Tensor) -> torch.Tensor:
        """Sub-step ``index``'s (1..15) input: [B] codes of codebook ``index - 1`` -> [B, H]."""
        table: nn.Embedding = self.model.embed_tokens[index - 1]  # type: ignore[assignment]  # ModuleList
        return table(codes)

    def step(self, index: int, x: torch.Tensor, cache: LocalCache) -> torch.Tensor:
        """One sub-step for the first B cache rows: ``x`` [B, H] at position ``index`` -> logits [B, 1027]."""
        rows = x.shape[0]
        cos, sin = self.rope(x.device, x.dtype)
        rope = (cos[index], sin[index])
        for i, layer in enumerate(self.model.layers):
            assert isinstance(layer, LocalLayer)
            keys, values = cache.keys[i, :rows], cache.values[i, :rows]
            x = x + layer.self_attn(layer.input_layernorm(x), rope, keys, values, index, self.attention)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        head: nn.Linear = self.local_lm_heads[index]  # type: ignore[assignment]  # ModuleList
        return head(self.model.norm(x))
