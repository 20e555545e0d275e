"""The way back from an engine thread to the event loop that asked for a generation.

An engine thread owns its model; each generation it runs has a ``Handoff``: the thread ``post``s items
(codes, frames) and finally ``finish``es it with an ``Ended``; the event loop side reads them with
``next_items`` (every item that has arrived, at least one, so a fast engine is not paid for one await per
item) and stops the generation with ``close`` (it returns once the thread has left it: within one step).
Items cross with ``loop.call_soon_threadsafe``; a loop that is gone cancels the generation. A batched
engine hands a whole step's items over with ``post_all``: one ``call_soon_threadsafe`` per event loop per
step, however many rows stepped.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from app.core.errors import APIError
from app.core.types import FinishReason

T = TypeVar("T")


@dataclass(frozen=True)
class Ended:
    """The last item of a generation: why it ended (None when the engine does not say), or the error to
    raise."""

    reason: FinishReason | None = None
    error: APIError | None = None


@dataclass(eq=False)
class Handoff(Generic[T]):
    """One generation's items on their way from the engine thread to ``loop``."""

    loop: asyncio.AbstractEventLoop
    out: asyncio.Queue[T | Ended] = field(default_factory=asyncio.Queue)
    done: asyncio.Event = field(default_factory=asyncio.Event)  # set once the thread has left it
    cancel: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    ended: Ended | None = None  # the loop side's copy, once read
    finished: bool = False  # the thread's side: finish was called

    # --- the thread's side ----------------------------------------------------------------------------

    def post(self, item: T) -> None:
        """Hand an item to the consumer (a closed loop cancels the generation)."""
        self._send(item)

    def finish(self, ended: Ended) -> None:
        """Post the end and let the consumer's ``close`` return."""
        self.finished = True
        self._send(ended)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            self.loop.call_soon_threadsafe(self.done.set)

    def _send(self, item: T | Ended) -> None:
        try:
            self.loop.call_soon_threadsafe(self.out.put_nowait, item)
        except RuntimeError:
            self.cancel.set()

    # --- the event loop's side ------------------------------------------------------------------------

    async def next_items(self) -> list[T]:
        """Every item posted since the last call, at least one; [] once the generation has ended (then
        ``ended`` says how). A cancelled wait cancels the generation."""
        if self.ended is not None:
            return []
        try:
            item = await self.out.get()
        except asyncio.CancelledError:
            self.cancel.set()
            raise
        items: list[T] = []
        while True:
            if isinstance(item, Ended):
                self.ended = item
                break
            items.append(item)
            if self.out.empty():
                break
            item = self.out.get_nowait()
        return items

    async def close(self) -> None:
        """Stop the generation unless it has ended; returns once the thread has left it."""
        if self.ended is not None:
            return
        self.cancel.set()
        if self.started.is_set():
            await self.done.wait()


def post_all(handoffs: Sequence[Handoff[Any]], items: Sequence[Any]) -> None:
    """``handoffs[i].post(items[i])`` for every i, with one ``call_soon_threadsafe`` per event loop (the
    items of one step of a batch). Items posted later, and ``finish``, still arrive after these."""
    by_loop: dict[asyncio.AbstractEventLoop, tuple[list[Handoff[Any]], list[Any]]] = {}
    for handoff, item in zip(handoffs, items, strict=True):
        group = by_loop.setdefault(handoff.loop, ([], []))
        group[0].append(handoff)
        group[1].append(item)
    for loop, (theirs, their_items) in by_loop.items():
        try:
            loop.call_soon_threadsafe(_put_all, theirs, their_items)
        except RuntimeError:  # the loop is gone: nobody reads these
            for gone in theirs:
                gone.cancel.set()


def _put_all(handoffs: list[Handoff[Any]], items: list[Any]) -> None:
    """On the event loop: each item into its handoff's queue."""
    for handoff, item in zip(handoffs, items, strict=True):
        handoff.out.put_nowait(item)
