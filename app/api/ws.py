"""What both realtime faces share: a WebSocket as a session's client.

``Connection`` reads the client's messages (refusing, by an error, one past
``REALTIME_MAX_MESSAGE_BYTES`` without closing; closing a connection idle for
``REALTIME_IDLE_TIMEOUT_S`` with no open context) and writes the session's events one at a time: a
client that does not take a message within ``REALTIME_SEND_TIMEOUT_S`` (a write stall) is disconnected,
which closes its session and frees everything it holds. ``serve`` runs a face: it counts the connection
against the session limits, accepts it, runs the face's message loop and always closes the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from app.core.errors import APIError, InvalidRequest
from app.sessions.events import Event
from app.sessions.session import Session, SessionLimits, Sessions

log = logging.getLogger(__name__)

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_TRY_LATER = 1013


class Gone(Exception):
    """The client left, stalled or went idle: the connection is over."""


class TooLarge(InvalidRequest):
    """A message past REALTIME_MAX_MESSAGE_BYTES."""


class Connection:
    """One accepted WebSocket (module docstring)."""

    def __init__(self, ws: WebSocket, limits: SessionLimits) -> None:
        self.ws = ws
        self.limits = limits
        self._lock = asyncio.Lock()

    async def receive(self, idle: bool) -> str | bytes:
        """The next message (``idle``: no context is open, so the idle timeout applies). Gone when the
        client left or idled out; TooLarge for a message past the limit (the connection goes on)."""
        try:
            if idle:
                async with asyncio.timeout(self.limits.idle_s):
                    message = await self.ws.receive()
            else:
                message = await self.ws.receive()
        except TimeoutError:
            await self.close(CLOSE_NORMAL, "idle")
            raise Gone("idle") from None
        except (WebSocketDisconnect, RuntimeError) as exc:
            raise Gone(repr(exc)) from None
        if message["type"] == "websocket.disconnect":
            raise Gone("disconnect")
        data: str | bytes | None = message.get("text")
        if data is None:
            data = message.get("bytes") or b""
        size = len(data.encode("utf-8", "surrogatepass")) if isinstance(data, str) else len(data)
        if size > self.limits.message_bytes:
            raise TooLarge(
                f"a message may be at most {self.limits.message_bytes} bytes, got {size}",
                param="message",
                code="message_too_large",
            )
        return data

    async def send(self, message: str | bytes) -> None:
        """Write one message; Gone when the client is gone or stalls past REALTIME_SEND_TIMEOUT_S."""
        async with self._lock:
            if self.ws.application_state != WebSocketState.CONNECTED:
                raise Gone("closed")
            try:
                async with asyncio.timeout(self.limits.send_s):
                    if isinstance(message, bytes):
                        await self.ws.send_bytes(message)
                    else:
                        await self.ws.send_text(message)
            except TimeoutError:
                log.warning("realtime client stalled for %.0f s: disconnecting it", self.limits.send_s)
                raise Gone("stalled") from None
            except (WebSocketDisconnect, RuntimeError, OSError) as exc:
                raise Gone(repr(exc)) from None

    async def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        with contextlib.suppress(Exception):
            if self.ws.application_state == WebSocketState.CONNECTED:
                await self.ws.close(code, reason)


Write = Callable[[Event], Awaitable[None]]
Face = Callable[[Connection, Session], Coroutine[Any, Any, None]]
"""A protocol's message loop over an accepted connection and its session."""


async def serve(
    ws: WebSocket,
    write: Callable[[Connection], Write],
    face: Face,
    refuse: Callable[[Connection, APIError], Awaitable[None]],
    conversation: str | None = None,
) -> None:
    """Accept ``ws`` as a realtime session and run ``face`` on it (module docstring). ``write`` makes the
    function that sends an event in the face's shape; ``refuse`` tells a client over a limit why it is
    closed."""
    state: Any = ws.app.state
    sessions: Sessions = state.sessions
    limits: SessionLimits = state.session_limits
    tenant = ws.scope.get("state", {}).get("tenant")
    await ws.accept()
    connection = Connection(ws, limits)
    try:
        sessions.take(tenant)
    except APIError as exc:
        with contextlib.suppress(Gone):
            await refuse(connection, exc)
        await connection.close(CLOSE_TRY_LATER, "too many sessions")
        return
    gone = asyncio.Event()
    send = write(connection)

    async def emit(event: Event) -> None:
        try:
            await send(event)
        except Gone:
            gone.set()  # the face's loop is stopped below; the session closes

    session = Session(state.engine, emit, limits, state.admission, tenant=tenant, conversation=conversation)
    loop = asyncio.create_task(face(connection, session))
    stalled = asyncio.create_task(gone.wait())
    try:
        await asyncio.wait({loop, stalled}, return_when=asyncio.FIRST_COMPLETED)
        if loop.done() and not loop.cancelled() and not isinstance(loop.exception(), Gone | None):
            raise loop.exception()  # type: ignore[misc]
    finally:
        for task in (loop, stalled):
            task.cancel()
        await asyncio.gather(loop, stalled, return_exceptions=True)
        await session.close()
        sessions.give_back(tenant)
        await connection.close(CLOSE_NORMAL)
