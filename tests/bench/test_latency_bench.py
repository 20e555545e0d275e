"""bench/latency_bench.py's requests: a text of a few words that the fake LM, told its codes per word, speaks
as exactly ``--tokens`` codes."""

from __future__ import annotations

import aiohttp

from bench.latency_bench import CODES_PER_WORD, codes_per_word, request_text, set_pace, words_for
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
