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

from dataclasses import dataclass

import torch

from app.families.moss.lm.types import AUDIO_BOS, AUDIO_EOS, AUDIO_PAD, FrameSampling

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
    ``params.repetition_window`` codes of this turn (empty on frame 0). One row, step by step: the
    reference that ``choose_codes`` (what the engine runs, B rows at once) is tested against."""
    scores = mask_specials(logits.float(), head)
    scores = apply_repetition_penalty(scores, recent, params.repetition_penalty)
    if params.temperature < GREEDY_BELOW:
        return int(torch.argmax(scores))
    scores = scores / params.temperature
    scores = top_k_filter(scores, params.top_k)
    scores = top_p_filter(scores, params.top_p)
    probs = torch.softmax(scores, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


@dataclass(frozen=True)
class RowParams:
    """Sampling settings of B rows as [B] tensors, for ``choose_codes``."""

    temperature: torch.Tensor  # float
    top_k: torch.Tensor  # long; <= 0 is off
    top_p: torch.Tensor  # float; >= 1 is off
    penalty: torch.Tensor  # float; 1 is off
    sampling_rows: tuple[int, ...]  # the rows that sample (temperature > 0), known on the host

    @classmethod
    def of(cls, params: list[FrameSampling], device: torch.device) -> RowParams:
        def column(values: list[float], dtype: torch.dtype) -> torch.Tensor:
            return torch.tensor(values, dtype=dtype, device=device)

        return cls(
            column([p.temperature for p in params], torch.float32),
            column([p.top_k for p in params], torch.long),
            column([p.top_p for p in params], torch.float32),
            column([p.repetition_penalty for p in params], torch.float32),
            tuple(i for i, p in enumerate(params) if p.temperature >= GREEDY_BELOW),
        )


def draw(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One row's multinomial draw from its [V] probabilities, on the device (no host sync): shape [1]."""
    return torch.multinomial(probs, 1, generator=generator)


def choose_codes(
    logits: torch.Tensor,
    head: int,
    recent: torch.Tensor,
    params: RowParams,
    generators: list[torch.Generator | None],
) -> tuple[torch.Tensor, dict[int, Exception]]:
    """``choose_code`` for B rows at once, each with its own settings and generator: ``logits`` [B, 1027],
    ``recent`` [B, W] this codebook's recent codes per row (-1 = none). Every step is one batched op
    except each sampling row's ``draw``; nothing waits for the host. Returns the codes [B] (on the
    device) and the rows whose draw raised (their code is 0)."""
    rows, vocab = logits.shape
    scores = mask_specials(logits.float(), head)
    seen = torch.zeros((rows, vocab), dtype=torch.int32, device=scores.device)
    seen.scatter_add_(1, recent.clamp(min=0), (recent >= 0).to(torch.int32))
    penalty = params.penalty[:, None]
    scores = torch.where(seen > 0, torch.where(scores > 0, scores / penalty, scores * penalty), scores)
    codes = scores.argmax(-1)
    if not params.sampling_rows:
        return codes, {}
    scores = scores / params.temperature.clamp(min=GREEDY_BELOW)[:, None]
    descending = scores.sort(dim=-1, descending=True).values
    k = params.top_k.clamp(1, vocab)
    kth = descending.gather(1, (k - 1)[:, None])
    k_off = (params.top_k <= 0) | (params.top_k >= vocab)
    scores = scores.masked_fill((scores < kth) & ~k_off[:, None], float("-inf"))
    ordered, order = scores.sort(dim=-1)
    cumulative = torch.softmax(ordered, dim=-1).cumsum(-1)
    drop = (cumulative <= (1.0 - params.top_p)[:, None]) & (params.top_p < 1.0)[:, None]
    drop[:, -1] = False
    scores = scores.masked_fill(torch.zeros_like(drop).scatter(1, order, drop), float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    failed: dict[int, Exception] = {}
    sampled = codes.clone()
    for i in params.sampling_rows:
        try:
            sampled[i] = draw(probs[i], generators[i])[0]
        except Exception as exc:  # this row's draw alone (e.g. its logits went NaN)
            failed[i] = exc
            sampled[i] = 0
    return sampled, failed
