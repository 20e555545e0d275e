"""ReferenceCache: one encode per distinct reference, bounded LRU, shared in-flight encodes."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from app.codec.reference_cache import ReferenceCache


class CountingEncoder:
    """An encode function that records its calls and can be held at a gate."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False

    async def __call__(self, samples: np.ndarray) -> list[int]:
        self.calls += 1
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("encoder failed")
        return [int(samples[0]), len(samples)]


CODES = 65536  # the code range the cache checks
AUDIO = {key: np.full(320, value, dtype=np.float32) for key, value in (("a", 1), ("b", 2), ("c", 3))}


async def test_a_repeated_reference_is_encoded_once() -> None:
    cache, encode = ReferenceCache(4, code_values=CODES), CountingEncoder()
    first = await cache.get_or_encode("a", AUDIO["a"], encode)
    second = await cache.get_or_encode("a", AUDIO["a"], encode)
    assert first == second == [1, 320]
    assert encode.calls == 1
    second.append(99)  # callers get copies
    assert await cache.get_or_encode("a", AUDIO["a"], encode) == [1, 320]


async def test_least_recently_used_is_evicted() -> None:
    cache, encode = ReferenceCache(2, code_values=CODES), CountingEncoder()
    await cache.get_or_encode("a", AUDIO["a"], encode)
    await cache.get_or_encode("b", AUDIO["b"], encode)
    await cache.get_or_encode("a", AUDIO["a"], encode)  # a is now the most recent
    await cache.get_or_encode("c", AUDIO["c"], encode)  # evicts b
    assert len(cache) == 2 and encode.calls == 3
    await cache.get_or_encode("a", AUDIO["a"], encode)
    assert encode.calls == 3
    await cache.get_or_encode("b", AUDIO["b"], encode)
    assert encode.calls == 4


async def test_capacity_zero_caches_nothing() -> None:
    cache, encode = ReferenceCache(0, code_values=CODES), CountingEncoder()
    for _ in range(2):
        await cache.get_or_encode("a", AUDIO["a"], encode)
    assert encode.calls == 2 and len(cache) == 0


async def test_concurrent_requests_share_one_encode_and_survive_a_cancel() -> None:
    cache, encode = ReferenceCache(4, code_values=CODES), CountingEncoder()
    encode.gate.clear()
    waiters = [asyncio.create_task(cache.get_or_encode("a", AUDIO["a"], encode)) for _ in range(3)]
    await asyncio.sleep(0.01)
    waiters[0].cancel()  # one caller gives up; the others still get the result
    encode.gate.set()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert results[1] == results[2] == [1, 320]
    assert encode.calls == 1 and len(cache) == 1


async def test_failures_are_not_cached() -> None:
    cache, encode = ReferenceCache(4, code_values=CODES), CountingEncoder()
    encode.fail = True
    with pytest.raises(RuntimeError):
        await cache.get_or_encode("a", AUDIO["a"], encode)
    encode.fail = False
    assert await cache.get_or_encode("a", AUDIO["a"], encode) == [1, 320]
    assert encode.calls == 2
