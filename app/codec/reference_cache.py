"""ReferenceCache: speech codes of reference audio, keyed by the audio's content hash (bounded LRU).

A voice-conversion client usually sends the same reference with every request; its codes are the
same each time, so the encoder (a 600M-parameter semantic model) runs once per distinct reference.
Concurrent requests for a reference that is being encoded share that one encode. With a ``shared``
store (``SharedCodes``: Redis, for every replica) a local miss asks it first and every encode is put
there, so a clip encoded by one replica is not encoded again by another.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Protocol

import numpy as np

Encode = Callable[[np.ndarray], Awaitable[list[int]]]


class SharedCodes(Protocol):
    """Codes by content digest in a store other processes see; best effort: a failure is a miss."""

    async def get(self, digest: str) -> list[int] | None: ...

    async def put(self, digest: str, codes: list[int]) -> None: ...


class ReferenceCache:
    """``digest -> codes`` for the last ``capacity`` references used (0 disables caching)."""

    def __init__(self, capacity: int, shared: SharedCodes | None = None) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.shared = shared
        self._codes: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._pending: dict[str, asyncio.Task[list[int]]] = {}

    def __len__(self) -> int:
        return len(self._codes)

    async def get_or_encode(self, digest: str, samples: np.ndarray, encode: Encode) -> list[int]:
        """The codes for ``samples`` (whose content hash is ``digest``): cached, shared, or encoded now.

        A caller that is cancelled does not cancel an encode other callers (or the cache) are awaiting.
        """
        cached = self._codes.get(digest)
        if cached is not None:
            self._codes.move_to_end(digest)
            return list(cached)
        task = self._pending.get(digest)
        if task is None:
            task = asyncio.ensure_future(self._fetch_or_encode(digest, samples, encode))
            self._pending[digest] = task
            task.add_done_callback(lambda done: self._settle(digest, done))
        return list(await asyncio.shield(task))

    async def _fetch_or_encode(self, digest: str, samples: np.ndarray, encode: Encode) -> list[int]:
        """The shared store's codes for ``digest``, else a new encode (then put there)."""
        if self.shared is None:
            return await encode(samples)
        codes = await self.shared.get(digest)
        if codes is None:
            codes = await encode(samples)
            await self.shared.put(digest, codes)
        return codes

    def _settle(self, digest: str, task: asyncio.Task[list[int]]) -> None:
        """Store a finished encode (failures are not cached) and forget it as pending."""
        self._pending.pop(digest, None)
        if task.cancelled() or task.exception() is not None or self.capacity == 0:
            return
        self._codes[digest] = tuple(task.result())
        self._codes.move_to_end(digest)
        while len(self._codes) > self.capacity:
            self._codes.popitem(last=False)
