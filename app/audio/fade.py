"""Fade-in at the start of a response, against a click when the first sample is not near zero.

The first ``L = round(ms * sample_rate / 1000)`` output samples are multiplied by the raised cosine
``0.5 (1 - cos(pi i / L))``, i = 0..L-1 (so the first sample is exactly 0); later samples pass
unchanged. The ramp follows the absolute sample index, so it is the same however the input is chunked.
``ms = 0`` disables it.
"""

from __future__ import annotations

import math

import numpy as np

from app.audio.pcm import as_mono_f32
from app.core import defaults
from app.core.constants import SAMPLE_RATE


class FadeIn:
    """Streaming raised-cosine fade-in: float32 [N] chunks in, float32 [N] chunks out."""

    def __init__(self, ms: float = defaults.FADE_IN_MS, sample_rate: int = SAMPLE_RATE) -> None:
        if not (isinstance(ms, int | float) and math.isfinite(ms) and ms >= 0):
            raise ValueError(f"fade-in length must be a finite number of ms >= 0, got {ms!r}")
        if not (isinstance(sample_rate, int) and sample_rate > 0):
            raise ValueError(f"sample_rate must be a positive integer, got {sample_rate!r}")
        length = round(ms * sample_rate / 1000)
        self._ramp = (0.5 * (1.0 - np.cos(np.pi * np.arange(length) / max(length, 1)))).astype(np.float32)
        self._pos = 0

    def push(self, pcm: np.ndarray) -> np.ndarray:
        """Return the chunk [N] with the part of the ramp that falls on it applied (a new array)."""
        x = as_mono_f32(pcm)
        out = x.copy()
        if self._pos < len(self._ramp):
            n = min(len(x), len(self._ramp) - self._pos)
            out[:n] *= self._ramp[self._pos : self._pos + n]
        self._pos += len(x)
        return out

    def flush(self) -> np.ndarray:
        """Nothing is held back: an empty float32 array."""
        return np.zeros(0, dtype=np.float32)
