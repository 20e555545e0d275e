"""One context of a session: a turn whose text arrives in deltas and whose audio goes out as it is made.

``push`` and ``end`` only queue (checked against the limits at once, so a refusal is immediate); the
context's task then runs three things for the turn's life:

1. **the slot**: a stream slot of the server's admission (``MAX_CONCURRENT_STREAMS``), held while the
   context is open, so sessions and HTTP requests share one limit; no slot within ``QUEUE_WAIT_S``
   fails the context with 429;
2. **the text**: deltas cut into pieces (``StreamSplitter``), each normalized as a request's text is
   (``spoken_plan``: lexicons, then the normalizer) and pushed into the family's ``SpeechStream``;
   a flush cuts what is pending into a piece now; the end of the input ends the stream. No text for
   ``REALTIME_INPUT_TIMEOUT_S`` before the input ended fails the context;
3. **the audio**: the stream's PCM through the shared post chain (loudness, speed, fade, the encoder
   at the requested rate; in worker threads), sent as ``Audio`` events, and its word timings, scaled by
   the speed change, as ``Timestamps`` events after the audio they describe.

It ends with ``Done`` (usage) or ``Failed`` (the error), or silently when cancelled; in every case the
family stream is closed (its generation and codec stream stop within one step), the chain is closed and
the slot is released. ``REALTIME_TURN_TIMEOUT_S`` bounds the whole turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from app.audio.post import PostChain
from app.core.constants import SAMPLE_RATE
from app.core.errors import APIError, BackendError, InvalidRequest
from app.core.family import SpeechStream, SpokenPiece, StreamItem, WordTiming
from app.core.stats import UtteranceStats
from app.observability.tracing import start_span
from app.sessions.events import Acknowledged, Audio, Done, Event, Failed, Flushed, Timestamps
from app.sessions.plan import ContextPlan
from app.synthesis.engine import Engine
from app.synthesis.spoken import spoken_plan
from app.text.speech_plan import Speak
from app.text.stream_split import Piece, StreamSplitter

log = logging.getLogger("app.access")

Emit = Callable[[Event], Awaitable[None]]


class Admission(Protocol):
    """The server's stream slots (``app.api.admission.Admission``)."""

    async def acquire(self) -> float: ...

    def release(self, started: float) -> None: ...


@dataclass(frozen=True)
class Limits:
    """What one context may take (the REALTIME_* settings)."""

    chars: int = 20000
    input_idle_s: float = 30.0
    turn_s: float = 600.0


class _End:
    """Queued by ``end``."""


@dataclass(frozen=True)
class _Flush:
    flush_id: int


class Context:
    """One turn (see the module docstring)."""

    def __init__(
        self,
        context_id: str,
        plan: ContextPlan,
        engine: Engine,
        emit: Emit,
        limits: Limits,
        admission: Admission | None,
        finished: Callable[[Context], None] = lambda context: None,
    ) -> None:
        self.id = context_id
        self.plan = plan
        self.engine = engine
        self.emit = emit
        self.limits = limits
        self.admission = admission
        self.finished = finished
        self.stats = UtteranceStats()
        self.chars = 0
        self.ended = False  # the input has ended (no more push)
        self.flushes = 0
        self.seq = -1  # the last text message's sequence number, when the protocol numbers them
        self.outcome: str | None = None
        self.first_text: float | None = None
        self.input_end: float | None = None
        self.first_audio: float | None = None
        self.last_audio: float | None = None
        self.stream: SpeechStream | None = None
        self._inbox: asyncio.Queue[str | _End | _Flush] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    # --- the client's side ---------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"context {self.id}")

    def push(self, text: str, seq: int | None = None) -> Acknowledged | None:
        """Queue a text delta (``seq``: its number, gapless from 0, when the protocol numbers them);
        InvalidRequest after the end, out of order, or past the context's character limit."""
        if self.ended:
            raise InvalidRequest("this context's input has ended", param="context_id", code="input_ended")
        if seq is not None:
            if seq != self.seq + 1:
                raise InvalidRequest(
                    f"seq {seq} out of order: expected {self.seq + 1}", param="seq", code="invalid_sequence"
                )
            self.seq = seq
        if self.chars + len(text) > self.limits.chars:
            raise InvalidRequest(
                f"a context takes at most {self.limits.chars} characters of text",
                param="transcript",
                code="context_too_long",
            )
        self.chars += len(text)
        if text and self.first_text is None:
            self.first_text = time.monotonic()
        self._inbox.put_nowait(text)
        return Acknowledged(self.id, seq) if seq is not None else None

    def flush(self) -> None:
        """Speak what is pending now (a flush): the text so far is cut into a piece."""
        if not self.ended:
            self.flushes += 1
            self._inbox.put_nowait(_Flush(self.flushes))

    def end(self) -> None:
        """No more text for this context."""
        if not self.ended:
            self.ended = True
            self.input_end = time.monotonic()
            self._inbox.put_nowait(_End())

    async def cancel(self, outcome: str = "cancelled") -> None:
        """Stop the turn now (barge-in, the client left; ``outcome`` "error": it got a message it cannot
        take): everything it holds is released."""
        if self._task is not None and not self._task.done():
            if self.outcome is None:
                self.outcome = outcome
            self._task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.gather(self._task, return_exceptions=True)

    async def wait(self) -> None:
        """Until the context has finished."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    # --- the turn ------------------------------------------------------------------------------------

    async def _run(self) -> None:
        plan = self.plan
        span = start_span(
            "tts.realtime.context",
            {**plan.job.attributes, "tts.model": plan.job.model, "realtime.context": self.id},
        )
        acquired: float | None = None  # the slot's start, once taken
        chain: PostChain | None = None
        try:
            async with asyncio.timeout(self.limits.turn_s):
                if self.admission is not None:
                    acquired = await self.admission.acquire()
                self.stream = await plan.family.open_stream(plan.job)
                chain = PostChain(plan.post)
                await self._both(self._read(self.stream), self._speak(self.stream, chain))
            self.outcome = "done"
            await self.emit(Done(self.id, self._usage()))
        except asyncio.CancelledError:
            self.outcome = self.outcome or "cancelled"
            raise
        except TimeoutError:
            self.outcome = "error"
            error = InvalidRequest(
                f"the context ran past REALTIME_TURN_TIMEOUT_S ({self.limits.turn_s:g} s)",
                param="context_id",
                code="turn_timeout",
            )
            await self._fail(error)
        except APIError as exc:
            self.outcome = "error"
            await self._fail(exc)
        except Exception as exc:  # a bug: this context fails, the session goes on
            log.exception("realtime context %s failed", self.id)
            self.outcome = "error"
            await self._fail(BackendError(f"the context failed: {exc!r}"))
        finally:
            with anyio.CancelScope(shield=True):
                if chain is not None:
                    chain.close()
                if acquired is not None and self.admission is not None:
                    self.admission.release(acquired)
                span.set({"tts.codes": self.stats.codes, "realtime.outcome": self.outcome})
                span.end()
                self._record()
                self.finished(self)

    async def _fail(self, error: APIError) -> None:
        with contextlib.suppress(Exception):
            await self.emit(Failed(self.id, error))

    async def _both(self, read: Awaitable[None], speak: Awaitable[None]) -> None:
        """Run the text and the audio side together; the first failure stops the other."""
        tasks = [asyncio.ensure_future(read), asyncio.ensure_future(speak)]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _read(self, stream: SpeechStream) -> None:
        """Deltas -> pieces -> normalized -> the family stream, until the input ends."""
        splitter = StreamSplitter()
        while True:
            try:
                async with asyncio.timeout(self.limits.input_idle_s):
                    item = await self._inbox.get()
            except TimeoutError:
                raise InvalidRequest(
                    f"no text for {self.limits.input_idle_s:g} s and the input has not ended",
                    param="transcript",
                    code="input_timeout",
                ) from None
            pieces = splitter.push(item) if isinstance(item, str) else splitter.end()
            for piece in pieces:
                await self._piece(stream, piece)
            if isinstance(item, _Flush):
                await self.emit(Flushed(self.id, item.flush_id))
            if isinstance(item, _End):
                stream.end()
                return

    async def _piece(self, stream: SpeechStream, piece: Piece) -> None:
        plan = self.plan
        planned = await spoken_plan(
            self.engine, piece.text, plan.text, "transcript", plan.lexicons, plan.voice_lexicons
        )
        spoken = " ".join(item.text for item in planned.plan.items if isinstance(item, Speak) and item.text)
        if spoken:
            stream.push(SpokenPiece(spoken, piece.text, piece.kind, piece.spaced))

    async def _speak(self, stream: SpeechStream, chain: PostChain) -> None:
        """The stream's audio through the chain and out; word timings after the audio they describe."""
        rate = self.plan.post.speaking_rate
        words: list[WordTiming] = []
        items: AsyncGenerator[StreamItem, None] = stream.stream(self.stats)
        try:
            async for item in items:
                if isinstance(item, WordTiming):
                    if self.plan.timestamps:
                        words.append(WordTiming(item.word, item.start / rate, item.end / rate))
                    continue
                await self._send(await _off_loop(chain.push, item))
                if words and self.first_audio is not None:
                    await self.emit(Timestamps(self.id, tuple(words)))
                    words = []
            await self._send(await _off_loop(chain.flush))
            if words:
                await self.emit(Timestamps(self.id, tuple(words)))
        finally:
            with anyio.CancelScope(shield=True):
                await items.aclose()

    async def _send(self, data: bytes) -> None:
        if not data:
            return
        now = time.monotonic()
        if self.first_audio is None:
            self.first_audio = now
        self.last_audio = now
        await self.emit(Audio(self.id, data))

    # --- what it did ---------------------------------------------------------------------------------

    def _usage(self) -> dict[str, float | int]:
        audio_s = self.stats.samples / SAMPLE_RATE / self.plan.post.speaking_rate
        return {
            "input_characters": self.chars,
            "prompt_tokens": self.stats.prompt_tokens or 0,
            "output_tokens": self.stats.codes,
            "audio_seconds": round(audio_s, 3),
            "parked_seconds": round(self.stats.parked_s, 3),
        }

    def latencies(self) -> tuple[float | None, float | None]:
        """(first text -> first audio, input end -> last audio), seconds, where both ends happened."""
        first = None
        if self.first_text is not None and self.first_audio is not None:
            first = max(0.0, self.first_audio - self.first_text)
        end = None
        if self.input_end is not None and self.last_audio is not None and self.outcome == "done":
            end = max(0.0, self.last_audio - self.input_end)
        return first, end

    def _record(self) -> None:
        metrics = self.engine.metrics
        first, end = self.latencies()
        metrics.observe_context(self.outcome or "cancelled", first, end, self.stats.parked_s)
        audio_s = self.stats.samples / SAMPLE_RATE
        if audio_s:
            metrics.audio.labels("realtime").inc(audio_s)
            metrics.observe_stall(self.stats.stall_s)
        # the LM's own time: a turn's generation waits for its text too, which is not the LM's pace
        lm_s = max(0.0, self.stats.generation_s - self.stats.parked_s)
        metrics.observe_generation(self.stats.codes, audio_s, lm_s)
        log.info(
            "WS context %s %s",
            self.id,
            self.outcome,
            extra={
                "context_id": self.id,
                "outcome": self.outcome,
                "voice": self.plan.voice,
                "format": self.plan.post.response_format,
                "chars": self.chars,
                "audio_s": round(audio_s, 3),
                "first_audio_s": None if first is None else round(first, 6),
                "end_s": None if end is None else round(end, 6),
                "parked_s": round(self.stats.parked_s, 3),
                "stall_s": round(self.stats.stall_s, 3),
            },
        )


async def _off_loop(step: Callable[..., bytes], *args: Any) -> bytes:
    """``step(*args)`` in a worker thread; a cancellation waits for it (the chain is never closed under a
    thread still using it)."""
    future = asyncio.ensure_future(asyncio.to_thread(step, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        with anyio.CancelScope(shield=True):
            await asyncio.gather(future, return_exceptions=True)
        raise
