"""What oneDNN can lay out on this CPU, for the tests of prepacked weights (``app.codec.prepack``): a
bfloat16 parametrization of them runs where oneDNN packs bfloat16 weights (AVX-512 or AVX-NE-CONVERT);
where it cannot (an AVX2-only CPU), ``tests/codec/test_prepack.py`` checks that such layers stay plain and
say why."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from app.codec.prepack import PackedLinear


def packs(dtype: torch.dtype) -> bool:
    """Whether oneDNN lays out ``dtype`` weights on this CPU: a small layer packed as ``prepack_for_cpu``
    packs it."""
    try:
        PackedLinear.of(nn.Linear(16, 16).to(dtype))
    except RuntimeError:
        return False
    return True


needs_bf16_packing = pytest.mark.skipif(
    not packs(torch.bfloat16),
    reason="oneDNN lays out bfloat16 weights only with AVX-512 (avx512bw, vl, dq) or AVX-NE-CONVERT",
)
PACKED_DTYPES = [torch.float32, pytest.param(torch.bfloat16, marks=needs_bf16_packing)]
