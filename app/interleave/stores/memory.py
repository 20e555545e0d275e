"""The in-process turn store: one dict, for tests and single-worker servers (not shared by workers)."""

from __future__ import annotations

import time
from collections.abc import Callable

from app.interleave.ids import digest
from app.interleave.stores.base import History
from app.interleave.turns import Turn, retain


class MemoryStore:
    """Turns per id in a dict; expired ids are dropped on the next append. Every method runs without
    awaiting in between, so the event loop makes each one atomic."""

    name = "memory"

    def __init__(self, ttl_s: float, max_codes: int, clock: Callable[[], float] = time.time) -> None:
        self._ttl_s = ttl_s
        self._max_codes = max_codes
        self._clock = clock
        self._entries: dict[str, tuple[float, list[Turn]]] = {}  # digest -> (last append, turns)

    async def start(self) -> None:
        """Nothing to open."""

    async def close(self) -> None:
        """Forget everything."""
        self._entries.clear()

    def _live(self, key: str) -> tuple[float, list[Turn]] | None:
        entry = self._entries.get(key)
        if entry is not None and self._clock() - entry[0] >= self._ttl_s:
            del self._entries[key]
            return None
        return entry

    async def load(self, interleave_id: str) -> History:
        entry = self._live(digest(interleave_id))
        if entry is None:
            return History()
        return History(list(entry[1]), self._ttl_s - (self._clock() - entry[0]))

    async def append(self, interleave_id: str, turn: Turn, keep: int) -> None:
        now = self._clock()
        for key in [k for k, (at, _) in self._entries.items() if now - at >= self._ttl_s]:
            del self._entries[key]
        key = digest(interleave_id)
        turns = self._entries.get(key, (now, []))[1]
        self._entries[key] = (now, retain([*turns, turn], keep, self._max_codes))

    async def delete(self, interleave_id: str) -> bool:
        key = digest(interleave_id)
        existed = self._live(key) is not None
        self._entries.pop(key, None)
        return existed
