"""MossUtterance: one planned MOSS request, spoken as one generation or, for a long input, as several
parts played as one stream (``app.families.shared.parts``).

Each part runs its frames through a codec stream of its own (``speak``), opened with its first chunk.
Part k > 0 is prompted with part k - 1 as a history turn (its text and frames, laid out as any earlier
turn), so the voice and pace carry over the join, when part k - 1 ended normally ("stop") and the turn
leaves the part its planned frames in the backbone window; otherwise the part is prompted cold, as
planned. With an interleave id (built-in voices) every part that ended normally is stored as a turn,
in order, the last one before the stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import anyio
import numpy as np

from app.core.family import SpeechJob
from app.core.stats import UtteranceStats
from app.core.types import Attributes
from app.families.moss import history
from app.families.moss.lm.stage import MossLM
from app.families.moss.lm.types import FrameJob, Turn
from app.families.moss.speak import ChunkSchedule, speak
from app.families.shared.parts import Part, play_parts
from app.interleave.service import Interleave
from app.observability.tracing import start_span, traced_stream

if TYPE_CHECKING:
    from app.families.moss.codec.service import MossCodecService, MossStream


class Backends(Protocol):
    """What an utterance runs on (the family's): the LM stage and codec, the store."""

    interleave: Interleave
    schedule: ChunkSchedule
    """The decode sizes a request gets unless it asks for its own first audio size."""

    def parts(self) -> tuple[MossLM, MossCodecService]: ...


@dataclass(frozen=True)
class PlannedPart:
    """One generation of a request: its text and its frame job (cold: no history of its parts)."""

    text: str
    job: FrameJob


class _Decoder:
    """A part's codec stream, opened with its first chunk: a request waiting for a row of the engine holds
    no decoder state (~180 MB in float32). The first part is refused (503, before any audio) when
    MOSS_CODEC_MAX_STREAMS are open; a later part, read ahead while the one before plays, waits for a
    stream instead (that part's own stream ends at the latest), so a response never fails half-way. The
    same holds for the frame engine's wait list: only the first part may be refused (429)."""

    def __init__(self, codec: MossCodecService, first: bool) -> None:
        self.codec = codec
        self.first = first
        self.stream: MossStream | None = None

    async def __call__(self, frames: np.ndarray) -> np.ndarray:
        if self.stream is None:
            self.stream = self.codec.open_stream() if self.first else await self.codec.open_stream_soon()
        return await self.stream.decode(frames)

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


class MossUtterance:
    """One planned MOSS request: its parts (one unless the text is long), the first part's history, and
    the turns to store when an interleave id is set."""

    def __init__(
        self,
        family: Backends,
        parts: Sequence[PlannedPart],
        request: SpeechJob,
        voice: str | None,
        reference: np.ndarray | None,
        history_turns: Sequence[Turn],
        schedule: ChunkSchedule,
        crossfade: int = 0,
    ) -> None:
        self.family = family
        self.schedule = schedule  # decode sizes in frames
        self.parts = tuple(parts)
        self.request = request
        self.voice = voice  # the built-in voice (history is kept for built-in voices only)
        self.reference = reference  # the voice prompt's codes (F, 16), None for ``default``
        self.history_turns = history_turns
        self.crossfade = crossfade  # samples at each join between parts
        self.jobs = [part.job for part in self.parts]  # the job each part runs (part k > 0: when it starts)
        self.made: list[list[np.ndarray]] = [[] for _ in self.parts]  # each part's frame blocks

    @property
    def job(self) -> FrameJob:
        """The first part's frame job."""
        return self.jobs[0]

    @property
    def turn_kept(self) -> bool:
        """True when the finished turns go to the interleave store."""
        return self.request.interleave_id is not None and self.voice is not None

    def _attributes(self, job: FrameJob, extra: Attributes) -> Attributes:
        return {
            **extra,
            **self.request.attributes,
            "tts.model": self.request.model,
            "max_tokens": job.max_frames,
            "temperature": job.sampling.temperature,
            "prompt_rows": int(job.prefill.shape[0]),
            "history_turns": len(self.history_turns),
        }

    def headers(self) -> Mapping[str, str]:
        if not self.turn_kept:
            return {}
        frames = sum(len(turn.frames) for turn in self.history_turns)
        return {
            "X-Interleave-Turns": str(len(self.history_turns)),
            "X-Interleave-Tokens": str(frames),
        }

    async def stream(self, stats: UtteranceStats) -> AsyncGenerator[np.ndarray, None]:
        """PCM chunks of every part, in order; closing it closes the engine's row and the codec stream
        of the part running, and starts no further part. A part that ended normally ("stop") is stored
        as a turn before the stream ends."""
        if len(self.parts) == 1:
            chunks = self._part(0, stats, lambda: None)
        else:
            chunks = play_parts(len(self.parts), self._part_stream, stats, self.crossfade, self._part_done)
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            with anyio.CancelScope(shield=True):
                await chunks.aclose()
        if len(self.parts) == 1:
            await self._keep(0, stats, last=True)

    async def _part_stream(self, part: Part) -> AsyncGenerator[np.ndarray, None]:
        """Part ``part.index`` of a long input, prompted with the part before it when that fits."""
        previous = part.previous
        if previous is not None and previous.stats.finish_reason == "stop" and self.made[previous.index]:
            self.jobs[part.index] = await asyncio.to_thread(self._follow, part.index)
        chunks = self._part(part.index, part.stats, part.generated, part.due)
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                yield chunk

    def _follow(self, index: int) -> FrameJob:
        """Part ``index``'s job with part ``index - 1`` as its history turn, when the window holds both and
        the part's planned frames; else its cold job (worker thread: it tokenizes)."""
        lm, _ = self.family.parts()
        cold = self.parts[index].job
        frames = np.concatenate(self.made[index - 1])
        turn = Turn(lm.prompter.text_ids(self.parts[index - 1].text), frames)
        warm = lm.prompter.job(
            self.parts[index].text,
            reference=self.reference,
            history=[turn],
            sampling=cold.sampling,
            max_frames=cold.max_frames,
        )
        return warm if len(warm.prefill) + warm.max_frames <= lm.max_positions else cold

    async def _part_done(self, part: Part, last: bool) -> None:
        await self._keep(part.index, part.stats, last)

    async def _keep(self, index: int, stats: UtteranceStats, last: bool) -> None:
        """Store part ``index`` as a turn when it ended normally (the last one: waited for)."""
        if not self.turn_kept or stats.finish_reason != "stop" or not self.made[index]:
            return
        assert self.voice is not None and self.request.interleave_id is not None
        record = history.record(self.voice, self.parts[index].text, np.concatenate(self.made[index]))
        interleave, keep = self.family.interleave, self.request.retain_turns
        if last:
            await interleave.commit_turn(self.request.interleave_id, record, keep)
        else:
            interleave.append(self.request.interleave_id, record, keep)

    async def _part(
        self,
        index: int,
        stats: UtteranceStats,
        generated: Callable[[], None],
        due: Callable[[], float | None] | None = None,
    ) -> AsyncGenerator[np.ndarray, None]:
        """One part's PCM chunks as the engine makes frames; ``generated`` is called once its frames are all
        made; ``due``: when a listener already playing reaches it (None: the first audio). Closing it closes
        the engine's row and the part's codec stream."""
        lm, codec = self.family.parts()
        job = self.jobs[index]
        stats.prompt_tokens = int(job.prefill.shape[0])
        started = time.perf_counter()
        decoder = _Decoder(codec, first=index == 0)
        frames: AsyncGenerator[np.ndarray, None] | None = None
        chunks: AsyncGenerator[np.ndarray, None] | None = None
        extra: Attributes = {"tts.part": index} if len(self.parts) > 1 else {}
        made = self.made[index]
        feed = job.feed
        parked = None if feed is None else lambda: feed.parked_s
        try:
            frames = lm.engine.stream(job, admitted=index > 0)  # a later part waits: the response is on
            chunks = traced_stream(
                start_span("tts.stream", self._attributes(job, extra)),
                speak(frames, decoder, self.schedule, job.max_frames, stats, made, generated, due, parked),
                stats.span_attributes,
            )
            async for chunk in chunks:
                yield chunk
        except Exception:
            stats.finish_reason = "error"
            raise
        finally:  # closed by its consumer (GeneratorExit) or cancelled: "cancelled" below
            with anyio.CancelScope(shield=True):
                if chunks is not None:
                    await chunks.aclose()
                if frames is not None:
                    await frames.aclose()
            decoder.close()
            if stats.finish_reason is None:
                stats.finish_reason = "cancelled"
            stats.generation_s = time.perf_counter() - started
