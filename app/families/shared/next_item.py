"""The next item of an async iterator (an LM's codes or frames), waited for only so long: a stream decodes
what it has on a deadline while its LM has not sent more, and then waits for the same item again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

import anyio

T = TypeVar("T")


class NextItem(Generic[T]):
    """One pending ``anext`` of ``items`` at a time, in a task of its own so a wait can time out."""

    def __init__(self, items: AsyncIterator[T]) -> None:
        self._items = items
        self._pending: asyncio.Future[T | None] | None = None

    async def wait(self, timeout: float | None) -> bool:
        """True once the next item (or the end) came; False when ``timeout`` seconds passed first (the next
        call waits for the same item)."""
        if self._pending is None:
            self._pending = asyncio.ensure_future(anext(self._items, None))
        await asyncio.wait({self._pending}, timeout=timeout)
        return self._pending.done()

    def take(self) -> T | None:
        """The item that came (None: the iterator ended); the next ``wait`` asks for the one after it."""
        assert self._pending is not None and self._pending.done()
        item, self._pending = self._pending.result(), None
        return item

    async def cancel(self) -> None:
        """Stop waiting, shielded: once this returns the iterator is not running (its owner may close it)."""
        pending, self._pending = self._pending, None
        if pending is not None and not pending.done():
            with anyio.CancelScope(shield=True):
                pending.cancel()
                with contextlib.suppress(BaseException):
                    await pending
