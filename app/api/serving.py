"""SpeechService: validate a speech or voice-conversion request, build its pipeline, stream the audio.

Both endpoints differ only in the prompt: ``/v1/audio/speech`` speaks in a built-in voice (or a
registered one, whose stored reference makes a voice-conversion prompt), ``/v1/audio/vc`` encodes an
uploaded reference. From the prompt on they share one path (``respond``).

Everything that can fail is resolved before the response starts: the voice, the options, and the
LM backend up to the first audio chunk (so a backend failure is a 502/504 and not a 200 with a cut
body). While it waits, the client is checked for a disconnect every ``DISCONNECT_POLL_S``; once the
body streams, Starlette cancels the body task on disconnect, which closes the LM stream upstream.

A speech request with an interleave id (built-in voices only) is prompted with the id's history; if
the LM stops implausibly early with it, the turn is regenerated without history before any audio is
sent; once the whole body has been produced, the turn is committed in the background (``app.interleave``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Literal, Protocol, TypeVar

import anyio
import numpy as np
from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from app.api.errors import ClientDisconnected
from app.api.schemas import ResponseFormat, SpeechRequest, TextOptions, VCForm
from app.api.sse import sse_events
from app.api.uploads import read_reference
from app.audio.decoder_pool import ReferenceDecoder
from app.audio.io import AsyncReadable
from app.audio.post import PostChain, PostOptions
from app.audio.stitcher import StitchSchedule
from app.engine import Engine
from app.errors import APIError, BackendError, NotFound, Unavailable, ValidationFailed
from app.interleave.ids import HEADER as INTERLEAVE_HEADER
from app.interleave.ids import request_id
from app.interleave.service import InterleaveTurn
from app.lm.prompt import clean_text, tts_prompt, vc_prompt
from app.lm.types import GenerationParams
from app.observability.requests import request_record
from app.observability.tracing import Attributes, span, start_span, traced_stream
from app.pipeline import UtteranceStats, synthesize
from app.registry import RegisteredVoice
from app.text.normalizer import NormalizeResult
from app.text.speakable import require_speakable

log = logging.getLogger(__name__)

T = TypeVar("T")

MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
STREAM_HEADERS = {"Cache-Control": "no-cache, no-store", "X-Accel-Buffering": "no"}
PCM_HEADERS = {"X-Audio-Sample-Rate": "24000", "X-Audio-Channels": "1", "X-Audio-Bit-Depth": "16"}


def given(value: T | None, default: T) -> T:
    """``value`` when the request set it, else the settings' ``default``."""
    return default if value is None else value


def accepts_model(name: str, served: str) -> bool:
    """Our model, an OpenAI TTS alias, or a dated variant of one (``gpt-4o-mini-tts-2025-12-15``)."""
    return name == served or name in MODEL_ALIASES or name.startswith("gpt-4o-mini-tts-")


class SynthesisOptions(Protocol):
    """The model, sampling and output fields every synthesis request has (SpeechRequest, VCForm)."""

    model: str | None
    response_format: ResponseFormat
    speed: float | None
    stream_format: Literal["audio", "sse"]
    stream: bool
    temperature: float | None
    repetition_penalty: float | None
    max_tokens: int | None
    top_p: float | None
    top_k: int | None
    seed: int | None
    playback_speed: float | None
    playback_overlap_speed: float | None
    stream_normalize: bool | None


def check_input_length(text: str, limit: int, param: str = "input") -> None:
    """422 on a text field longer than ``limit`` characters."""
    if len(text) > limit:
        raise ValidationFailed(
            f"{param}: at most {limit} characters are accepted, got {len(text)}", param=param
        )


async def normalize_text(
    engine: Engine, text: str, options: TextOptions, for_speech: bool
) -> NormalizeResult:
    """``text`` through the engine's normalizer with the request's options and the settings' defaults."""
    s = engine.settings
    mode = options.mode or s.DEFAULT_NORMALIZER_MODE
    with span("tts.normalize", {"normalizer.mode": mode, "normalizer.chars_in": len(text)}) as traced:
        started = time.perf_counter()
        result = await engine.normalizer.normalize(
            clean_text(text),
            mode=mode,
            normalize_malaysian=given(options.normalize_malaysian, s.DEFAULT_NORMALIZE_MALAYSIAN),
            language=options.language,
            prompt=options.prompt,
            for_speech=for_speech,
        )
        engine.metrics.observe_normalize(result.mode_used, time.perf_counter() - started)
        traced.set({"normalizer.chars_out": len(result.output), "normalizer.fallback": result.fallback})
    return result


def stream_attributes(params: GenerationParams, opts: SynthesisOptions, first_tokens: int) -> Attributes:
    """The ``tts.stream`` span's request attributes."""
    return {
        "tts.model": params.model,
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "prompt_chars": len(params.prompt),
        "playback_speed": opts.playback_speed,
        "playback_overlap_speed": opts.playback_overlap_speed,
        "first_window_tokens": first_tokens,
        "response_format": opts.response_format,
        "stream": opts.stream,
        "stream_format": opts.stream_format,
        "stream_normalize": opts.stream_normalize,
        "speaking_rate": opts.speed,
    }


class SpeechService:
    """Serves ``POST /v1/audio/speech`` and ``POST /v1/audio/vc`` for one Engine."""

    def __init__(self, engine: Engine, decoder: ReferenceDecoder) -> None:
        self.engine = engine
        self.decoder = decoder  # uploaded references are decoded on its own threads (issue 21)

    def check_model(self, opts: SynthesisOptions) -> None:
        """404 for a model this server does not serve."""
        if opts.model is not None and not accepts_model(opts.model, self.engine.settings.MODEL_NAME):
            raise NotFound(f"The model {opts.model!r} does not exist.", param="model", code="model_not_found")

    def resolve_voice(self, name: str | None) -> str | RegisteredVoice:
        """A registered voice by that name, else the built-in voice or alias. Raises InvalidRequest."""
        registry = self.engine.registry
        registered = registry.get(name) if name is not None else None
        if registered is not None:
            return registered
        return self.engine.voices.resolve(name, [voice.name for voice in registry.voices])

    async def speech_text(self, text: str, options: TextOptions, param: str) -> str:
        """``text`` checked for length (422), normalized for speech and cleaned of markup (400 when
        nothing speakable is left)."""
        check_input_length(text, self.engine.settings.MAX_INPUT_CHARS, param)
        normalized = await normalize_text(self.engine, text, options, for_speech=True)
        cleaned = clean_text(normalized.output)
        require_speakable(cleaned, param)  # 400: nothing but whitespace, controls, marks, emoji (issue 21)
        return cleaned

    def sampling(self, prompt: str, opts: SynthesisOptions) -> GenerationParams:
        """The LM call for ``prompt`` with the request's sampling options and the settings' defaults."""
        s = self.engine.settings
        return GenerationParams(
            prompt=prompt,
            model=s.MODEL_NAME,
            max_tokens=given(opts.max_tokens, s.DEFAULT_MAX_TOKENS),
            temperature=given(opts.temperature, s.DEFAULT_TEMPERATURE),
            repetition_penalty=given(opts.repetition_penalty, s.DEFAULT_REPETITION_PENALTY),
            top_p=opts.top_p,
            top_k=opts.top_k,
            seed=opts.seed,
        )

    async def generation_params(
        self, req: SpeechRequest, interleave_id: str | None = None
    ) -> tuple[GenerationParams, InterleaveTurn | None]:
        """Validate a speech request, normalize its text and build the LM call, with the history of
        ``interleave_id`` when the store is on and the voice is a built-in one. Raises APIError."""
        self.check_model(req)
        voice = self.resolve_voice(req.voice_name())
        text = await self.speech_text(req.input, req.text_options(), "input")
        if isinstance(voice, RegisteredVoice):
            return self.sampling(vc_prompt(voice.reference_text, voice.codes, text), req), None
        params = self.sampling(tts_prompt(voice, text), req)
        interleave = self.engine.interleave
        if interleave_id is None or not interleave.enabled:
            return params, None
        keep = given(req.max_retain_interleave, self.engine.settings.MAX_RETAIN_INTERLEAVE)
        turn = await interleave.prepare(interleave_id, voice, text, params, keep)
        return turn.params, turn

    async def vc_params(self, form: VCForm, reference_audio: AsyncReadable) -> GenerationParams:
        """Validate a voice-conversion request, encode its reference and build the LM call."""
        self.check_model(form)
        self.engine.check_can_encode()
        limit = self.engine.settings.MAX_INPUT_CHARS
        check_input_length(form.reference_text, limit, "reference_text")
        check_input_length(form.generate_text, limit, "generate_text")
        with span("vc.load_audio") as loading:
            reference = await read_reference(
                self.engine.settings, self.decoder, reference_audio, "reference_audio"
            )
            loading.set({"audio.samples": len(reference.samples)})
        options = form.text_options()
        reference_text = await self.speech_text(form.reference_text, options, "reference_text")
        text = await self.speech_text(form.generate_text, options, "generate_text")
        with span("codec.encode", {"codec.samples": len(reference.samples)}) as encoding:
            codes = await self.engine.reference_codes(reference)
            encoding.set({"codec.tokens": len(codes)})
        return self.sampling(vc_prompt(reference_text, codes, text), form)

    def post_options(self, opts: SynthesisOptions) -> PostOptions:
        """The post-codec chain this request asks for, with the settings' defaults."""
        s = self.engine.settings
        return PostOptions(
            response_format=opts.response_format,
            stream=opts.stream,
            speaking_rate=given(opts.speed, s.DEFAULT_SPEAKING_RATE),
            normalize=given(opts.stream_normalize, s.STREAM_NORMALIZE),
            target_rms_db=s.TARGET_RMS_DB,
            max_gain_db=s.MAX_GAIN_DB,
            lock_s=s.NORM_LOCK_S,
            min_estimate_s=s.NORM_MIN_ESTIMATE_S,
            fade_in_ms=s.FADE_IN_MS,
        )

    async def create(self, req: SpeechRequest, request: Request) -> Response:
        """``/v1/audio/speech``: validate, build, then stream (or buffer) the audio."""
        request_record(request).voice = req.voice_name()
        interleave_id = request_id(req.interleave_id, request.headers.get(INTERLEAVE_HEADER))
        params, turn = await self.generation_params(req, interleave_id)
        return await self.respond(params, req, request, turn)

    async def convert(self, form: VCForm, reference_audio: AsyncReadable, request: Request) -> Response:
        """``/v1/audio/vc``: validate, encode the reference, then stream (or buffer) the audio."""
        request_record(request).voice = "reference_audio"
        return await self.respond(await self.vc_params(form, reference_audio), form, request)

    async def respond(
        self,
        params: GenerationParams,
        opts: SynthesisOptions,
        request: Request,
        turn: InterleaveTurn | None = None,
    ) -> Response:
        """Run ``params`` through the pipeline; the first chunk is awaited before the response starts.

        With an interleave ``turn``, a fallback regeneration happens here (before any audio), the
        response carries its headers, and the turn is committed once the whole body was produced.
        """
        chain = PostChain(self.post_options(opts))
        s = self.engine.settings
        schedule = self.engine.schedule(
            given(opts.playback_speed, s.DEFAULT_PLAYBACK_SPEED),
            given(opts.playback_overlap_speed, s.DEFAULT_PLAYBACK_OVERLAP_SPEED),
        )
        stats = UtteranceStats()
        record = request_record(request)
        record.response_format, record.stats = opts.response_format, stats
        try:
            hold = turn.hold_codes if turn is not None else 0
            chunks, first = await self._first_audio(request, params, opts, schedule, stats, hold)
            if turn is not None and turn.falls_back(stats):
                with anyio.CancelScope(shield=True):
                    await chunks.aclose()
                self.engine.interleave.fell_back()
                turn, stats = turn.cold(), UtteranceStats()
                record.stats = stats
                params = turn.params
                chunks, first = await self._first_audio(request, params, opts, schedule, stats, 0)
        except BaseException:
            chain.close()
            raise
        on_done: Callable[[], None] | None = None
        extra: dict[str, str] = {}
        if turn is not None:
            extra = turn.headers()
            on_done = functools.partial(self.engine.interleave.commit, turn, stats)
        headers = {**(PCM_HEADERS if opts.response_format == "pcm" else {}), **extra}
        if not opts.stream:  # the chain is flushed (and so closed) in the thread, even if we are cancelled
            body = await asyncio.to_thread(_encode_whole, chain, first)
            if on_done is not None:
                on_done()
            return Response(body, media_type=chain.media_type, headers=headers)
        if opts.stream_format == "sse":
            events = sse_events(_encoded(first, chunks, chain, on_done), stats, params.prompt)
            return StreamingResponse(
                events, media_type="text/event-stream", headers={**STREAM_HEADERS, **extra}
            )
        return StreamingResponse(
            _audio_body(_encoded(first, chunks, chain, on_done)),
            media_type=chain.media_type,
            headers={**STREAM_HEADERS, **headers},
        )

    async def _first_audio(
        self,
        request: Request,
        params: GenerationParams,
        opts: SynthesisOptions,
        schedule: StitchSchedule,
        stats: UtteranceStats,
        hold_codes: int,
    ) -> tuple[AsyncGenerator[np.ndarray, None], np.ndarray]:
        """Start the generation (its ``tts.stream`` span); return its chunk iterator and the first
        audio: when streaming, the first chunk (extended until ``hold_codes`` codes exist or the LM has
        finished), else all of it. BackendError when the LM produced nothing; the iterator is closed
        on any failure."""
        codec = self.engine.codec
        if codec is None:
            raise Unavailable("The codec is not loaded yet.")
        stream_span = start_span("tts.stream", stream_attributes(params, opts, schedule.first_tokens))
        chunks = traced_stream(
            stream_span,
            synthesize(self.engine.source, codec.decode, params, schedule, stats),
            stats.span_attributes,
        )
        try:
            if opts.stream:
                first = await self._watch(request, _head(chunks, stats, hold_codes))
            else:
                pcm = await self._watch(request, _collect(chunks))
                first = pcm if pcm.size else None
            if first is None:
                raise BackendError("The LM produced no speech tokens.")
        except BaseException:
            with anyio.CancelScope(shield=True):
                await chunks.aclose()
            raise
        return chunks, first

    async def _watch(self, request: Request, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` while checking for a client disconnect every DISCONNECT_POLL_S."""
        task = asyncio.ensure_future(awaitable)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.engine.settings.DISCONNECT_POLL_S)
                if done:
                    return task.result()
                if await request.is_disconnected():
                    raise ClientDisconnected()
        finally:
            if not task.done():
                task.cancel()
                with anyio.CancelScope(shield=True):
                    await asyncio.gather(task, return_exceptions=True)


async def _head(
    chunks: AsyncIterator[np.ndarray], stats: UtteranceStats, hold_codes: int
) -> np.ndarray | None:
    """The first chunk, joined with the next ones until ``hold_codes`` codes were generated or the LM
    finished; None when there is no audio at all."""
    parts: list[np.ndarray] = []
    while (chunk := await anext(chunks, None)) is not None:
        parts.append(chunk)
        if stats.finish_reason is not None or stats.codes >= hold_codes:
            break
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


async def _collect(chunks: AsyncIterator[np.ndarray]) -> np.ndarray:
    """All chunks of an utterance as one float32 array."""
    parts = [chunk async for chunk in chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)


def _encode_whole(chain: PostChain, pcm: np.ndarray) -> bytes:
    """A whole utterance through the post chain (in a worker thread)."""
    return chain.push(pcm) + chain.flush()


async def _encoded(
    first: np.ndarray,
    chunks: AsyncGenerator[np.ndarray, None],
    chain: PostChain,
    on_done: Callable[[], None] | None = None,
) -> AsyncIterator[bytes]:
    """The response's bytes as audio is produced; the chain runs in worker threads. ``on_done`` is
    called once the whole body has been produced (not on a disconnect or an error).

    A cancelled request (client gone) waits for the chain call in flight before closing the chain, so
    the encoder is never closed under a thread that is still using it.
    """
    in_flight: asyncio.Future[bytes] | None = None

    async def run(step: Callable[..., bytes], *args: object) -> bytes:
        nonlocal in_flight
        in_flight = asyncio.ensure_future(asyncio.to_thread(step, *args))
        return await asyncio.shield(in_flight)

    try:
        data = await run(chain.push, first)
        if data:
            yield data
        async for pcm in chunks:
            data = await run(chain.push, pcm)
            if data:
                yield data
        tail = await run(chain.flush)
        if tail:
            yield tail
        if on_done is not None:
            on_done()
    finally:
        with anyio.CancelScope(shield=True):
            if in_flight is not None:
                await asyncio.gather(in_flight, return_exceptions=True)
            chain.close()
            await chunks.aclose()


async def _audio_body(encoded: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Raw audio body. A failure after the first byte aborts the connection (logged), so a client
    never mistakes a cut stream for a complete one."""
    try:
        async for data in encoded:
            yield data
    except APIError as exc:
        log.warning("stream aborted after audio started: %s %s", exc.status, exc.message)
        raise
