"""Choosing one code of one codebook from its 1027 logits, in the order MOSS-TTS-Realtime expects.

Per codebook and frame (upstream ``streaming_mossttsrealtime.py``), on float32 logits:

0. mask what may never be chosen: pad (1024) and BOS (1025) on every head, EOS (1026) on heads 1..15
   (only codebook 0's EOS ends speech; upstream masks nothing and feeds a sampled pad or BOS back);
1. repetition penalty over the last ``window`` codes of this codebook in this turn, each distinct code
   once: positive logits divided by the penalty, negative ones multiplied (none on frame 0: no history);
2. greedy (argmax) when the temperature is 0;
3. divide by the temperature;
4. top-k: drop logits below the k-th largest (ties with it are kept); ``top_k <= 0`` is off;
5. top-p: sorted ascending, drop the entries whose cumulative probability is ``<= 1 - top_p``, always
   keeping the most likely one; ``top_p >= 1`` is off;
6. softmax, then ``torch.multinomial`` with the row's own generator (None: torch's global one).
"""

from __future__ import annotations

import torch

from app.lm.moss.types import AUDIO_BOS, AUDIO_EOS, AUDIO_PAD, FrameSampling

GREEDY_BELOW = 1e-5
"""Temperatures under this choose greedily."""


def mask_specials(logits: torch.Tensor, head: int) -> torch.Tensor:
    """``logits`` [..., 1027] with pad and BOS (and EOS on heads > 0) at -inf."""
    out = logits.clone()
    out[..., AUDIO_PAD] = float("-inf")
    out[..., AUDIO_BOS] = float("-inf")
    if head > 0:
        out[..., AUDIO_EOS] = float("-inf")
    return out


def apply_repetition_penalty(logits: torch.Tensor, recent: torch.Tensor, penalty: float) -> torch.Tensor:
    """``logits`` [V] with every distinct code of ``recent`` [n] penalised once."""
    if penalty == 1.0 or recent.numel() == 0:
        return logits
    codes = torch.unique(recent)
    chosen = logits.index_select(0, codes)
    penalised = torch.where(chosen > 0, chosen / penalty, chosen * penalty)
    return logits.index_copy(0, codes, penalised)


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Logits below the k-th largest at -inf; ties with the k-th are kept."""
    if k <= 0 or k >= logits.numel():
        return logits
    kth = torch.topk(logits, k).values[-1]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Upstream's nucleus: ascending sort, drop cumulative probability ``<= 1 - p``, keep the top one."""
    if p >= 1.0:
        return logits
    ordered, order = torch.sort(logits)
    cumulative = torch.softmax(ordered, dim=-1).cumsum(-1)
    drop = cumulative <= 1.0 - p
    drop[-1] = False
    return logits.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))


def choose_code(
    logits: torch.Tensor,
    head: int,
    recent: torch.Tensor,
    params: FrameSampling,
    generator: torch.Generator | None,
) -> int:
    """The code for codebook ``head`` from its [1027] logits; ``recent`` are this codebook's last
    ``params.repetition_window`` codes of this turn (empty on frame 0)."""
    scores = mask_specials(logits.float(), head)
    scores = apply_repetition_penalty(scores, recent, params.repetition_penalty)
    if params.temperature < GREEDY_BELOW:
        return int(torch.argmax(scores))
    scores = scores / params.temperature
    scores = top_k_filter(scores, params.top_k)
    scores = top_p_filter(scores, params.top_p)
    probs = torch.softmax(scores, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


def recent_codes(history: torch.Tensor, head: int, window: int) -> torch.Tensor:
    """Codebook ``head``'s codes in the last ``window`` frames of ``history`` [F, 16] (this turn)."""
    if window <= 0:
        return history[:0, head]
    return history[-window:, head]
