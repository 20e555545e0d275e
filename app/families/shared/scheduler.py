"""The batched row scheduler: the thread, queue and loop that every batched in-process engine runs (the
NeuCodec speech-token LM and MOSS-TTS-Realtime's frame engine); the engine gives the model's part.

One thread owns the model and loops:

1. take new requests off the queue into a FIFO wait list (blocking only when there is nothing to do);
2. drop the requests whose stream was closed (a cancelled request leaves within one step);
3. admit the head of the wait list while a row is free (``max_rows``) and the cache budget holds
   (``cache_budget``: rows x the widest row, each row counted at ``Row.reserved``, its prompt plus every
   position it may generate); beyond either it waits, so the cache never grows past the budget (a
   request larger than the whole budget runs when it would be alone);
4. run one chunk of the prefill group: up to ``prefill_rows`` admitted requests prefilled TOGETHER,
   left-padded to the longest (``app.lm.padded_cache.PrefillGroup``: padding masked, each row at its own
   positions, never more than half of the group's columns padding), in chunks of ``prefill_chunk``
   positions over all members, so a long prompt never stalls the running rows for more than one chunk;
   after its last chunk every member makes its first output and the group joins the batch; requests
   admitted meanwhile form the next group (FIFO: none is overtaken);
5. run one step over the batch (``PaddedBatch``: one left-padded cache, per-row positions) and hand
   each row its output; rows that finished leave.

**Parking.** A row whose input is streamed (a realtime session's text) may be unable to take its next
step: its engine says so (``can_step``). Before each step such rows leave the batch with their own cache
(``PaddedBatch.split``) and wait, parked: they take no step, make no output and cost the other rows
nothing. ``wake()`` (called when more input arrives) has the loop look again; a parked row that is
ready rejoins the batch (``PaddedBatch.join``) and goes on from where it stopped. Parked rows hold
their place under ``max_rows`` and ``cache_budget``, are cancelled within one step like any row, and
keep the loop asleep when nothing else is to be done.

The engine implements the model's part (``prepare``, ``forward``, ``step_inputs``, ``sample``): a
request's outputs depend only on its own inputs and seed, never on who shares its steps. A failure in
one request's preparation or sampling fails that request alone; a failure of a shared forward (a
group's prefill chunk, the batch step; e.g. the device runs out of memory despite the budget) fails the
rows of that forward; a failure of the loop itself fails every request rather than leaving one hanging.
Each request's way back to its event loop is a ``Handoff``.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import torch

from app.core.device import set_current
from app.core.errors import APIError, BackendError, RateLimited, Unavailable
from app.core.types import FinishReason
from app.families.shared.handoff import Ended, Handoff
from app.lm.padded_cache import PaddedBatch, PrefillGroup


class Row(Protocol):
    """What the loop needs of an admitted request."""

    length: int
    """Positions it holds in the cache (set once prefilled)."""

    @property
    def handoff(self) -> Handoff[Any]:
        """Its way back to its event loop."""
        ...

    @property
    def reserved(self) -> int:
        """Cache positions it may need: its whole prompt plus everything it may generate."""
        ...


JobT = TypeVar("JobT")
RowT = TypeVar("RowT", bound=Row)


@dataclass(eq=False)
class Pending(Generic[JobT]):
    """A submitted request not admitted yet (``row`` once prepared: prepared once, however long it
    waits)."""

    job: JobT
    handoff: Handoff[Any]
    row: Any = None


class _Wake:
    """Queued by ``BatchedEngine.wake``: look at the parked rows again."""


WAKE = _Wake()


class BatchedEngine(ABC, Generic[JobT, RowT]):
    """The loop of the module docstring around an engine's model part.

    ``max_waiting`` bounds the requests that may wait for a row (None: unbounded); beyond it ``submit``
    refuses new requests with 429, while ``admitted`` work (a later part of a response
    already admitted) always waits its turn. ``device`` is the thread's current device; ``tensors`` where
    the step's inputs are made (the device of the model's weights; ``device`` unless given).
    """

    def __init__(
        self,
        name: str,
        device: torch.device,
        *,
        max_rows: int,
        cache_budget: int,
        prefill_chunk: int,
        prefill_rows: int | None = None,
        max_waiting: int | None = None,
        tensors: torch.device | None = None,
    ) -> None:
        prefill_rows = max_rows if prefill_rows is None else prefill_rows
        if min(max_rows, cache_budget, prefill_chunk, prefill_rows) < 1 or (max_waiting or 0) < 0:
            raise ValueError("max_rows, cache_budget, prefill_chunk and prefill_rows must be positive")
        self.name = name
        self.device = device  # the thread's current device
        self.tensors = device if tensors is None else tensors  # where the step's inputs are made
        self.max_rows = max_rows
        self.cache_budget = cache_budget
        self.prefill_chunk = prefill_chunk
        self.prefill_rows = prefill_rows
        self.max_waiting = max_waiting
        self._jobs: queue.Queue[Pending[JobT] | _Wake | None] = queue.Queue()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self.pending = 0  # submitted, not yet admitted
        self.active = 0  # admitted, not finished
        self.steps = 0  # batched steps run so far (tests, bench)
        self.peak_rows = 0  # most rows stepped together so far
        self.peak_group = 0  # most requests prefilled together so far
        self.parked = 0  # rows parked now (waiting for streamed input)
        self.parks = 0  # times a row was parked so far (tests, metrics)

    # --- the event loop's side ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread that owns the model (idempotent)."""
        if self._thread is not None:
            return
        self._closing.clear()
        self._thread = threading.Thread(target=self._serve, name=f"{self.name}-rows", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        """End every open stream with Unavailable and join the thread."""
        if self._thread is None:
            return
        with self._lock:
            self._closing.set()
            self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)
        self._thread = None

    def running(self) -> bool:
        """True while the thread runs and takes work (not once it is closing or its loop has failed)."""
        return self._thread is not None and self._thread.is_alive() and not self._closing.is_set()

    def submit(self, job: JobT, handoff: Handoff[Any], admitted: bool = False) -> None:
        """Queue ``job``; Unavailable when the engine is not running, RateLimited (429) when
        ``max_waiting`` requests already wait, unless it is ``admitted`` work (a later part of a response
        already started)."""
        with self._lock:
            if self._closing.is_set() or self._thread is None:
                raise Unavailable(f"the {self.name} engine is not running")
            if (
                self.max_waiting is not None
                and not admitted
                and self.pending + self.active >= self.max_rows + self.max_waiting
            ):
                raise RateLimited(
                    f"every {self.name} generation slot is busy and the wait queue is full",
                    headers={"Retry-After": "1"},
                )
            self.pending += 1
            self._jobs.put(Pending(job, handoff))

    def wake(self) -> None:
        """Have the loop look at its parked rows again (more streamed input arrived); any thread."""
        self._jobs.put(WAKE)

    # --- the model's part (the thread) ----------------------------------------------------------------

    def can_step(self, row: RowT) -> bool:
        """True when ``row`` can take its next step now; False parks it (its streamed input ran dry)."""
        return True

    def setup(self) -> None:
        """Anything the thread needs before its first step (inside inference mode)."""

    @abstractmethod
    def prepare(self, job: JobT, handoff: Handoff[Any]) -> RowT:
        """The row of ``job`` (tokenized, its sampler set up); raising fails the request alone."""

    @abstractmethod
    def prompt(self, row: RowT) -> torch.Tensor:
        """The row's prompt ``[1, P, ...]`` (how a prefill group reads it)."""

    @abstractmethod
    def forward(
        self,
        rows: list[RowT],
        inputs: torch.Tensor,
        mask: torch.Tensor | None,
        positions: torch.Tensor | None,
        cache: Any,
    ) -> tuple[Any, Any]:
        """One forward shared by ``rows``: ``inputs`` ``[B, T, ...]``, the 2-D attention mask and the
        positions ``[B, T]`` (both None when no row is padded), ``cache`` theirs (None to start one);
        returns the output ``sample`` reads and the cache."""

    @abstractmethod
    def step_inputs(self, rows: list[RowT]) -> torch.Tensor:
        """Each row's next input ``[B, 1, ...]`` (what it made last)."""

    @abstractmethod
    def sample(self, rows: list[RowT], out: Any) -> list[RowT]:
        """Each row's next output from ``out``, handed to it (``deliver``), or its end (``finish``);
        returns the rows that left."""

    def shutdown_error(self) -> APIError:
        return Unavailable(f"the {self.name} engine is shutting down")

    def failure(self, exc: Exception) -> APIError:
        """The error a request that raised ends with: its APIError, or a BackendError naming it."""
        if isinstance(exc, APIError):
            return exc
        return BackendError(f"{self.name} generation failed: {exc!r}")

    def finish(self, row: RowT, reason: FinishReason | None = None, error: APIError | None = None) -> None:
        """End an admitted row's stream (from the thread; once: a row already ended is left alone)."""
        if row.handoff.finished:
            return
        with self._lock:
            self.active -= 1
        row.handoff.finish(Ended(reason, error))

    # --- the loop -------------------------------------------------------------------------------------

    def _serve(self) -> None:
        set_current(self.device)
        waiting: deque[Pending[JobT]] = deque()
        admitted: deque[RowT] = deque()  # admitted, waiting for the next prefill group
        group: PrefillGroup[RowT] = PrefillGroup()  # prefilling now
        batch: PaddedBatch[RowT] = PaddedBatch()
        parked: list[PaddedBatch[RowT]] = []  # rows waiting for streamed input, each with its cache
        end = self.shutdown_error()
        try:
            with torch.inference_mode():
                self.setup()
                while True:
                    idle = not (waiting or admitted or group.rows or batch.rows)
                    if not _take(self._jobs, waiting.append, block=idle) or self._closing.is_set():
                        break
                    self._drop_cancelled(waiting, admitted, group, batch)
                    self._drop_parked(parked)
                    active = [*admitted, *group.rows, *batch.rows, *(p.rows[0] for p in parked)]
                    self._admit(waiting, admitted, active)
                    if not group.rows and admitted:
                        group.form(admitted, self.prefill_rows, self.prompt)
                        self.peak_group = max(self.peak_group, len(group.rows))
                    if group.rows:
                        self._prefill_step(group, batch)
                    if parked or batch.rows:
                        self._park(batch, parked)
                    if batch.rows:
                        self._step(batch)
        except Exception as exc:  # a bug outside any row's work: fail every row rather than hang them
            end = BackendError(f"the {self.name} engine stopped: {exc!r}")
        with self._lock:
            self._closing.set()  # nothing new is queued from here on
        _take(self._jobs, waiting.append, block=False)
        for pending in waiting:
            pending.handoff.finish(Ended("error", end))
        for row in [*admitted, *group.rows, *batch.rows, *(p.rows[0] for p in parked)]:
            self.finish(row, "error", end)
        self.parked = 0

    def _drop_cancelled(
        self,
        waiting: deque[Pending[JobT]],
        admitted: deque[RowT],
        group: PrefillGroup[RowT],
        batch: PaddedBatch[RowT],
    ) -> None:
        """Finish the requests whose stream was closed; they leave before the next forward."""
        for pending in [pending for pending in waiting if pending.handoff.cancel.is_set()]:
            waiting.remove(pending)
            with self._lock:
                self.pending -= 1
            pending.handoff.finish(Ended("cancelled"))
        for row in [row for row in admitted if row.handoff.cancel.is_set()]:
            admitted.remove(row)
            self.finish(row, "cancelled")
        for rows, drop in ((group.rows, group.drop), (batch.rows, batch.remove)):
            gone = [row for row in rows if row.handoff.cancel.is_set()]
            for row in gone:
                self.finish(row, "cancelled")
            if gone:
                drop(gone)

    def _drop_parked(self, parked: list[PaddedBatch[RowT]]) -> None:
        """Finish the parked rows whose stream was closed (their cache goes with them)."""
        for alone in [alone for alone in parked if alone.rows[0].handoff.cancel.is_set()]:
            parked.remove(alone)
            self.finish(alone.rows[0], "cancelled")
        self.parked = len(parked)

    def _park(self, batch: PaddedBatch[RowT], parked: list[PaddedBatch[RowT]]) -> None:
        """Parked rows that are ready rejoin ``batch``; rows of ``batch`` that are not leave it, each with
        its own cache (a failing ``ready`` fails its row alone)."""
        for alone in [alone for alone in parked if self._ready(alone.rows[0])]:
            parked.remove(alone)
            batch.join(alone)
        gone = [row for row in batch.rows if row.handoff.finished]
        if gone:
            batch.remove(gone)
        dry = [row for row in batch.rows if not self._ready(row)]
        if dry:
            parked.extend(batch.split(dry))
            self.parks += len(dry)
        gone = [row for row in batch.rows if row.handoff.finished]
        if gone:
            batch.remove(gone)
        self.parked = len(parked)
        self.peak_rows = max(self.peak_rows, len(batch.rows))

    def _ready(self, row: RowT) -> bool:
        """``can_step``; a row whose check raised is finished with its error (and counts as ready, so it
        leaves with the batch's finished rows)."""
        if row.handoff.finished:
            return True
        try:
            return self.can_step(row)
        except Exception as exc:
            self.finish(row, "error", self.failure(exc))
            return True

    def _admit(self, waiting: deque[Pending[JobT]], admitted: deque[RowT], active: list[RowT]) -> None:
        """Admit waiting requests in arrival order while a row and the cache budget are free."""
        while waiting and len(active) < self.max_rows:
            head = waiting[0]
            if head.row is None:
                try:
                    head.row = self.prepare(head.job, head.handoff)
                except Exception as exc:
                    waiting.popleft()
                    with self._lock:
                        self.pending -= 1
                    head.handoff.finish(Ended("error", self.failure(exc)))
                    continue
            row: RowT = head.row
            widest = max([row.reserved, *(other.reserved for other in active)])
            if active and (len(active) + 1) * widest > self.cache_budget:
                return  # waits for rows to leave
            waiting.popleft()
            with self._lock:
                self.pending -= 1
                self.active += 1
            row.handoff.started.set()
            admitted.append(row)
            active.append(row)

    def _shared_forward(
        self,
        rows: list[RowT],
        inputs: torch.Tensor,
        mask: torch.Tensor | None,
        positions: torch.Tensor | None,
        cache: Any,
    ) -> tuple[Any, Any] | None:
        """``forward``; None, every row of it failed, when it raises."""
        try:
            return self.forward(rows, inputs, mask, positions, cache)
        except Exception as exc:
            error = self.failure(exc)
            for row in rows:
                self.finish(row, "error", error)
            return None

    def _prefill_step(self, group: PrefillGroup[RowT], batch: PaddedBatch[RowT]) -> None:
        """One chunk of the group's prompts; after the last, each member's first output and the join."""
        rows = group.rows
        inputs, mask, positions = group.next_chunk(self.prefill_chunk)
        done = self._shared_forward(rows, inputs, mask, positions, group.cache)
        if done is None:
            group.reset()
            return
        out, cache = done
        if not group.advance(cache, int(inputs.shape[1])):
            return
        group.hand_over(batch, self._sampled(rows, out))
        self.peak_rows = max(self.peak_rows, len(batch.rows))

    def _step(self, batch: PaddedBatch[RowT]) -> None:
        """One forward over every row, then their outputs; finished rows leave."""
        rows = batch.rows
        mask = None  # no padding (a row alone, or rows of one length): the causal path, no mask to build
        if any(row.length < batch.width for row in rows):
            padding = torch.zeros((len(rows), batch.width + 1), dtype=torch.long)
            for i, row in enumerate(rows):
                padding[i, batch.width - row.length :] = 1
            mask = padding.to(self.tensors)
        positions = torch.tensor([[row.length] for row in rows], device=self.tensors)
        done = self._shared_forward(rows, self.step_inputs(rows), mask, positions, batch.cache)
        if done is None:
            batch.rows, batch.cache, batch.width = [], None, 0
            return
        out, batch.cache = done
        self.steps += 1
        batch.width += 1
        for row in rows:
            row.length += 1
        gone = self._sampled(rows, out)
        if gone:
            batch.remove(gone)

    def _sampled(self, rows: list[RowT], out: Any) -> list[RowT]:
        """``sample``; every row failed when it raises (a bug in the batched part of the sampling)."""
        try:
            return self.sample(rows, out)
        except Exception as exc:
            error = self.failure(exc)
            for row in rows:
                self.finish(row, "error", error)
            return list(rows)


def _take(
    jobs: queue.Queue[Pending[JobT] | _Wake | None], put: Callable[[Pending[JobT]], None], block: bool
) -> bool:
    """Hand every queued request to ``put`` (blocking for the first when ``block``, the engine being
    idle; a wake-up ends the wait); False once the ``None`` sentinel (close) is taken."""
    try:
        item = jobs.get(block=block)
        while True:
            if item is None:
                return False
            if not isinstance(item, _Wake):
                put(item)
            item = jobs.get_nowait()
    except queue.Empty:
        return True
