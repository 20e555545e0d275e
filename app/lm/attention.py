"""Float32 attention for a transformers LM whose other layers run in bf16 or fp16.

``FP32_SDPA`` ("sdpa_fp32") is an attention implementation registered with transformers: it upcasts
q, k, v (and a float mask) to float32, runs transformers' own SDPA attention on them, and rounds the
output back to the model's dtype. The projections, MLPs and norms keep the model's dtype; only
``softmax(q kᵀ / √d) v`` is computed in float32. This is the A/B an Ascend deployment needs: whether
the low-precision attention kernels cost the model its output distribution (``app.tools.precision``).
"""

from __future__ import annotations

from typing import Any

import torch

FP32_SDPA = "sdpa_fp32"


def _sdpa_fp32(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention on float32 copies of ``[B, H, T, D]`` q, k, v; output in q's dtype."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    dtype = query.dtype
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.float()
    out, weights = sdpa_attention_forward(
        module, query.float(), key.float(), value.float(), attention_mask, **kwargs
    )
    return out.to(dtype), weights


def register_fp32_attention() -> str:
    """Register ``FP32_SDPA`` (and SDPA's mask builder under that name) with transformers; idempotent.
    Returns the name to pass as ``attn_implementation``."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(FP32_SDPA, _sdpa_fp32)
    AttentionMaskInterface.register(FP32_SDPA, sdpa_mask)
    return FP32_SDPA


def attention_implementation(name: str) -> str:
    """The ``attn_implementation`` for a setting: "sdpa", "eager", or "sdpa_fp32" (registered here)."""
    if name == FP32_SDPA:
        return register_fp32_attention()
    if name not in {"sdpa", "eager"}:
        raise ValueError(f"unknown attention {name!r}: use sdpa, eager or {FP32_SDPA}")
    return name
