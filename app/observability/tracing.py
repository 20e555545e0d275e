"""Hot-path spans, gated so that they cost nothing when nobody is listening.

Spans are built only when ``ENABLE_TRACING_SPANS`` is on, an exporter is configured (``OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``ENABLE_CONSOLE_SPAN_EXPORTER``;
or ``TRACING_SPANS_REQUIRE_EXPORTER=false``) and opentelemetry imports. ``Tracing.from_settings``
decides once per app; a closed gate leaves ``Tracing.reason`` saying why (logged at startup) and
creates no provider and no tracer.

Per-app state: the open gate's ``TracerProvider`` lives on the ``Tracing`` object (``app.state.tracing``),
never in OpenTelemetry's process-global provider. The request middleware binds
that app's tracer to the request's context (``Tracing.bind``); the helpers below (``span``,
``start_span``, ``current_context``, ``record_span``, ``traced_stream``) find it there. With nothing
bound they return a shared no-op at once: no tracer lookup, no clock read, no attribute dict.

Worker threads (the codec batcher) cannot see a request's context: the caller captures
``current_context()`` with each queued item and the thread records its stages after the fact with
``record_span(name, parent, start_ns, end_ns, attributes)``, times from ``time.time_ns()``.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterator, MutableMapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from app.core.routes import UNTRACED_PATHS
from app.core.settings import ServerSettings
from app.core.types import Attributes, AttributeValue

if TYPE_CHECKING:
    from fastapi import FastAPI
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import Tracer

log = logging.getLogger(__name__)

T = TypeVar("T")

NO_EXPORTER = (
    "hot-path spans requested but no span exporter is configured, so they are disabled rather than "
    "built and dropped. Set OTLP_ENDPOINT (or ENABLE_CONSOLE_SPAN_EXPORTER=true) to collect them, or "
    "TRACING_SPANS_REQUIRE_EXPORTER=false if a processor is attached in code."
)


class SpanLike(Protocol):
    """What the helpers hand out: a live span or the shared no-op."""

    @property
    def context(self) -> Parent | None: ...
    def set(self, attributes: Attributes) -> None: ...
    def event(self, name: str, attributes: Attributes | None = None) -> None: ...
    def fail(self, exc: BaseException) -> None: ...
    def end(self, end_ns: int | None = None) -> None: ...
    def attached(self) -> contextlib.AbstractContextManager[object]: ...


class _NoopSpan:
    """The shared span of a closed gate: every method returns at once."""

    __slots__ = ()
    context: Parent | None = None

    def set(self, attributes: Attributes) -> None:
        """No-op."""

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        """No-op."""

    def fail(self, exc: BaseException) -> None:
        """No-op."""

    def end(self, end_ns: int | None = None) -> None:
        """No-op."""

    def attached(self) -> contextlib.AbstractContextManager[object]:
        return _NULL


NOOP_SPAN = _NoopSpan()
_NOOP_CM: contextlib.nullcontext[SpanLike] = contextlib.nullcontext(NOOP_SPAN)
_NULL: contextlib.nullcontext[None] = contextlib.nullcontext()


def _clean(attributes: Attributes | None) -> dict[str, AttributeValue]:
    """Attributes OpenTelemetry accepts: None values dropped."""
    return {k: v for k, v in attributes.items() if v is not None} if attributes else {}


@dataclass(frozen=True, slots=True)
class Parent:
    """A span context to hang children on, plus the tracer that records them (usable from any thread)."""

    live: _Live
    otel_context: Any  # opentelemetry.context.Context


class _Span:
    """A live span handle."""

    __slots__ = ("_live", "_span")

    def __init__(self, live: _Live, span: OtelSpan) -> None:
        self._live = live
        self._span = span

    @property
    def context(self) -> Parent:
        return Parent(self._live, self._live.with_span(self._span))

    def set(self, attributes: Attributes) -> None:
        self._span.set_attributes(_clean(attributes))

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        self._span.add_event(name, _clean(attributes))

    def fail(self, exc: BaseException) -> None:
        self._live.fail(self._span, exc)

    def end(self, end_ns: int | None = None) -> None:
        self._span.end(end_time=end_ns)

    def attached(self) -> contextlib.AbstractContextManager[object]:
        """Make this span the current one for a block (it is not ended on exit)."""
        return self._live.use_span(self._span, end_on_exit=False, record_exception=False)


class _Live:
    """The open gate of one app: its tracer and the opentelemetry functions the helpers call."""

    def __init__(self, tracer: Tracer) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import Status, StatusCode

        self.tracer = tracer
        self.get_current = context.get_current
        self.with_span = trace.set_span_in_context
        self.use_span = trace.use_span
        self.current_span = trace.get_current_span
        self._status = Status
        self._code = StatusCode.ERROR

    def fail(self, span: OtelSpan, exc: BaseException) -> None:
        span.record_exception(exc)
        span.set_status(self._status(self._code, f"{type(exc).__name__}: {exc}"))

    @contextlib.contextmanager
    def span(self, name: str, attributes: Attributes | None, parent: Parent | None) -> Iterator[SpanLike]:
        context = parent.otel_context if parent is not None else None
        with self.tracer.start_as_current_span(name, context=context, attributes=_clean(attributes)) as span:
            yield _Span(self, span)

    def start(self, name: str, attributes: Attributes | None, parent: Parent | None) -> SpanLike:
        context = parent.otel_context if parent is not None else None
        return _Span(self, self.tracer.start_span(name, context=context, attributes=_clean(attributes)))

    def record(
        self, name: str, parent: Parent, start_ns: int, end_ns: int, attributes: Attributes | None
    ) -> None:
        span = self.tracer.start_span(
            name, context=parent.otel_context, attributes=_clean(attributes), start_time=start_ns
        )
        span.end(end_time=end_ns)


_ACTIVE: ContextVar[_Live | None] = ContextVar("tts_tracing", default=None)
_REQUEST_TRACE_ID: ContextVar[str | None] = ContextVar("tts_trace_id", default=None)
# W3C traceparent, matched whole: version-trace_id-parent_id-flags, and the fields a later version adds
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}(?:-[!-~]*)?")


def trace_ids() -> tuple[str | None, str | None]:
    """``(trace_id, span_id)`` for a log line: the current span's when spans are on, else the
    request's own trace id (no span id)."""
    live = _ACTIVE.get()
    if live is not None:
        ctx = live.current_span().get_span_context()
        if ctx.is_valid:
            return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"
    return _REQUEST_TRACE_ID.get(), None


def bind_request_trace_id(traceparent: str) -> tuple[str, Token[str | None]]:
    """The trace id of a request, kept for log lines that no span covers: the current server span's,
    else the caller's W3C ``traceparent`` trace id, else a new random one. Undo with ``unbind_request``."""
    trace_id, _ = trace_ids()
    if trace_id is None:
        match = _TRACEPARENT.fullmatch(traceparent)
        trace_id = match.group(1) if match and match.group(1) != "0" * 32 else uuid.uuid4().hex
    return trace_id, _REQUEST_TRACE_ID.set(trace_id)


def unbind_request(token: Token[str | None]) -> None:
    """Undo ``bind_request_trace_id``."""
    _REQUEST_TRACE_ID.reset(token)


def span(
    name: str, attributes: Attributes | None = None, parent: Parent | None = None
) -> contextlib.AbstractContextManager[SpanLike]:
    """A span around a block, current inside it, child of ``parent`` or of the current span.

    Only for blocks that do not ``yield`` out of an async generator (the context would be restored in
    another task); use ``start_span`` with an explicit parent there.
    """
    live = _ACTIVE.get()
    if live is None:
        return _NOOP_CM
    return live.span(name, attributes, parent)


def start_span(name: str, attributes: Attributes | None = None, parent: Parent | None = None) -> SpanLike:
    """A span started now and ended by the caller (``end()``); not made current."""
    live = _ACTIVE.get()
    if live is None:
        return NOOP_SPAN
    return live.start(name, attributes, parent)


def current_context() -> Parent | None:
    """The active span's context, to carry with a queued item; None when spans are off (one lookup)."""
    live = _ACTIVE.get()
    if live is None:
        return None
    return Parent(live, live.get_current())


def record_span(
    name: str, parent: Parent | None, start_ns: int, end_ns: int, attributes: Attributes | None = None
) -> None:
    """Record a finished span after the fact (from any thread) under ``parent``, times from
    ``time.time_ns()``; a no-op when ``parent`` is None (spans off)."""
    if parent is not None:
        parent.live.record(name, parent, start_ns, end_ns, attributes)


def traced_stream(
    handle: SpanLike, chunks: AsyncGenerator[T, None], finish: Callable[[], Attributes]
) -> AsyncGenerator[T, None]:
    """``chunks`` with ``handle`` (the ``tts.stream`` span) current during each step, so spans opened
    inside hang under it whichever task pulls the chunk. Sets ``tts.ttfb_s`` at the first chunk and
    ``tts.chunks`` plus ``finish()`` when the stream is closed, then ends the span. With spans off it
    returns ``chunks`` itself."""
    if handle is NOOP_SPAN:
        return chunks
    return _traced_stream(handle, chunks, finish)


async def _traced_stream(
    handle: SpanLike, chunks: AsyncGenerator[T, None], finish: Callable[[], Attributes]
) -> AsyncGenerator[T, None]:
    started = time.perf_counter()
    count = 0
    try:
        while True:
            with handle.attached():
                try:
                    item = await anext(chunks)
                except StopAsyncIteration:
                    return
                except Exception as exc:
                    handle.fail(exc)
                    raise
            if count == 0:
                handle.set({"tts.ttfb_s": time.perf_counter() - started})
            count += 1
            yield item
    finally:
        try:
            await chunks.aclose()
        finally:
            handle.set({"tts.chunks": count, **finish()})
            handle.end()


def _traces_endpoint(settings: ServerSettings) -> str | None:
    """The OTLP/HTTP traces URL the settings name, if any (the signal path appended to base URLs)."""
    if settings.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:
        return settings.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    base = settings.OTLP_ENDPOINT or settings.OTEL_EXPORTER_OTLP_ENDPOINT
    if not base:
        return None
    if urlsplit(base).path.rstrip("/").endswith("/v1/traces"):
        return base
    return base.rstrip("/") + "/v1/traces"


def gate_reason(settings: ServerSettings) -> str | None:
    """Why spans stay off under ``settings`` (None: the settings open the gate)."""
    if not settings.ENABLE_TRACING_SPANS:
        return "hot-path spans are off (ENABLE_TRACING_SPANS=false)."
    exporter = _traces_endpoint(settings) is not None or settings.ENABLE_CONSOLE_SPAN_EXPORTER
    if settings.TRACING_SPANS_REQUIRE_EXPORTER and not exporter:
        return NO_EXPORTER
    return None


def _request_span_details(scope: MutableMapping[str, Any]) -> tuple[str, dict[str, str]]:
    """The server span's first name, ``METHOD /path``; renamed to the route template once routed."""
    return f"{scope.get('method', 'HTTP')} {scope.get('path', '')}", {}


class Tracing:
    """The tracing state of one app: a closed gate (``reason``) or a provider and its tracer."""

    def __init__(self, settings: ServerSettings, reason: str | None, provider: TracerProvider | None) -> None:
        self.settings = settings
        self.reason = reason
        self.provider = provider
        self._live = _Live(provider.get_tracer("app.tts")) if provider is not None else None

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> Tracing:
        """Decide the gate; when open, a sampled provider (exporters are attached in ``start``)."""
        reason = gate_reason(settings)
        if reason is not None:
            return cls(settings, reason, None)
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        except ImportError as exc:
            return cls(settings, f"hot-path spans are off: opentelemetry is not importable ({exc}).", None)
        provider = TracerProvider(
            sampler=ParentBased(TraceIdRatioBased(settings.TRACING_SAMPLE)),
            resource=Resource.create({"service.name": settings.SERVICE_NAME}),
            shutdown_on_exit=False,  # closed by the app's lifespan, not by a process-wide atexit hook
        )
        return cls(settings, None, provider)

    @property
    def enabled(self) -> bool:
        """True when this app builds spans."""
        return self._live is not None

    def install(self, app: FastAPI) -> None:
        """Add OpenTelemetry's ASGI server-span middleware, outermost (nothing when spans are off).

        Per-message ``http receive``/``http send`` spans are left out unless TRACE_ASGI_MESSAGE_SPANS.
        """
        if self._live is None:
            return
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
        from opentelemetry.metrics import NoOpMeter

        excluded: list[Any] | None = None if self.settings.TRACE_ASGI_MESSAGE_SPANS else ["receive", "send"]
        app.add_middleware(
            OpenTelemetryMiddleware,
            excluded_urls=",".join(UNTRACED_PATHS),
            default_span_details=_request_span_details,
            tracer=self._live.tracer,
            meter=NoOpMeter("app.tts"),  # HTTP metrics come from prometheus-client
            exclude_spans=excluded,
        )

    def start(self) -> None:
        """Attach the configured exporters (threads start here), or log why spans are off."""
        if self.provider is None:
            log.info("%s", self.reason)
            return
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )

        endpoint = _traces_endpoint(self.settings)
        if endpoint is not None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        if self.settings.ENABLE_CONSOLE_SPAN_EXPORTER:
            self.provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        log.info(
            "hot-path spans on: service %s, sample %s, OTLP %s, console %s",
            self.settings.SERVICE_NAME,
            self.settings.TRACING_SAMPLE,
            endpoint or "off",
            self.settings.ENABLE_CONSOLE_SPAN_EXPORTER,
        )

    def shutdown(self) -> None:
        """Flush and stop the exporters (blocking: call it off the event loop)."""
        if self.provider is not None:
            self.provider.shutdown()

    def name_server_span(self, method: str, route: str) -> None:
        """Name the current server span after the route template (called once routing is known)."""
        if self._live is not None:
            server = self._live.current_span()
            server.update_name(f"{method} {route}")
            server.set_attribute("http.route", route)

    def bind(self) -> Token[_Live | None] | None:
        """Make this app's tracer the one the helpers use in the current context (None when off)."""
        return _ACTIVE.set(self._live) if self._live is not None else None

    @staticmethod
    def unbind(token: Token[_Live | None] | None) -> None:
        """Undo ``bind``."""
        if token is not None:
            _ACTIVE.reset(token)

    @contextlib.contextmanager
    def activated(self) -> Iterator[None]:
        """``bind`` for a block: for code driven outside a request (benchmarks, tests)."""
        token = self.bind()
        try:
            yield
        finally:
            self.unbind(token)
