"""A header-read timeout for uvicorn's HTTP/1.1 protocols (uvicorn has none of its own).

Whenever a connection is waiting for the headers of a request (it has just opened, or its last
response has completed), a timer runs for ``header_timeout_s``. A request whose headers complete in
time stops it; otherwise the connection is answered 408 (when it had sent part of a request) and
closed, so a client that trickles its headers never holds a connection, a task or a socket for long.
The body has its own timeout, in the app (``app.api.body_timeout``). A connection upgraded to a
WebSocket leaves the protocol: its timer stops (a realtime session has timeouts of its own).

``header_timeout_protocol`` returns a picklable factory for ``uvicorn.Config(http=...)`` (worker
processes receive the config by pickling), built on httptools when it is installed, as uvicorn's
``auto`` would be, else on h11.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from typing import Any, Literal

from uvicorn.protocols.http.h11_impl import H11Protocol

from app.core.errors import RequestTimeout

_BODY = json.dumps(RequestTimeout("The request headers were not received in time.").body()).encode()
TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: " + str(len(_BODY)).encode() + b"\r\n\r\n" + _BODY
)


class HeaderDeadline:
    """The timer logic, mixed into a uvicorn protocol (which provides ``loop``, ``transport``, ``cycle``
    and the hooks extended here)."""

    header_timeout_s: float
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any

    def _arm(self) -> None:
        self._disarm()
        if self.transport.is_closing():
            return
        self._armed_cycle = self.cycle
        self._bytes_since_armed = False
        self._header_timer: asyncio.TimerHandle | None = self.loop.call_later(
            self.header_timeout_s, self._expired
        )

    def _disarm(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
        self._header_timer = None

    def waiting_for_headers(self) -> bool:
        """True when no request has started since the timer was armed and none is being answered."""
        cycle = self.cycle
        return cycle is self._armed_cycle and (cycle is None or cycle.response_complete)

    def _expired(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self.waiting_for_headers():
            return
        if self._bytes_since_armed:
            self.transport.write(TIMEOUT_RESPONSE)
        self.transport.close()


def _with_deadline(base: type[asyncio.Protocol], name: str) -> Callable[..., asyncio.Protocol]:
    """``base`` with HeaderDeadline hooked into its connection lifecycle, as module attribute ``name``."""

    class Protocol(HeaderDeadline, base):  # type: ignore[valid-type, misc]  # a base chosen at run time
        def __init__(self, *args: Any, header_timeout_s: float, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.header_timeout_s = header_timeout_s

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            self._bytes_since_armed = True
            super().data_received(data)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_websocket_upgrade(self, *args: Any) -> None:
            self._disarm()  # the connection is a WebSocket's from here on: no more request headers
            super().handle_websocket_upgrade(*args)

    Protocol.__name__ = Protocol.__qualname__ = name
    return Protocol


H11HeaderTimeout = _with_deadline(H11Protocol, "H11HeaderTimeout")
try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is not installed: uvicorn's auto would use h11
    HttpToolsHeaderTimeout = None
else:
    HttpToolsHeaderTimeout = _with_deadline(HttpToolsProtocol, "HttpToolsHeaderTimeout")


def header_timeout_protocol(
    timeout_s: float, implementation: Literal["auto", "h11", "httptools"] = "auto"
) -> Callable[..., asyncio.Protocol]:
    """The protocol factory for ``uvicorn.Config(http=...)``; ``auto``: httptools when installed."""
    if implementation == "h11" or (implementation == "auto" and HttpToolsHeaderTimeout is None):
        return functools.partial(H11HeaderTimeout, header_timeout_s=timeout_s)
    if HttpToolsHeaderTimeout is None:
        raise RuntimeError("httptools is not installed")
    return functools.partial(HttpToolsHeaderTimeout, header_timeout_s=timeout_s)
