"""The pace of a stream's input: how many units (speech codes, frames) a second came since the first
arrival, the time the stream was parked waiting for its own input (a realtime turn's text) left out. The
NeuCodec stitcher holds a first audio by it and MOSS's chunking cuts by it."""

from __future__ import annotations


class Pace:
    """Arrivals of a stream's units and their rate (module docstring)."""

    def __init__(self) -> None:
        self._first: tuple[float, int, float] | None = None  # clock, units and parked seconds at the first
        self._last = (0.0, 0.0)  # clock and parked seconds at the last arrival
        self.units = 0  # units so far

    def arrived(self, units: int, now: float, parked_s: float = 0.0) -> None:
        """``units`` came at ``now``; ``parked_s``: the seconds parked so far (a running total)."""
        if self._first is None:
            self._first = (now, units, parked_s)
        self.units += units
        self._last = (now, parked_s)

    @property
    def last_at(self) -> float:
        """The clock of the last arrival (0 before the first)."""
        return self._last[0]

    @property
    def rate(self) -> float | None:
        """Units a second since the first arrival (the first arrival's own units not counted), parked time
        left out; None before a later arrival took any time."""
        if self._first is None:
            return None
        at, units, parked_s = self._first
        span = self._last[0] - at - (self._last[1] - parked_s)
        return (self.units - units) / span if span > 0 else None
