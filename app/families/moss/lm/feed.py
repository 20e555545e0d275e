"""The text ids of a generation whose text is still arriving (a realtime session's turn).

The event loop ``extend``s the ids as the text comes (already held back where a later delta could
still change them, ``stream_tokens``) and ``end``s it; the engine thread reads id ``k`` with ``at``: the
id, the text pad once the text has ended before ``k``, or None while it may still come (the row
parks). Every change wakes the engine (``bind``), so a parked row resumes within one loop turn.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence


class TextFeed:
    """Ids appended by the event loop, read by the engine thread (see the module docstring)."""

    def __init__(self, ids: Sequence[int] = ()) -> None:
        self._lock = threading.Lock()
        self._ids: list[int] = list(ids)
        self._ended = False
        self._wake: Callable[[], None] = lambda: None
        self.parked_s = 0.0  # time the generation waited for an id (the engine thread adds it up)
        self._waiting_since: float | None = None

    def bind(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` after each change from now on (the engine that runs this feed)."""
        self._wake = wake

    def extend(self, ids: Sequence[int]) -> None:
        """More ids, in order (after ``end`` they are refused)."""
        if not ids:
            return
        with self._lock:
            if self._ended:
                raise ValueError("the text has ended")
            self._ids.extend(ids)
        self._wake()

    def end(self) -> None:
        """No more ids will come."""
        with self._lock:
            self._ended = True
        self._wake()

    @property
    def ended(self) -> bool:
        return self._ended

    def __len__(self) -> int:
        return len(self._ids)

    def ids(self) -> list[int]:
        """A copy of the ids so far."""
        with self._lock:
            return list(self._ids)

    def at(self, index: int, pad: int) -> int | None:
        """Id ``index``; ``pad`` when the text ended before it; None while it may still come."""
        with self._lock:
            if index < len(self._ids):
                return self._ids[index]
            return pad if self._ended else None

    def waiting(self, waits: bool) -> None:
        """The engine thread's record of a wait for an id (``waits``) or of its end: ``parked_s``."""
        now = time.monotonic()
        if waits and self._waiting_since is None:
            self._waiting_since = now
        elif not waits and self._waiting_since is not None:
            self.parked_s += now - self._waiting_since
            self._waiting_since = None
