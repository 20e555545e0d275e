"""Splicing independent parts of one response: each join an equal-power crossfade, no gap, no overlap.

A long input is spoken as several generations (parts). Their audio is one stream: the last ``W``
samples of a part are blended with the first ``W`` samples of the next,

    out[i] = prev_tail[i] * cos(pi/2 * t_i) + next_head[i] * sin(pi/2 * t_i),   t_i = (i + 0.5) / W,

``W = min(width, len(stream so far), len(next part))`` (the parts are different generations, so their
signals are uncorrelated and the equal-power pair keeps the loudness level through the join). So the
stream is ``sum(len(part)) - sum(W)`` samples long: no silence is added and none is lost beyond the
crossfade. ``width = 0`` butts the parts together.

Streaming: the last ``width`` samples pushed are held back (they may belong to a join), and after
``join()`` the next part's first samples are held until ``W`` of them exist. The output does not depend
on how the parts are chunked.
"""

from __future__ import annotations

import numpy as np

from app.audio.pcm import as_mono_f32
from app.core.constants import SAMPLE_RATE

EMPTY = np.zeros(0, dtype=np.float32)


def width_samples(ms: float, sample_rate: int = SAMPLE_RATE) -> int:
    """A crossfade of ``ms`` milliseconds, in samples."""
    return round(ms * sample_rate / 1000)


def equal_power(width: int) -> tuple[np.ndarray, np.ndarray]:
    """The fade-out and fade-in ramps of a ``width``-sample equal-power crossfade, float32 [width] each."""
    t = (np.arange(width, dtype=np.float64) + 0.5) / width
    return np.cos(np.pi / 2 * t).astype(np.float32), np.sin(np.pi / 2 * t).astype(np.float32)


def splice(parts: list[np.ndarray], width: int) -> np.ndarray:
    """The parts, float32 [N_k] each, joined as ``Splice`` joins them (all at once), float32 [N]."""
    out = EMPTY
    for index, part in enumerate(parts):
        part = as_mono_f32(part)
        w = min(width, len(out), len(part)) if index else 0
        if w == 0:
            out = np.concatenate([out, part])
            continue
        fade_out, fade_in = equal_power(w)
        blend = out[len(out) - w :] * fade_out + part[:w] * fade_in
        out = np.concatenate([out[: len(out) - w], blend, part[w:]])
    return out


class Splice:
    """Streaming ``splice``: ``push`` a part's chunks, ``join()`` before the next part, ``flush()`` at the
    end; each call returns the float32 samples that are final."""

    def __init__(self, width: int) -> None:
        if not (isinstance(width, int) and width >= 0):
            raise ValueError(f"crossfade width must be an integer >= 0 samples, got {width!r}")
        self.width = width
        self._tail = EMPTY  # the last samples pushed, at most `width`, not yet emitted
        self._previous: np.ndarray | None = None  # the previous part's tail, waiting for the next head
        self._head = EMPTY  # the next part's first samples, while fewer than the previous tail

    def push(self, pcm: np.ndarray) -> np.ndarray:
        """Samples of the current part in; the samples now final out."""
        x = as_mono_f32(pcm)
        if self._previous is not None:
            self._head = np.concatenate([self._head, x])
            if len(self._head) < len(self._previous):
                return EMPTY
            x = self._blend()
        return self._hold(x)

    def join(self) -> np.ndarray:
        """The current part ended; the next ``push`` starts the next part. Returns samples now final (a
        part shorter than the crossfade is blended with what it has)."""
        out = self._hold(self._blend()) if self._previous is not None else EMPTY
        self._previous, self._tail = self._tail, EMPTY
        return out

    def flush(self) -> np.ndarray:
        """The end of the stream: everything still held."""
        out = self._blend() if self._previous is not None else EMPTY
        out = np.concatenate([self._tail, out])
        self._tail = EMPTY
        return out

    def _blend(self) -> np.ndarray:
        """The previous tail crossfaded into the head gathered so far (over the shorter of the two)."""
        previous, head = self._previous, self._head
        assert previous is not None
        self._previous, self._head = None, EMPTY
        w = min(len(previous), len(head))
        if w == 0:
            return np.concatenate([previous, head])
        fade_out, fade_in = equal_power(w)
        blend = previous[len(previous) - w :] * fade_out + head[:w] * fade_in
        return np.concatenate([previous[: len(previous) - w], blend, head[w:]])

    def _hold(self, x: np.ndarray) -> np.ndarray:
        """Emit all but the last ``width`` samples of the held tail followed by ``x``."""
        buffered = np.concatenate([self._tail, x])
        cut = max(0, len(buffered) - self.width)
        self._tail = buffered[cut:]
        return buffered[:cut]
