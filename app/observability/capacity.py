"""Measured rates that decide whether one more stream can stay ahead of real time.

Two rates, each a ratio of decaying sums (``RateMeter``): the codec's audio seconds decoded per second
of decode time (``codec``, fed by the codec batcher after every batch), and one stream's LM speech
tokens per second (``lm``, fed at the end of each generation). A stream played in real time needs about
``need`` codec seconds a second (1 plus what its windows re-decode) and at least ``lm_floor`` of real
time from its LM (50 tokens a second). ``viable(streams, need, lm_floor)``: with ``streams`` already
admitted, one more keeps every stream ahead of its listener at the rates measured so far; a rate not
yet measured (no decode, no finished generation) does not refuse.

A third figure sizes the first window of a stream (``StitchSchedule.covering``): ``short_decode``, the
recent compute time of one short decode batch (at most ``SHORT_DECODE_AUDIO_S`` of audio: the first and
cut windows, which a listener waits on), a mean whose weights halve every few decodes.
"""

from __future__ import annotations

import threading

from app.core.constants import TOKENS_PER_SECOND

SHORT_DECODE_AUDIO_S = 1.28  # a decode batch of at most this much audio (64 codes) is a short one


class RateMeter:
    """``amount / seconds`` over recent observations: both sums decay by half every ``half_life_s`` of
    observed seconds, so the rate follows a changing load. Safe to update from any thread."""

    def __init__(self, half_life_s: float = 10.0) -> None:
        if half_life_s <= 0:
            raise ValueError(f"half_life_s must be > 0, got {half_life_s!r}")
        self._half_life_s = half_life_s
        self._amount = 0.0
        self._seconds = 0.0
        self._lock = threading.Lock()

    def add(self, amount: float, seconds: float) -> None:
        """``amount`` (audio seconds, tokens) done in ``seconds``."""
        if seconds <= 0 or amount < 0:
            return
        keep = 0.5 ** (seconds / self._half_life_s)
        with self._lock:
            self._amount = self._amount * keep + amount
            self._seconds = self._seconds * keep + seconds

    @property
    def rate(self) -> float | None:
        """Amount per second; None before the first observation."""
        with self._lock:
            return self._amount / self._seconds if self._seconds > 0 else None


class RecentMean:
    """The mean of recent values, each value's weight halving every ``half_life`` later values. Safe to
    update from any thread."""

    def __init__(self, half_life: float = 8.0) -> None:
        if half_life <= 0:
            raise ValueError(f"half_life must be > 0, got {half_life!r}")
        self._keep = 0.5 ** (1.0 / half_life)
        self._sum = 0.0
        self._weight = 0.0
        self._lock = threading.Lock()

    def add(self, value: float) -> None:
        with self._lock:
            self._sum = self._sum * self._keep + value
            self._weight = self._weight * self._keep + 1.0

    @property
    def value(self) -> float | None:
        """The mean; None before the first value."""
        with self._lock:
            return self._sum / self._weight if self._weight else None


class Capacity:
    """The codec's and the LM's measured rates and the viability rule (module docstring)."""

    def __init__(self, half_life_s: float = 10.0) -> None:
        self.codec = RateMeter(half_life_s)  # audio seconds per decode second
        self.lm = RateMeter(half_life_s)  # tokens per second of one stream
        self.short_decode = RecentMean()  # seconds one short decode batch takes

    def decoded(self, audio_s: float, compute_s: float) -> None:
        """One decode batch: ``audio_s`` of audio in ``compute_s`` seconds."""
        self.codec.add(audio_s, compute_s)
        if 0 < audio_s <= SHORT_DECODE_AUDIO_S:
            self.short_decode.add(compute_s)

    def viable(self, streams: int, need: float, lm_floor: float) -> bool:
        """True when ``streams + 1`` streams can all stay ahead of real time at the measured rates, each
        needing ``need`` codec seconds a second and ``lm_floor`` of real time from its LM."""
        codec, lm = self.codec.rate, self.lm.rate
        if codec is not None and (streams + 1) * need > codec:
            return False
        return lm is None or lm >= lm_floor * TOKENS_PER_SECOND
