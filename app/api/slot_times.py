"""How long stream slots are held, and when the slots held now are expected back: a 429's ``Retry-After``.

A refused client is told to come back when room is expected rather than after a fixed time. Each slot
held now is expected back after the median of the recent holds that lasted longer than it has been held
so far, less that age (the median of all recent holds for a slot held longer than any of them); the k-th
soonest of those is when k slots are expected back. A slot's hold is the whole response, or a realtime
context's turn, so a stream's audio length and its client's pace are both in it. Before any hold has
ended there is no estimate, and the caller falls back to its fixed wait.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable

HISTORY = 64
"""Recent holds remembered (the estimate follows a change of load within this many streams)."""


class SlotTimes:
    """The start of every slot held now and the lengths of the last HISTORY holds (one event loop)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._held: deque[float] = deque(maxlen=HISTORY)  # seconds each recent hold lasted
        self._starts: list[float] = []  # clock time each slot held now was taken

    @property
    def held(self) -> int:
        """Slots held now."""
        return len(self._starts)

    def start(self) -> float:
        """A slot is taken now; returns its start, to pass to ``end``."""
        now = self._clock()
        self._starts.append(now)
        return now

    def end(self, started: float) -> None:
        """The slot taken at ``started`` is given back."""
        self._starts.remove(started)
        self._held.append(self._clock() - started)

    def expected_back_s(self, slots: int) -> float | None:
        """Seconds from now until ``slots`` of the slots held now are expected back (all of them if fewer
        are held); None before any hold has ended or while none is held."""
        if not self._held or not self._starts:
            return None
        now = self._clock()
        left = sorted(self._left(now - started) for started in self._starts)
        return left[min(max(slots, 1), len(left)) - 1]

    def _left(self, age: float) -> float:
        """Expected seconds left of a hold ``age`` seconds old."""
        longer = [held - age for held in self._held if held > age]
        return statistics.median(longer) if longer else statistics.median(self._held)
