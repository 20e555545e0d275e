"""Drive a streaming PCM stage (``push``/``flush``) the way the pipeline does, in given chunk sizes."""

from __future__ import annotations

import numpy as np

from app.audio.post import Stage


def stream(stage: Stage, x: np.ndarray, sizes: list[int]) -> np.ndarray:
    """Push ``x`` in chunks of ``sizes`` (cycled), then flush; the concatenated output."""
    out, i, k = [], 0, 0
    while i < len(x):
        n = sizes[k % len(sizes)]
        out.append(stage.push(x[i : i + n]))
        i, k = i + n, k + 1
    out.append(stage.flush())
    return np.concatenate(out)
