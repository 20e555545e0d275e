"""Viability admission: a new stream only while every stream can stay ahead of real time at the codec cost
and LM rate measured so far; else a bounded wait, then 429 with Retry-After. Also the measured decode cost
the windows are sized by, and the stall and viability metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from app.api.admission import RECHECK_S, Admission, Viability
from app.core.errors import RateLimited
from app.families.neucodec.family import NeuCodecFamily
from app.interleave.service import Interleave
from app.main import create_app
from app.observability.capacity import Capacity, DecodeCost, RateMeter
from app.observability.metrics import Metrics
from tests.api.conftest import http_settings, serve_app
from tests.api.test_speech_http import assert_openai_error
from tests.conftest import make_settings
from tests.fakes.fake_vllm import FakeVLLM, Script
from tests.observability.test_metrics_http import samples

SPEECH = "/v1/audio/speech"
BODY = {"input": "Hello there.", "voice": "husein"}


def slow_codec(metrics: Metrics, fixed_s: float = 0.01, per_code_s: float = 0.006) -> None:
    """Make the measured decode cost ``fixed_s + per_code_s * codes`` (by default one stream at a time at
    most: 6 ms a code is 0.3 s of decoding per second of audio), over many batches so that a few real
    decodes hardly move it."""
    for _ in range(100):
        for codes in (20, 200):
            metrics.observe_decoded(codes / 50, fixed_s + per_code_s * codes)


def test_rate_meter_follows_a_changing_rate() -> None:
    meter = RateMeter(half_life_s=1.0)
    assert meter.rate is None
    meter.add(10.0, 1.0)
    assert meter.rate == pytest.approx(10.0)
    for _ in range(20):  # 20 s at 2 per second: the old rate has decayed away
        meter.add(2.0, 1.0)
    assert meter.rate == pytest.approx(2.0, rel=1e-4)


def test_the_decode_cost_is_a_line_through_recent_batches() -> None:
    cost = DecodeCost(half_life=4.0)
    assert cost.line is None
    cost.add(20, 0.06)  # one size only: all of it per code
    assert cost.line == pytest.approx((0.0, 0.003))
    cost.add(120, 0.16)  # 20 codes 0.06 s, 120 codes 0.16 s: 0.04 s + 1 ms a code
    assert cost.line == pytest.approx((0.04, 0.001))
    for _ in range(60):  # the machine got faster: the old batches have all but gone
        cost.add(20, 0.03)
        cost.add(120, 0.08)
    assert cost.line == pytest.approx((0.02, 0.0005), rel=1e-3)
    noisy = DecodeCost()
    noisy.add(20, 0.05)
    noisy.add(40, 0.2)  # a line through these would cross zero at 27 codes: refitted through the origin
    fixed, per_code = noisy.line or (None, None)
    assert fixed == 0.0 and per_code == pytest.approx((20 * 0.05 + 40 * 0.2) / (20**2 + 40**2), rel=0.01)


def test_capacity_admits_while_every_rule_does_and_the_lm_keeps_up() -> None:
    capacity = Capacity()
    assert capacity.viable(100, lm_floor=0.8)  # no rule, nothing measured: no refusal
    capacity.rules.append(lambda streams: streams <= 4)
    assert capacity.viable(3, lm_floor=0.8) and not capacity.viable(4, lm_floor=0.8)
    capacity.lm.add(0.6, 1.0)  # 0.6 s of audio a second: below 0.8 of real time
    assert not capacity.viable(0, lm_floor=0.8)
    assert capacity.viable(0, lm_floor=0.5)


def test_decodes_feed_the_cost_and_the_rate() -> None:
    capacity = Capacity()
    capacity.decoded(0.4, 0.06)  # 20 codes
    capacity.decoded(2.4, 0.16)  # 120 codes
    assert capacity.cost.line == pytest.approx((0.04, 0.001))
    keep = 0.5 ** (0.16 / 10.0)  # the rate's sums decay by half every 10 s of decoding
    assert capacity.codec.rate == pytest.approx((0.4 * keep + 2.4) / (0.06 * keep + 0.16))


async def test_the_neucodec_rule_admits_while_a_first_window_of_0_5_s_keeps_every_stream_fed() -> None:
    """Context 20 codes (0.2 s past and future), 3 codes held back, cover 1.2 (the default), room for the
    second window to be 1.5 times the first. At 1.15 ms a code and 14 ms a decode,
    F(n) = (1.2 (0.014 + 0.023 n) + 0.06) / (0.02 - 0.00207 n): 23 codes for 5 streams, 32 for 6 (more
    than the 25 of 0.5 s). At 6 ms a code one stream alone (24 codes), never two."""
    family = NeuCodecFamily(
        make_settings(STREAM_FIRST_COVER=1.2), Interleave(make_settings(), None), metrics := Metrics()
    )
    assert family.admits(50)  # nothing measured yet
    slow_codec(metrics, 0.014, 0.00115)
    assert family.admits(5) and not family.admits(6)
    slow_codec(metrics)
    assert family.admits(1) and not family.admits(2)


async def test_windows_are_sized_by_the_decode_cost_and_the_streams_served() -> None:
    """The family's load is a round of the streams admitted now at the measured cost; with
    STREAM_FIRST_COVER=0 there is none (the configured schedule)."""
    for cover in (1.2, 0.0):
        family = NeuCodecFamily(
            make_settings(STREAM_FIRST_COVER=cover), Interleave(make_settings(), None), metrics := Metrics()
        )
        assert family.round_load() is None
        slow_codec(metrics, 0.02, 0.002)
        metrics.capacity.streams = 3
        load = family.round_load()
        if not cover:
            assert load is None
            continue
        assert load is not None and load.streams == 3 and load.cover == cover
        assert (load.fixed_s, load.per_code_s) == pytest.approx((0.02, 0.002))
        schedule = family.schedule(0.2, 0.2)
        assert schedule.buckets == ()  # a CPU codec: natural window lengths
        assert schedule.for_load(load).first_tokens == 25  # F = (1.2 x 0.14 + 0.06) / 0.0092 = 24.8


async def test_refused_for_viability_with_retry_after_and_counted() -> None:
    metrics = Metrics()
    metrics.capacity.rules.append(lambda streams: streams <= 2)  # room for 2 streams
    admission = Admission(10, 4, 5.0, metrics, Viability(lm_floor=0.8, wait_s=0.05))
    await admission.acquire()
    await admission.acquire()
    assert metrics.capacity.streams == 2  # the families size their windows by it
    with pytest.raises(RateLimited, match="cannot keep one more stream ahead of real time") as refused:
        await admission.acquire()
    assert refused.value.headers == {"Retry-After": "1"}
    assert admission.active == 2
    got = samples(metrics.exposition().decode())
    assert got[("tts_viability_streams_total", (("outcome", "admitted"),))] == 2
    assert got[("tts_viability_streams_total", (("outcome", "refused"),))] == 1


async def test_a_viability_refusal_says_when_a_stream_is_expected_to_end() -> None:
    """Room for one more comes when one admitted stream ends: its Retry-After is the soonest expected end
    (by how long recent streams held their slot), not the fixed wait."""
    metrics, now = Metrics(), [0.0]
    metrics.capacity.rules.append(lambda streams: streams <= 2)
    admission = Admission(10, 4, 5.0, metrics, Viability(lm_floor=0.8, wait_s=0.05), clock=lambda: now[0])
    started = await admission.acquire()
    now[0] += 9.0  # a stream of 9 s
    admission.release(started)
    await admission.acquire()
    now[0] += 2.0
    await admission.acquire()
    now[0] += 1.0  # held 3 s and 1 s: the first is expected back in 6 s
    with pytest.raises(RateLimited, match="ahead of real time") as refused:
        await admission.acquire()
    assert refused.value.headers == {"Retry-After": "6"}


async def test_a_waiting_stream_is_admitted_when_one_ends() -> None:
    metrics = Metrics()
    metrics.capacity.rules.append(lambda streams: streams <= 2)
    admission = Admission(10, 4, 5.0, metrics, Viability(lm_floor=0.8, wait_s=5.0))
    started = await admission.acquire()
    await admission.acquire()
    waiter = asyncio.create_task(admission.acquire())
    await asyncio.sleep(0.01)
    assert not waiter.done() and admission.active == 2
    admission.release(started)
    await asyncio.wait_for(waiter, 1.0)
    assert admission.active == 2
    got = samples(metrics.exposition().decode())
    assert got[("tts_viability_streams_total", (("outcome", "waited"),))] == 1


async def test_a_waiter_is_admitted_when_the_measured_rates_make_room_without_a_stream_ending() -> None:
    """The codec's measured cost and the LM's pace move on their own (a warm codec, a fitted line): the
    waiters are re-checked every RECHECK_S, not only when a stream ends."""
    metrics, room = Metrics(), [2]
    metrics.capacity.rules.append(lambda streams: streams <= room[0])
    admission = Admission(10, 4, 5.0, metrics, Viability(lm_floor=0.8, wait_s=5.0))
    await admission.acquire()
    await admission.acquire()
    waiter = asyncio.create_task(admission.acquire())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    room[0] = 3  # the measured cost fell: one more stream fits, and no stream ended
    await asyncio.wait_for(waiter, RECHECK_S + 0.5)
    assert admission.active == 3


async def test_a_wait_for_room_ends_admitted_if_room_came_before_the_next_check() -> None:
    """A wait shorter than RECHECK_S: room that came during it is seen when it runs out, not refused."""
    metrics, room = Metrics(), [1]
    metrics.capacity.rules.append(lambda streams: streams <= room[0])
    admission = Admission(10, 4, 5.0, metrics, Viability(lm_floor=0.8, wait_s=RECHECK_S / 2))
    await admission.acquire()
    with pytest.raises(RateLimited, match="cannot keep one more stream ahead of real time"):
        await admission.acquire()  # a slot was free all along: the 429 names the wait for room
    waiter = asyncio.create_task(admission.acquire())
    await asyncio.sleep(0.01)
    room[0] = 2
    await asyncio.wait_for(waiter, 1.0)
    assert admission.active == 2


async def test_a_lone_stream_is_always_admitted() -> None:
    metrics = Metrics()
    metrics.capacity.rules.append(lambda streams: False)  # not even one: refusing it would serve nobody
    admission = Admission(10, 4, 5.0, metrics, Viability(wait_s=0.01))
    await admission.acquire()
    with pytest.raises(RateLimited):
        await admission.acquire()


async def test_without_the_check_only_slots_count() -> None:
    metrics = Metrics()
    metrics.capacity.rules.append(lambda streams: False)
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
        slow_codec(app.state.metrics)  # 6 ms a code: only a lone stream
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


def test_the_decode_cost_is_exported() -> None:
    metrics = Metrics()
    metrics.observe_decoded(0.4, 0.06)
    metrics.observe_decoded(2.4, 0.16)
    got = samples(metrics.exposition().decode())
    assert got[("tts_codec_decode_cost_seconds", (("part", "fixed"),))] == pytest.approx(0.04)
    assert got[("tts_codec_decode_cost_seconds", (("part", "per_code"),))] == pytest.approx(0.001)


def test_the_lm_floor_is_a_share_of_real_time_in_any_family() -> None:
    """MOSS makes 12.5 frames a second of audio, NeuCodec 50 codes: the floor compares audio seconds."""
    metrics = Metrics()
    metrics.observe_generation(10, 0.8, 1.0)  # 10 MOSS frames (0.8 s of audio) in 1 s
    assert metrics.capacity.lm.rate == pytest.approx(0.8)
    assert metrics.capacity.viable(1, lm_floor=0.8) and not metrics.capacity.viable(1, lm_floor=0.9)
