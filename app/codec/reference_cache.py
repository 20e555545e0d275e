"""ReferenceCache: speech codes of reference audio, keyed by the audio's content hash (bounded LRU).

A voice-conversion client usually sends the same reference with every request; its codes are the
same each time, so the encoder (a 600M-parameter semantic model) runs once per distinct reference.
Concurrent requests for a reference that is being encoded share that one encode. With a ``shared``
store (``SharedCodes``: Redis, for every replica) a local miss asks it first and every encode is put
there, so a clip encoded by one replica is not encoded again by another.

Codes are checked before anything keeps them: an encode whose codes are not all in ``0..code_values-1``
(the codec's range; an encoder fed audio it cannot take can overflow) is refused with ``InvalidAudio``
and cached nowhere, and a shared entry out of range (another version, another writer) is a miss.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Protocol

import numpy as np

from app.core.errors import InvalidAudio

log = logging.getLogger(__name__)

Encode = Callable[[np.ndarray], Awaitable[list[int]]]


class SharedCodes(Protocol):
    """Codes by content digest in a store other processes see; best effort: a failure is a miss."""

    async def get(self, digest: str) -> list[int] | None: ...

    async def put(self, digest: str, codes: list[int]) -> None: ...


class ReferenceCache:
    """``digest -> codes`` for the last ``capacity`` references used (0 disables caching), each code in
    ``0..code_values-1``."""

    def __init__(self, capacity: int, shared: SharedCodes | None = None, *, code_values: int) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.shared = shared
        self.code_values = code_values
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

    def _in_range(self, codes: list[int]) -> bool:
        return bool(codes) and all(isinstance(c, int) and 0 <= c < self.code_values for c in codes)

    async def _fetch_or_encode(self, digest: str, samples: np.ndarray, encode: Encode) -> list[int]:
        """The shared store's codes for ``digest`` when in range, else a new encode (checked, then put
        there)."""
        codes = None if self.shared is None else await self.shared.get(digest)
        if codes is not None and not self._in_range(codes):
            log.warning("shared reference codes %s out of range: encoding the clip again", digest[:16])
            codes = None
        if codes is None:
            codes = await encode(samples)
            if not self._in_range(codes):
                raise InvalidAudio(
                    f"the codec cannot encode the clip: its codes fall outside 0..{self.code_values - 1}"
                )
            if self.shared is not None:
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
