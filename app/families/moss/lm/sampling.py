"""Choosing one codebook's code for B rows at once from their 1027 logits, in the order MOSS-TTS-Realtime
expects, on the shared batched sampler (``app.lm.sampling``).

Per codebook and frame (upstream ``streaming_mossttsrealtime.py``), on float32 logits:

0. mask what may never be chosen: pad (1024) and BOS (1025) on every head, EOS (1026) on heads 1..15
   (only codebook 0's EOS ends speech; upstream masks nothing and feeds a sampled pad or BOS back);
1. repetition penalty over the last ``window`` codes of this codebook in this turn, each distinct code
   once (none on frame 0: no history);
2. greedy (argmax) when the temperature is 0; else temperature, top-k (``top_k <= 0`` is off), top-p
   (the most likely codes until the mass before the next reaches ``top_p``: upstream's rule, its ascending
   cumulative ``<= 1 - top_p`` dropped, read from the other end; ``top_p >= 1`` is off);
3. one counter-based uniform per row (its seed, frame and codebook) and inverse-CDF.

Each row keeps its own settings, window and seed, so its frames do not depend on who shares the batch.
"""

from __future__ import annotations

import torch

from app.families.moss.lm.types import AUDIO_BOS, AUDIO_EOS, AUDIO_PAD, CODEBOOKS, FrameSampling
from app.lm.sampling import BatchSampling, RowSampling, choose, random_seed


def row_sampling(sampling: FrameSampling) -> RowSampling:
    """A request's settings for the shared sampler (no seed: a random one)."""
    seed = sampling.seed if sampling.seed is not None else random_seed()
    top_k = max(sampling.top_k, 0)
    return RowSampling(sampling.temperature, top_k, sampling.top_p, sampling.repetition_penalty, seed)


def mask_specials(logits: torch.Tensor, head: int) -> torch.Tensor:
    """``logits`` [..., 1027] (changed in place) with pad and BOS (and EOS on heads > 0) at -inf."""
    logits[..., AUDIO_PAD] = float("-inf")
    logits[..., AUDIO_BOS] = float("-inf")
    if head > 0:
        logits[..., AUDIO_EOS] = float("-inf")
    return logits


def choose_codes(
    logits: torch.Tensor, head: int, recent: torch.Tensor, settings: BatchSampling, frames: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Codebook ``head``'s code of B rows: ``logits`` [B, 1027] (float32 ones are changed in place),
    ``recent`` [B, W] this codebook's recent codes per row (-1 = none), ``frames`` [B] each row's frame
    index (with ``head``, its draw's counter). Returns the codes [B] on the device and the rows that
    could not sample [B] bool."""
    scores = mask_specials(logits.float(), head)
    return choose(scores, recent, settings, frames * CODEBOOKS + head)
