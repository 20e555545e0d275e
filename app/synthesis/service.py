"""SpeechService: plan a speech, voice-conversion or registration request and produce its audio.

Independent of HTTP: it takes validated request fields and a ``disconnected`` probe, never a Starlette
``Request``, so tests and benchmarks drive it without a socket. ``speech`` and ``convert`` differ only
in how the voice is found; both return a ``Synthesis`` whose first audio already exists, so everything
that can fail before the first byte (the model, the voice, the text, the LM backend up to its first
audio) has failed before the HTTP layer starts a response. While waiting, the client is checked for a
disconnect every ``DISCONNECT_POLL_S``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import anyio
import numpy as np

from app.audio.decoder_pool import ReferenceDecoder
from app.audio.io import AsyncReadable, ReferenceAudio
from app.audio.post import Boundary, Chunk, PostChain
from app.core.errors import APIError, BackendError, ClientDisconnected, ValidationFailed
from app.core.family import ModelFamily, ReferenceVoice
from app.core.stats import UtteranceStats
from app.core.types import Language
from app.observability.tracing import span
from app.synthesis.engine import Engine
from app.synthesis.planning import (
    Conversation,
    SpeechPlan,
    SynthesisFields,
    TextFields,
    check_input_length,
    plan_request,
    resolve_voice,
    speech_text,
)
from app.synthesis.references import read_upload
from app.synthesis.registry import RegisteredVoice
from app.synthesis.segments import plan_utterance
from app.synthesis.spoken import spoken_plan, voice_lexicons

T = TypeVar("T")

Disconnected = Callable[[], Awaitable[bool]]
"""True once the client has gone away."""


async def never_disconnected() -> bool:
    """The ``disconnected`` probe of a caller with no client to lose (tests, benchmarks)."""
    return False


class SpeechFields(SynthesisFields, TextFields, Protocol):
    """A ``/v1/audio/speech`` request."""

    input: str
    max_retain_interleave: int | None

    def voice_name(self) -> str | None: ...

    def lexicon_names(self) -> list[str]: ...


class VCFields(SynthesisFields, TextFields, Protocol):
    """A ``/v1/audio/vc`` request (the reference clip comes separately; ``reference_text`` is "" when
    the client sent none)."""

    reference_text: str
    generate_text: str

    def lexicon_names(self) -> list[str]: ...


class VoiceFields(Protocol):
    """A ``POST /v1/audio/voices`` request (the clip comes separately; ``reference_text`` may be "")."""

    name: str
    reference_text: str
    consent: str | None
    language: Language

    def lexicon_names(self) -> list[str]: ...


@dataclass
class Synthesis:
    """A request whose first audio exists: its plan, the audio already there (the first chunk, or every
    chunk when not streaming), what is still to come, and the chain that encodes it."""

    plan: SpeechPlan
    first: list[Chunk]
    chunks: AsyncGenerator[Chunk, None]
    chain: PostChain
    stats: UtteranceStats
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def media_type(self) -> str:
        return self.chain.media_type

    async def whole(self) -> bytes:
        """The whole response body (the first audio already holds every chunk when not streaming)."""
        try:
            return await asyncio.to_thread(_encode_whole, self.chain, self.first)
        finally:
            with anyio.CancelScope(shield=True):
                await self.chunks.aclose()

    async def encoded(self) -> AsyncIterator[bytes]:
        """The response's bytes as audio is produced; the chain runs in worker threads.

        A cancelled request (client gone) waits for the chain call in flight before closing the chain,
        so the encoder is never closed under a thread that is still using it.
        """
        in_flight: asyncio.Future[bytes] | None = None
        chain = self.chain

        async def run(step: Callable[..., bytes], *args: object) -> bytes:
            nonlocal in_flight
            in_flight = asyncio.ensure_future(asyncio.to_thread(step, *args))
            return await asyncio.shield(in_flight)

        try:
            for item in self.first:
                data = await run(chain.push, item)
                if data:
                    yield data
            async for pcm in self.chunks:
                data = await run(chain.push, pcm)
                if data:
                    yield data
            tail = await run(chain.flush)
            if tail:
                yield tail
        finally:
            with anyio.CancelScope(shield=True):
                if in_flight is not None:
                    await asyncio.gather(in_flight, return_exceptions=True)
                chain.close()
                await self.chunks.aclose()


class SpeechService:
    """Serves speech, voice conversion and voice registration for one Engine."""

    def __init__(self, engine: Engine, decoder: ReferenceDecoder) -> None:
        self.engine = engine
        self.decoder = decoder  # uploaded references are decoded on its own threads

    async def speech(
        self,
        req: SpeechFields,
        stats: UtteranceStats,
        conversation: Conversation | None = None,
        disconnected: Disconnected = never_disconnected,
    ) -> Synthesis:
        """``/v1/audio/speech``: plan (model, voice, text, history), then produce the first audio."""
        engine = self.engine
        family = engine.family_for(req.model)
        voice = await resolve_voice(engine, family, req.voice_name())
        if conversation is not None and engine.interleave.enabled and isinstance(voice, str):
            engine.require(family, multi_turn=True)
        else:
            conversation = None
        voice_lexicon_names = await voice_lexicons(engine, family, req.voice_name())
        planned = await spoken_plan(engine, req.input, req, "input", req.lexicon_names(), voice_lexicon_names)
        plan = plan_request(
            engine.settings, family, req, planned.plan, voice, conversation, req.max_retain_interleave
        )
        return await self._synthesize(plan, stats, disconnected)

    async def convert(
        self,
        form: VCFields,
        reference_audio: AsyncReadable,
        stats: UtteranceStats,
        disconnected: Disconnected = never_disconnected,
    ) -> Synthesis:
        """``/v1/audio/vc``: encode the reference, then as ``speech`` with its voice."""
        engine = self.engine
        family = engine.family_for(form.model)
        engine.require(family, reference_voice=True)
        family.check_can_encode()
        shape = family.reference
        if shape.needs_transcript and not form.reference_text:
            raise _transcript_needed(family)
        limit = engine.settings.MAX_INPUT_CHARS
        check_input_length(form.reference_text, limit, "reference_text")
        # generate_text (plain or SSML) first: a bad one fails before the upload is decoded
        planned = await spoken_plan(engine, form.generate_text, form, "generate_text", form.lexicon_names())
        reference = await self._read(reference_audio, "reference_audio", shape.rate)
        reference_text = ""
        if form.reference_text:
            reference_text = await speech_text(engine, form.reference_text, form, "reference_text")
        codes = await self._encode(family, reference)
        voice = ReferenceVoice(reference_text, tuple(codes), shape.codebooks)
        plan = plan_request(engine.settings, family, form, planned.plan, voice)
        return await self._synthesize(plan, stats, disconnected)

    async def register_voice(
        self, form: VoiceFields, audio_sample: AsyncReadable, owner: str | None = None
    ) -> RegisteredVoice:
        """Encode the clip once with every loaded family that can take it now (each at its own rate) and
        store the codes with the normalized transcript, owned by ``owner`` (the API key's tenant; None
        when keys are off). Without a transcript, only the families that need none encode it (422 when
        there is none)."""
        engine = self.engine
        families = self._encoders(bool(form.reference_text))
        await engine.registry.check_name(form.name)  # fail fast, before the upload is decoded
        lexicons = form.lexicon_names()
        await engine.lexicons.check_names(lexicons, "lexicons")
        data = await read_upload(engine.settings, audio_sample, "audio_sample")
        text = ""
        if form.reference_text:
            options = _LanguageOnly(form.language)
            text = await speech_text(engine, form.reference_text, options, "reference_text")
        codes: dict[str, list[int]] = {}
        duration_s = 0.0
        for family in families:
            reference = await self.decoder.decode(data, "audio_sample", family.reference.rate)
            codes[family.name] = await family.encode_reference(reference.samples, reference.digest)
            duration_s = reference.duration_s
        now = int(time.time())
        return await engine.registry.add(
            form.name,
            text,
            codes,
            form.consent,
            now,
            owner,
            duration_s=round(duration_s, 3),
            lexicons=lexicons,
        )

    def _encoders(self, transcript: bool) -> list[ModelFamily]:
        """The families a voice registration encodes with: those with reference voices that can encode
        now (and need no transcript when there is none), the default one first. When none can, the
        default family's refusal (or the first refusal) is raised."""
        engine = self.engine
        capable = [family for family in engine.families if family.capabilities.reference_voice]
        if not capable:
            engine.require(engine.default, reference_voice=True)
        usable: list[ModelFamily] = []
        refusals: list[APIError] = []
        for family in capable:
            try:
                family.check_can_encode()
            except APIError as exc:
                refusals.append(exc)
                continue
            if transcript or not family.reference.needs_transcript:
                usable.append(family)
        if usable:
            return usable
        if refusals:
            raise refusals[0]
        raise _transcript_needed(capable[0])

    async def _read(self, upload: AsyncReadable, param: str, rate: int) -> ReferenceAudio:
        with span("vc.load_audio") as loading:
            data = await read_upload(self.engine.settings, upload, param)
            reference = await self.decoder.decode(data, param, rate)
            loading.set({"audio.samples": len(reference.samples)})
        return reference

    async def _encode(self, family: ModelFamily, reference: ReferenceAudio) -> list[int]:
        with span("codec.encode", {"codec.samples": len(reference.samples)}) as encoding:
            codes = await family.encode_reference(reference.samples, reference.digest)
            encoding.set({"codec.tokens": len(codes)})
        return codes

    async def _synthesize(
        self, plan: SpeechPlan, stats: UtteranceStats, disconnected: Disconnected
    ) -> Synthesis:
        """Plan ``plan``'s utterance with its family and start it; wait for its first chunk (streaming) or
        all of it, watching for a disconnect. BackendError when it produced no audio; the stream is closed
        on any failure."""
        utterance = await plan_utterance(plan)
        chain = PostChain(plan.post)
        chunks = utterance.stream(stats)
        try:
            if plan.post.stream:
                head = await self._watch(disconnected, anext(chunks, None))
                first = [head] if head is not None else []
            else:
                first = await self._watch(disconnected, _collect(chunks))
            if not any(isinstance(item, np.ndarray) and item.size for item in first):
                raise BackendError("The LM produced no speech tokens.")
        except BaseException:
            chain.close()
            with anyio.CancelScope(shield=True):
                await chunks.aclose()
            raise
        return Synthesis(plan, first, chunks, chain, stats, {**plan.headers(), **utterance.headers()})

    async def _watch(self, disconnected: Disconnected, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` while checking for a client disconnect every DISCONNECT_POLL_S."""
        task = asyncio.ensure_future(awaitable)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.engine.settings.DISCONNECT_POLL_S)
                if done:
                    return task.result()
                if await disconnected():
                    raise ClientDisconnected()
        finally:
            if not task.done():
                task.cancel()
                with anyio.CancelScope(shield=True):
                    await asyncio.gather(task, return_exceptions=True)


def _transcript_needed(family: ModelFamily) -> ValidationFailed:
    """422: the family's prompt quotes the reference's transcript and none was sent."""
    return ValidationFailed(
        f"reference_text: the model {family.model_ids()[0]} needs the transcript of the reference audio",
        param="reference_text",
    )


@dataclass(frozen=True)
class _LanguageOnly:
    """Text options of a voice registration: its language, every other option at its default."""

    language: Language
    mode: None = None
    normalize_malaysian: None = None
    prompt: None = None


async def _collect(chunks: AsyncIterator[Chunk]) -> list[Chunk]:
    """All chunks of an utterance, each run of PCM between boundaries as one float32 array."""
    items: list[Chunk] = []
    run: list[np.ndarray] = []
    async for chunk in chunks:
        if isinstance(chunk, Boundary):
            items += [np.concatenate(run)] if run else []
            items.append(chunk)
            run = []
        else:
            run.append(chunk)
    return items + ([np.concatenate(run)] if run else [])


def _encode_whole(chain: PostChain, items: list[Chunk]) -> bytes:
    """A whole utterance through the post chain (in a worker thread)."""
    return b"".join(chain.push(item) for item in items) + chain.flush()
