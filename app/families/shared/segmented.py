"""A realtime turn spoken segment by segment: for a family that generates whole texts (``plan``), and
the segment grouping and word timings every family's stream uses.

**Segments.** The pieces of a streamed text (``app.text.stream_split``, normalized by the session) are
grouped into segments: a segment closes at a sentence end, at a clause end when it is the turn's first
(so the first audio does not wait for a whole sentence) or has ``min_chars`` characters, once it
reaches ``max_chars``, and at a flush and the end of the text. ``Segments`` is the growing part source of
``play_parts``: each segment is generated as soon as it is complete (while the one before plays, as a
long input's parts are) and joined to the one before with the long-input crossfade.

**Word timings** (``spread``): a generation's audio spread over the written words of its text, each
word's share proportional to its letters and digits (at least one): a stated estimate, exact at the
generation's two ends. ``SegmentTimer`` places each segment's words from the audio played before it
(minus the crossfades) and its own length, once the segment's audio has all been taken.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence

import anyio
import numpy as np

from app.core.constants import SAMPLE_RATE
from app.core.family import SpokenPiece, StreamItem, Utterance, WordTiming
from app.core.stats import UtteranceStats
from app.families.shared.parts import Part, PartDone, PartStream, play_parts

MIN_CHARS = 40
MAX_CHARS = 300
_WORD = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\s\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
)


def written_words(text: str) -> list[str]:
    """The words of a written text: whitespace-separated, each CJK character a word of its own."""
    return _WORD.findall(text)


def spread(words: Sequence[str], start: float, end: float) -> list[WordTiming]:
    """``words`` laid over ``[start, end]`` seconds, each in proportion to its letters and digits."""
    weights = [max(1, sum(ch.isalnum() for ch in word)) for word in words]
    total = sum(weights)
    timings, at = [], start
    for word, weight in zip(words, weights, strict=True):
        length = (end - start) * weight / total
        timings.append(WordTiming(word, round(at, 4), round(at + length, 4)))
        at += length
    return timings


class Segments:
    """Pieces grouped into segments (see the module docstring); a ``Growing`` source of parts."""

    def __init__(self, min_chars: int = MIN_CHARS, max_chars: int = MAX_CHARS) -> None:
        self.min_chars = min_chars
        self.max_chars = max_chars
        self.texts: list[str] = []  # complete segments: spoken text
        self.written: list[str] = []  # and their written text
        self.ended = False
        self._spoken: list[str] = []
        self._writing: list[str] = []
        self._changed = asyncio.Event()
        self._listeners: list[Callable[[], None]] = []

    def push(self, piece: SpokenPiece) -> None:
        """Add a piece; closes the segment it ends, if it ends one."""
        join = " " if piece.spaced and self._spoken else ""
        self._spoken.append(join + piece.text)
        self._writing.append(join + piece.written)
        length = sum(len(text) for text in self._spoken)
        first = not self.texts
        if (
            piece.kind in ("sentence", "end")  # "end": the text's end, or a flush
            or (piece.kind == "clause" and (first or length >= self.min_chars))
            or length >= self.max_chars
        ):
            self._close()

    def end(self) -> None:
        """The text has ended: the last segment closes."""
        self._close()
        self.ended = True
        self._changed.set()

    def _close(self) -> None:
        text = "".join(self._spoken).strip()
        written = "".join(self._writing).strip()
        self._spoken, self._writing = [], []
        if not text:
            return
        self.texts.append(text)
        self.written.append(written)
        self._changed.set()
        for listener in self._listeners:
            listener()

    def known(self) -> int:
        return len(self.texts)

    async def wait(self, index: int) -> bool:
        while index >= len(self.texts) and not self.ended:
            self._changed.clear()
            await self._changed.wait()
        return index < len(self.texts)

    def listen(self, added: Callable[[], None]) -> None:
        self._listeners.append(added)


class SegmentTimer:
    """Word timings of played segments: segment ``k`` starts after the audio of the ones before it, less
    one crossfade per join (seconds of 24 kHz audio)."""

    def __init__(self, crossfade: int) -> None:
        self.crossfade = crossfade
        self.at = 0  # samples before the next segment
        self.ready: list[WordTiming] = []

    def done(self, index: int, written: str, samples: int) -> None:
        """Segment ``index`` played ``samples`` samples: its words' timings are ready (from where the words
        before them end: the crossfade's overlap goes to this segment)."""
        start = self.at
        self.at = max(start, self.at - (self.crossfade if index else 0) + samples)
        self.ready += spread(written_words(written), start / SAMPLE_RATE, self.at / SAMPLE_RATE)

    def take(self) -> list[WordTiming]:
        ready, self.ready = self.ready, []
        return ready


SegmentPlanner = Callable[[str, int], Awaitable[Utterance]]
"""A segment's text and index -> its utterance (the family's ``plan`` of a job for that text)."""


class SegmentedStream:
    """A ``SpeechStream`` for any family: each segment planned as a text of its own (``plan``) and played
    as a long input's parts are."""

    def __init__(self, plan: SegmentPlanner, crossfade: int) -> None:
        self.plan = plan
        self.crossfade = crossfade
        self.segments = Segments()

    def push(self, piece: SpokenPiece) -> None:
        self.segments.push(piece)

    def end(self) -> None:
        self.segments.end()

    async def _part(self, part: Part) -> AsyncGenerator[np.ndarray, None]:
        utterance = await self.plan(self.segments.texts[part.index], part.index)
        chunks = utterance.stream(part.stats)
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            with anyio.CancelScope(shield=True):
                await chunks.aclose()
            part.generated()

    def stream(self, stats: UtteranceStats) -> AsyncGenerator[StreamItem, None]:
        return play_segments(self.segments, self._part, stats, self.crossfade)


async def play_segments(
    segments: Segments,
    stream: PartStream,
    stats: UtteranceStats,
    crossfade: int,
    done: PartDone | None = None,
) -> AsyncGenerator[StreamItem, None]:
    """The segments made by ``stream`` played as a long input's parts (``play_parts``), each segment's
    word timings yielded once its audio has all been taken; ``done`` runs after each segment's timings
    are placed."""
    timer = SegmentTimer(crossfade)

    async def placed(part: Part, last: bool) -> None:
        timer.done(part.index, segments.written[part.index], part.stats.samples)
        if done is not None:
            await done(part, last)

    chunks = play_parts(segments, stream, stats, crossfade, placed)
    try:
        async for chunk in chunks:
            for timing in timer.take():
                yield timing
            yield chunk
        for timing in timer.take():
            yield timing
    finally:
        with anyio.CancelScope(shield=True):
            await chunks.aclose()
