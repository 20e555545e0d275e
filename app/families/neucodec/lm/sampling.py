"""Choosing the next speech code of one generation, with vLLM's sampling semantics.

Repetition penalty over the ids seen so far (the prompt's included), then greedy below
``GREEDY_BELOW`` or temperature, top-k and top-p sampling from the row's own seeded generator.
"""

from __future__ import annotations

import torch

from app.families.neucodec.lm.types import GenerationParams

GREEDY_BELOW = 1e-5  # temperatures under this sample greedily (vLLM's _SAMPLING_EPS)


def apply_repetition_penalty(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """HF/vLLM repetition penalty: for ``seen`` ids divide positive logits and multiply negative ones."""
    penalized = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(seen, penalized, logits)


def choose_next(
    logits: torch.Tensor,
    seen: torch.Tensor,
    params: GenerationParams,
    generator: torch.Generator | None = None,
) -> int:
    """Pick the next index of ``logits`` (1-D, float): repetition penalty, then greedy or
    temperature / top-k / top-p sampling with vLLM's semantics (``top_k`` <= 0 and ``top_p`` 1 are off)."""
    if params.repetition_penalty != 1.0:
        logits = apply_repetition_penalty(logits, seen, params.repetition_penalty)
    if params.temperature < GREEDY_BELOW:
        return int(torch.argmax(logits))
    logits = logits / params.temperature
    if params.top_k is not None and 0 < params.top_k < logits.numel():
        kth = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if params.top_p is not None and params.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        outside = sorted_probs.cumsum(0) - sorted_probs >= params.top_p  # mass before it already >= top_p
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs.masked_fill(outside, 0.0))
    return int(torch.multinomial(probs, 1, generator=generator))
