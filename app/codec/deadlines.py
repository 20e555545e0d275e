"""Earliest-deadline-first selection of codec batches: a pure data structure, no threads, no clock.

Every queued item has a deadline: the moment its stream's listener will have played all the audio
sent so far (for a stream's first window: the moment it was submitted, i.e. already due). ``take``
returns the next batch: the live item with the earliest deadline (ties: the one queued first), plus the
other live items of the same ``key`` (on an accelerator the window's length: batches are never padded
in time; on a CPU one key, windows of any lengths being packed) in deadline order, up to ``max_batch``
items and, with a ``budget``, while their ``weight`` (a window's codes) adds up to at most that (an item
that would pass it is left for a later batch; the first always goes). With ``ends`` (when a batch of a
given weight, started now, would end, with time to spare; None: not known) an item joins only if the
batch with it still ends by the first item's deadline, or if the item itself is due before the batch
would end (it could not wait for the next one): a window whose listener is seconds ahead does not make
the batch of a listener about to run dry longer. So:

- the most urgent item always runs in the next batch; a stream's first window never waits behind a
  batch of later windows whose deadlines are further away (it waits at most for the batch already
  running: the device is not pre-empted);
- with ``max_batch == 1`` (where batching does not pay, e.g. on a CPU) a burst of first windows runs one
  by one in arrival order, so the first of them is not held back for the slowest;
- no item starves: every item that arrives after an item's deadline has a later deadline, so once its
  deadline has passed an item waits only for the items that were already due before it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

I = TypeVar("I")  # noqa: E741 - a queued item


@dataclass(order=True)
class _Entry(Generic[I]):
    deadline: float
    seq: int
    item: I = field(compare=False)
    key: Hashable = field(compare=False)
    weight: int = field(compare=False)


class DeadlineQueue(Generic[I]):
    """Items ordered by (deadline, arrival); ``take`` forms the next batch (module docstring).

    ``alive(item)`` tells whether an item is still wanted (its caller has not given up); dead items are
    dropped as they are met. ``weight(item)`` is what it takes of a batch's ``budget``.
    """

    def __init__(
        self,
        key: Callable[[I], Hashable],
        alive: Callable[[I], bool] = lambda item: True,
        weight: Callable[[I], int] = lambda item: 1,
    ) -> None:
        self._key = key
        self._alive = alive
        self._weight = weight
        self._heap: list[_Entry[I]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, item: I, deadline: float) -> None:
        """Queue ``item`` due at ``deadline`` (any clock, the same for all items)."""
        entry = _Entry(deadline, next(self._seq), item, self._key(item), self._weight(item))
        heapq.heappush(self._heap, entry)

    def head(self) -> tuple[I, float, int, int] | None:
        """The most urgent live item, its deadline, and how many live items share its key and their total
        weight (None: empty)."""
        self._drop_dead_head()
        if not self._heap:
            return None
        first = self._heap[0]
        same = [entry for entry in self._heap if entry.key == first.key and self._alive(entry.item)]
        return first.item, first.deadline, len(same), sum(entry.weight for entry in same)

    def take(
        self, max_batch: int, budget: int | None = None, ends: Callable[[int], float | None] | None = None
    ) -> list[I]:
        """Remove and return the next batch: the most urgent live item and up to ``max_batch - 1`` more
        live items of its key, most urgent first, within ``budget`` and, with ``ends``, without delaying
        the first past its deadline (module docstring). Empty when nothing live is queued."""
        self._drop_dead_head()
        if not self._heap:
            return []
        key = self._heap[0].key
        if max_batch == 1:
            return [heapq.heappop(self._heap).item]
        chosen: list[_Entry[I]] = []
        rest: list[_Entry[I]] = []
        weight = 0  # of the chosen items
        for entry in sorted(self._heap):
            if not self._alive(entry.item):
                continue
            joins = entry.key == key and len(chosen) < max_batch
            if joins and chosen:
                joins = budget is None or weight + entry.weight <= budget
                end = ends(weight + entry.weight) if joins and ends is not None else None
                joins = joins and (end is None or entry.deadline <= end or end <= chosen[0].deadline)
            if joins:
                chosen.append(entry)
                weight += entry.weight
            else:
                rest.append(entry)
        heapq.heapify(rest)
        self._heap = rest
        return [entry.item for entry in chosen]

    def drain(self) -> list[I]:
        """Remove and return every queued item (live or not), most urgent first."""
        items = [entry.item for entry in sorted(self._heap)]
        self._heap = []
        return items

    def _drop_dead_head(self) -> None:
        while self._heap and not self._alive(self._heap[0].item):
            heapq.heappop(self._heap)
