"""Viability admission: a new stream only while every stream can stay ahead of real time at the rates
measured so far; else a bounded wait, then 429 with Retry-After. Also the stall and viability metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from app.api.admission import Admission, Viability
from app.core.errors import RateLimited
from app.families.neucodec.family import NeuCodecFamily
from app.interleave.service import Interleave
from app.main import create_app
from app.observability.capacity import Capacity, RateMeter
from app.observability.metrics import Metrics
from tests.api.conftest import http_settings, serve_app
from tests.api.test_speech_http import assert_openai_error
from tests.conftest import make_settings
from tests.fakes.fake_vllm import FakeVLLM, Script
from tests.observability.test_metrics_http import samples

SPEECH = "/v1/audio/speech"
BODY = {"input": "Hello there.", "voice": "husein"}


def slow_codec(metrics: Metrics, audio_s_per_s: float) -> None:
    """Make the measured codec rate ``audio_s_per_s``, weighted so that real decodes hardly move it."""
    metrics.capacity.codec.add(audio_s_per_s * 1000.0, 1000.0)


def test_rate_meter_follows_a_changing_rate() -> None:
    meter = RateMeter(half_life_s=1.0)
    assert meter.rate is None
    meter.add(10.0, 1.0)
    assert meter.rate == pytest.approx(10.0)
    for _ in range(20):  # 20 s at 2 per second: the old rate has decayed away
        meter.add(2.0, 1.0)
    assert meter.rate == pytest.approx(2.0, rel=1e-4)


def test_capacity_counts_the_streams_the_codec_can_keep_ahead() -> None:
    capacity = Capacity()
    assert capacity.viable(100, need=1.5, lm_floor=0.8)  # nothing measured: no refusal
    capacity.codec.add(6.0, 1.0)  # 6 audio s per s: 4 streams at 1.5 each
    assert capacity.viable(3, need=1.5, lm_floor=0.8) and not capacity.viable(4, need=1.5, lm_floor=0.8)
    capacity.lm.add(30.0, 1.0)  # 30 tokens/s: below 0.8 of real time (40)
    assert not capacity.viable(0, need=1.5, lm_floor=0.8)
    assert capacity.viable(0, need=1.5, lm_floor=0.5)


def test_short_decodes_give_the_recent_decode_time() -> None:
    capacity = Capacity()
    assert capacity.short_decode.value is None
    capacity.decoded(0.4, 0.3)  # a short window: 20 codes in 0.3 s
    capacity.decoded(2.0, 0.6)  # 100 codes: a long one, which counts for the codec rate only
    assert capacity.short_decode.value == pytest.approx(0.3)
    keep = 0.5 ** (0.6 / 10.0)  # the rate's sums decay by half every 10 s of decoding
    assert capacity.codec.rate == pytest.approx((0.4 * keep + 2.0) / (0.3 * keep + 0.6))
    for _ in range(40):  # the codec got faster: the old value has all but gone
        capacity.decoded(0.4, 0.1)
    assert capacity.short_decode.value == pytest.approx(0.1, rel=0.01)


async def test_a_slow_codec_gives_new_streams_a_longer_first_window() -> None:
    """The NeuCodec family's schedule for a request covers 1.5 x the codec's recent short decode: 0.2 s
    (10 codes) while decodes are fast, 25 codes after 0.27 s decodes; STREAM_FIRST_COVER=0 keeps 10."""
    for cover, expected in ((1.5, 25), (0.0, 10)):
        family = NeuCodecFamily(
            make_settings(STREAM_FIRST_COVER=cover), Interleave(make_settings(), None), metrics := Metrics()
        )
        assert family.schedule(0.2, 0.2).first_tokens == 10
        metrics.observe_decoded(0.4, 0.01)
        assert family.schedule(0.2, 0.2).first_tokens == 10
        for _ in range(40):
            metrics.observe_decoded(0.4, 0.27)
        assert family.schedule(0.2, 0.2).first_tokens == expected


async def test_refused_for_viability_with_retry_after_and_counted() -> None:
    metrics = Metrics()
    slow_codec(metrics, 3.0)  # room for 2 streams at 1.5
    admission = Admission(10, 4, 5.0, metrics, Viability(need=1.5, lm_floor=0.8, wait_s=0.05))
    await admission.acquire()
    await admission.acquire()
    with pytest.raises(RateLimited, match="cannot keep one more stream ahead of real time") as refused:
        await admission.acquire()
    assert refused.value.headers == {"Retry-After": "1"}
    assert admission.active == 2
    got = samples(metrics.exposition().decode())
    assert got[("tts_viability_streams_total", (("outcome", "admitted"),))] == 2
    assert got[("tts_viability_streams_total", (("outcome", "refused"),))] == 1


async def test_a_waiting_stream_is_admitted_when_one_ends() -> None:
    metrics = Metrics()
    slow_codec(metrics, 3.0)
    admission = Admission(10, 4, 5.0, metrics, Viability(need=1.5, lm_floor=0.8, wait_s=5.0))
    await admission.acquire()
    await admission.acquire()
    waiter = asyncio.create_task(admission.acquire())
    await asyncio.sleep(0.01)
    assert not waiter.done() and admission.active == 2
    admission.release()
    await asyncio.wait_for(waiter, 1.0)
    assert admission.active == 2
    got = samples(metrics.exposition().decode())
    assert got[("tts_viability_streams_total", (("outcome", "waited"),))] == 1


async def test_a_lone_stream_is_always_admitted() -> None:
    metrics = Metrics()
    slow_codec(metrics, 0.5)  # not even one stream in real time: refusing it would serve nobody
    admission = Admission(10, 4, 5.0, metrics, Viability(wait_s=0.01))
    await admission.acquire()
    with pytest.raises(RateLimited):
        await admission.acquire()


async def test_without_the_check_only_slots_count() -> None:
    metrics = Metrics()
    slow_codec(metrics, 0.5)
    admission = Admission(3, 0, 5.0, metrics)
    for _ in range(3):
        await admission.acquire()
    with pytest.raises(RateLimited, match="the wait queue is full"):
        await admission.acquire()


async def test_429_over_http_when_the_codec_cannot_keep_up(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    fake_vllm.script = Script(codes=list(range(100)), tokens_per_event=5, tokens_per_s=200)  # 0.5 s
    settings = http_settings(tiny_codec_dir, fake_vllm.url, VIABILITY_CHECK=True, VIABILITY_WAIT_S=0.1)
    app = create_app(settings)
    async with serve_app(app) as url, httpx.AsyncClient(timeout=10) as client:
        slow_codec(app.state.metrics, 1.0)  # the codec keeps 1 stream of 1.5 ahead... only a lone one
        async with client.stream("POST", url + SPEECH, json=BODY) as first:
            assert first.status_code == 200
            refused = await client.post(url + SPEECH, json=BODY)
            body = await first.aread()
        assert len(body) == 100 * 480 * 2
        error = assert_openai_error(refused, 429)
        assert "ahead of real time" in error["message"] and refused.headers["retry-after"] == "1"
        assert (await client.post(url + SPEECH, json=BODY)).status_code == 200  # alone again: admitted
        got = samples((await client.get(url + "/metrics")).text)
    assert got[("tts_viability_streams_total", (("outcome", "refused"),))] == 1
    assert got[("tts_viability_streams_total", (("outcome", "admitted"),))] == 2
    assert got[("tts_stream_stall_seconds_count", ())] == 2  # one per served stream
