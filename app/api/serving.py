"""SpeechService: validate a speech request, build its pipeline, and stream or buffer the audio.

Everything that can fail is resolved before the response starts: the voice, the options, and the
LM backend up to the first audio chunk (so a backend failure is a 502/504 and not a 200 with a cut
body). While it waits, the client is checked for a disconnect every ``DISCONNECT_POLL_S``; once the
body streams, Starlette cancels the body task on disconnect, which closes the LM stream upstream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from typing import TypeVar

import anyio
import numpy as np
from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from app.api.errors import ClientDisconnected
from app.api.schemas import SpeechRequest, TextOptions
from app.api.sse import sse_events
from app.audio.post import PostChain, PostOptions
from app.engine import Engine
from app.errors import APIError, BackendError, NotFound, Unavailable, ValidationFailed
from app.lm.prompt import clean_text, tts_prompt
from app.lm.types import GenerationParams
from app.pipeline import UtteranceStats, synthesize
from app.text.normalizer import NormalizeResult

log = logging.getLogger(__name__)

T = TypeVar("T")

MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
STREAM_HEADERS = {"Cache-Control": "no-cache, no-store", "X-Accel-Buffering": "no"}
PCM_HEADERS = {"X-Audio-Sample-Rate": "24000", "X-Audio-Channels": "1", "X-Audio-Bit-Depth": "16"}


def accepts_model(name: str, served: str) -> bool:
    """Our model, an OpenAI TTS alias, or a dated variant of one (``gpt-4o-mini-tts-2025-12-15``)."""
    return name == served or name in MODEL_ALIASES or name.startswith("gpt-4o-mini-tts-")


def check_input_length(text: str, limit: int) -> None:
    """422 on ``input`` longer than ``limit`` characters."""
    if len(text) > limit:
        raise ValidationFailed(
            f"input: at most {limit} characters are accepted, got {len(text)}", param="input"
        )


async def normalize_text(
    engine: Engine, text: str, options: TextOptions, for_speech: bool
) -> NormalizeResult:
    """``text`` through the engine's normalizer with the request's options and the settings' defaults."""
    s = engine.settings
    return await engine.normalizer.normalize(
        clean_text(text),
        mode=options.mode or s.DEFAULT_NORMALIZER_MODE,
        normalize_malaysian=(
            options.normalize_malaysian
            if options.normalize_malaysian is not None
            else s.DEFAULT_NORMALIZE_MALAYSIAN
        ),
        language=options.language,
        prompt=options.prompt,
        for_speech=for_speech,
    )


class SpeechService:
    """Serves ``POST /v1/audio/speech`` for one Engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def generation_params(self, req: SpeechRequest) -> GenerationParams:
        """Validate the request, normalize its text and build the LM call. Raises APIError."""
        s = self.engine.settings
        if req.model is not None and not accepts_model(req.model, s.MODEL_NAME):
            raise NotFound(f"The model {req.model!r} does not exist.", param="model", code="model_not_found")
        voice = self.engine.voices.resolve(req.voice_name())
        check_input_length(req.input, s.MAX_INPUT_CHARS)
        normalized = await normalize_text(self.engine, req.input, req.text_options(), for_speech=True)
        text = clean_text(normalized.output)
        if not text:
            raise ValidationFailed("input: no speakable text after cleaning", param="input")
        return GenerationParams(
            prompt=tts_prompt(voice, text),
            model=s.MODEL_NAME,
            max_tokens=req.max_tokens if req.max_tokens is not None else s.DEFAULT_MAX_TOKENS,
            temperature=req.temperature if req.temperature is not None else s.DEFAULT_TEMPERATURE,
            repetition_penalty=(
                req.repetition_penalty if req.repetition_penalty is not None else s.DEFAULT_REPETITION_PENALTY
            ),
            top_p=req.top_p,
            top_k=req.top_k,
            seed=req.seed,
        )

    def post_options(self, req: SpeechRequest) -> PostOptions:
        """The post-codec chain this request asks for, with the settings' defaults."""
        s = self.engine.settings
        return PostOptions(
            response_format=req.response_format,
            stream=req.stream,
            speaking_rate=req.speed if req.speed is not None else s.DEFAULT_SPEAKING_RATE,
            normalize=req.stream_normalize if req.stream_normalize is not None else s.STREAM_NORMALIZE,
            target_rms_db=s.TARGET_RMS_DB,
            max_gain_db=s.MAX_GAIN_DB,
            lock_s=s.NORM_LOCK_S,
            min_estimate_s=s.NORM_MIN_ESTIMATE_S,
            fade_in_ms=s.FADE_IN_MS,
        )

    async def create(self, req: SpeechRequest, request: Request) -> Response:
        """Validate, build, then stream (or buffer) the audio."""
        params = await self.generation_params(req)
        chain = PostChain(self.post_options(req))
        s = self.engine.settings
        codec = self.engine.codec
        if codec is None:
            raise Unavailable("The codec is not loaded yet.")
        schedule = self.engine.schedule(
            req.playback_speed if req.playback_speed is not None else s.DEFAULT_PLAYBACK_SPEED,
            (
                req.playback_overlap_speed
                if req.playback_overlap_speed is not None
                else s.DEFAULT_PLAYBACK_OVERLAP_SPEED
            ),
        )
        stats = UtteranceStats()
        chunks = synthesize(self.engine.source, codec.decode, params, schedule, stats)
        headers = dict(PCM_HEADERS) if req.response_format == "pcm" else {}
        try:
            if not req.stream:
                pcm = await self._watch(request, _collect(chunks))
                if pcm.size == 0:
                    raise BackendError("The LM produced no speech tokens.")
                body = await asyncio.to_thread(_encode_whole, chain, pcm)
                return Response(body, media_type=chain.media_type, headers=headers)
            first = await self._watch(request, anext(chunks, None))
            if first is None:
                raise BackendError("The LM produced no speech tokens.")
        except BaseException:
            with anyio.CancelScope(shield=True):
                await chunks.aclose()
            raise
        if req.stream_format == "sse":
            events = sse_events(_encoded(first, chunks, chain), stats, params.prompt)
            return StreamingResponse(events, media_type="text/event-stream", headers=STREAM_HEADERS)
        return StreamingResponse(
            _audio_body(_encoded(first, chunks, chain)),
            media_type=chain.media_type,
            headers={**STREAM_HEADERS, **headers},
        )

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


async def _collect(chunks: AsyncIterator[np.ndarray]) -> np.ndarray:
    """All chunks of an utterance as one float32 array."""
    parts = [chunk async for chunk in chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)


def _encode_whole(chain: PostChain, pcm: np.ndarray) -> bytes:
    """A whole utterance through the post chain (in a worker thread)."""
    return chain.push(pcm) + chain.flush()


async def _encoded(
    first: np.ndarray, chunks: AsyncGenerator[np.ndarray, None], chain: PostChain
) -> AsyncIterator[bytes]:
    """The response's bytes as audio is produced; the chain runs in worker threads."""
    try:
        data = await asyncio.to_thread(chain.push, first)
        if data:
            yield data
        async for pcm in chunks:
            data = await asyncio.to_thread(chain.push, pcm)
            if data:
                yield data
        tail = await asyncio.to_thread(chain.flush)
        if tail:
            yield tail
    finally:
        chain.close()
        with anyio.CancelScope(shield=True):
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
