"""MossTextStream: a realtime turn of MOSS-TTS-Realtime, fed into ONE running generation as it arrives.

The turn's normalized pieces are joined as the whole text would be (one space where the client's text
had whitespace) and tokenized incrementally (``lm.stream_tokens``: the ids of the whole text, each
emitted once no later piece can change it; a flush emits what is held back, so the text is cut there).
The generation starts as soon as ``DELAY`` (12) ids are there, or the text has ended with fewer: its
prefill is exactly the one the whole text would have (the system block, the history, the assistant
prefix and the first ``min(n, 12)`` ids), and every further id goes into its ``TextFeed``. Step ``k``
feeds id ``P + k - 1``; when that id has not come yet the row parks in the frame engine (no steps, no
audio, its cache kept, the other rows unslowed) and resumes on the next piece; once the text has ended
the steps feed the text pad until EOS. So the frames depend on the text alone, not on how it was
delivered (tested: deltas of 1, 3 and 17 characters, a starved turn, 8 turns batched, all equal to the
text pushed whole).

The frames run through a codec stream of their own as in ``MossUtterance`` (which this wraps), and the
finished turn is stored in the session's conversation as any MOSS turn is (built-in voices), so the
next turn of the session has it as history.

Word timings, sent when the generation has ended: the turn's audio (``F`` frames) spread over the
written words in proportion to their letters, with each piece starting no earlier than the frame at
which its first id entered the generation (id ``j`` is first read by the step that makes frame
``j - P + 1``; the model cannot say a word before it has read it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import numpy as np

from app.core.errors import APIError, InvalidRequest
from app.core.family import SpeechJob, SpokenPiece, StreamItem, StreamJob, WordTiming
from app.core.stats import UtteranceStats
from app.families.moss.lm.feed import TextFeed
from app.families.moss.lm.stream_tokens import StreamTokenizer, pretoken_spans
from app.families.moss.lm.types import DELAY, FrameJob
from app.families.moss.utterance import Backends, MossUtterance, PlannedPart
from app.families.shared.segmented import spread, written_words

if TYPE_CHECKING:
    from app.families.moss.lm.stage import MossLM

FRAME_S = 0.08


@dataclass
class _Written:
    """A piece as written, and where the spoken text stood after it (characters)."""

    written: str
    until: int


class MossTextStream:
    """A turn whose text is still arriving (module docstring)."""

    def __init__(
        self,
        family: Backends,
        lm: MossLM,
        job: StreamJob,
        build: Callable[[list[int], TextFeed], FrameJob],
        voice: str | None,
        reference: np.ndarray | None,
    ) -> None:
        self.family = family
        self.lm = lm
        self.request = SpeechJob(
            model=job.model,
            text="",
            voice=job.voice,
            sampling=job.sampling,
            interleave_id=job.conversation,
            retain_turns=job.retain_turns,
            attributes=job.attributes,
        )
        self.build = build
        self.voice = voice
        self.reference = reference
        prompter = lm.prompter
        self.tokens = StreamTokenizer(
            lambda text: list(prompter.text_ids(text)), pretoken_spans(prompter.tokenizer)
        )
        self.text = ""  # the spoken text so far, pieces joined
        self.pieces: list[_Written] = []
        self.ids: list[int] = []  # before the generation starts
        self.feed: TextFeed | None = None
        self.frame_job: FrameJob | None = None
        self.utterance: MossUtterance | None = None
        self.error: APIError | None = None
        self.ended = False
        self._changed = asyncio.Event()

    def push(self, piece: SpokenPiece) -> None:
        text = (" " if piece.spaced and self.text else "") + piece.text
        self.text += text
        self.pieces.append(_Written(piece.written, len(self.text)))
        self._add(self.tokens.push(text))
        if piece.kind == "end":  # a flush (or the end): what is held back is spoken now
            self._add(self.tokens.end())

    def end(self) -> None:
        if self.ended:
            return
        self._add(self.tokens.end())
        self.ended = True
        if self.feed is not None:
            self.feed.end()
        elif self.ids:
            self._start()
        if self.utterance is not None:
            self.utterance.parts = (PlannedPart(self.text, self.utterance.parts[0].job),)
        self._changed.set()

    def _add(self, ids: list[int]) -> None:
        if self.error is not None:
            return
        if self.feed is not None:
            self.feed.extend(ids)
            return
        self.ids += ids
        if len(self.ids) >= DELAY:
            self._start()

    def _start(self) -> None:
        """Build the turn's job from the ids so far and open its generation's utterance."""
        feed = TextFeed(self.ids)
        try:
            job = self.build(self.ids, feed)
        except APIError as exc:
            self.error = exc
            self._changed.set()
            return
        except ValueError as exc:
            self.error = InvalidRequest(f"transcript: {exc}", param="transcript")
            self._changed.set()
            return
        if self.ended:
            feed.end()
        self.feed, self.frame_job = feed, job
        self.utterance = MossUtterance(
            self.family,
            [PlannedPart(self.text, job)],
            self.request,
            self.voice,
            self.reference,
            [],
            self.family.schedule,
        )
        self._changed.set()

    async def stream(self, stats: UtteranceStats) -> AsyncGenerator[StreamItem, None]:
        while self.utterance is None and self.error is None and not self.ended:
            self._changed.clear()
            await self._changed.wait()
        if self.error is not None:
            raise self.error
        if self.utterance is None:
            return  # the text had nothing to say
        chunks = self.utterance.stream(stats)
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            with anyio.CancelScope(shield=True):
                await chunks.aclose()
            if self.feed is not None:
                stats.parked_s = self.feed.parked_s
        for timing in self.timings(stats.codes):
            yield timing

    def timings(self, frames: int) -> list[WordTiming]:
        """The written words over ``frames`` frames (module docstring)."""
        if not frames or not self.pieces or self.frame_job is None:
            return []
        lead = self.frame_job.feed_from
        encode = self.lm.prompter.text_ids
        starts, weights = [], []
        before = 0
        for piece in self.pieces:
            first = before  # the piece's first id
            before = len(encode(self.text[: piece.until]))
            starts.append(max(0, first - lead + 1) * FRAME_S)
            weights.append(sum(max(1, sum(ch.isalnum() for ch in w)) for w in written_words(piece.written)))
        total_s, total_w = frames * FRAME_S, sum(weights) or 1
        timings: list[WordTiming] = []
        at = 0.0
        bounds = []
        for start, weight in zip(starts, weights, strict=True):
            at = min(max(at, start), total_s)
            bounds.append(at)
            at += total_s * weight / total_w
        bounds.append(total_s)
        for i, piece in enumerate(self.pieces):
            end = max(bounds[i], min(bounds[i + 1], total_s))
            timings += spread(written_words(piece.written), bounds[i], end)
        return timings
