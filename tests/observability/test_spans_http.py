"""The span tree of real requests (fake vLLM + tiny NeuCodec), and the gate that removes it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, Tracer, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.main import create_app
from tests.api.conftest import http_settings, serve, serve_app
from tests.api.test_vc_http import post_vc
from tests.fakes.fake_vllm import FakeVLLM
from tests.observability.conftest import by_name, is_child, one, traced_app

SPEECH = "/v1/audio/speech"
N_CODES = 48  # the fake's default script: 6 events of 8 codes


async def finished(exporter: InMemorySpanExporter, root: str) -> list[ReadableSpan]:
    """The exported spans once the server span ``root`` has ended (it ends after the last byte)."""
    for _ in range(200):
        spans = list(exporter.get_finished_spans())
        if any(s.name == root for s in spans):
            return spans
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {root!r} span; got {[s.name for s in exporter.get_finished_spans()]}")


async def test_speech_span_tree_and_aggregates(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    # a 20-code first window growing to 40 (+10 future): 48 codes decode as two windows, two chunks
    app, exporter = traced_app(http_settings(tiny_codec_dir, fake_vllm.url))
    async with serve_app(app) as url, httpx.AsyncClient(timeout=10) as client:
        response = await client.post(url + SPEECH, json={"input": "Hello there.", "voice": "husein"})
        assert response.status_code == 200
        spans = await finished(exporter, "POST /v1/audio/speech")

    root = one(spans, "POST /v1/audio/speech")
    assert root.parent is None
    assert response.headers["x-trace-id"] == f"{root.context.trace_id:032x}"
    normalize = one(spans, "tts.normalize")
    assert is_child(normalize, root)
    assert normalize.attributes["normalizer.mode"] == "rule"
    assert is_child(one(spans, "normalize.rule"), normalize)

    stream = one(spans, "tts.stream")
    assert is_child(stream, root)
    attrs = stream.attributes
    assert attrs["tts.decodes"] == 2 and attrs["tts.chunks"] == 2
    assert attrs["tts.codes"] == N_CODES
    assert attrs["tts.audio_bytes"] == N_CODES * 480 * 2
    assert 0 < attrs["tts.ttfb_s"] < 10
    assert attrs["tts.lm_wait_s"] >= 0 and attrs["tts.decode_wait_s"] > 0
    assert attrs["response_format"] == "pcm" and attrs["stream"] is True

    generate = one(spans, "lm.generate")
    assert is_child(generate, stream)
    assert generate.attributes["lm.deltas"] == N_CODES // 8
    assert generate.attributes["lm.finish_reason"] == "stop"
    assert is_child(one(spans, "lm.connect"), generate)
    assert is_child(one(spans, "lm.first_token"), generate)

    chunks = by_name(spans, "tts.chunk")
    decodes = by_name(spans, "codec.decode")
    assert [c.attributes["chunk.index"] for c in chunks] == [0, 1]
    assert [c.attributes["chunk.is_last"] for c in chunks] == [False, True]
    assert all(is_child(chunk, stream) for chunk in chunks)
    assert len(decodes) == 2
    stages = ["codec.batch_wait", "codec.batch_prep", "codec.compute_wait", "codec.gpu_decode"]
    for chunk, decode in zip(chunks, decodes, strict=True):
        assert is_child(decode, chunk)
        assert decode.attributes["codec.tokens"] == chunk.attributes["chunk.decode_tokens"]
        inside = sorted((s for s in spans if s.parent and is_child(s, decode)), key=lambda s: s.start_time)
        assert [s.name for s in inside] == stages  # the batcher's stages, recorded after the fact
        assert all(decode.start_time <= s.start_time <= s.end_time <= decode.end_time for s in inside)
        assert inside[-1].attributes["batch.size"] >= 1
        assert inside[-1].attributes["codec.cuda_graph"] is False
    assert sum(c.attributes["chunk.decode_tokens"] for c in chunks) >= N_CODES
    assert not [s for s in spans if s.name.endswith(("http receive", "http send"))]


async def test_vc_span_tree(tiny_codec_dir: Path, fake_vllm: FakeVLLM, reference_wav: bytes) -> None:
    app, exporter = traced_app(http_settings(tiny_codec_dir, fake_vllm.url))
    async with serve_app(app) as url:
        response = await post_vc(url, reference_wav)
        assert response.status_code == 200
        spans = await finished(exporter, "POST /v1/audio/vc")

    root = one(spans, "POST /v1/audio/vc")
    load = one(spans, "vc.load_audio")
    encode = one(spans, "codec.encode")
    assert is_child(load, root) and is_child(encode, root)
    samples = load.attributes["audio.samples"]
    assert encode.attributes["codec.samples"] == samples
    assert encode.attributes["codec.tokens"] == samples // 320
    assert load.end_time <= encode.start_time
    stages = sorted((s for s in spans if s.parent and is_child(s, encode)), key=lambda s: s.start_time)
    assert [s.name for s in stages] == [
        "codec.encode_wait",
        "codec.encode_prep",
        "codec.encode_compute_wait",
        "codec.encode_gpu",
    ]
    assert stages[-1].attributes["batch.size"] == 1
    assert len(by_name(spans, "tts.normalize")) == 2  # reference_text and generate_text
    stream = one(spans, "tts.stream")
    assert is_child(stream, root) and stream.start_time >= encode.end_time
    assert is_child(one(spans, "lm.generate"), stream)
    assert by_name(spans, "codec.decode")


async def test_asgi_message_spans_only_on_request(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    settings = http_settings(tiny_codec_dir, fake_vllm.url, TRACE_ASGI_MESSAGE_SPANS=True)
    app, exporter = traced_app(settings)
    async with serve_app(app) as url, httpx.AsyncClient(timeout=10) as client:
        response = await client.post(url + SPEECH, json={"input": "Hello there.", "voice": "husein"})
        assert response.status_code == 200
        spans = await finished(exporter, "POST /v1/audio/speech")
    assert [s for s in spans if s.name.endswith("http send")]


async def test_closed_gate_builds_no_spans_and_calls_no_tracer(
    tiny_codec_dir: Path,
    fake_vllm: FakeVLLM,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    def spy(name: str, original: object) -> object:
        def called(*args: object, **kwargs: object) -> object:
            calls.append(name)
            return original(*args, **kwargs)

        return called

    for cls, method in [
        (TracerProvider, "get_tracer"),
        (Tracer, "start_span"),
        (Tracer, "start_as_current_span"),
    ]:
        monkeypatch.setattr(cls, method, spy(method, getattr(cls, method)))
    monkeypatch.setattr(TracerProvider, "__init__", spy("TracerProvider", TracerProvider.__init__))
    app = create_app(http_settings(tiny_codec_dir, fake_vllm.url))  # spans on, but no exporter
    assert app.state.tracing.provider is None
    caplog.set_level("INFO", logger="app.observability.tracing")
    async with serve_app(app) as url, httpx.AsyncClient(timeout=10) as client:
        response = await client.post(url + SPEECH, json={"input": "Hello there.", "voice": "husein"})
        assert response.status_code == 200
        assert len(response.headers["x-trace-id"]) == 32  # still one id per request, for the logs
    assert calls == []
    assert [r.message for r in caplog.records].count(app.state.tracing.reason) == 1, (
        "the startup log says once why spans are off"
    )
    assert "no span exporter is configured" in app.state.tracing.reason


async def test_inbound_traceparent_is_kept_when_spans_are_off(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM
) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    async with serve(http_settings(tiny_codec_dir, fake_vllm.url)) as url, httpx.AsyncClient() as client:
        response = await client.get(
            url + "/health", headers={"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
        )
    assert response.headers["x-trace-id"] == trace_id


async def test_server_span_is_named_after_the_route_template(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM
) -> None:
    app, exporter = traced_app(http_settings(tiny_codec_dir, fake_vllm.url))
    async with serve_app(app) as url, httpx.AsyncClient(timeout=10) as client:
        assert (await client.delete(url + "/v1/audio/voices/nobody")).status_code == 404
        spans = await finished(exporter, "DELETE /v1/audio/voices/{name}")
    assert one(spans, "DELETE /v1/audio/voices/{name}").attributes["http.route"] == "/v1/audio/voices/{name}"
