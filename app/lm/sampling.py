"""Choosing the next id of B rows at once, each with its own settings and seed, in a fixed number of
batched tensor operations (no loop over rows, nothing read back to the host).

Per row, on float32 logits ``[B, V]``:

1. repetition penalty over the row's history ``[B, H]`` (ids, -1 = none): each id in it once, positive
   logits divided by the penalty, negative ones multiplied (a gather and a scatter over ``H`` columns,
   not a pass over the vocabulary);
2. greedy (argmax) when the temperature is below ``GREEDY_BELOW``;
3. divided by the temperature;
4. top-k: logits below the k-th largest dropped (ties with it kept); ``top_k`` 0 is off;
5. top-p: the most likely ids kept until the mass of those before the next one reaches ``top_p``
   (vLLM's rule; the most likely id always stays, ids tied with the last one kept stay too); 1 is off;
6. one uniform ``u`` per row and inverse-CDF: the first id whose cumulative weight exceeds ``u`` times
   the total (found block by block: ``inverse_cdf``).

The uniform is counter-based: a hash of the row's seed and a counter the engine gives (the row's step,
or its step and sub-step), so a row's draw depends on nothing but its own seed and position, whoever
shares the batch, on any device, without a generator object per row. Each step's work on a row reads
only that row, so a row's ids in a batch equal its ids alone (tested by the engines).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import torch

GREEDY_BELOW = 1e-5
"""Temperatures under this choose greedily (vLLM's ``_SAMPLING_EPS``)."""
TOP_P_CANDIDATES = 1024
"""Ids a top-p row's nucleus is looked for among first; a row whose nucleus is larger is sorted whole."""
CDF_BLOCK = 256
"""Ids per block of ``inverse_cdf``'s two-level scan."""

_MASK32 = 0xFFFFFFFF


@dataclass(frozen=True)
class RowSampling:
    """One row's settings: ``top_k`` 0 and ``top_p`` 1 are off, ``penalty`` 1 is off; ``seed`` any int."""

    temperature: float
    top_k: int
    top_p: float
    penalty: float
    seed: int


def random_seed() -> int:
    """A seed for a row that asked for none (nondeterministic)."""
    return secrets.randbits(63)


@dataclass(frozen=True)
class BatchSampling:
    """B rows' settings as ``[B]`` tensors, and what the host knows of them (which passes to run)."""

    temperature: torch.Tensor  # float32
    top_k: torch.Tensor  # long, 0 = off
    top_p: torch.Tensor  # float32, 1 = off
    penalty: torch.Tensor  # float32
    seed_lo: torch.Tensor  # long, the seed's low 32 bits
    seed_hi: torch.Tensor  # long, its next 32 bits
    greedy: torch.Tensor  # bool
    any_greedy: bool
    any_sampled: bool
    most_k: int  # the largest top-k in use, 0 = none
    any_top_p: bool
    any_penalty: bool
    top_p_within_k: bool  # every top-p row has a top-k too: its nucleus lies in the top ``most_k``

    @classmethod
    def of(cls, rows: Sequence[RowSampling], device: torch.device) -> BatchSampling:
        def column(values: Sequence[float], dtype: torch.dtype) -> torch.Tensor:
            return torch.tensor(values, dtype=dtype, device=device)

        greedy = [r.temperature < GREEDY_BELOW for r in rows]
        sampled = [r for r, g in zip(rows, greedy, strict=True) if not g]
        return cls(
            column([r.temperature for r in rows], torch.float32),
            column([max(r.top_k, 0) for r in rows], torch.long),
            column([r.top_p for r in rows], torch.float32),
            column([r.penalty for r in rows], torch.float32),
            column([r.seed & _MASK32 for r in rows], torch.long),
            column([(r.seed >> 32) & _MASK32 for r in rows], torch.long),
            column(greedy, torch.bool),
            any(greedy),
            bool(sampled),
            max((r.top_k for r in sampled), default=0),
            any(r.top_p < 1.0 for r in sampled),
            any(r.penalty != 1.0 for r in rows),
            all(r.top_k > 0 for r in sampled if r.top_p < 1.0),
        )


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``x * c mod 2**32`` for ``x`` in [0, 2**32) held in int64, without overflowing it."""
    low = x * (c & 0xFFFF)
    high = ((x * (c >> 16)) & 0xFFFF) << 16
    return (low + high) & _MASK32


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A bijective 32-bit integer hash (Wellons' lowbias32) of ``x`` in [0, 2**32)."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def uniforms(seed_lo: torch.Tensor, seed_hi: torch.Tensor, counter: torch.Tensor) -> torch.Tensor:
    """One uniform in [0, 1) per row ``[B]`` float32, a hash of its seed and ``counter`` ``[B]`` long."""
    x = _mix((counter & _MASK32) ^ 0x9E3779B9)
    x = _mix(x ^ seed_hi)
    x = _mix(x ^ seed_lo)
    x = _mix(x ^ ((counter >> 32) & _MASK32))
    return (x >> 8).to(torch.float32) * (1.0 / (1 << 24))


def penalize(logits: torch.Tensor, history: torch.Tensor, penalty: torch.Tensor) -> torch.Tensor:
    """``logits`` [B, V] (changed in place) with each id of ``history`` [B, H] (-1 = none) penalised once
    by the row's ``penalty`` [B]: positive logits divided, negative ones multiplied."""
    if history.shape[1] == 0:
        return logits
    valid = history >= 0
    has = valid.any(1)
    first = history.gather(1, valid.to(torch.uint8).argmax(1, keepdim=True))  # a real id of the row
    ids = torch.where(valid, history, first).clamp(min=0)  # padding repeats it: same value written twice
    factor = torch.where(has, penalty, torch.ones_like(penalty))[:, None]  # a row without history: as is
    chosen = logits.gather(1, ids)
    penalised = torch.where(chosen > 0, chosen / factor, chosen * factor)
    return logits.scatter_(1, ids, penalised)


def _top_p_floor(
    weights: torch.Tensor, total: torch.Tensor, top_p: torch.Tensor, within: int | None
) -> torch.Tensor:
    """Per row ``[B, 1]``: the smallest weight the nucleus keeps (0 for rows with top-p off), looked for
    among the largest ``within`` weights when no nucleus can be larger (top-k), else among the first
    ``TOP_P_CANDIDATES`` and, for a nucleus that may go on, in the whole sorted row (the same value)."""
    vocab = weights.shape[1]
    candidates = min(vocab, within or TOP_P_CANDIDATES)
    if 2 * candidates >= vocab:
        candidates = vocab
    if candidates == vocab:
        ordered = weights.sort(dim=1, descending=True).values
    else:
        ordered = weights.topk(candidates, dim=1).values
    limit = (top_p * total)[:, None]
    before = ordered.cumsum(1) - ordered
    kept = (before < limit).sum(1, keepdim=True)
    if within is None and candidates < vocab and bool((kept == candidates).any()):  # it may go on
        ordered = weights.sort(dim=1, descending=True).values
        before = ordered.cumsum(1) - ordered
        kept = (before < limit).sum(1, keepdim=True)
    floor = ordered.gather(1, (kept - 1).clamp(min=0))
    return torch.where((top_p < 1.0)[:, None], floor, torch.zeros_like(floor))


def _below(x: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
    """``x``, or the float just below ``limit`` where ``x`` reaches it."""
    return torch.where(x < limit, x, torch.nextafter(limit, torch.zeros_like(limit)))


def inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of ``weights`` [B, V] (non-negative), the first id whose cumulative weight exceeds ``u``
    [B] (in [0, 1)) times the row's total: ids [B] long, and the rows whose total is not positive and
    finite [B] bool (their id is meaningless).

    Two short scans instead of one over the vocabulary: the row's sums of ``CDF_BLOCK`` ids are
    accumulated to find the block, then that one block to find the id (a scan is sequential, and over
    65,537 ids cost as much as the rest of the sampling). The id found always has a positive weight:
    each scan's target is kept below its own total.
    """
    rows, vocab = weights.shape
    whole = vocab // CDF_BLOCK * CDF_BLOCK
    sums = weights[:, :whole].view(rows, -1, CDF_BLOCK).sum(2)  # [B, N] each block's mass
    if whole < vocab:  # the last, shorter block
        sums = torch.cat([sums, weights[:, whole:].sum(1, keepdim=True)], 1)
    sums = sums.cumsum_(1)  # mass up to the end of each block
    total = sums[:, -1:]
    failed = ~(total.isfinite() & (total > 0))[:, 0]
    target = _below(u[:, None] * total, total)
    block = torch.searchsorted(sums, target, right=True).clamp_(max=sums.shape[1] - 1)  # [B, 1]
    before = torch.where(block > 0, sums.gather(1, (block - 1).clamp(min=0)), torch.zeros_like(target))
    ids = block * CDF_BLOCK + torch.arange(CDF_BLOCK, device=weights.device)  # [B, S] the block's ids
    within = weights.gather(1, ids.clamp(max=vocab - 1)).masked_fill_(ids >= vocab, 0.0).cumsum_(1)
    rest = _below((target - before).clamp(min=0), within[:, -1:])
    offset = torch.searchsorted(within, rest, right=True).clamp_(max=CDF_BLOCK - 1)
    return ids.gather(1, offset)[:, 0].clamp_(max=vocab - 1), failed


def choose(
    logits: torch.Tensor, history: torch.Tensor, settings: BatchSampling, counter: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The next id of each row (module docstring): ``logits`` [B, V] float32 (changed in place),
    ``history`` [B, H] ids (-1 = none), ``counter`` [B] the draw's position. Returns the ids [B] long and
    the rows that could not sample [B] bool (their logits were not finite; their id is 0)."""
    if settings.any_penalty:
        penalize(logits, history, settings.penalty)
    greedy = logits.argmax(1) if settings.any_greedy else None
    failed = torch.zeros(logits.shape[0], dtype=torch.bool, device=logits.device)
    if not settings.any_sampled:
        assert greedy is not None
        return greedy, failed
    scores = logits.div_(settings.temperature.clamp(min=GREEDY_BELOW)[:, None])
    if settings.most_k:
        most = min(settings.most_k, scores.shape[1])
        k = settings.top_k.clamp(1, most)
        kth = scores.topk(most, dim=1).values.gather(1, (k - 1)[:, None])
        scores.masked_fill_((scores < kth) & (settings.top_k > 0)[:, None], float("-inf"))
    weights = scores.sub_(scores.amax(1, keepdim=True)).exp_()
    if settings.any_top_p:
        within = settings.most_k if settings.top_p_within_k else None
        floor = _top_p_floor(weights, weights.sum(1), settings.top_p, within)
        weights.masked_fill_(weights < floor, 0.0)
    ids, failed = inverse_cdf(weights, uniforms(settings.seed_lo, settings.seed_hi, counter))
    failed &= ~settings.greedy
    ids = ids.masked_fill(failed, 0)
    if greedy is not None:
        ids = torch.where(settings.greedy, greedy, ids)
    return ids, failed
