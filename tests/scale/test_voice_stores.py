"""Voice stores as two processes see them: two registries on one store (files or Redis) stay in step.

Each registry is what one worker or replica holds; the second sees the first's changes on its next use
(the version check), names are unique across them and the limit counts both. Also: the shared
reference codes in Redis, and what a Redis store does with bad records.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import numpy as np
import pytest
import redis

from app.codec.reference_cache import ReferenceCache
from app.codec.shared_codes import FileSharedCodes, RedisSharedCodes
from app.core.errors import APIError, Conflict, Forbidden, InvalidRequest, NotFound, Unavailable
from app.synthesis.registry import VoiceRegistry, VoiceStore
from app.synthesis.voice_stores.file import FileVoiceStore
from app.synthesis.voice_stores.redis import RedisVoiceStore
from tests.scale.conftest import REDIS_URL

RESERVED = ("husein", "nova")


@pytest.fixture(params=["file", "redis"])
async def make_registry(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], VoiceRegistry]]:
    """Builds registries that share one store, as the processes of a deployment do."""
    made: list[VoiceRegistry] = []

    def store() -> VoiceStore:
        if request.param == "file":
            return FileVoiceStore(tmp_path / "voices")
        return RedisVoiceStore(REDIS_URL, request.getfixturevalue("redis_prefix"))

    def build() -> VoiceRegistry:
        made.append(VoiceRegistry.of(store(), 2, RESERVED))
        return made[-1]

    yield build
    for registry in made:
        await registry.close()


async def add(registry: VoiceRegistry, name: str) -> object:
    return await registry.add(name, "hello", {"neucodec": [1, 2, 3]}, "consent noted", now=5)


async def test_a_change_through_one_is_seen_by_the_other_at_once(
    make_registry: Callable[[], VoiceRegistry],
) -> None:
    one, two = make_registry(), make_registry()
    await one.start()
    await two.start()
    assert await two.voices() == []
    voice = await add(one, "anna")
    assert await two.get("anna") == voice
    await two.remove("anna")
    assert await one.get("anna") is None and await one.voices() == []
    with pytest.raises(NotFound):
        await one.remove("anna")


async def test_names_are_unique_and_the_limit_counts_every_process(
    make_registry: Callable[[], VoiceRegistry],
) -> None:
    one, two = make_registry(), make_registry()
    await one.start()
    await two.start()
    await one.voices()
    await two.voices()  # both hold a copy with no voices: only the store can refuse the second add
    results = await asyncio.gather(add(one, "Same"), add(two, "same"), return_exceptions=True)
    assert sum(isinstance(r, Conflict) for r in results) == 1, results
    await add(two, "other")
    with pytest.raises(InvalidRequest) as info:
        await add(one, "third")
    assert info.value.code == "voice_limit_reached"
    with pytest.raises(Conflict):
        await add(one, "nova")  # a built-in alias


async def test_a_restarted_process_reads_every_voice_with_its_consent(
    make_registry: Callable[[], VoiceRegistry],
) -> None:
    first = make_registry()
    await first.start()
    await add(first, "kept")
    await first.close()
    again = make_registry()
    await again.start()
    [voice] = await again.voices()
    assert (voice.name, voice.codes, voice.consent) == ("kept", {"neucodec": (1, 2, 3)}, "consent noted")


async def test_a_voice_records_its_owner_and_only_that_owner_removes_it_through_either_process(
    make_registry: Callable[[], VoiceRegistry],
) -> None:
    """In the store: the owner check and the delete are one step, whichever process
    asks; no owner (an admin key, or keys off) removes any voice."""
    one, two = make_registry(), make_registry()
    await one.start()
    await two.start()
    await one.add("anna", "hello", {"neucodec": [1, 2, 3]}, None, now=5, owner="a1a1a1a1a1a1a1a1")
    await one.add("bob", "hello", {"neucodec": [1, 2, 3]}, None, now=5, owner="a1a1a1a1a1a1a1a1")
    assert (await two.get("anna")) is not None and (await two.get("anna")).owner == "a1a1a1a1a1a1a1a1"
    for registry in (one, two):
        with pytest.raises(Forbidden) as info:
            await registry.remove("anna", owner="b2b2b2b2b2b2b2b2")
        assert (
            info.value.status == 403 and info.value.param == "name" and info.value.code == "voice_not_owned"
        )
    assert [voice.name for voice in await one.voices()] == ["anna", "bob"]
    await two.remove("anna", owner="a1a1a1a1a1a1a1a1")
    await one.remove("bob")  # no owner: anyone's
    assert await one.voices() == [] and await two.voices() == []
    with pytest.raises(NotFound):
        await two.remove("anna", owner="a1a1a1a1a1a1a1a1")


async def test_a_voice_with_no_owner_is_removed_only_without_an_owner(
    make_registry: Callable[[], VoiceRegistry],
) -> None:
    """A voice registered while keys were off (or before owners were recorded) is claimed by no key."""
    registry = make_registry()
    await registry.start()
    await add(registry, "legacy")
    assert (await registry.get("legacy")) is not None and (await registry.get("legacy")).owner is None
    with pytest.raises(Forbidden):
        await registry.remove("legacy", owner="a1a1a1a1a1a1a1a1")
    await registry.remove("legacy")
    assert await registry.voices() == []


async def test_a_redis_that_does_not_answer_is_a_503() -> None:
    registry = VoiceRegistry.of(RedisVoiceStore("redis://127.0.0.1:1/0", "x:"), 2, RESERVED)
    await registry.start()  # startup goes on: the store is retried on first use
    for attempt in (registry.voices(), registry.check_name("anna"), add(registry, "anna")):
        with pytest.raises(Unavailable) as info:
            await attempt
        assert info.value.status == 503 and info.value.code == "voice_store_unavailable"
    await registry.close()


async def test_redis_records_that_do_not_parse_are_skipped(redis_prefix: str) -> None:
    store = RedisVoiceStore(REDIS_URL, redis_prefix)
    registry = VoiceRegistry.of(store, 5, RESERVED)
    await registry.start()
    await add(registry, "good")
    client = redis.Redis.from_url(REDIS_URL)
    client.hset(store.key, "bad", "{nope")
    out_of_range = {"version": 2, "name": "range", "reference_text": "x", "codes": {"neucodec": [70000]}}
    client.hset(store.key, "range", json.dumps(out_of_range | {"created_at": 1}))
    client.set(store.version_key, "changed by hand")
    client.close()
    assert [voice.name for voice in await registry.voices()] == ["good"]
    await registry.close()


@pytest.mark.parametrize("kind", ["file", "redis"])
async def test_shared_reference_codes_spare_a_second_process_the_encode(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    calls = []

    async def encode(samples: np.ndarray) -> list[int]:
        calls.append(len(samples))
        return [7, 8, 9]

    def store() -> FileSharedCodes | RedisSharedCodes:
        if kind == "file":
            return FileSharedCodes(tmp_path / "refs", 4)
        return RedisSharedCodes(REDIS_URL, request.getfixturevalue("redis_prefix") + "references:", 60, 4)

    shared = [store() for _ in range(2)]
    for store in shared:
        await store.start()
    one, two = (ReferenceCache(4, shared=store, code_values=65536) for store in shared)
    samples = np.zeros(160, dtype=np.float32)
    assert await one.get_or_encode("ab" * 16, samples, encode) == [7, 8, 9]
    assert await two.get_or_encode("ab" * 16, samples, encode) == [7, 8, 9]
    assert calls == [160]  # the second process found the first one's codes
    for store in shared:
        await store.close()


async def test_shared_reference_codes_are_best_effort_when_redis_is_down() -> None:
    store = RedisSharedCodes("redis://127.0.0.1:1/0", "x:", 60, 4)
    await store.start()
    cache = ReferenceCache(4, shared=store, code_values=65536)

    async def encode(samples: np.ndarray) -> list[int]:
        return [1]

    assert await cache.get_or_encode("d", np.zeros(4, dtype=np.float32), encode) == [1]
    assert await store.get("d") is None  # skipped while backing off: no second timeout
    await store.close()


async def test_file_shared_codes_keep_the_most_recently_used(tmp_path: Path) -> None:
    shared = FileSharedCodes(tmp_path, capacity=2)
    digests = ["aa" * 16, "bb" * 16, "cc" * 16]
    await shared.put(digests[0], [1])
    await shared.put(digests[1], [2])
    old = 1_000_000_000
    os.utime(tmp_path / f"{digests[0]}.codes", (old, old))
    os.utime(tmp_path / f"{digests[1]}.codes", (old + 1, old + 1))
    assert await shared.get(digests[0]) == [1]  # a hit makes it the most recently used
    await shared.put(digests[2], [3])
    assert sorted(p.stem for p in tmp_path.glob("*.codes")) == [digests[0], digests[2]]
    assert await shared.get("../../etc/passwd") is None  # only hex digests name files
    (tmp_path / f"{digests[2]}.codes").write_text("not json")
    assert await shared.get(digests[2]) is None


@pytest.mark.parametrize(
    "codes",
    [{"neucodec": [70_000, 1]}, {"neucodec": [-1]}, {"moss": []}, {}],
    ids=["above_range", "negative", "empty", "no_family"],
)
async def test_a_voice_that_would_not_load_back_is_never_stored(
    make_registry: Callable[[], VoiceRegistry], codes: dict[str, list[int]]
) -> None:
    """What is stored is exactly what loads: a record the loader would skip is refused before the store
    sees it, so it neither takes its name nor counts against the limit."""
    one, two = make_registry(), make_registry()
    await one.start()
    with pytest.raises(APIError) as info:
        await one.add("broken", "hello", codes, None, now=5)
    assert info.value.status == 500
    await two.start()
    assert await two.voices() == []
    await add(one, "broken")  # the name is free
    await add(one, "second")  # and both slots of the limit
    assert [voice.name for voice in await two.voices()] == ["broken", "second"]


async def test_redis_shared_codes_keep_the_most_recently_used_and_forget_the_old(redis_prefix: str) -> None:
    """REFERENCE_CACHE_SIZE bounds Redis as it bounds files: least recently used out first; an entry not
    used for SHARED_REFERENCE_TTL_S is gone."""
    shared = RedisSharedCodes(REDIS_URL, redis_prefix + "references:", 0.5, capacity=2)
    await shared.start()
    digests = ["aa" * 16, "bb" * 16, "cc" * 16]
    try:
        await shared.put(digests[0], [1])
        await shared.put(digests[1], [2])
        await asyncio.sleep(0.01)
        assert await shared.get(digests[0]) == [1]  # a hit makes it the most recently used
        await shared.put(digests[2], [3])
        assert [await shared.get(digest) for digest in digests] == [[1], None, [3]]
        await asyncio.sleep(0.6)
        assert await shared.get(digests[0]) is None
        client = redis.Redis.from_url(REDIS_URL)
        try:
            assert not list(client.scan_iter(match=redis_prefix + "references:*")), "nothing left behind"
        finally:
            client.close()
    finally:
        await shared.close()
