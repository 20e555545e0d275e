"""One utterance through the stages: LM speech codes -> stitcher (-> codec) -> float32 PCM chunks.

Server-independent: the speech route, benchmarks and tests drive it the same way.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable

import anyio
import numpy as np

from app.audio.round_cost import RoundCost
from app.audio.stitcher import Stitcher, StitchSchedule
from app.core.stats import UtteranceStats
from app.families.neucodec.lm.types import GenerationParams, TokenSource
from app.families.shared.next_item import NextItem
from app.families.shared.trace import traced_decode

Decode = Callable[[list[int], float | None], Awaitable[np.ndarray]]  # codes, play-out deadline


HOLD_MARGIN_S = 0.05
"""Held audio goes out this long before its listener needs it (it is decoded already: only sent)."""


class _FirstAudioHold:
    """The first audio held back until the LM has sent ``codes`` codes or ended (0: nothing held): an
    interleave turn's fallback is decided on them before any of its audio is heard. Only the audio is
    held, not the decodes: it goes out the moment the LM gets there, not when the next window is decoded.
    A listener is never kept waiting for the check: a later part's audio goes out when its listener gets
    there (``due``) whatever the LM has sent, and the part then plays without a fallback. ``release``
    (the stitcher's ``release_at``) holds the first audio until then too, unless the LM has ended: a
    listener who starts later does not run dry while a slow LM sends the next window's codes."""

    def __init__(
        self,
        codes: int,
        stats: UtteranceStats,
        due: Callable[[], float | None] | None,
        clock: Callable[[], float],
        release: Callable[[], float | None],
    ) -> None:
        self.codes = codes
        self.stats = stats
        self.due = due
        self.clock = clock
        self.release = release
        self.released = False  # the release time has passed
        self.held: list[np.ndarray] = []

    def _times(self) -> tuple[float | None, float | None]:
        """When the listener needs the held audio (less ``HOLD_MARGIN_S``) and when its release comes;
        each None when not set or nothing is held."""
        at = self.due() if self.held and self.due is not None else None
        release = self.release() if self.held and not self.released else None
        return (None if at is None else at - HOLD_MARGIN_S), release

    def due_in(self) -> float | None:
        """Seconds until the held audio's listener needs it or its release comes (0: now); None when
        nothing is held or neither is set."""
        at = _earliest(*self._times())
        return None if at is None else max(0.0, at - self.clock())

    def take(self, chunk: np.ndarray | None = None, fired: bool = False) -> list[np.ndarray]:
        """What may go out now, ``chunk`` included: nothing while held, else everything held as one chunk;
        ``fired``: the time ``due_in`` gave has passed (the earlier of the two, decided without the clock)."""
        if chunk is not None:
            self.held.append(chunk)
        if not self.held:
            return []
        needed, release = self._times()
        now = self.clock()
        release_fired = fired and release is not None and (needed is None or release < needed)
        needed_now = (fired and not release_fired) or (needed is not None and needed <= now)
        self.released = self.released or release_fired or release is None or release <= now
        stats = self.stats
        ended = stats.finish_reason is not None
        if not (needed_now or ((self.released or ended) and (stats.codes >= self.codes or ended))):
            return []
        out = self.held[0] if len(self.held) == 1 else np.concatenate(self.held)
        self.held, self.codes, self.released = [], 0, True
        stats.samples += out.size
        return [out]


def _earliest(*delays: float | None) -> float | None:
    """The shortest of the delays that are set; None when none is."""
    known = [d for d in delays if d is not None]
    return min(known) if known else None


class _ObservedDecode:
    """``decode`` timed into the stats and traced (``traced_decode``)."""

    def __init__(self, decode: Decode, stats: UtteranceStats) -> None:
        self.decode = decode
        self.stats = stats
        self.last = False  # set before the stitcher's flush: its decode is the last window

    async def __call__(self, codes: list[int], deadline: float | None = None) -> np.ndarray:
        return await traced_decode(self.stats, len(codes), self.last, lambda: self.decode(codes, deadline))


async def synthesize(
    source: TokenSource,
    decode: Decode,
    params: GenerationParams,
    schedule: StitchSchedule,
    stats: UtteranceStats | None = None,
    generated: Callable[[], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    load: Callable[[], RoundCost | None] | None = None,
    due: Callable[[], float | None] | None = None,
    hold_codes: int = 0,
) -> AsyncGenerator[np.ndarray, None]:
    """Yield float32 mono 24 kHz chunks, shape (samples,), as the LM produces codes.

    Exactly 480 samples per generated code in total. Closing or cancelling the iterator aborts the
    generation upstream (the LM stream is closed even when the task is being cancelled). ``generated``
    is called once the LM stream has ended normally, before the last windows are decoded. ``clock`` is
    the stitcher's (play-out deadlines); ``load`` the codec's load now, which sizes the windows; ``due``
    when a listener already playing reaches this generation (a later part: ``Stitcher``; None: the
    first audio). While it waits for the LM, a window is cut at the codes that exist when the schedule's
    deadline cuts say the listener is about to run dry (``Stitcher.cut_due_in``). ``hold_codes``: the first
    audio goes out only once the LM has sent that many codes or ended, or a listener already playing gets
    to it, and not before the stitcher's ``release_at`` for an LM near real time (``_FirstAudioHold``).
    """
    stats = stats if stats is not None else UtteranceStats()
    started = time.perf_counter()
    stream = source.generate(params)
    observed = _ObservedDecode(decode, stats)
    stitcher = Stitcher(observed, schedule, clock=clock, load=load, due=due)
    hold = _FirstAudioHold(hold_codes, stats, due, clock, lambda: stitcher.release_at)
    deltas = NextItem(aiter(stream))
    try:
        while True:
            waited = time.perf_counter()
            cut_in, hold_in = stitcher.cut_due_in(), hold.due_in()
            came = await deltas.wait(_earliest(cut_in, hold_in))
            stats.lm_wait_s += time.perf_counter() - waited
            if not came:
                if hold_in is not None and (cut_in is None or hold_in <= cut_in):
                    for chunk in hold.take(fired=True):  # its listener needs the held audio, or its time came
                        yield chunk
                else:  # the listener is about to run dry: decode what exists
                    for cut in await stitcher.cut():
                        for chunk in hold.take(cut):
                            yield chunk
                continue
            codes = deltas.take()
            if codes is None:
                break
            stats.codes += len(codes)
            stats.tokens += codes
            async with contextlib.aclosing(stitcher.feed(codes)) as decoded:  # each as soon as decoded
                async for window in decoded:
                    for chunk in hold.take(window):
                        yield chunk
            for chunk in hold.take():  # the LM got past the hold
                yield chunk
        stats.finish_reason = stream.finish_reason
        if generated is not None:
            generated()
        for chunk in hold.take():
            yield chunk
        observed.last = True
        for window in await stitcher.flush():
            for chunk in hold.take(window):
                yield chunk
    finally:
        with anyio.CancelScope(shield=True):
            await deltas.cancel()  # the generator must not be running when it is closed
            await stream.aclose()
        stats.stall_s += stitcher.stall_s
        stats.prompt_tokens = stream.prompt_tokens
        stats.finish_reason = stream.finish_reason
        stats.generation_s = time.perf_counter() - started
