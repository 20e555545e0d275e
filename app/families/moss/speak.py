"""Frames -> PCM for one utterance: the engine's frames go to the utterance's codec stream as they come.

Chunking: the first decode waits for ``first`` frames (80 ms each), then chunk sizes double up to
``largest`` (1, 2, 4, 8, 8, ... by default): the first audio leaves as soon as the first frame exists,
and later decodes are bigger (fewer codec calls) while the audio already sent plays. When more frames than the
next size are waiting (the LM ran ahead of the codec), one decode takes them all, up to ``largest``.
The codec stream is causal and keeps its own state, so chunks need no overlap or crossfade: the audio is
``1920 * frames`` samples, the same for any chunking (to float rounding). What is left when the LM ends
is decoded at once (in chunks of at most ``largest``).

Stalls: a listener who starts at the first audio (a later part: when it reaches the part, ``due``) and
plays in real time (``app.audio.playback``); the time its buffer stood empty goes to ``stats.stall_s``,
less the time the generation was parked waiting for its text (``parked``: a realtime turn's).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

import numpy as np

from app.audio.playback import Playback
from app.core.constants import SAMPLE_RATE
from app.core.stats import UtteranceStats
from app.families.shared.trace import traced_decode

Decode = Callable[[np.ndarray], Awaitable[np.ndarray]]
"""Frames ``(n, 16)`` -> their float32 audio ``(1920 n,)``, following the stream's earlier chunks."""


@dataclass(frozen=True)
class ChunkSchedule:
    """Decode sizes in frames: ``first``, then doubling up to ``largest``."""

    first: int = 1
    largest: int = 8

    def __post_init__(self) -> None:
        if not 1 <= self.first <= self.largest:
            raise ValueError(f"need 1 <= first <= largest, got {self.first}, {self.largest}")

    def sizes(self) -> Iterator[int]:
        """The sizes of successive decodes (endless)."""
        size = self.first
        while True:
            yield size
            size = min(size * 2, self.largest)


async def speak(
    frames: AsyncIterator[np.ndarray],
    decode: Decode,
    schedule: ChunkSchedule,
    max_frames: int,
    stats: UtteranceStats,
    made: list[np.ndarray],
    generated: Callable[[], None] = lambda: None,
    due: Callable[[], float | None] | None = None,
    parked: Callable[[], float] | None = None,
) -> AsyncGenerator[np.ndarray, None]:
    """float32 24 kHz chunks, shape (samples,), for the frames ``(n, 16)`` of ``frames``, as they come.

    Appends every frame block to ``made`` and counts frames in ``stats.codes``; sets
    ``stats.finish_reason`` when the frames end ("length" when ``max_frames`` were made, else "stop")
    and then calls ``generated`` (before the frames still waiting are decoded). ``due``: when a listener
    already playing reaches this generation (None: it starts at the first audio); ``parked``: the seconds
    the generation has waited for its text so far (module docstring, "Stalls").
    """
    listener = _Listener(due, parked)
    sizes = schedule.sizes()
    target = next(sizes)
    waiting = np.zeros((0, 16), dtype=np.int64)
    try:
        while True:
            started = time.perf_counter()
            block = await anext(frames, None)
            stats.lm_wait_s += time.perf_counter() - started
            if block is None:
                break
            made.append(block)
            stats.codes += len(block)
            waiting = np.concatenate([waiting, block])
            while len(waiting) >= target:
                take = min(len(waiting), schedule.largest)
                chunk, waiting = waiting[:take], waiting[take:]
                yield listener.hears(await _decoded(decode, chunk, stats, last=False))
                target = next(sizes)
        stats.finish_reason = "length" if stats.codes >= max_frames else "stop"
        generated()
        while len(waiting):
            chunk, waiting = waiting[: schedule.largest], waiting[schedule.largest :]
            yield listener.hears(await _decoded(decode, chunk, stats, last=not len(waiting)))
    finally:
        stats.stall_s += listener.playback.stall_s


class _Listener:
    """The simulated listener of one generation (module docstring, "Stalls")."""

    def __init__(self, due: Callable[[], float | None] | None, parked: Callable[[], float] | None) -> None:
        self.playback = Playback(SAMPLE_RATE)
        self.due = due
        self.parked = parked
        self.parked_s = 0.0  # parked time already accounted for

    def hears(self, audio: np.ndarray) -> np.ndarray:
        """``audio`` reaches the listener now."""
        if self.due is not None and self.playback.end is None:  # before the first chunk only
            self.playback.reaches(self.due())
        idle = 0.0
        if self.parked is not None:
            parked = self.parked()
            idle, self.parked_s = parked - self.parked_s, parked
        self.playback.emit(audio.size, time.monotonic(), idle)
        return audio


async def _decoded(decode: Decode, chunk: np.ndarray, stats: UtteranceStats, last: bool) -> np.ndarray:
    """``decode(chunk)``, timed and traced (``traced_decode``); its samples counted."""
    audio = await traced_decode(stats, len(chunk), last, lambda: decode(chunk))
    stats.samples += audio.size
    return audio
