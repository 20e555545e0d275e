"""NeuCodecUtterance: one planned NeuCodec request, spoken as one generation or, for a long input, as
several parts played as one stream (``app.families.shared.parts``).

Each generation runs ``pipeline.synthesize``. With an interleave turn, a generation's first audio is held
until the fallback check has been decided, so a regeneration without history never follows audio; a
later part's is held no longer than its listener can wait (then it plays without a fallback). With
interleave on, part k > 0 is prompted with the parts before it as turns (``Conversations.follow``) and
each part is stored as a turn once all its audio was taken, the last one before the stream ends
(``Conversations.land``), so before the response's last bytes.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import anyio
import numpy as np

from app.audio.round_cost import RoundCost
from app.audio.stitcher import StitchSchedule
from app.core.errors import Unavailable
from app.core.stats import UtteranceStats
from app.core.types import Attributes
from app.families.neucodec.history.conversation import Conversations, InterleaveTurn
from app.families.neucodec.lm.types import GenerationParams, TokenSource
from app.families.neucodec.pipeline import synthesize
from app.families.neucodec.prompt import estimate_tokens
from app.families.shared.parts import Part, play_parts
from app.observability.tracing import start_span, traced_stream

if TYPE_CHECKING:
    from app.families.neucodec.codec.worker import CodecWorker


class Backends(Protocol):
    """What an utterance runs on (the family's): the LM source, the codec worker, the conversations, and
    the codec's load now (which sizes the windows)."""

    source: TokenSource
    codec: CodecWorker | None
    conversations: Conversations

    def round_load(self) -> RoundCost | None: ...


@dataclass(frozen=True)
class PlannedPart:
    """One generation of a request: its text and its LM call (the plain prompt, fitted max_tokens, seed)."""

    text: str
    params: GenerationParams


class NeuCodecUtterance:
    """One planned NeuCodec request: its parts (one unless the text is long), its stitch schedule, and the
    first part's interleave turn (None without interleave)."""

    def __init__(
        self,
        family: Backends,
        parts: Sequence[PlannedPart],
        schedule: StitchSchedule,
        turn: InterleaveTurn | None,
        request_attributes: Attributes,
        crossfade: int = 0,
    ) -> None:
        self.family = family
        self.parts = list(parts)
        self.schedule = schedule
        self.request_attributes = request_attributes
        self.crossfade = crossfade  # samples at each join between parts
        self.turns: list[InterleaveTurn | None] = [turn] + [None] * (len(self.parts) - 1)

    @property
    def turn(self) -> InterleaveTurn | None:
        """The first part's interleave turn (cold after a fallback)."""
        return self.turns[0]

    @property
    def params(self) -> GenerationParams:
        """The first generation's LM call."""
        return self.turns[0].params if self.turns[0] is not None else self.parts[0].params

    def attributes(self) -> Attributes:
        return self._attributes(self.params, {"tts.parts": len(self.parts)})

    def _attributes(self, params: GenerationParams, extra: Attributes) -> Attributes:
        return {
            **extra,
            **self.request_attributes,
            "tts.model": params.model,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "prompt_chars": len(params.prompt),
            "first_window_tokens": self.schedule.first_tokens,
        }

    def headers(self) -> Mapping[str, str]:
        return self.turn.headers() if self.turn is not None else {}

    def _generate(
        self,
        params: GenerationParams,
        stats: UtteranceStats,
        index: int,
        generated: Callable[[], None],
        due: Callable[[], float | None] | None,
        hold_codes: int,
    ) -> AsyncGenerator[np.ndarray, None]:
        """One generation of ``params`` traced as ``tts.stream``; its first audio held until ``hold_codes``
        codes exist, the LM ended or its listener gets to it (``synthesize``)."""
        codec = self.family.codec
        if codec is None:
            raise Unavailable("The codec is not loaded yet.")
        attributes = self._attributes(params, {"tts.part": index} if len(self.parts) > 1 else {})
        return traced_stream(
            start_span("tts.stream", attributes),
            synthesize(
                self.family.source,
                codec.decode,
                params,
                self.schedule,
                stats,
                generated,
                load=self.family.round_load,
                due=due,
                hold_codes=hold_codes,
            ),
            stats.span_attributes,
        )

    async def stream(self, stats: UtteranceStats) -> AsyncGenerator[np.ndarray, None]:
        """PCM chunks of every part, in order; each part's turn is stored once its audio was taken."""
        if len(self.parts) == 1:
            async for chunk in self._part(0, stats, lambda: None, None):
                yield chunk
            if self.turn is not None:
                await self.family.conversations.land(self.turn, stats)
            return
        chunks = play_parts(len(self.parts), self._part_stream, stats, self.crossfade, self._part_done)
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            with anyio.CancelScope(shield=True):
                await chunks.aclose()

    async def _part_stream(self, part: Part) -> AsyncGenerator[np.ndarray, None]:
        """Part ``part.index`` of a long input; with interleave, prompted with the parts before it."""
        index = part.index
        previous = self.turns[index - 1] if index else None
        if previous is not None and part.previous is not None:
            planned = self.parts[index]
            follow = self.family.conversations.follow
            self.turns[index] = await follow(previous, part.previous.stats, planned.text, planned.params)
        async with contextlib.aclosing(self._part(index, part.stats, part.generated, part.due)) as chunks:
            async for chunk in chunks:  # closed with this stream, not whenever Python finalizes it
                yield chunk

    async def _part_done(self, part: Part, last: bool) -> None:
        """Store the part's turn (the last one: and wait for it, as for a one-part request)."""
        turn = self.turns[part.index]
        if turn is None:
            return
        if last:
            await self.family.conversations.land(turn, part.stats)
        else:
            self.family.conversations.commit(turn, part.stats)

    async def _part(
        self,
        index: int,
        stats: UtteranceStats,
        generated: Callable[[], None],
        due: Callable[[], float | None] | None,
    ) -> AsyncGenerator[np.ndarray, None]:
        """One part's PCM chunks; with an interleave turn the first audio is held until ``hold_codes``
        codes exist, the LM finished or the listener gets to it (``synthesize``), and a fallback
        regenerates without history before anything is yielded. ``generated`` is called when the
        generation that is kept has all its tokens; ``due`` says when a listener already playing reaches
        it (None: the first audio)."""
        turn = self.turns[index]
        params = turn.params if turn is not None else self.parts[index].params

        def kept() -> None:  # a part whose audio went out before the check was decided is kept as it is
            if turn is None or stats.samples or not turn.falls_back(stats):
                generated()

        hold = turn.hold_codes if turn is not None else 0
        chunks = self._generate(params, stats, index, kept, due, hold)
        try:
            if turn is not None and hold:
                head = await anext(chunks, None)
                if turn.falls_back(stats):
                    with anyio.CancelScope(shield=True):
                        await chunks.aclose()
                    self.family.conversations.fell_back()
                    turn = self.turns[index] = turn.cold()
                    params = turn.params
                    stats.reset()
                    chunks = self._generate(params, stats, index, kept, due, 0)
                    head = await anext(chunks, None)
                if head is None:
                    return
                yield head
            async for chunk in chunks:
                yield chunk
        finally:
            with anyio.CancelScope(shield=True):
                await chunks.aclose()
            if stats.prompt_tokens is None:
                stats.prompt_tokens = estimate_tokens(params.prompt)
