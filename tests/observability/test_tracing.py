"""The span gate and the helpers: shared no-ops when closed, explicit parents across threads when open."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.observability import tracing
from app.observability.tracing import Tracing, gate_reason
from tests.conftest import make_settings
from tests.observability.conftest import is_child, one


@pytest.mark.parametrize(
    ("overrides", "open_"),
    [
        ({}, False),
        ({"ENABLE_TRACING_SPANS": False, "ENABLE_CONSOLE_SPAN_EXPORTER": True}, False),
        ({"OTLP_ENDPOINT": "http://tempo:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"ENABLE_CONSOLE_SPAN_EXPORTER": True}, True),
        ({"TRACING_SPANS_REQUIRE_EXPORTER": False}, True),
    ],
)
def test_gate(overrides: dict[str, object], open_: bool) -> None:
    assert (gate_reason(make_settings(**overrides)) is None) == open_


def test_otlp_traces_endpoint() -> None:
    endpoint = tracing._traces_endpoint
    assert endpoint(make_settings(OTLP_ENDPOINT="http://tempo:4318")) == "http://tempo:4318/v1/traces"
    assert (
        endpoint(make_settings(OTLP_ENDPOINT="http://tempo:4318/v1/traces")) == "http://tempo:4318/v1/traces"
    )
    both = make_settings(OTLP_ENDPOINT="http://a:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://b/x")
    assert endpoint(both) == "http://b/x"


def test_helpers_are_shared_no_ops_without_a_bound_tracer() -> None:
    assert tracing.span("x", {"a": 1}) is tracing.span("y")
    assert tracing.start_span("x") is tracing.NOOP_SPAN
    assert tracing.current_context() is None
    tracing.record_span("x", None, 1, 2)

    async def chunks():
        yield 1

    generator = chunks()
    assert tracing.traced_stream(tracing.NOOP_SPAN, generator, dict) is generator


def test_record_span_from_a_thread_under_an_explicit_parent() -> None:
    traced = Tracing.from_settings(make_settings(TRACING_SPANS_REQUIRE_EXPORTER=False))
    assert traced.provider is not None
    exporter = InMemorySpanExporter()
    traced.provider.add_span_processor(SimpleSpanProcessor(exporter))
    with traced.activated(), tracing.span("codec.decode", {"codec.tokens": 20}):
        parent = tracing.current_context()
    assert parent is not None
    start = time.time_ns()

    def batch_thread() -> None:  # what the codec batcher does, with no request context at all
        assert tracing.current_context() is None
        tracing.record_span("codec.gpu_decode", parent, start, start + 5_000_000, {"batch.size": 3})

    thread = threading.Thread(target=batch_thread)
    thread.start()
    thread.join()
    spans = exporter.get_finished_spans()
    gpu = one(spans, "codec.gpu_decode")
    assert is_child(gpu, one(spans, "codec.decode"))
    assert (gpu.start_time, gpu.end_time) == (start, start + 5_000_000)
    assert gpu.attributes == {"batch.size": 3}
    traced.shutdown()


def test_two_apps_do_not_share_a_provider() -> None:
    first = Tracing.from_settings(make_settings(TRACING_SPANS_REQUIRE_EXPORTER=False))
    second = Tracing.from_settings(make_settings(TRACING_SPANS_REQUIRE_EXPORTER=False))
    exporter = InMemorySpanExporter()
    assert first.provider is not None and second.provider is not None
    first.provider.add_span_processor(SimpleSpanProcessor(exporter))
    with second.activated(), tracing.span("elsewhere"):
        pass
    with first.activated(), tracing.span("here"):
        pass
    assert [s.name for s in exporter.get_finished_spans()] == ["here"]
