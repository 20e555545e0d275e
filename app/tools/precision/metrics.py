"""Agreement metrics between a reference tensor and a test tensor, and between two LMs' next-token logits.

Every metric is computed in float64 on the CPU, so the comparison adds no error of its own:

- ``cosine``: ``<r, t> / (|r| |t|)`` over the flattened tensors (1 = same direction);
- ``rel_l2``: ``|t - r| / |r|`` (0.0133 is the seed's "1.33%");
- ``max_abs`` / ``mean_abs``: of ``t - r``;
- ``snr_db``: ``10 log10(sum r^2 / sum (t - r)^2)`` (+inf when equal; ``-20 log10(rel_l2)``).

Next-token checks compare, position by position, the distributions ``softmax(logits / temperature)``:
top-1 agreement, the overlap of the top-k sets (``|A ∩ B| / k``), ``KL(ref || test)`` in nats, and the
total variation distance ``TV = ½ Σ |p - q|``: the probability that one sample drawn from each, coupled
as closely as possible, differs. The share of positions with TV above a threshold is the share of steps
at which sampling would have gone differently at least that often.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class TensorAgreement:
    """How closely one tensor follows its reference."""

    shape: tuple[int, ...]
    cosine: float
    rel_l2: float
    max_abs: float
    mean_abs: float
    snr_db: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _flat64(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to(device="cpu", dtype=torch.float64).reshape(-1)


def compare_tensors(reference: torch.Tensor, test: torch.Tensor) -> TensorAgreement:
    """Agreement of ``test`` with ``reference`` (same shape, any float dtype or device).

    Raises ValueError when the shapes differ. A zero reference gives cosine 0 against a non-zero test
    (1 when both are zero) and an infinite relative error against any non-zero difference.
    """
    if reference.shape != test.shape:
        raise ValueError(f"shapes differ: reference {tuple(reference.shape)}, test {tuple(test.shape)}")
    ref, tst = _flat64(reference), _flat64(test)
    diff = tst - ref
    ref_norm, tst_norm, diff_norm = float(ref.norm()), float(tst.norm()), float(diff.norm())
    if ref_norm == 0.0 or tst_norm == 0.0:
        cosine = 1.0 if ref_norm == tst_norm else 0.0
    else:
        cosine = min(1.0, max(-1.0, float(ref @ tst) / (ref_norm * tst_norm)))  # rounding can pass 1
    rel_l2 = diff_norm / ref_norm if ref_norm else (0.0 if diff_norm == 0.0 else math.inf)
    abs_diff = diff.abs()
    return TensorAgreement(
        shape=tuple(reference.shape),
        cosine=cosine,
        rel_l2=rel_l2,
        max_abs=float(abs_diff.max()) if abs_diff.numel() else 0.0,
        mean_abs=float(abs_diff.mean()) if abs_diff.numel() else 0.0,
        snr_db=snr_db(reference, test),
    )


def snr_db(reference: torch.Tensor, test: torch.Tensor) -> float:
    """``10 log10(signal power / error power)`` of ``test`` against ``reference``; +inf when equal."""
    ref, tst = _flat64(reference), _flat64(test)
    signal, noise = float(ref.square().sum()), float((tst - ref).square().sum())
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


@dataclass(frozen=True)
class NextTokenAgreement:
    """Teacher-forced next-token agreement over ``positions`` positions (lists are per position)."""

    positions: int
    top1_agreement: float
    topk: int
    topk_overlap: float
    kl_mean: float
    kl_max: float
    tv_mean: float
    tv_threshold: float
    share_tv_above: float
    kl: list[float]
    tv: list[float]

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def compare_next_token(
    reference_logits: torch.Tensor,
    test_logits: torch.Tensor,
    *,
    topk: int = 5,
    temperature: float = 1.0,
    tv_threshold: float = 0.05,
) -> NextTokenAgreement:
    """Compare next-token logits ``[positions, vocab]`` of a reference and a test run.

    ``temperature`` scales both before the softmax (the sampler's view); top-1 and top-k do not depend
    on it. Raises ValueError for mismatched or non-2-D shapes, an empty input or a bad parameter.
    """
    if reference_logits.dim() != 2 or reference_logits.shape != test_logits.shape:
        raise ValueError(
            f"logits must be [positions, vocab] of one shape, got {tuple(reference_logits.shape)} "
            f"and {tuple(test_logits.shape)}"
        )
    positions, vocab = reference_logits.shape
    if positions == 0:
        raise ValueError("no positions to compare")
    if not 0 < topk <= vocab:
        raise ValueError(f"topk must be in 1..{vocab}, got {topk}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    ref = reference_logits.detach().to("cpu", torch.float64) / temperature
    tst = test_logits.detach().to("cpu", torch.float64) / temperature
    log_p, log_q = ref.log_softmax(-1), tst.log_softmax(-1)
    p, q = log_p.exp(), log_q.exp()
    # p * (log p - log q), with 0 * log 0 = 0 where p underflows
    kl = torch.where(p > 0, p * (log_p - log_q), torch.zeros_like(p)).sum(-1).clamp_min(0.0)
    tv = 0.5 * (p - q).abs().sum(-1)
    top1 = (ref.argmax(-1) == tst.argmax(-1)).double().mean()
    ref_top, tst_top = ref.topk(topk, dim=-1).indices, tst.topk(topk, dim=-1).indices
    overlap = (ref_top.unsqueeze(-1) == tst_top.unsqueeze(-2)).any(-1).double().sum(-1) / topk
    return NextTokenAgreement(
        positions=positions,
        top1_agreement=float(top1),
        topk=topk,
        topk_overlap=float(overlap.mean()),
        kl_mean=float(kl.mean()),
        kl_max=float(kl.max()),
        tv_mean=float(tv.mean()),
        tv_threshold=tv_threshold,
        share_tv_above=float((tv > tv_threshold).double().mean()),
        kl=[float(v) for v in kl],
        tv=[float(v) for v in tv],
    )
