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

Deadline cuts (``ChunkSchedule.cuts``): doubling sizes assume an LM at least twice real time (the next
chunk's frames come while the one before plays). A slower LM (a batched engine near real time) would
leave the listener dry at every step, so while the next size's frames are not all there, the frames that
are go to the codec once the listener has less audio left than 1.5 times the last decode (at least
``CUT_MARGIN_S``); the codec is causal, so a chunk of any size costs no overlap. An LM at twice real
time or more is not cut; nor is one whose frames came slower than ``CUT_MIN_PACE`` of real time so far
(a CPU): its listener runs dry whatever the chunking, and cuts would only add codec calls. Before the
first audio nothing is cut: there is no listener yet.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

import numpy as np

from app.audio.pace import Pace
from app.audio.playback import Playback
from app.core.constants import SAMPLE_RATE
from app.core.stats import UtteranceStats
from app.families.shared.next_item import NextItem
from app.families.shared.trace import traced_decode

Decode = Callable[[np.ndarray], Awaitable[np.ndarray]]
"""Frames ``(n, 16)`` -> their float32 audio ``(1920 n,)``, following the stream's earlier chunks."""

CUT_DECODES = 1.5
CUT_MIN_PACE = 0.9
"""Frames that came slower than this share of real time are not cut (module docstring)."""
FRAMES_PER_SECOND = SAMPLE_RATE / 1920
"""Real time: 12.5 frames (80 ms each) a second."""
CUT_MARGIN_S = 0.02
"""A cut comes when the listener has less audio left than 1.5 times the last decode, or this (a chunk of
one frame plays 80 ms: a margin that long would cut right after every chunk)."""


@dataclass(frozen=True)
class ChunkSchedule:
    """Decode sizes in frames: ``first``, then doubling up to ``largest``."""

    first: int = 1
    largest: int = 8
    cuts: bool = True  # deadline cuts (module docstring)

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
    clock: Callable[[], float] = time.monotonic,
) -> AsyncGenerator[np.ndarray, None]:
    """float32 24 kHz chunks, shape (samples,), for the frames ``(n, 16)`` of ``frames``, as they come.

    Appends every frame block to ``made`` and counts frames in ``stats.codes``; sets
    ``stats.finish_reason`` when the frames end ("length" when ``max_frames`` were made, else "stop")
    and then calls ``generated`` (before the frames still waiting are decoded). ``due``: when a listener
    already playing reaches this generation (None: it starts at the first audio); ``parked``: the seconds
    the generation has waited for its text so far (module docstring, "Stalls"); ``clock``: the
    listener's, in the event loop's seconds.
    """
    listener = _Listener(due, parked, clock)
    sizes = schedule.sizes()
    target = next(sizes)
    waiting = np.zeros((0, 16), dtype=np.int64)
    blocks = NextItem(frames)
    try:
        while True:
            cut_in = listener.cut_in() if schedule.cuts and len(waiting) else None
            started = time.perf_counter()
            came = await blocks.wait(cut_in)
            stats.lm_wait_s += time.perf_counter() - started
            if not came:  # the listener is about to run dry: decode the frames there are
                chunk, waiting = waiting[: schedule.largest], waiting[schedule.largest :]
                yield listener.hears(await _decoded(decode, chunk, stats, last=False, timed=listener))
                continue
            block = blocks.take()
            if block is None:
                break
            listener.arrived(len(block))
            made.append(block)
            stats.codes += len(block)
            waiting = np.concatenate([waiting, block])
            while len(waiting) >= target:
                take = min(len(waiting), schedule.largest)
                chunk, waiting = waiting[:take], waiting[take:]
                yield listener.hears(await _decoded(decode, chunk, stats, last=False, timed=listener))
                target = next(sizes)
        stats.finish_reason = "length" if stats.codes >= max_frames else "stop"
        generated()
        while len(waiting):
            chunk, waiting = waiting[: schedule.largest], waiting[schedule.largest :]
            yield listener.hears(await _decoded(decode, chunk, stats, last=not len(waiting), timed=listener))
    finally:
        await blocks.cancel()  # the frames' generator must not be running when its owner closes it
        stats.stall_s += listener.playback.stall_s


class _Listener:
    """The simulated listener of one generation (module docstring, "Stalls") and when the next cut is due
    (module docstring, "Deadline cuts")."""

    def __init__(
        self,
        due: Callable[[], float | None] | None,
        parked: Callable[[], float] | None,
        clock: Callable[[], float],
    ) -> None:
        self.playback = Playback(SAMPLE_RATE)
        self.due = due
        self.parked = parked
        self.clock = clock
        self.parked_s = 0.0  # parked time already accounted for
        self.last_decode_s = 0.0
        self.pace = Pace()  # the frames as they came

    def arrived(self, frames: int) -> None:
        """A block of ``frames`` frames came now."""
        self.pace.arrived(frames, self.clock(), self.parked() if self.parked is not None else 0.0)

    def cut_in(self) -> float | None:
        """Seconds until the frames waiting should be decoded whatever the schedule's size (0: now); None
        before the first audio, or while the frames come slower than ``CUT_MIN_PACE`` of real time."""
        end, pace = self.playback.end, self.pace.rate
        if end is None or (pace is not None and pace < CUT_MIN_PACE * FRAMES_PER_SECOND):
            return None
        margin = max(CUT_MARGIN_S, CUT_DECODES * self.last_decode_s)
        return max(0.0, end - margin - self.clock())

    def hears(self, audio: np.ndarray) -> np.ndarray:
        """``audio`` reaches the listener now."""
        if self.due is not None and self.playback.end is None:  # before the first chunk only
            self.playback.reaches(self.due())
        idle = 0.0
        if self.parked is not None:
            parked = self.parked()
            idle, self.parked_s = parked - self.parked_s, parked
        self.playback.emit(audio.size, self.clock(), idle)
        return audio


async def _decoded(
    decode: Decode, chunk: np.ndarray, stats: UtteranceStats, last: bool, timed: _Listener
) -> np.ndarray:
    """``decode(chunk)``, timed and traced (``traced_decode``); its samples counted, its time kept for the
    next cut's margin."""
    started = timed.clock()
    audio = await traced_decode(stats, len(chunk), last, lambda: decode(chunk))
    timed.last_decode_s = timed.clock() - started
    stats.samples += audio.size
    return audio
