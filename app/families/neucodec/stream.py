"""NeuCodecStream: a realtime turn of the NeuCodec family, pipelined by segment.

The turn's pieces are grouped into segments (``app.families.shared.segmented.Segments``: sentence and
clause ends); each segment is one generation, planned when it is complete as a long input's part is
(its plain prompt, ``max_tokens`` fitted to the window, the seed ``part_seed(seed, k)``), prompted
with the turn's earlier segments as interleave turns (``Conversations.follow``, built-in voices), and
started while the segment before it plays. The segments are played by ``play_parts`` with the
long-input crossfade, exactly as ``NeuCodecUtterance`` plays a long input cut into the same parts: the
two give the same audio for the same segments and seeds (tested).

With a session conversation (``StreamJob.conversation``) and the interleave store on, the first
segment is prompted with the conversation's stored turns, and every segment is stored as a turn once
played, so the next turn of the session continues this one. Word timings: each segment's audio spread
over its written words (``SegmentTimer``), sent once the segment has been played.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Protocol

import numpy as np

from app.audio.stitcher import StitchSchedule
from app.core.family import SpeechJob, SpokenPiece, StreamItem, StreamJob
from app.core.stats import UtteranceStats
from app.families.neucodec.utterance import Backends, NeuCodecUtterance, PlannedPart
from app.families.shared.parts import Part
from app.families.shared.segmented import Segments, play_segments


class StreamBackends(Backends, Protocol):
    """What a stream runs on (the family's): an utterance's backends and the planning of a segment."""

    def segment_part(self, job: SpeechJob, text: str, index: int) -> PlannedPart: ...


class NeuCodecStream(NeuCodecUtterance):
    """A turn whose text is still arriving (module docstring); its parts are the segments so far."""

    def __init__(
        self,
        family: StreamBackends,
        job: StreamJob,
        schedule: StitchSchedule,
        crossfade: int,
    ) -> None:
        super().__init__(family, [], schedule, None, job.attributes, crossfade)
        self.owner = family
        self.job = job
        self.turns = []
        self.segments = Segments()
        self.request = SpeechJob(
            model=job.model, text="", voice=job.voice, sampling=job.sampling, attributes=job.attributes
        )
        self.interleaved = isinstance(job.voice, str)

    def push(self, piece: SpokenPiece) -> None:
        self.segments.push(piece)

    def end(self) -> None:
        self.segments.end()

    async def _plan(self, index: int) -> None:
        """Plan segment ``index`` (its turn too, for the first one with a built-in voice)."""
        text = self.segments.texts[index]
        planned = await asyncio.to_thread(self.owner.segment_part, self.request, text, index)
        self.parts.append(planned)
        self.turns.append(None)
        if index or not self.interleaved:
            return
        assert isinstance(self.job.voice, str)
        conversations = self.owner.conversations
        key, keep = self.job.conversation, self.job.retain_turns
        if key is not None and conversations.enabled:
            turn = await conversations.prepare(key, self.job.voice, text, planned.params, keep)
        else:
            turn = await conversations.fresh(key or "", self.job.voice, text, planned.params, keep)
        self.turns[0] = turn

    async def _part_stream(self, part: Part) -> AsyncGenerator[np.ndarray, None]:
        await self._plan(part.index)
        async for chunk in super()._part_stream(part):
            yield chunk

    async def _part_done(self, part: Part, last: bool) -> None:
        if self.job.conversation is not None:
            await super()._part_done(part, last)

    def stream(self, stats: UtteranceStats) -> AsyncGenerator[StreamItem, None]:  # type: ignore[override]
        return play_segments(self.segments, self._part_stream, stats, self.crossfade, self._part_done)
