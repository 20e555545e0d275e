"""The three stores behave alike: order, retention, delete, expiry, any id; plus each one's own cases."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis

from app.interleave.ids import digest
from app.interleave.stores.base import StoreError, TurnStore
from app.interleave.stores.factory import build_store, default_store_dir
from app.interleave.stores.memory import MemoryStore
from app.interleave.stores.redis import RedisStore
from app.interleave.stores.shm import ShmStore
from app.interleave.turns import Turn
from tests.conftest import make_settings
from tests.interleave.conftest import REDIS_URL, Clock

TTL_S = 600.0
HOSTILE_IDS = [
    "../../../../etc/passwd",
    "a/b/c",
    "..",
    ".",
    "/absolute",
    "back\\slash",
    "nul\x00byte",
    "x" * 10_000,
    "房间-42 ✓",
    "lone \ud800 surrogate",
    "",
]


def turn(text: str, n: int = 2, voice: str = "husein") -> Turn:
    return Turn(voice, text, tuple(range(n)))


@pytest.fixture(params=["memory", "shm", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> AsyncIterator[TurnStore]:
    made: TurnStore
    if request.param == "memory":
        made = MemoryStore(TTL_S, 1000, clock=clock)
    elif request.param == "shm":
        made = ShmStore(tmp_path / "store", TTL_S, 1000, clock=clock)
    else:
        made = RedisStore(REDIS_URL, TTL_S, 1000, prefix=request.getfixturevalue("redis_prefix"))
    await made.start()
    try:
        yield made
    finally:
        await made.close()


async def test_append_load_delete(store: TurnStore) -> None:
    assert (await store.load("room")).turns == []
    for text in ["one", "two", "three"]:
        await store.append("room", turn(text), keep=0)
    await store.append("other", turn("elsewhere"), keep=0)
    history = await store.load("room")
    assert [t.text for t in history.turns] == ["one", "two", "three"]
    assert history.expires_in_s is not None and 0 < history.expires_in_s <= TTL_S
    assert await store.delete("room") is True
    assert await store.delete("room") is False
    assert (await store.load("room")).turns == []
    assert [t.text for t in (await store.load("other")).turns] == ["elsewhere"]


async def test_appends_keep_what_retain_keeps(store: TurnStore) -> None:
    for i in range(5):
        await store.append("count", turn(f"t{i}"), keep=3)
    assert [t.text for t in (await store.load("count")).turns] == ["t2", "t3", "t4"]
    for i in range(6):
        await store.append("codes", turn(f"t{i}", 400), keep=0)
    # 1000 codes: t5 and t4 hold 800, t3 crosses the cap and is kept whole (the prompt cuts it)
    assert [t.text for t in (await store.load("codes")).turns] == ["t3", "t4", "t5"]
    await store.append("codes", turn("switch", voice="idayu"), keep=0)
    assert [t.text for t in (await store.load("codes")).turns] == ["switch"]


async def test_the_cap_weighs_each_turn_by_its_seconds(store: TurnStore) -> None:
    """A turn at 200 codes a second (MOSS frames) counts its seconds, in every store (redis: the Lua)."""
    for i in range(3):  # 2000 codes each = 10 s = 500 of the cap's 1000 (20 s at 50 a second)
        await store.append("rate", Turn("moss:v", f"t{i}", tuple(range(1000)) * 2, 200), keep=0)
    turns = (await store.load("rate")).turns
    assert [t.text for t in turns] == ["t1", "t2"] and turns[0].codes_per_second == 200


async def test_any_id_is_a_separate_key(store: TurnStore) -> None:
    for i, interleave_id in enumerate(HOSTILE_IDS):
        await store.append(interleave_id, turn(f"turn {i}"), keep=0)
    for i, interleave_id in enumerate(HOSTILE_IDS):
        assert [t.text for t in (await store.load(interleave_id)).turns] == [f"turn {i}"]
    assert await store.delete("../../../../etc/passwd") is True
    assert (await store.load("a/b/c")).turns


@pytest.mark.parametrize("kind", ["memory", "shm"])
async def test_ids_expire_after_the_ttl_since_their_last_append(
    kind: str, tmp_path: Path, clock: Clock
) -> None:
    store: TurnStore = (
        MemoryStore(TTL_S, 1000, clock=clock)
        if kind == "memory"
        else ShmStore(tmp_path, TTL_S, 1000, clock=clock)
    )
    await store.append("room", turn("one"), keep=0)
    clock.advance(TTL_S - 1)
    await store.append("room", turn("two"), keep=0)  # renews the TTL
    clock.advance(TTL_S - 1)
    history = await store.load("room")
    assert [t.text for t in history.turns] == ["one", "two"]
    assert history.expires_in_s == pytest.approx(1.0)
    clock.advance(1)
    assert (await store.load("room")).turns == []
    assert await store.delete("room") is False, "an expired id has nothing to delete"
    await store.append("room", turn("three"), keep=0)
    assert [t.text for t in (await store.load("room")).turns] == ["three"], "expired turns do not come back"


async def test_redis_ids_expire_after_the_ttl(redis_prefix: str) -> None:
    store = RedisStore(REDIS_URL, 0.3, 1000, prefix=redis_prefix)
    await store.start()
    try:
        await store.append("room", turn("one"), keep=0)
        history = await store.load("room")
        assert history.expires_in_s is not None and 0 < history.expires_in_s <= 0.3
        await asyncio.sleep(0.45)
        assert (await store.load("room")).turns == []
    finally:
        await store.close()


async def test_redis_corrupt_elements_read_as_empty_and_are_dropped(redis_prefix: str) -> None:
    store = RedisStore(REDIS_URL, TTL_S, 1000, prefix=redis_prefix)
    await store.start()
    client = redis.Redis.from_url(REDIS_URL)
    try:
        await store.append("room", turn("one"), keep=0)
        client.rpush(store.key("room"), b"\xff not json")
        assert (await store.load("room")).turns == []
        await store.append("room", turn("two"), keep=0)
        assert [t.text for t in (await store.load("room")).turns] == ["two"]
        assert client.llen(store.key("room")) == 1
        client.delete(store.key("room"))
        client.set(store.key("room"), b"a string, not a list")
        with pytest.raises(StoreError):
            await store.load("room")  # WRONGTYPE is a backend failure: the request goes on cold
    finally:
        client.close()
        await store.close()


async def test_unreachable_redis_raises_store_error_quickly() -> None:
    store = RedisStore("redis://127.0.0.1:1/0", TTL_S, 1000)
    await store.start()
    started = time.monotonic()
    try:
        with pytest.raises(StoreError):
            await store.load("room")
        with pytest.raises(StoreError):
            await store.append("room", turn("one"), keep=0)
        with pytest.raises(StoreError):
            await store.delete("room")
    finally:
        await store.close()
    assert time.monotonic() - started < 3


# --- shm: paths, corruption, locks, sweeping -------------------------------------------------------


async def test_hostile_ids_never_touch_paths_outside_the_store(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store_dir = root / "store"
    store = ShmStore(store_dir, TTL_S, 1000)
    for interleave_id in HOSTILE_IDS:
        await store.append(interleave_id, turn("x"), keep=0)
        await store.load(interleave_id)
    await store.delete("a/b/c")
    everything = sorted(path.relative_to(root) for path in root.rglob("*"))
    assert all(path.parts[0] == "store" for path in everything)
    files = [path.name for path in store_dir.iterdir()]
    assert all(path.parent == store_dir for path in store_dir.rglob("*")), "no subdirectories"
    expected = {f"{digest(i)}.{ext}" for i in HOSTILE_IDS if i != "a/b/c" for ext in ("json", "lock")}
    assert set(files) == expected


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"\xff\xfe\x00garbage", b"[]", b'{"turns": 3}', b'{"turns": [{"voice": "a"}]}', b"null"],
)
async def test_corrupt_files_read_as_empty_and_are_replaced(tmp_path: Path, content: bytes) -> None:
    store = ShmStore(tmp_path, TTL_S, 1000)
    await store.append("room", turn("one"), keep=0)
    (tmp_path / f"{digest('room')}.json").write_bytes(content)
    assert (await store.load("room")).turns == []
    await store.append("room", turn("two"), keep=0)
    assert [t.text for t in (await store.load("room")).turns] == ["two"]


async def test_the_store_directory_must_be_ours(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    store = ShmStore(tmp_path / "link", TTL_S, 1000)
    with pytest.raises(StoreError):
        await store.append("room", turn("one"), keep=0)
    assert list(target.iterdir()) == []


async def test_a_deleted_lock_file_sends_its_waiters_to_a_new_one(tmp_path: Path) -> None:
    store = ShmStore(tmp_path, TTL_S, 1000)
    await store.append("room", turn("before"), keep=0)
    key = digest("room")
    with store._locked(key):  # a deleter holds the lock ...
        waiter = asyncio.create_task(store.append("room", turn("after"), keep=0))
        await asyncio.sleep(0.1)  # ... while an appender blocks on the same lock file
        (tmp_path / f"{key}.json").unlink()
        (tmp_path / f"{key}.lock").unlink()
        assert not waiter.done()
    await asyncio.wait_for(waiter, 5)
    assert [t.text for t in (await store.load("room")).turns] == ["after"]
    assert (tmp_path / f"{key}.lock").exists()


async def test_sweep_removes_expired_ids_and_stale_temp_files_only(tmp_path: Path, clock: Clock) -> None:
    store = ShmStore(tmp_path, TTL_S, 1000, clock=clock)
    await store.append("old", turn("old"), keep=0)
    clock.advance(TTL_S / 2)
    await store.append("new", turn("new"), keep=0)
    stale_tmp = tmp_path / f"{digest('crashed')}.abc123.tmp"
    stale_tmp.write_bytes(b"half a write")
    os.utime(stale_tmp, (clock() - TTL_S, clock() - TTL_S))
    unrelated = tmp_path / "not-ours.json"
    unrelated.write_bytes(b"{}")
    os.utime(unrelated, (0, 0))
    clock.advance(TTL_S / 2)
    assert await store.sweep() == 2  # the old id and the temp file
    names = {path.name for path in tmp_path.iterdir()}
    assert names == {f"{digest('new')}.json", f"{digest('new')}.lock", "not-ours.json"}
    assert [t.text for t in (await store.load("new")).turns] == ["new"]


async def test_periodic_sweep_runs_in_the_background(tmp_path: Path, clock: Clock) -> None:
    store = ShmStore(tmp_path, TTL_S, 1000, clock=clock, sweep_interval_s=0.05)
    await store.start()
    try:
        await store.append("room", turn("one"), keep=0)
        clock.advance(TTL_S)
        for _ in range(100):
            if not any(tmp_path.iterdir()):
                break
            await asyncio.sleep(0.02)
        assert list(tmp_path.iterdir()) == []
    finally:
        await store.close()


def test_build_store_follows_the_settings(tmp_path: Path) -> None:
    shm = build_store(make_settings(INTERLEAVE_STORE_DIR=str(tmp_path)))
    assert isinstance(shm, ShmStore) and shm.directory == tmp_path
    default = build_store(make_settings())
    assert isinstance(default, ShmStore) and default.directory == default_store_dir()
    assert default_store_dir().name == "tts-interleave"
    assert isinstance(build_store(make_settings(INTERLEAVE_STORE="redis")), RedisStore)
    assert isinstance(build_store(make_settings(INTERLEAVE_STORE="memory")), MemoryStore)
    assert build_store(make_settings(INTERLEAVE_STORE="off")) is None
