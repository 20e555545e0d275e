"""The PCM chunk every streaming stage takes: mono float32 samples, shape [N]."""

from __future__ import annotations

import numpy as np


def as_mono_f32(pcm: np.ndarray) -> np.ndarray:
    """Validate a PCM chunk: any 1-D real array -> float32 [N] (no copy when it already is one)."""
    x = np.asarray(pcm, dtype=np.float32)
    if x.ndim != 1:
        raise ValueError(f"PCM chunks must be 1-D, got shape {x.shape}")
    return x
