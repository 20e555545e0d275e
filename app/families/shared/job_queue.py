"""The queue a batched LM engine's thread takes its work from, between two steps."""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def take_queued(jobs: queue.Queue[T | None], put: Callable[[T], None], block: bool) -> bool:
    """Hand every queued item of ``jobs`` to ``put`` (blocking for the first when ``block``, the engine
    being idle); False once the ``None`` sentinel (close) is taken."""
    try:
        item = jobs.get(block=block)
        while True:
            if item is None:
                return False
            put(item)
            item = jobs.get_nowait()
    except queue.Empty:
        return True
