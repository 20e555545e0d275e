"""The WebSocket plumbing on its own: a client that takes no message within REALTIME_SEND_TIMEOUT_S is
gone (a write stall), a message past the size limit is refused without closing, idle closes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.websockets import WebSocketState

from app.api.ws import Connection, Gone, TooLarge
from app.sessions.session import SessionLimits


class StuckSocket:
    """A WebSocket whose peer never reads (sends block) and sends what it is given."""

    application_state = WebSocketState.CONNECTED

    def __init__(self, incoming: list[dict[str, Any]] | None = None) -> None:
        self.incoming = incoming or []
        self.closed: tuple[int, str] | None = None

    async def send_text(self, text: str) -> None:
        await asyncio.Event().wait()

    async def send_bytes(self, data: bytes) -> None:
        await asyncio.Event().wait()

    async def receive(self) -> dict[str, Any]:
        if self.incoming:
            return self.incoming.pop(0)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def close(self, code: int, reason: str = "") -> None:
        self.closed = (code, reason)


async def test_a_write_stall_ends_the_connection() -> None:
    connection = Connection(StuckSocket(), SessionLimits(send_s=0.05))  # type: ignore[arg-type]
    with pytest.raises(Gone, match="stalled"):
        await asyncio.wait_for(connection.send("{}"), 2)


async def test_size_limit_and_idle() -> None:
    big = {"type": "websocket.receive", "text": "x" * 300}
    socket = StuckSocket([big, {"type": "websocket.receive", "text": "ok"}])
    connection = Connection(socket, SessionLimits(message_bytes=256, idle_s=0.05))  # type: ignore[arg-type]
    with pytest.raises(TooLarge):
        await connection.receive(idle=False)
    assert await connection.receive(idle=False) == "ok"  # the connection goes on
    with pytest.raises(Gone, match="idle"):
        await connection.receive(idle=True)
    assert socket.closed is not None and socket.closed[0] == 1000
