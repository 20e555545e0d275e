"""Agreement of discrete codes (a codec encoder's output): the share of identical codes per codebook.

Codes are integer tensors ``[frames, codebooks]``. For a residual quantizer the first codebook carries the
coarse content and each later one the residual the earlier ones left; a code flipped by a small numerical
difference changes the residual of the codebooks after it, so flips gather in the later codebooks, and
``all_codebooks``, the share of frames identical in every codebook, is the strictest figure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class CodeAgreement:
    """Per-codebook and overall share of identical codes of a test run against its reference."""

    frames: int
    codebooks: int
    per_codebook: list[float]
    mean: float
    all_codebooks: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def compare_codes(reference: torch.Tensor, test: torch.Tensor) -> CodeAgreement:
    """Agreement of integer codes ``[frames, codebooks]`` (a 1-D tensor is one codebook).

    Raises ValueError for different shapes, float tensors, more than two dimensions or no frames.
    """
    if reference.shape != test.shape:
        raise ValueError(f"shapes differ: reference {tuple(reference.shape)}, test {tuple(test.shape)}")
    if reference.dtype.is_floating_point or test.dtype.is_floating_point:
        raise ValueError("codes must be integer tensors")
    if reference.dim() not in (1, 2):
        raise ValueError(f"codes must be [frames, codebooks], got shape {tuple(reference.shape)}")
    ref = (reference if reference.dim() == 2 else reference[:, None]).cpu()
    tst = (test if test.dim() == 2 else test[:, None]).cpu()
    frames, codebooks = ref.shape
    if frames == 0 or codebooks == 0:
        raise ValueError("no codes to compare")
    same = ref == tst  # [frames, codebooks]
    per_codebook = same.double().mean(0)
    return CodeAgreement(
        frames=frames,
        codebooks=codebooks,
        per_codebook=[float(v) for v in per_codebook],
        mean=float(per_codebook.mean()),
        all_codebooks=float(same.all(-1).double().mean()),
    )
