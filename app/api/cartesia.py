"""The Cartesia-compatible face of realtime sessions: ``/tts/websocket`` and ``/tts/bytes``.

Cartesia's clients (``livekit-plugins-cartesia``'s ``TTS(base_url=...)``, Pipecat's
``CartesiaTTSService(url=...)``, the ``cartesia`` SDK's ``websocket_base_url``) work against it as they
are. One socket carries many contexts. A client message is one JSON object:

- a generation request: ``context_id``, ``transcript`` (a delta of the context's text), ``continue``
  (false ends the context's input; absent means false), ``model_id``, ``voice`` (``{"mode": "id",
  "id": ...}``), ``output_format`` (``{"container": "raw", "encoding": pcm_s16le | pcm_f32le |
  pcm_mulaw | pcm_alaw, "sample_rate": N}``; ``wav`` and ``mp3`` containers at 24 kHz too),
  ``language``, ``add_timestamps``, ``generation_config.speed``, ``pronunciation_dict_id`` (a lexicon's
  name), ``flush``; the context's options come from its first message;
- a cancellation: ``{"context_id": ..., "cancel": true}`` (barge-in: the context stops at once and
  sends nothing more).

The server answers with JSON messages carrying ``context_id`` and ``type``: ``chunk`` (``data``: base64
audio), ``timestamps`` (``word_timestamps``: ``words``, ``start``, ``end`` in seconds), ``flush_done``,
``done``, ``error`` (also for a malformed or oversized message: the connection and the other contexts
go on). Model ids ``sonic*`` (and OpenAI's names) mean the default family; any of our model ids names
its family. Voice ids are our voices: built-in, aliases, registered. The version header
(``Cartesia-Version``) or query parameter (``cartesia_version``) is accepted and not needed.
``max_buffer_delay_ms`` is accepted and ignored: the server cuts text by its content
(``app.text.stream_split``), not by time. ``/tts/bytes`` speaks a whole ``transcript`` and answers with
the raw audio.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import StreamingResponse

from app.api.ws import Connection, TooLarge, Write, serve
from app.audio.formats import make_encoder
from app.core import routes
from app.core.errors import APIError, InvalidRequest, ValidationFailed
from app.core.types import Language
from app.sessions.context import Context
from app.sessions.events import Audio, Done, Event, Failed, Flushed, Timestamps
from app.sessions.plan import ContextRequest
from app.sessions.session import Session

router = APIRouter(tags=["realtime"])

LANGUAGES: tuple[Language, ...] = ("en", "ms", "zh", "ta")
CONTAINERS = {"wav": "wav", "mp3": "mp3"}


def context_request(message: dict[str, Any]) -> ContextRequest:
    """A generation request's options (its first message's) as the session core takes them."""
    model = message.get("model_id")
    if isinstance(model, str) and model.startswith("sonic"):
        model = None
    voice = message.get("voice")
    if isinstance(voice, dict):
        if voice.get("mode", "id") != "id":
            raise InvalidRequest(
                "only voices by id are served (mode 'id'); embeddings are not", param="voice"
            )
        voice = voice.get("id")
    if voice is not None and not isinstance(voice, str):
        raise InvalidRequest("voice.id must be a string", param="voice")
    fmt = message.get("output_format") or {}
    if not isinstance(fmt, dict):
        raise InvalidRequest("output_format must be an object", param="output_format")
    container = fmt.get("container", "raw")
    rate = fmt.get("sample_rate", 24000)
    if not isinstance(rate, int) or isinstance(rate, bool):
        raise InvalidRequest("output_format.sample_rate must be an integer", param="output_format")
    if container == "raw":
        encoding = fmt.get("encoding", "pcm_s16le")
    elif container in CONTAINERS:
        encoding = CONTAINERS[container]
    else:
        raise InvalidRequest(f"unsupported container {container!r}", param="output_format")
    language = message.get("language")
    config = message.get("generation_config") or {}
    speed = config.get("speed") if isinstance(config, dict) else None
    if speed is not None and (not isinstance(speed, int | float) or isinstance(speed, bool)):
        raise InvalidRequest("generation_config.speed must be a number", param="generation_config")
    lexicon = message.get("pronunciation_dict_id")
    return ContextRequest(
        model=model if isinstance(model, str) else None,
        voice=voice,
        encoding=str(encoding),
        sample_rate=rate,
        speed=float(speed) if speed is not None else None,
        language=language if language in LANGUAGES else "auto",
        timestamps=bool(message.get("add_timestamps", False)),
        lexicons=(lexicon,) if isinstance(lexicon, str) and lexicon else (),
    )


def _message(event: Event) -> dict[str, Any]:
    """An event as Cartesia's clients read it."""
    if isinstance(event, Audio):
        return {
            "type": "chunk",
            "context_id": event.context_id,
            "data": base64.b64encode(event.data).decode("ascii"),
            "done": False,
            "status_code": 206,
            "step_time": 0.0,
        }
    if isinstance(event, Timestamps):
        return {
            "type": "timestamps",
            "context_id": event.context_id,
            "done": False,
            "status_code": 206,
            "word_timestamps": {
                "words": [w.word for w in event.words],
                "start": [w.start for w in event.words],
                "end": [w.end for w in event.words],
            },
        }
    if isinstance(event, Flushed):
        return {
            "type": "flush_done",
            "context_id": event.context_id,
            "done": False,
            "flush_done": True,
            "flush_id": event.flush_id,
            "status_code": 206,
        }
    if isinstance(event, Done):
        return {"type": "done", "context_id": event.context_id, "done": True, "status_code": 200}
    if isinstance(event, Failed):
        return _error(event.context_id, event.error)
    return {"type": "ack", "context_id": event.context_id}


def _error(context_id: str | None, error: APIError) -> dict[str, Any]:
    return {
        "type": "error",
        "context_id": context_id,
        "done": True,
        "status_code": error.status,
        "title": error.type,
        "message": error.message,
        "error_code": error.code,
        "error": error.body()["error"],
    }


def _writer(connection: Connection) -> Write:
    async def write(event: Event) -> None:
        if isinstance(event, Audio | Timestamps | Flushed | Done | Failed):
            await connection.send(json.dumps(_message(event)))

    return write


async def _refuse(connection: Connection, error: APIError) -> None:
    await connection.send(json.dumps(_error(None, error)))


async def _handle(session: Session, message: dict[str, Any]) -> None:
    """One client message (raises APIError for the context it names)."""
    context_id = message.get("context_id")
    if not isinstance(context_id, str) or not context_id:
        raise InvalidRequest("context_id must be a non-empty string", param="context_id")
    if message.get("cancel"):
        await session.cancel(context_id)
        return
    transcript = message.get("transcript", "")
    if not isinstance(transcript, str):
        raise InvalidRequest("transcript must be a string", param="transcript")
    context: Context | None = session.open_context(context_id)
    if context is None:
        context = await session.start_context(context_id, context_request(message))
    context.push(transcript)
    if message.get("flush"):
        context.flush()
    if not message.get("continue", False):
        context.end()


async def _loop(connection: Connection, session: Session) -> None:
    while True:
        context_id: str | None = None
        try:
            data = await connection.receive(idle=not session.contexts)
            try:
                message = json.loads(data)
            except ValueError:
                raise InvalidRequest("a message must be a JSON object", param="message") from None
            if not isinstance(message, dict):
                raise InvalidRequest("a message must be a JSON object", param="message")
            context_id = message.get("context_id") if isinstance(message.get("context_id"), str) else None
            await _handle(session, message)
        except TooLarge as exc:
            await connection.send(json.dumps(_error(None, exc)))
        except APIError as exc:
            if context_id is not None and (context := session.open_context(context_id)) is not None:
                await context.cancel("error")  # a context that got a bad message fails; the others go on
            await connection.send(json.dumps(_error(context_id, exc)))


@router.websocket(routes.CARTESIA_WEBSOCKET)
async def cartesia_websocket(ws: WebSocket) -> None:
    """Cartesia's streaming protocol (module docstring)."""
    await serve(ws, _writer, _loop, _refuse)


class _Arrivals:
    """A context's events as they arrive, for a response body."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Event] = asyncio.Queue()

    async def put(self, event: Event) -> None:
        self.queue.put_nowait(event)

    async def first(self) -> Event:
        """The first audio, or the end (done or failed) when none comes."""
        while True:
            event = await self.queue.get()
            if isinstance(event, Audio | Done | Failed):
                return event

    async def rest(self, first: Event) -> AsyncIterator[bytes]:
        """The audio from ``first`` on, until the context ends."""
        event = first
        while True:
            if isinstance(event, Audio):
                yield event.data
            elif isinstance(event, Done | Failed):
                return
            event = await self.queue.get()


@router.post(routes.CARTESIA_BYTES, include_in_schema=False)
async def cartesia_bytes(request: Request) -> StreamingResponse:
    """A whole ``transcript`` spoken and returned as raw audio in the requested ``output_format``;
    errors before the first audio are answered with their status and the OpenAI error body."""
    try:
        message = await request.json()
    except ValueError:
        raise ValidationFailed("the body must be a JSON object", param="body") from None
    if not isinstance(message, dict) or not isinstance(message.get("transcript"), str):
        raise ValidationFailed("transcript: a string is required", param="transcript")
    state = request.app.state
    arrivals = _Arrivals()
    tenant = request.scope.get("state", {}).get("tenant")
    session = Session(
        state.engine, arrivals.put, state.session_limits, None, tenant
    )  # the route holds a slot
    try:
        context = await session.start_context("bytes", context_request(message))
        context.push(message["transcript"])
        context.end()
        first = await arrivals.first()
    except BaseException:
        await session.close()
        raise
    if isinstance(first, Failed):
        await session.close()
        raise first.error
    post = context.plan.post
    encoder = make_encoder(post.response_format, True, post.sample_rate)
    media_type = encoder.media_type
    encoder.close()

    async def body() -> AsyncIterator[bytes]:
        try:
            async for data in arrivals.rest(first):
                yield data
        finally:
            await session.close()

    return StreamingResponse(body(), media_type=media_type)
