"""Compare a test run with a reference run of the same part and inputs, and judge it against thresholds.

Float outputs are compared as tensors (``metrics.compare_tensors``); integer outputs are codes (a codec
encoder's), compared by the share of identical codes per codebook (``codes.compare_codes``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import torch

from app.tools.precision.audio import AudioAgreement, compare_audio
from app.tools.precision.codes import CodeAgreement, compare_codes
from app.tools.precision.metrics import (
    NextTokenAgreement,
    TensorAgreement,
    compare_next_token,
    compare_tensors,
)
from app.tools.precision.runs import Run


@dataclass(frozen=True)
class Thresholds:
    """Pass/fail limits; None leaves a metric unchecked. Tensor limits apply to every output tensor."""

    min_cosine: float | None = None
    max_rel_l2: float | None = None
    min_top1: float | None = None
    min_topk_overlap: float | None = None
    max_kl_mean: float | None = None
    max_share_tv: float | None = None
    min_audio_snr_db: float | None = None
    max_log_mel_db: float | None = None
    min_code_agreement: float | None = None

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class NextTokenOptions:
    """How next-token distributions are compared (see ``metrics.compare_next_token``)."""

    topk: int = 5
    temperature: float = 1.0
    tv_threshold: float = 0.05


@dataclass
class Comparison:
    """One test run against the reference: per-tensor and per-code agreement, LM or codec checks, failed
    limits."""

    reference: Run
    test: Run
    tensors: dict[str, TensorAgreement]
    codes: dict[str, CodeAgreement] = field(default_factory=dict)
    next_token: NextTokenAgreement | None = None
    audio: AudioAgreement | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def check_same_inputs(reference: Run, test: Run) -> None:
    """ValueError unless both runs are of one part, fed the same inputs, with the same outputs."""
    if reference.part != test.part:
        raise ValueError(f"runs of different parts: {reference.part} and {test.part}")
    if set(reference.inputs) != set(test.inputs) or not all(
        torch.equal(reference.inputs[k], test.inputs[k]) for k in reference.inputs
    ):
        raise ValueError(f"{reference.config.label} and {test.config.label} were not fed the same inputs")
    if list(reference.outputs) != list(test.outputs):
        raise ValueError(f"{reference.config.label} and {test.config.label} captured different tensors")


def _below(value: float, limit: float) -> bool:
    """True when ``value`` fails a lower limit (NaN fails)."""
    return not value >= limit


def _above(value: float, limit: float) -> bool:
    """True when ``value`` fails an upper limit (NaN fails)."""
    return not value <= limit


def judge(comparison: Comparison, limits: Thresholds) -> list[str]:
    """The limits ``comparison`` breaks, one sentence each (empty: it passes)."""
    failures = []
    for name, agreement in comparison.tensors.items():
        if limits.min_cosine is not None and _below(agreement.cosine, limits.min_cosine):
            failures.append(f"{name}: cosine {agreement.cosine:.6f} < {limits.min_cosine}")
        if limits.max_rel_l2 is not None and _above(agreement.rel_l2, limits.max_rel_l2):
            failures.append(f"{name}: relative L2 {agreement.rel_l2:.4g} > {limits.max_rel_l2}")
    for name, codes in comparison.codes.items():
        limit = limits.min_code_agreement
        if limit is not None and _below(codes.mean, limit):
            failures.append(f"{name}: mean code agreement {codes.mean:.4g} < {limit}")
    token = comparison.next_token
    if token is not None:
        checks = [
            ("top-1 agreement", token.top1_agreement, limits.min_top1, _below),
            ("top-k overlap", token.topk_overlap, limits.min_topk_overlap, _below),
            ("mean KL", token.kl_mean, limits.max_kl_mean, _above),
            (
                f"share of positions with TV > {token.tv_threshold}",
                token.share_tv_above,
                limits.max_share_tv,
                _above,
            ),
        ]
        failures += [
            f"{what} {value:.4g} breaks {limit}"
            for what, value, limit, bad in checks
            if limit is not None and bad(value, limit)
        ]
    audio = comparison.audio
    if audio is not None:
        if limits.min_audio_snr_db is not None and _below(audio.snr_db, limits.min_audio_snr_db):
            failures.append(f"audio SNR {audio.snr_db:.2f} dB < {limits.min_audio_snr_db} dB")
        if limits.max_log_mel_db is not None and _above(audio.log_mel_db, limits.max_log_mel_db):
            failures.append(f"log-mel distance {audio.log_mel_db:.3f} dB > {limits.max_log_mel_db} dB")
    return failures


def compare_runs(
    reference: Run,
    test: Run,
    kind: str,
    limits: Thresholds | None = None,
    next_token: NextTokenOptions | None = None,
) -> Comparison:
    """Compare every output (float: as tensors, integer: as codes); for ``kind`` "lm" the next-token
    logits, for "codec" the audio."""
    check_same_inputs(reference, test)
    tensors, codes = {}, {}
    for name, ref in reference.outputs.items():
        tst = test.outputs[name]
        if ref.dtype.is_floating_point:
            tensors[name] = compare_tensors(ref, tst)
        else:
            codes[name] = compare_codes(ref, tst)
    comparison = Comparison(reference, test, tensors, codes)
    if kind == "lm":
        opts = next_token or NextTokenOptions()
        comparison.next_token = compare_next_token(
            reference.outputs["logits"],
            test.outputs["logits"],
            topk=opts.topk,
            temperature=opts.temperature,
            tv_threshold=opts.tv_threshold,
        )
    elif kind == "codec":
        rate = int(reference.options["sample_rate"])
        comparison.audio = compare_audio(reference.outputs["audio"], test.outputs["audio"], rate)
    comparison.failures = judge(comparison, limits or Thresholds())
    return comparison


def finite(value: object) -> object:
    """JSON-safe number: infinities and NaN as the strings "inf", "-inf" and "nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
