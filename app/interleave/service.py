"""Interleave ids' stored turns, shared by every family: the store's life, reading and committing turns.

Store failures never fail a request: a history that cannot be read is an empty one (cold start), a
turn that cannot be stored is dropped; both are logged and counted in ``counters``. A commit runs as a
task that the response's end may wait for (``commit_turn``, at most ``COMMIT_WAIT_S``): the turn is in
the store before the last bytes are sent, so a next request on any worker or replica finds it. A commit
that takes longer goes on in the background; a later request (or GET/DELETE) on the same id in this
process then waits for it. How a family puts turns into its prompt is the family's own.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from app.core.settings import ServerSettings
from app.interleave.stores.base import History, StoreError, TurnStore
from app.interleave.stores.factory import build_store, max_history_codes
from app.interleave.turns import Turn
from app.observability.metrics import Metrics

log = logging.getLogger(__name__)

COMMIT_WAIT_S = 1.0  # longest a response's end waits for its turn to be stored (the stores' own timeout)


@dataclass
class InterleaveCounters:
    """What went wrong or happened (per process); each count also goes to ``tts_interleave_events``."""

    commits: int = 0
    commit_failures: int = 0
    load_failures: int = 0
    fallbacks: int = 0
    metrics: Metrics | None = None

    def add(self, event: str) -> None:
        """Count one ``event`` (a field name) here and in the app's metrics."""
        setattr(self, event, getattr(self, event) + 1)
        if self.metrics is not None:
            self.metrics.observe_interleave(event)


class Interleave:
    """The engine's interleave state: the turn store (None when INTERLEAVE_STORE=off), opened by the first
    family that starts it and closed by the last, and the commits still landing."""

    def __init__(
        self, settings: ServerSettings, store: TurnStore | None, metrics: Metrics | None = None
    ) -> None:
        self.settings = settings
        self.store = store
        self.counters = InterleaveCounters(metrics=metrics)
        self.max_codes = max_history_codes(settings)
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._users = 0  # families that started the store and have not closed it

    @classmethod
    def from_settings(cls, settings: ServerSettings, metrics: Metrics | None = None) -> Interleave:
        return cls(settings, build_store(settings), metrics)

    @property
    def enabled(self) -> bool:
        return self.store is not None

    async def start(self) -> None:
        """Start the store; every family that starts it closes it once: the store opens with the first
        and closes with the last."""
        self._users += 1
        if self.store is None or self._users > 1:
            return
        await self.store.start()
        log.info("interleave store %s", self.store.name)

    async def close(self) -> None:
        """Finish the pending commits, then close the store (when the last family that started it
        closes; also safe when it was never started)."""
        self._users = max(0, self._users - 1)
        if self._users:
            return
        if self._pending:
            await asyncio.gather(*self._pending.values(), return_exceptions=True)
        if self.store is not None:
            await self.store.close()

    async def _settled(self, interleave_id: str) -> None:
        """Wait for this process's pending commit on the id, if any (never cancels it)."""
        task = self._pending.get(interleave_id)
        if task is not None:
            await asyncio.shield(task)

    async def inspect(self, interleave_id: str) -> History:
        """The id's stored history (raises StoreError)."""
        assert self.store is not None
        await self._settled(interleave_id)
        return await self.store.load(interleave_id)

    async def forget(self, interleave_id: str) -> bool:
        """Delete the id now; True when it had turns (raises StoreError)."""
        assert self.store is not None
        await self._settled(interleave_id)
        return await self.store.delete(interleave_id)

    async def history(self, interleave_id: str) -> list[Turn]:
        """The id's stored turns, oldest first; none (counted, logged) when the store cannot be read."""
        assert self.store is not None
        try:
            return (await self.inspect(interleave_id)).turns
        except StoreError as exc:
            self.counters.add("load_failures")
            log.warning("interleave history unavailable, going on cold: %s", exc)
            return []

    async def commit_turn(self, interleave_id: str, record: Turn, keep: int) -> None:
        """``append``, then wait up to COMMIT_WAIT_S for the turn to be stored (never cancels it): a
        finished turn (one whose generation ended normally) is in the store before the response ends."""
        task = self.append(interleave_id, record, keep)
        if task is not None:
            await asyncio.wait({task}, timeout=COMMIT_WAIT_S)

    def append(self, interleave_id: str, record: Turn, keep: int) -> asyncio.Task[None] | None:
        """Store ``record`` after the id's turns in a task (in order with this process's earlier
        commits on the id, keeping what ``turns.retain`` keeps for ``keep``); None with no store."""
        if self.store is None:
            return None
        key = interleave_id
        task = asyncio.create_task(self._append(key, record, keep, self._pending.get(key)))
        self._pending[key] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._pending.get(key) is finished:
                del self._pending[key]

        task.add_done_callback(done)
        return task

    async def _append(
        self, interleave_id: str, turn: Turn, keep: int, after: asyncio.Task[None] | None
    ) -> None:
        if after is not None:
            await asyncio.gather(after, return_exceptions=True)  # one id's commits land in order
        assert self.store is not None
        try:
            await self.store.append(interleave_id, turn, keep)
        except Exception as exc:
            self.counters.add("commit_failures")
            log.warning("interleave turn not stored: %r", exc)
            return
        self.counters.add("commits")
