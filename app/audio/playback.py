"""The simulated listener of a stream: it starts playing at the first audio (or when it reaches a later
part) and plays in real time; the time its buffer stood empty is the stream's stall
(``tts_stream_stall_seconds``), and when it will run dry is the deadline of the stream's next decode."""

from __future__ import annotations


class Playback:
    """A listener that starts at the first chunk and plays in real time: when its buffer runs dry
    (``end``) and how long it stood empty before the end (``stall_s``)."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.end: float | None = None  # clock() when everything emitted so far has been played
        self.stall_s = 0.0

    def reaches(self, at: float | None) -> None:
        """A listener already playing reaches this stream at ``at`` (None: not known): audio that comes
        later finds it stalled since then. Only before the first chunk."""
        if self.end is None:
            self.end = at

    def emit(self, samples: int, now: float, idle_s: float = 0.0) -> None:
        """``samples`` more audio reached the listener at ``now``; ``idle_s``: seconds of the time since the
        last audio the stream waited for its input (a realtime turn's text), not counted as a stall (taken
        to fall within the gap, so a stall is never over-counted)."""
        if self.end is None:
            self.end = now
        elif now > self.end:
            self.stall_s += max(0.0, now - self.end - idle_s)
            self.end = now
        self.end += samples / self.sample_rate
