"""bench/latency_bench.py's requests: a text of a few words that the fake LM, told its codes per word, speaks
as exactly ``--tokens`` codes."""

from __future__ import annotations

import aiohttp
import pytest

from app.observability.metrics import Metrics
from bench.latency_bench import (
    CODES_PER_WORD,
    Loop,
    codes_per_word,
    loop_work,
    request_text,
    set_pace,
    words_for,
    work_from_text,
)
from tests.fakes.fake_vllm import FakeVLLM, Script


def test_a_request_text_has_the_words_its_tokens_need() -> None:
    for tokens in (1, 25, 26, 250, 1000):
        words = words_for(tokens)
        assert words * CODES_PER_WORD >= tokens > (words - 1) * CODES_PER_WORD
        assert len(request_text(tokens, salt=3).split()) == words


async def test_the_fake_makes_exactly_the_tokens_asked_at_the_codes_per_word_set() -> None:
    fake = FakeVLLM(Script(), control=True)
    await fake.start()
    try:
        for tokens in (250, 100):
            await set_pace(fake.url, 0, 100_000, codes_per_word(tokens))
            prompt = f"user: {request_text(tokens, 1)}<|speech_start|>"
            body = {"model": "TTS-model", "prompt": prompt, "max_tokens": tokens, "stream": True}
            async with (
                aiohttp.ClientSession() as session,
                session.post(f"{fake.url}/v1/completions", json=body) as r,
            ):
                text = await r.text()
            assert text.count("<|s_") == tokens and '"finish_reason": "length"' in text
    finally:
        await fake.stop()


def test_a_loops_work_is_read_from_the_servers_counters() -> None:
    """The decode and admission counters a closed loop moved, per request and per batch; counters of
    another queue or outcome are not counted."""
    metrics = Metrics()
    before = parse_work(metrics)
    metrics.observe_codec_batch("decode", 2, 0.5, graph=False)
    metrics.observe_codec_batch("decode", 1, 0.25, graph=False)
    metrics.observe_codec_batch("encode", 4, 9.0, graph=False)
    metrics.viability.labels("admitted").inc(3)
    metrics.viability.labels("waited").inc()
    loop = Loop(audio_s=20.0, wall_s=1.5, first_audio_s=[0.3, 0.9, 0.5, 0.4])
    work = loop_work(before, parse_work(metrics), loop)
    assert loop.audio_s_per_s == pytest.approx(20.0 / 1.5)
    assert work == {
        "decode_busy": 0.5,  # 0.75 s of decoding in 1.5 s
        "windows_per_request": 0.75,  # 3 windows, 4 requests
        "windows_per_batch": 1.5,
        "admitted": 3,
        "waited": 1,
        "refused": 0,
        "first_audio_s_p50": 0.45,
    }


def parse_work(metrics: Metrics) -> dict[str, float]:
    """``server_work`` of a server whose /metrics is ``metrics``'s exposition."""
    return work_from_text(metrics.exposition().decode())
