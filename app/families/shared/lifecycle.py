"""How a family starts and stops its parts, the same for every family: each part that started is closed
once, in the reverse order, also after a start that failed half-way; and the shared post stages' heavy
imports are done at start, not on the first request."""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

WARM_IMPORTS = ("scipy.signal",)
"""Modules the post stages import on first use (the loudness filter: about 2 s cold)."""


class Running:
    """The started parts of a family, by name, with the way to close each."""

    def __init__(self) -> None:
        self._closers: list[tuple[str, Callable[[], Awaitable[None]]]] = []

    def add(self, name: str, close: Callable[[], Awaitable[None]]) -> None:
        """Record that ``name`` is running and how it stops."""
        self._closers.append((name, close))

    async def close(self) -> None:
        """Close every started part, the last started first; a part that fails to close is logged and
        the others still close."""
        while self._closers:
            name, close = self._closers.pop()
            try:
                await close()
            except Exception:
                log.exception("closing %s failed", name)


async def warm_post_stages() -> None:
    """Import the post stages' heavy modules now, in a worker thread."""
    for module in WARM_IMPORTS:
        await asyncio.to_thread(importlib.import_module, module)
