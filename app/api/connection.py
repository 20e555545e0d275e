"""Limits on one HTTP/1.1 connection, kept in uvicorn's protocol (uvicorn has none of these):

- **Header deadline.** Whenever a connection is waiting for the headers of a request (it has just
  opened, or its last response has completed), a timer runs for ``header_timeout_s``. A request whose
  headers complete in time stops it; otherwise the connection is answered 408 (when it had sent part
  of a request) and closed, so a client that trickles its headers never holds a connection, a task or
  a socket for long. The body has its own timeout, in the app (``app.api.body_timeout``).
- **Header size.** The request line and headers of one request may take ``max_header_bytes``. The
  bytes are counted before the parser sees them, and a head still incomplete at the cap is answered 431
  at once: the parser never holds more (httptools and uvicorn grow the URL and each header by
  concatenation, so a huge head costs time quadratic in its size, on the event loop, stalling every
  other client). After the 431 the connection is half-closed, reads stop, and it closes a moment later.
- **Write stall.** A response whose client stops reading fills the socket buffers, and uvicorn's next
  ``send`` waits for room forever, holding the stream's admission slot, its LM stream and codec state.
  When the transport has stayed paused for writing (buffers full) for ``write_stall_s``, the connection
  is aborted: the app sees a client disconnect and releases all of it, as for any client that leaves.

``connection_protocol`` returns a picklable factory for ``uvicorn.Config(http=...)`` (worker processes
receive the config by pickling), built on httptools when it is installed, as uvicorn's ``auto`` would
be, else on h11.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.core.errors import APIError, HeadersTooLarge, RequestTimeout

log = logging.getLogger(__name__)

LINGER_S = 1.0
"""How long a connection refused with 431 stays half-closed (the client reads the answer) before closing."""


def _response(status: str, error: APIError) -> bytes:
    body = json.dumps(error.body()).encode()
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\n"
        f"content-length: {len(body)}\r\n\r\n".encode()
        + body
    )


TIMEOUT_RESPONSE = _response(
    "408 Request Timeout", RequestTimeout("The request headers were not received in time.")
)


@dataclass(frozen=True)
class ConnectionLimits:
    """The limits of one connection (HEADER_READ_TIMEOUT_S, MAX_HEADER_BYTES, WRITE_STALL_TIMEOUT_S)."""

    header_timeout_s: float
    max_header_bytes: int
    write_stall_s: float

    def too_large_response(self) -> bytes:
        error = HeadersTooLarge(
            f"The request line and headers are larger than the {self.max_header_bytes}-byte limit."
        )
        return _response("431 Request Header Fields Too Large", error)


class ConnectionGuard(asyncio.Protocol):
    """The three limits, mixed in front of a uvicorn protocol (which provides ``loop``, ``transport``,
    ``cycle`` and ``on_response_complete``); ``reading_head`` says whether its parser is inside a request
    head."""

    limits: ConnectionLimits
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any
    _head_bytes = 0
    _refused = False
    _header_timer: asyncio.TimerHandle | None = None
    _stall_timer: asyncio.TimerHandle | None = None

    def __init__(self, *args: Any, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        self._bytes_since_armed = True
        self._guarded_feed(data, super().data_received)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]  # uvicorn's protocols define it
        self._arm()

    def pause_writing(self) -> None:
        super().pause_writing()
        self._stall_started()

    def resume_writing(self) -> None:
        self._stall_ended()
        super().resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._stall_ended()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self, *args: Any) -> None:
        """The connection is a WebSocket's from here on: no more request heads to wait for or count (a
        realtime session has timeouts of its own)."""
        self._disarm()
        self._stall_ended()
        super().handle_websocket_upgrade(*args)  # type: ignore[misc]  # uvicorn's protocols define it

    # --- header deadline -------------------------------------------------------------------------
    def _arm(self) -> None:
        self._disarm()
        self._head_bytes = 0
        if self.transport.is_closing():
            return
        self._armed_cycle = self.cycle
        self._bytes_since_armed = False
        self._header_timer = self.loop.call_later(self.limits.header_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
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

    # --- header size -----------------------------------------------------------------------------
    def reading_head(self) -> bool:
        """True while the parser is inside a request line or headers (each protocol below says how)."""
        raise NotImplementedError

    def _guarded_feed(self, data: bytes, feed: Callable[[bytes], None]) -> None:
        """Give ``data`` to the parser (``feed``), no more than the head's remaining room while a head is
        being read; a head that is still incomplete at the cap is refused."""
        if self._refused:
            return  # after a 431 nothing more is parsed
        if not self.reading_head():
            feed(data)
            return
        room = self.limits.max_header_bytes - self._head_bytes
        if len(data) <= room:
            self._head_bytes += len(data)
            feed(data)
            return
        if room > 0:
            self._head_bytes += room
            feed(data[:room])
        if self.transport.is_closing():
            return
        if self.reading_head():
            self._refuse_head()
            return
        feed(data[max(room, 0) :])  # the head ended within its room: the rest is its body or the next one

    def _refuse_head(self) -> None:
        """431, then a half-close: the client can read the answer; what it still sends is not read."""
        self._refused = True
        self._disarm()
        transport = self.transport
        transport.write(self.limits.too_large_response())
        if transport.can_write_eof():
            transport.write_eof()
        transport.pause_reading()
        self.loop.call_later(LINGER_S, transport.close)

    # --- write stall -----------------------------------------------------------------------------
    def _stall_started(self) -> None:
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(self.limits.write_stall_s, self._stalled)

    def _stall_ended(self) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
        self._stall_timer = None

    def _stalled(self) -> None:
        self._stall_timer = None
        if not self.transport.is_closing():
            log.info("closing a connection whose client read nothing for %g s", self.limits.write_stall_s)
            self.transport.abort()  # close() would wait for the buffered bytes the client never reads


class H11Guarded(ConnectionGuard, H11Protocol):
    """uvicorn's h11 protocol with the limits: a head is being read while the client's side is IDLE."""

    def reading_head(self) -> bool:
        return bool(self.conn.their_state is h11.IDLE)


HttpToolsGuarded: type[ConnectionGuard] | None
try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is not installed: uvicorn's auto would use h11
    HttpToolsGuarded = None
else:

    class _HttpToolsGuarded(ConnectionGuard, HttpToolsProtocol):
        """uvicorn's httptools protocol with the limits: the parser's callbacks mark each head."""

        _in_head = True

        def reading_head(self) -> bool:
            return self._in_head

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head = True
            self._head_bytes = 0

    _HttpToolsGuarded.__name__ = _HttpToolsGuarded.__qualname__ = "HttpToolsGuarded"  # pickled by this name
    HttpToolsGuarded = _HttpToolsGuarded


def connection_protocol(
    limits: ConnectionLimits, implementation: Literal["auto", "h11", "httptools"] = "auto"
) -> Callable[..., asyncio.Protocol]:
    """The protocol factory for ``uvicorn.Config(http=...)``; ``auto``: httptools when installed."""
    if implementation == "h11" or (implementation == "auto" and HttpToolsGuarded is None):
        return functools.partial(H11Guarded, limits=limits)
    if HttpToolsGuarded is None:
        raise RuntimeError("httptools is not installed")
    return functools.partial(HttpToolsGuarded, limits=limits)
