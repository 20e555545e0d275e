"""Our realtime protocol: ``/v1/audio/speech/realtime`` (written up in docs/realtime.md, described by
the AsyncAPI document served at ``/v1/audio/speech/realtime/asyncapi.json``).

Every client message is a JSON object with a ``type``:

- ``session.update`` ``{"session": {options}}``: the defaults of the contexts opened after it
  (``model``, ``voice``, ``response_format``: mp3 | opus | aac | flac | wav | pcm | pcm_s16le |
  pcm_f32le | pcm_mulaw | pcm_alaw, ``sample_rate`` (raw encodings), ``speed``, ``language``,
  ``timestamps``, ``lexicons``, ``audio``: binary | base64, and the sampling fields of
  ``/v1/audio/speech``);
- ``context.create`` ``{"context_id", "options"}``: open a context with options of its own (optional:
  the first ``input.text`` of an unknown context opens it with the session's defaults);
- ``input.text`` ``{"context_id", "seq", "text"}``: a delta of the context's text; ``seq`` numbers a
  context's deltas from 0 without gaps and each is acknowledged (``input.ack``);
- ``input.flush`` ``{"context_id"}``: speak what is pending now;
- ``input.done`` ``{"context_id"}``: the context's text has ended;
- ``context.cancel`` ``{"context_id"}``: stop the context now (barge-in);
- ``session.close``: close the connection after cancelling every context.

The server sends ``session.created`` ``{"session_id", "session"}`` first, then per context
``input.ack``, audio (``audio.delta`` ``{"context_id", "audio"}`` in base64, or binary frames: one byte
``n``, ``n`` bytes of the context id in UTF-8, then the audio bytes), ``word.timestamps`` ``{"words":
[{"word", "start", "end"}]}`` (seconds of the audio sent), ``input.flushed``, ``context.done``
``{"usage"}`` and ``error`` ``{"context_id", "error": {"message", "type", "param", "code"}}`` (the
OpenAI error body; ``context_id`` null for a message that names none).
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any, Literal

from fastapi import APIRouter, WebSocket
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.api.ws import Connection, TooLarge, Write, serve
from app.core import routes
from app.core.errors import APIError, InvalidRequest
from app.core.types import Language, NormalizerMode
from app.sessions.events import Acknowledged, Audio, Done, Event, Failed, Flushed, Timestamps
from app.sessions.plan import ENCODINGS, ContextRequest
from app.sessions.session import Session

router = APIRouter(tags=["realtime"])

DEFAULT_CONTEXT = "default"
MAX_CONTEXT_ID = 128


class Options(BaseModel):
    """A context's options (every one may be left out: the server's default)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    voice: str | None = Field(None, max_length=128)
    response_format: str = "pcm"
    sample_rate: int = 24000
    speed: float | None = None
    language: Language = "auto"
    mode: NormalizerMode | None = None
    timestamps: bool = False
    lexicons: list[str] = Field(default_factory=list, max_length=8)
    audio: Literal["binary", "base64"] = "binary"
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=1)
    seed: int | None = Field(None, ge=0, lt=2**63)
    max_tokens: int | None = Field(None, ge=1)
    repetition_penalty: float | None = Field(None, gt=0, le=4)

    def request(self) -> ContextRequest:
        encoding = self.response_format
        if encoding == "pcm" and self.sample_rate != 24000:
            encoding = "pcm_s16le"
        if encoding not in ENCODINGS:
            raise InvalidRequest(
                f"unknown response_format {encoding!r}; expected one of {', '.join(ENCODINGS)}",
                param="response_format",
            )
        return ContextRequest(
            model=self.model,
            voice=self.voice,
            encoding=encoding,
            sample_rate=self.sample_rate,
            speed=self.speed,
            language=self.language,
            mode=self.mode,
            timestamps=self.timestamps,
            lexicons=tuple(self.lexicons),
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            seed=self.seed,
            max_tokens=self.max_tokens,
            repetition_penalty=self.repetition_penalty,
        )


def _options(value: Any, base: Options, param: str) -> Options:
    """``value`` (an object of options) over ``base``; InvalidRequest naming the first bad field."""
    if value is None:
        return base
    if not isinstance(value, dict):
        raise InvalidRequest(f"{param} must be an object", param=param)
    try:
        return Options.model_validate({**base.model_dump(exclude_unset=True), **value})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or param
        raise InvalidRequest(f"{param}.{field}: {first['msg']}", param=f"{param}.{field}") from None


class _Face:
    """One connection's protocol state: the session defaults and each context's audio transport."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.defaults = Options()
        self.binary: dict[str, bool] = {}

    async def write(self, event: Event) -> None:
        if isinstance(event, Audio):
            if self.binary.get(event.context_id, True):
                tag = event.context_id.encode("utf-8")
                await self.connection.send(bytes([len(tag)]) + tag + event.data)
                return
            audio = base64.b64encode(event.data).decode("ascii")
            await self.send({"type": "audio.delta", "context_id": event.context_id, "audio": audio})
        elif isinstance(event, Timestamps):
            words = [dataclasses.asdict(word) for word in event.words]
            await self.send({"type": "word.timestamps", "context_id": event.context_id, "words": words})
        elif isinstance(event, Acknowledged):
            await self.send({"type": "input.ack", "context_id": event.context_id, "seq": event.seq})
        elif isinstance(event, Flushed):
            await self.send(
                {"type": "input.flushed", "context_id": event.context_id, "flush_id": event.flush_id}
            )
        elif isinstance(event, Done):
            self.binary.pop(event.context_id, None)
            await self.send({"type": "context.done", "context_id": event.context_id, "usage": event.usage})
        elif isinstance(event, Failed):
            await self.error(event.context_id, event.error)

    async def error(self, context_id: str | None, error: APIError) -> None:
        await self.send({"type": "error", "context_id": context_id, **error.body()})

    async def send(self, message: dict[str, Any]) -> None:
        await self.connection.send(json.dumps(message))

    async def handle(self, session: Session, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "session.update":
            self.defaults = _options(message.get("session"), self.defaults, "session")
            return
        if kind == "session.close":
            raise _Closing()
        context_id = message.get("context_id", DEFAULT_CONTEXT)
        if not isinstance(context_id, str) or not 0 < len(context_id.encode("utf-8")) <= MAX_CONTEXT_ID:
            raise InvalidRequest(
                f"context_id must be a string of 1..{MAX_CONTEXT_ID} bytes", param="context_id"
            )
        if kind == "context.create":
            options = _options(message.get("options"), self.defaults, "options")
            await self._open(session, context_id, options)
        elif kind == "input.text":
            text, seq = message.get("text"), message.get("seq")
            if not isinstance(text, str):
                raise InvalidRequest("text must be a string", param="text")
            if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool)):
                raise InvalidRequest("seq must be an integer", param="seq")
            context = session.open_context(context_id) or await self._open(session, context_id, self.defaults)
            ack = context.push(text, seq)
            if ack is not None:
                await self.write(ack)
        elif kind in ("input.done", "input.flush", "context.cancel"):
            if kind == "context.cancel":
                await session.cancel(context_id)
                return
            context = session.open_context(context_id)
            if context is None:
                raise InvalidRequest(
                    f"no open context {context_id!r}", param="context_id", code="unknown_context"
                )
            context.end() if kind == "input.done" else context.flush()
        else:
            raise InvalidRequest(f"unknown message type {kind!r}", param="type", code="unknown_type")

    async def _open(self, session: Session, context_id: str, options: Options) -> Any:
        context = await session.start_context(context_id, options.request())
        self.binary[context_id] = options.audio == "binary"
        return context


class _Closing(Exception):
    """The client asked to close the session."""


def _writer_of(faces: dict[int, _Face]) -> Any:
    def writer(connection: Connection) -> Write:
        face = faces.setdefault(id(connection), _Face(connection))
        return face.write

    return writer


@router.websocket(routes.REALTIME)
async def realtime_websocket(ws: WebSocket) -> None:
    """Our realtime protocol (module docstring)."""
    faces: dict[int, _Face] = {}

    async def loop(connection: Connection, session: Session) -> None:
        face = faces[id(connection)]
        await face.send(
            {"type": "session.created", "session_id": session.id, "session": face.defaults.model_dump()}
        )
        while True:
            context_id: str | None = None
            try:
                data = await connection.receive(idle=not session.contexts)
                if isinstance(data, bytes):
                    raise InvalidRequest("messages are JSON text", param="message")
                try:
                    message = json.loads(data)
                except ValueError:
                    raise InvalidRequest("a message must be a JSON object", param="message") from None
                if not isinstance(message, dict):
                    raise InvalidRequest("a message must be a JSON object", param="message")
                raw_id = message.get("context_id", DEFAULT_CONTEXT)
                context_id = raw_id if isinstance(raw_id, str) else None
                await face.handle(session, message)
            except _Closing:
                return
            except TooLarge as exc:
                await face.error(None, exc)
            except APIError as exc:
                if context_id is not None and (context := session.open_context(context_id)) is not None:
                    await context.cancel("error")
                await face.error(context_id, exc)

    async def refuse(connection: Connection, error: APIError) -> None:
        await connection.send(json.dumps({"type": "error", "context_id": None, **error.body()}))

    await serve(ws, _writer_of(faces), loop, refuse)


@router.get(routes.REALTIME_ASYNCAPI, include_in_schema=False)
async def asyncapi() -> JSONResponse:
    """The AsyncAPI 3 description of the realtime protocol."""
    from app.api.asyncapi import DOCUMENT

    return JSONResponse(DOCUMENT)
