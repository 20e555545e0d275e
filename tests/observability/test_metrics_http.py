"""/metrics after known traffic, the batcher's metric interface, and /ready against a dead backend."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import httpx
import torch
from prometheus_client.parser import text_string_to_metric_families

from app.codec.precision import choose_precision
from app.main import create_app
from app.observability.metrics import Metrics
from tests.api.conftest import http_settings, serve, serve_app
from tests.fakes.fake_vllm import FakeVLLM

SPEECH = "/v1/audio/speech"
N_CODES = 48


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, keyed by name and sorted labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_metrics_count_known_traffic(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    async with serve(http_settings(tiny_codec_dir, fake_vllm.url)) as url, httpx.AsyncClient(timeout=10) as c:
        assert (
            await c.post(url + SPEECH, json={"input": "Hello there.", "voice": "husein"})
        ).status_code == 200
        assert (await c.post(url + SPEECH, json={"input": "Hi", "speed": 9})).status_code == 422
        assert (await c.post(url + SPEECH, json={"input": "Hi", "voice": "nobody"})).status_code == 400
        response = await c.get(url + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    got = samples(response.text)
    speech = (("method", "POST"), ("route", SPEECH))
    assert got[("tts_http_requests_total", (*speech, ("status", "200")))] == 1
    assert got[("tts_http_requests_total", (*speech, ("status", "422")))] == 1
    assert got[("tts_http_requests_total", (*speech, ("status", "400")))] == 1
    assert got[("tts_http_request_duration_seconds_count", (("route", SPEECH),))] == 3
    assert got[("tts_ttfb_seconds_count", (("route", SPEECH),))] == 1
    assert got[("tts_audio_seconds_total", (("route", SPEECH),))] == N_CODES / 50
    assert got[("tts_lm_tokens_total", ())] == N_CODES
    assert got[("tts_lm_tokens_per_second_count", ())] == 1
    assert got[("tts_errors_total", (("kind", "validation"),))] == 2
    assert got[("tts_errors_total", (("kind", "backend"),))] == 0
    assert got[("tts_active_streams", ())] == 0
    assert got[("tts_normalize_seconds_count", (("mode", "rule"),))] == 1  # the voice is checked first


async def test_backend_failure_is_counted_by_kind(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    fake_vllm.script.status = 500
    async with serve(http_settings(tiny_codec_dir, fake_vllm.url)) as url, httpx.AsyncClient(timeout=10) as c:
        assert (await c.post(url + SPEECH, json={"input": "Hello there."})).status_code == 502
        got = samples((await c.get(url + "/metrics")).text)
    assert got[("tts_errors_total", (("kind", "backend"),))] == 1


def test_codec_batcher_interface() -> None:
    metrics = Metrics()
    metrics.observe_codec_batch("decode", 4, 0.012, graph=True)
    metrics.observe_codec_batch("decode", 1, 0.003, graph=False)
    metrics.observe_codec_queue_wait("encode", 0.25)
    metrics.set_codec_queue_depth("decode", 3)
    got = samples(metrics.exposition().decode())
    assert got[("tts_codec_batch_size_sum", (("queue", "decode"),))] == 5
    assert got[("tts_codec_batches_total", (("graph", "true"), ("queue", "decode")))] == 1
    assert got[("tts_codec_batches_total", (("graph", "false"), ("queue", "decode")))] == 1
    assert got[("tts_codec_compute_seconds_count", (("queue", "decode"),))] == 2
    assert got[("tts_codec_queue_wait_seconds_sum", (("queue", "encode"),))] == 0.25
    assert got[("tts_codec_queue_depth", (("queue", "decode"),))] == 3


def test_each_app_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()  # no duplicate-registration error
    first.lm_tokens.inc(5)
    assert samples(second.exposition().decode())[("tts_lm_tokens_total", ())] == 0


async def test_ready_turns_503_with_a_reason_when_the_backend_is_down(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM
) -> None:
    async with serve(http_settings(tiny_codec_dir, fake_vllm.url)) as url, httpx.AsyncClient(timeout=10) as c:
        ready = await c.get(url + "/ready")
        assert ready.status_code == 200 and ready.json()["checks"] == {"codec": True, "lm": True}
        expected = choose_precision("auto", "cpu")  # what CODEC_DTYPE=auto picked, and why
        assert ready.json()["codec"] == {
            "dtype": expected.dtype,
            "tf32": False,
            "reason": expected.reason,
            "prepacked": True,  # CODEC_PREPACK on a CPU
            "threads": torch.get_num_threads(),  # torch's, on this thread (CODEC_THREADS unset)
        }
        await fake_vllm.stop()
        down = await c.get(url + "/ready")
        assert (await c.get(url + "/health")).status_code == 200
    assert down.status_code == 503
    assert down.json() == {
        "status": "not_ready",
        "checks": {"codec": True, "lm": False},
        "reason": "not ready: lm",
    }


async def test_ready_has_a_deadline(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    app = create_app(http_settings(tiny_codec_dir, fake_vllm.url, READY_TIMEOUT_S=0.1))

    async def hanging() -> bool:
        await asyncio.sleep(30)
        return True

    async with serve_app(app) as url, httpx.AsyncClient(timeout=10) as c:
        app.state.engine.default.source.ready = hanging
        started = time.monotonic()
        response = await c.get(url + "/ready")
    assert time.monotonic() - started < 2
    assert response.status_code == 503
    assert response.json()["reason"] == "the LM backend did not answer within 0.1 s"


def test_dashboard_queries_only_exported_metrics() -> None:
    dashboard = json.loads((Path(__file__).parents[2] / "deploy/grafana/dashboards/tts.json").read_text())
    queried = {
        re.sub(r"_(bucket|sum|count|total)$", "", name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\btts_[a-z_]+", target["expr"])
    }
    exported = {family.name for family in Metrics().registry.collect()}
    assert queried and queried <= exported, queried - exported
