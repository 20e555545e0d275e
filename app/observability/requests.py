"""Per-request bookkeeping: the ``X-Trace-Id`` header, HTTP metrics, error kinds and the access line
(WebSocket connections too: one line and one count per connection).

``RequestMiddleware`` (pure ASGI, so streamed bodies pass through unbuffered) opens a ``RequestRecord``
for each HTTP request, binds the app's tracer for the spans of that request, and once the last byte
is sent (or the request failed or the client left) counts it and writes one access log line. Routes
add what only they know (voice, format, the synthesis stats) through ``request_record(request)``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.constants import SAMPLE_RATE
from app.core.errors import APIError
from app.core.routes import REALTIME_PATHS, SYNTHESIS_PATHS
from app.core.stats import UtteranceStats
from app.observability.metrics import Metrics
from app.observability.tracing import Tracing, bind_request_trace_id, unbind_request

access_log = logging.getLogger("app.access")

_KIND_BY_STATUS = {
    400: "validation",
    413: "validation",
    422: "validation",
    401: "auth",
    403: "auth",
    404: "not_found",
    429: "overload",
    499: "client_disconnect",
    502: "backend",
    503: "unavailable",
    504: "timeout",
}


@dataclass
class RequestRecord:
    """What one request did, filled in as it runs."""

    method: str
    path: str
    started: float = field(default_factory=time.perf_counter)
    status: int | None = None
    ttfb_s: float | None = None  # to the first non-empty body byte
    bytes_out: int = 0
    completed: bool = False  # the last body message was sent
    voice: str | None = None
    response_format: str | None = None
    stats: UtteranceStats | None = None

    def audio_s(self) -> float | None:
        """Seconds of audio the synthesis produced (None when the request made none)."""
        return None if self.stats is None else self.stats.samples / SAMPLE_RATE


def request_record(request: Request) -> RequestRecord:
    """The record of ``request`` (a detached one when the middleware is not installed)."""
    record = request.scope.get("state", {}).get("obs")
    return record if isinstance(record, RequestRecord) else RequestRecord(request.method, request.url.path)


def error_kind(status: int | None, exc: BaseException | None, record: RequestRecord) -> str | None:
    """The failure kind of a finished request, or None when it succeeded."""
    if exc is not None:
        if isinstance(exc, ClientDisconnect | OSError):
            return "client_disconnect"
        if isinstance(exc, APIError):
            return _KIND_BY_STATUS.get(exc.status, "internal")
        return "internal" if isinstance(exc, Exception) else "cancelled"
    if status is not None and status >= 400:
        return _KIND_BY_STATUS.get(status, "internal" if status >= 500 else "validation")
    if status is not None and not record.completed:
        return "client_disconnect"  # the body was cut: Starlette stops streaming once the client is gone
    return None


class RequestMiddleware:
    """Records, counts and logs every HTTP request; sets ``X-Trace-Id``."""

    def __init__(self, app: ASGIApp, tracing: Tracing, metrics: Metrics) -> None:
        self.app = app
        self.tracing = tracing
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        record = RequestRecord(scope["method"], scope["path"])
        scope.setdefault("state", {})["obs"] = record
        tracer_token = self.tracing.bind()
        traceparent = dict(scope["headers"]).get(b"traceparent", b"").decode("latin-1")
        trace_id, trace_token = bind_request_trace_id(traceparent)

        async def send_recorded(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
                route = getattr(scope.get("route"), "path", None)
                if route is not None:  # routed by now; the server span ends with the last byte
                    self.tracing.name_server_span(record.method, route)
                message["headers"] = [*message.get("headers", []), (b"x-trace-id", trace_id.encode())]
            elif message["type"] == "http.response.body":
                body = message.get("body", b"")
                if body and record.ttfb_s is None:
                    record.ttfb_s = time.perf_counter() - record.started
                record.bytes_out += len(body)
                record.completed = not message.get("more_body", False)
            await send(message)

        try:
            await self._run(scope, receive, send_recorded, record)
        finally:
            unbind_request(trace_token)
            self.tracing.unbind(tracer_token)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket connection: its spans bound, and counted and logged once it ends (status 101 when
        accepted, 403 when refused before it opened); its contexts log lines of their own."""
        record = RequestRecord("WS", scope["path"])
        scope.setdefault("state", {})["obs"] = record
        tracer_token = self.tracing.bind()

        async def send_recorded(message: Message) -> None:
            kind = message["type"]
            if kind == "websocket.accept":
                record.status = 101
            elif kind == "websocket.close" and record.status is None:
                record.status = 403
            elif kind == "websocket.send":
                record.bytes_out += len(message.get("bytes") or b"") + len(message.get("text") or "")
            await send(message)

        try:
            await self._run(scope, receive, send_recorded, record, ended=True)
        finally:
            self.tracing.unbind(tracer_token)

    async def _run(
        self, scope: Scope, receive: Receive, send: Send, record: RequestRecord, *, ended: bool = False
    ) -> None:
        """The app on one connection, counted and logged once it returns or fails (``ended``: the
        record is complete whatever happened, as a WebSocket's is once it closes)."""
        failure: BaseException | None = None
        try:
            await self.app(scope, receive, send)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            if ended:
                record.completed = True
            self._finish(scope, record, failure)

    def _finish(self, scope: Scope, record: RequestRecord, failure: BaseException | None) -> None:
        """Count the request and write its access line."""
        duration = time.perf_counter() - record.started
        route = getattr(scope.get("route"), "path", None)
        if route is None:  # refused before routing (401, 429): only fixed paths keep their name
            route = record.path if record.path in SYNTHESIS_PATHS | REALTIME_PATHS else "unmatched"
        status = record.status if record.status is not None else 500
        kind = error_kind(record.status, failure, record)
        m = self.metrics
        m.requests.labels(record.method, route, str(status)).inc()
        m.latency.labels(route).observe(duration)
        if kind is not None:
            m.errors.labels(kind).inc()
        audio_s = record.audio_s()
        if record.path in SYNTHESIS_PATHS and record.ttfb_s is not None and status < 400:
            m.ttfb.labels(route).observe(record.ttfb_s)
        if audio_s:
            m.audio.labels(route).inc(audio_s)
        if record.stats is not None:
            stats = record.stats
            m.observe_generation(stats.codes, stats.samples / SAMPLE_RATE, stats.generation_s)
            if record.path in SYNTHESIS_PATHS and record.stats.samples:
                m.observe_stall(record.stats.stall_s)
        access_log.info(
            "%s %s %s %.3fs",
            record.method,
            record.path,
            status,
            duration,
            extra={
                "method": record.method,
                "path": record.path,
                "status": status,
                "duration_s": round(duration, 6),
                "ttfb_s": None if record.ttfb_s is None else round(record.ttfb_s, 6),
                "audio_s": None if audio_s is None else round(audio_s, 3),
                "voice": record.voice,
                "format": record.response_format,
                "bytes": record.bytes_out,
                "error": kind,
                "request_id": scope.get("state", {}).get("request_id"),
            },
        )
