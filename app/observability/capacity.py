"""What this process can serve in real time: the codec's measured cost, the LM's measured pace, the streams
being served, and the viability rule the admission reads.

- ``cost`` (``DecodeCost``): one decode batch of ``codes`` codes takes ``fixed_s + per_code_s * codes``
  seconds, fitted to the recent batches (fed by the codec batcher after every batch; warm-up decodes at
  startup give it its first two points). The NeuCodec family sizes its windows by it
  (``app.audio.round_cost``) and the admission asks whether one more stream still fits.
- ``codec``: audio seconds decoded per second of decoding (``RateMeter``), for the refusal message and
  the metrics.
- ``lm``: one stream's LM pace as a share of real time (seconds of audio its generation made per second
  it ran, whatever the family's tokens), fed at the end of each generation.
- ``streams``: the streams admitted now (the admission keeps it).
- ``rules``: what each family says about one more stream (``admits(streams)``, registered when the family
  starts; a family whose codec is not measured yet admits). ``viable(streams, lm_floor)``: every rule
  admits ``streams + 1`` streams and the LM keeps ``lm_floor`` of real time (unmeasured: admitted).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.core.constants import TOKENS_PER_SECOND


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


class DecodeCost:
    """``seconds = fixed_s + per_code_s * codes`` for one decode batch, a least-squares line through the
    recent batches (each batch's weight halves every ``half_life`` later batches, so the fit follows a
    changing machine). Safe to update from any thread.

    Written by hand: five running sums make the fit; a statistics library would keep every point. Until
    two batches of different sizes were seen the line goes through the origin (all cost per code); a
    negative intercept (noise) is refitted through the origin too, so both figures are never negative.
    """

    def __init__(self, half_life: float = 32.0) -> None:
        if half_life <= 0:
            raise ValueError(f"half_life must be > 0, got {half_life!r}")
        self._keep = 0.5 ** (1.0 / half_life)
        self._sums = [0.0] * 5  # weight, x, y, x*x, x*y
        self._lock = threading.Lock()

    def add(self, codes: int, seconds: float) -> None:
        """One batch: ``codes`` codes (all its windows together) decoded in ``seconds``."""
        if codes <= 0 or seconds <= 0:
            return
        x, y = float(codes), seconds
        point = (1.0, x, y, x * x, x * y)
        with self._lock:
            self._sums = [s * self._keep + v for s, v in zip(self._sums, point, strict=True)]

    @property
    def line(self) -> tuple[float, float] | None:
        """``(fixed_s, per_code_s)``; None before the first batch."""
        with self._lock:
            w, sx, sy, sxx, sxy = self._sums
        if w <= 0:
            return None
        spread = w * sxx - sx * sx
        if spread > 1e-9 * w * sxx:
            slope = (w * sxy - sx * sy) / spread
            fixed = (sy - slope * sx) / w
            if fixed >= 0 and slope > 0:
                return fixed, slope
        return 0.0, sxy / sxx


class Capacity:
    """The codec's and the LM's measured figures, the streams served and the viability rule (module
    docstring)."""

    def __init__(self, half_life_s: float = 10.0) -> None:
        self.codec = RateMeter(half_life_s)  # audio seconds per decode second
        self.lm = RateMeter(half_life_s)  # audio seconds one stream's LM makes per second
        self.cost = DecodeCost()  # seconds of one decode batch by its codes
        self.streams = 0  # streams admitted now
        self.rules: list[Callable[[int], bool]] = []  # each family's: may this many streams be served?

    def decoded(self, audio_s: float, compute_s: float) -> None:
        """One decode batch: ``audio_s`` of audio in ``compute_s`` seconds."""
        self.codec.add(audio_s, compute_s)
        self.cost.add(round(audio_s * TOKENS_PER_SECOND), compute_s)

    def viable(self, streams: int, lm_floor: float) -> bool:
        """True when ``streams + 1`` streams can all stay ahead of real time: every family's rule admits
        them and one stream's LM keeps ``lm_floor`` of real time (module docstring)."""
        if not all(admits(streams + 1) for admits in self.rules):
            return False
        lm = self.lm.rate
        return lm is None or lm >= lm_floor
