"""The shared interleave service: the store opened by the first family and closed by the last, commits in
order, reads that fail going cold."""

from __future__ import annotations

import asyncio

from app.interleave.service import Interleave
from app.interleave.stores.base import History, StoreError
from app.interleave.stores.memory import MemoryStore
from app.interleave.turns import Turn
from tests.conftest import make_settings


class CountingStore(MemoryStore):
    """A memory store that counts its starts and closes."""

    def __init__(self) -> None:
        super().__init__(600, 1000)
        self.starts = self.closes = 0

    async def start(self) -> None:
        self.starts += 1

    async def close(self) -> None:
        self.closes += 1


class DownStore(MemoryStore):
    """A store whose reads fail."""

    async def load(self, interleave_id: str) -> History:
        raise StoreError("down")


async def test_the_store_opens_with_the_first_family_and_closes_with_the_last() -> None:
    store = CountingStore()
    interleave = Interleave(make_settings(), store)
    await interleave.start()
    await interleave.start()
    assert store.starts == 1
    await interleave.close()
    assert store.closes == 0, "one family still uses it"
    await interleave.close()
    assert store.closes == 1


async def test_commits_on_one_id_land_in_order_and_are_counted() -> None:
    interleave = Interleave(make_settings(), MemoryStore(600, 1000))
    for code in range(5):
        interleave.append("room", Turn("moss:default", f"turn {code}.", (code,)), keep=0)
    await interleave.commit_turn("room", Turn("moss:default", "last.", (9,)), keep=0)
    turns = (await interleave.inspect("room")).turns
    assert [turn.codes for turn in turns] == [(0,), (1,), (2,), (3,), (4,), (9,)]
    assert interleave.counters.commits == 6


async def test_an_unreadable_store_is_an_empty_history_counted_once() -> None:
    interleave = Interleave(make_settings(), DownStore(600, 1000))
    assert await interleave.history("room") == []
    assert interleave.counters.load_failures == 1


async def test_forget_waits_for_the_pending_commit() -> None:
    interleave = Interleave(make_settings(), MemoryStore(600, 1000))
    interleave.append("room", Turn("husein", "one.", (1,)), keep=5)
    assert await interleave.forget("room") is True
    await asyncio.sleep(0)
    assert (await interleave.inspect("room")).turns == []
