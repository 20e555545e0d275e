"""Apps with an in-memory span exporter attached, and span-tree helpers."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.config import Settings
from app.main import create_app
from tests.api.conftest import fake_vllm, reference_wav  # noqa: F401  (fixtures shared with the API tests)


def traced_app(settings: Settings) -> tuple[FastAPI, InMemorySpanExporter]:
    """``create_app`` with spans on (no exporter needed) and every finished span kept in memory."""
    settings = settings.model_copy(update={"TRACING_SPANS_REQUIRE_EXPORTER": False})
    app = create_app(settings)
    exporter = InMemorySpanExporter()
    app.state.tracing.provider.add_span_processor(SimpleSpanProcessor(exporter))
    return app, exporter


def by_name(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The spans called ``name``, in start order."""
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    """The single span called ``name``."""
    found = by_name(spans, name)
    assert len(found) == 1, f"{name}: {[s.name for s in spans]}"
    return found[0]


def is_child(child: ReadableSpan, parent: ReadableSpan) -> bool:
    """True when ``child`` hangs directly under ``parent`` in the same trace."""
    assert child.parent is not None and parent.context is not None and child.context is not None
    return (
        child.parent.span_id == parent.context.span_id and child.context.trace_id == parent.context.trace_id
    )
