"""Admission control: the slot pool and its queue, then 429s and slot release over HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.api.admission import RETRY_AFTER_MOST_S, Admission
from app.core.errors import RateLimited
from app.main import create_app
from app.observability.metrics import Metrics
from tests.api.conftest import http_settings, serve_app
from tests.api.test_speech_http import assert_openai_error
from tests.fakes.fake_vllm import FakeVLLM, Script
from tests.observability.test_metrics_http import samples

SPEECH = "/v1/audio/speech"
BODY = {"input": "Hello there.", "voice": "husein"}


async def test_slots_queue_in_order_and_hand_over() -> None:
    admission = Admission(max_active=1, max_queued=2, wait_s=5, metrics=Metrics())
    starts = [await admission.acquire()]
    order: list[int] = []

    async def wait(n: int) -> None:
        starts.append(await admission.acquire())
        order.append(n)

    waiters = [asyncio.create_task(wait(n)) for n in (1, 2)]
    await asyncio.sleep(0.01)
    with pytest.raises(RateLimited) as refused:
        await admission.acquire()  # queue full
    assert refused.value.headers == {"Retry-After": "5"}  # no hold has ended: the fixed wait
    admission.release(starts[0])
    await asyncio.sleep(0.01)
    assert order == [1] and admission.active == 1
    admission.release(starts[1])
    await asyncio.gather(*waiters)
    assert order == [1, 2]
    admission.release(starts[2])
    assert admission.active == 0


async def test_wait_runs_out_and_cancelled_waiters_leave_the_queue() -> None:
    admission = Admission(max_active=1, max_queued=4, wait_s=0.05, metrics=Metrics())
    started = await admission.acquire()
    with pytest.raises(RateLimited, match=r"no slot within 0\.05 s"):
        await admission.acquire()
    admission.wait_s = 5
    waiter = asyncio.create_task(admission.acquire())
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    admission.release(started)
    assert admission.active == 0
    await admission.acquire()  # the cancelled waiter did not take the slot
    assert admission.active == 1


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_retry_after_is_when_the_slots_it_needs_are_expected_back() -> None:
    clock = Clock()
    admission = Admission(max_active=2, max_queued=1, wait_s=1.0, metrics=Metrics(), clock=clock)
    for held in (10.0, 20.0, 30.0):  # recent streams held their slot 10, 20 and 30 s
        started = await admission.acquire()
        clock.now += held
        admission.release(started)
    old = await admission.acquire()
    clock.now += 15.0
    young = await admission.acquire()
    clock.now += 2.0  # held 17 s (longer holds: 20, 30 -> 8 s left) and 2 s (10, 20, 30 -> 18 s left)
    queued = asyncio.create_task(admission.acquire())
    await asyncio.sleep(0.01)
    with pytest.raises(RateLimited, match="the wait queue is full") as refused:
        await admission.acquire()  # behind the queued one: the second slot back
    assert refused.value.headers == {"Retry-After": "18"}
    with pytest.raises(RateLimited, match="no slot within") as refused:
        await queued  # nobody ahead of it: the first slot back
    assert refused.value.headers == {"Retry-After": "8"}
    clock.now += 40.0  # both outlived every recent hold: the median, 20 s, from now
    with pytest.raises(RateLimited) as alone:
        await admission.acquire()
    assert alone.value.headers == {"Retry-After": "20"}
    admission.release(old)
    admission.release(young)
    assert admission.active == 0


async def test_retry_after_is_at_most_a_minute_and_at_least_a_second() -> None:
    clock = Clock()
    admission = Admission(max_active=1, max_queued=0, wait_s=5, metrics=Metrics(), clock=clock)
    started = await admission.acquire()
    clock.now += 600.0  # a ten-minute stream
    admission.release(started)
    started = await admission.acquire()
    with pytest.raises(RateLimited) as refused:
        await admission.acquire()
    assert refused.value.headers == {"Retry-After": str(RETRY_AFTER_MOST_S)}
    clock.now += 599.8
    with pytest.raises(RateLimited) as refused:
        await admission.acquire()
    assert refused.value.headers == {"Retry-After": "1"}  # 0.2 s left: the header's smallest
    admission.release(started)


def limited_app(codec_dir: Path, fake: FakeVLLM, **overrides: object) -> FastAPI:
    settings = http_settings(codec_dir, fake.url, MAX_CONCURRENT_STREAMS=1, **overrides)
    return create_app(settings)


async def test_429_at_the_limit_then_recovery(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    fake_vllm.script = Script(codes=list(range(100)), tokens_per_event=5, tokens_per_s=200)  # 0.5 s
    app = limited_app(tiny_codec_dir, fake_vllm, MAX_QUEUED_STREAMS=0, QUEUE_WAIT_S=1)
    async with serve_app(app) as url, httpx.AsyncClient(timeout=10) as client:
        async with client.stream("POST", url + SPEECH, json=BODY) as first:
            assert first.status_code == 200
            refused = await client.post(url + SPEECH, json=BODY)
            body = await first.aread()
        assert len(body) == 100 * 480 * 2
        error = assert_openai_error(refused, 429)
        assert error["code"] == "rate_limit_exceeded"
        assert refused.headers["retry-after"] == "1"
        assert (await client.post(url + SPEECH, json=BODY)).status_code == 200
        assert (await client.get(url + "/health")).status_code == 200  # other routes are not limited
        got = samples((await client.get(url + "/metrics")).text)
    refused_key = (("method", "POST"), ("route", SPEECH), ("status", "429"))
    assert got[("tts_http_requests_total", refused_key)] == 1
    assert got[("tts_errors_total", (("kind", "overload"),))] == 1


async def test_a_queued_request_gets_the_slot(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    fake_vllm.script = Script(codes=list(range(100)), tokens_per_event=5, tokens_per_s=200)
    app = limited_app(tiny_codec_dir, fake_vllm, MAX_QUEUED_STREAMS=1, QUEUE_WAIT_S=5)
    async with serve_app(app) as url, httpx.AsyncClient(timeout=10) as client:
        first, second = await asyncio.gather(
            client.post(url + SPEECH, json=BODY), client.post(url + SPEECH, json=BODY)
        )
    assert first.status_code == second.status_code == 200


async def test_slot_is_released_after_an_error(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    app = limited_app(tiny_codec_dir, fake_vllm, MAX_QUEUED_STREAMS=0)
    async with serve_app(app) as url, httpx.AsyncClient(timeout=10) as client:
        fake_vllm.script.status = 500
        assert (await client.post(url + SPEECH, json=BODY)).status_code == 502
        fake_vllm.script.status = 200
        assert (await client.post(url + SPEECH, json=BODY)).status_code == 200
    assert samples(app.state.metrics.exposition().decode())[("tts_active_streams", ())] == 0


async def test_slot_is_released_when_the_client_disconnects(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM
) -> None:
    fake_vllm.script = Script(codes=list(range(1000)), tokens_per_event=5, tokens_per_s=100)  # 10 s
    app = limited_app(tiny_codec_dir, fake_vllm, MAX_QUEUED_STREAMS=1, QUEUE_WAIT_S=5)
    async with serve_app(app) as url:
        async with (
            httpx.AsyncClient(timeout=10) as leaving,
            leaving.stream("POST", url + SPEECH, json=BODY) as response,
        ):
            async for _ in response.aiter_raw():
                break  # audio started: hang up
        fake_vllm.script = Script(codes=list(range(48)), tokens_per_event=8)
        async with httpx.AsyncClient(timeout=10) as client:
            started = asyncio.get_running_loop().time()
            after = await client.post(url + SPEECH, json=BODY)
        assert after.status_code == 200
        assert asyncio.get_running_loop().time() - started < 4  # not the 10 s the first one would take
