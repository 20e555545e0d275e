"""Cross-request dynamic batching of codec work, earliest deadline first; an item's result is its own.

``await batcher.submit(item, deadline)`` from any request. ``deadline`` (``time.monotonic()`` seconds)
is when the item's result is needed: for a decode window, the moment its listener will have played
all the audio sent so far; a stream's first window, or an item without one, is due at once. One
thread per batcher owns the device and nothing polls: it sleeps on a condition until work is queued,
then

- picks the next batch from a ``DeadlineQueue`` (``app.codec.deadlines``): the most urgent live item and
  up to ``max_batch - 1`` more items of the same ``key`` (decodes on an accelerator: the exact window
  length, batches are never padded in time; on a CPU any length, the windows packed), most urgent
  first, and with a ``budget`` only while their ``weight`` (a window's codes) adds up to at most that (a
  CPU batches short windows only), and with ``ends`` only while the batch still ends by its most urgent
  item's deadline or the item is due before it would end; cancelled items are dropped;
- when the batch is not full and its most urgent item was queued less than ``window_s`` ago, waits until
  then (or until the batch would be full) for more items to share it: only when the device was idle;
  a device that was busy has let the queue fill meanwhile;
- prepares the batch (``prepare``: e.g. the host-to-device copy), runs it (``run``) and settles every
  future on its event loop with ``loop.call_soon_threadsafe``.

The batch is chosen when the device is free, never staged ahead, so an urgent item that arrives while
a batch computes runs right after it. With ``deadlines=False`` every item is due when it is submitted:
first come, first served (the behaviour before deadlines, kept for comparison).

A failure fails only the futures of its batch; the thread keeps running. ``timeout_s`` bounds each
caller's wait (503 past it). ``close`` fails what is queued, lets the batch in flight finish and
joins the thread. Timings of every batch go to a ``BatchObserver`` (metrics; ``BatchStats`` keeps
bounded counts) and, per item, to a ``SpanRecorder`` with the span context captured at submit
(tracing), recorded after the fact.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from app.codec.batch_stats import BatchStats
from app.codec.deadlines import DeadlineQueue
from app.core.errors import Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")  # an item: e.g. a window of codes
R = TypeVar("R")  # its result: e.g. float32 audio
P = TypeVar("P")  # a prepared batch


class BatcherClosed(Unavailable):
    """503: the batcher is stopped (server shutting down) and takes no more work."""


class BatchTimeout(Unavailable):
    """503: an item waited longer than ``BATCH_TIMEOUT`` for the device."""


class BatchObserver(Protocol):
    """Metrics hooks (the observability layer implements them; ``BatchStats`` keeps plain counts)."""

    def observe_codec_batch(self, queue: str, size: int, compute_s: float, graph: bool) -> None: ...

    def observe_codec_queue_wait(self, queue: str, wait_s: float) -> None: ...

    def set_codec_queue_depth(self, queue: str, depth: int) -> None: ...


class SpanRecorder(Protocol):
    """Tracing hooks: capture the caller's span context, record finished spans from any thread."""

    def current_context(self) -> object | None: ...

    def record_span(
        self,
        name: str,
        parent: Any,  # what current_context returned
        start_ns: int,
        end_ns: int,
        attributes: Any = None,  # span attributes (name -> str, bool, int, float or a sequence of them)
    ) -> None: ...


@dataclass
class _Item(Generic[T, R]):
    payload: T
    future: asyncio.Future[R]
    loop: asyncio.AbstractEventLoop
    submitted_ns: int  # time.time_ns(), for spans
    queued_at: float  # time.monotonic(), for the batching window
    span_parent: object | None


@dataclass
class _Batch(Generic[T, R, P]):
    items: list[_Item[T, R]]
    prepared: P
    collected_ns: int  # the worker took the batch
    prepared_ns: int  # staged for the device


# the stages of one item, recorded as children of the span that was current when it was submitted
SPAN_NAMES = {
    "decode": ("codec.batch_wait", "codec.batch_prep", "codec.compute_wait", "codec.gpu_decode"),
    "encode": ("codec.encode_wait", "codec.encode_prep", "codec.encode_compute_wait", "codec.encode_gpu"),
}


def _settle(future: asyncio.Future[Any], result: object) -> None:
    """Settle ``future`` on its loop thread unless the caller gave up meanwhile."""
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


def _alive(item: _Item[Any, Any]) -> bool:
    return not item.future.cancelled()  # a plain state read, safe from any thread


class Batcher(Generic[T, R, P]):
    """One queue of codec work and the thread that batches and runs it (module docstring).

    ``prepare(items) -> P`` and then ``run(P) -> (results, graph_used)`` run on the worker thread;
    results come in item order and a result that is an exception fails only its item. ``bind_thread``
    runs first on the thread (e.g. to make the device current), then ``warmup`` (e.g. CUDA graph
    capture); items queue meanwhile.
    """

    def __init__(
        self,
        name: str,
        *,
        key: Callable[[T], Hashable],
        prepare: Callable[[list[T]], P],
        run: Callable[[P], tuple[list[R | BaseException], bool]],
        window_s: float,
        max_batch: int,
        timeout_s: float,
        deadlines: bool = True,
        weight: Callable[[T], int] = lambda payload: 1,
        budget: int | None = None,
        ends: Callable[[int], float | None] | None = None,
        bind_thread: Callable[[], None] = lambda: None,
        warmup: Callable[[], None] = lambda: None,
        observer: BatchObserver | None = None,
        spans: SpanRecorder | None = None,
    ) -> None:
        if max_batch < 1 or window_s < 0 or timeout_s <= 0:
            raise ValueError(
                f"bad batcher limits: max_batch={max_batch} window_s={window_s} timeout={timeout_s}"
            )
        self.name = name
        self._prepare = prepare
        self._run = run
        self._window_s = window_s
        self.max_batch = max_batch
        self.budget = budget  # most weight in one batch (the first item always goes); None: no bound
        self._ends = ends  # when a batch of a weight started now would end (monotonic s); None: no bound
        self._timeout_s = timeout_s
        self.deadlines = deadlines
        self._bind_thread = bind_thread
        self._warmup = warmup
        self.stats = BatchStats()  # replaceable (a bench resets it between runs)
        self._observer = observer
        self._spans = spans  # None: no tracing (no context captured, so nothing recorded)
        self._queue: DeadlineQueue[_Item[T, R]] = DeadlineQueue(
            lambda item: key(item.payload), _alive, lambda item: weight(item.payload)
        )
        self._cond = threading.Condition()  # guards _queue and _closed; the worker sleeps on it
        self._threads: list[threading.Thread] = []
        self._closed = False

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``close()``."""
        return bool(self._threads) and not self._closed

    def _observers(self) -> list[BatchObserver]:
        return [self.stats] if self._observer is None else [self.stats, self._observer]

    def start(self) -> None:
        """Start the worker thread."""
        if self._threads or self._closed:
            raise RuntimeError(f"{self.name} batcher: start() called twice or after close()")
        self._threads = [threading.Thread(target=self._work, name=f"{self.name}-worker", daemon=True)]
        for thread in self._threads:
            thread.start()

    async def submit(self, payload: T, deadline: float | None = None) -> R:
        """Queue ``payload``, due at ``deadline`` (``time.monotonic()`` seconds; None: now), and wait for
        its result. Raises BatcherClosed, BatchTimeout, or the exception its batch raised. Cancelling the
        caller drops the item if it has not been batched."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        parent = self._spans.current_context() if self._spans is not None else None
        now = time.monotonic()
        item = _Item(payload, future, loop, time.time_ns(), now, parent)
        due = deadline if self.deadlines and deadline is not None else now
        with self._cond:
            if not self.running:
                raise BatcherClosed(f"the codec is not running (no {self.name} accepted)")
            self._queue.push(item, due)
            self._cond.notify()
        try:
            return await asyncio.wait_for(future, self._timeout_s)
        except TimeoutError:
            raise BatchTimeout(
                f"the codec is overloaded: a {self.name} waited more than {self._timeout_s:g} s"
            ) from None

    async def close(self) -> None:
        """Stop taking work, fail what is queued, finish the batch in flight and join the thread."""
        with self._cond:
            self._closed = True
            queued = self._queue.drain()
            self._cond.notify_all()
        self._fail(queued, self._closed_error())  # now, not after the batch in flight
        for thread in self._threads:
            await asyncio.to_thread(thread.join)

    def _closed_error(self) -> BatcherClosed:
        return BatcherClosed(f"the codec stopped before this {self.name} ran")

    # --- worker thread ---------------------------------------------------------------------------

    def _next_batch(self) -> list[_Item[T, R]] | None:
        """Block until a batch is due (module docstring) and take it; None once closed."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                head = self._queue.head()
                if head is None:
                    self._cond.wait()  # woken by submit or close
                    continue
                item, _, same_key, weight = head
                full = same_key >= self.max_batch or (self.budget is not None and weight >= self.budget)
                wait = item.queued_at + self._window_s - time.monotonic()
                if full or wait <= 0:
                    batch = self._queue.take(self.max_batch, self.budget, self._ends)  # empty: all cancelled
                    if batch:
                        depth = len(self._queue)
                        break
                    continue
                self._cond.wait(timeout=wait)  # more may join; re-select by deadline afterwards
        for observer in self._observers():
            observer.set_codec_queue_depth(self.name, depth)
        return batch

    def _work(self) -> None:
        self._bind_thread()
        self._warmup()
        while (items := self._next_batch()) is not None:  # None once closed (close fails the queue)
            collected = time.time_ns()
            try:
                prepared = self._prepare([item.payload for item in items])
            except Exception as exc:
                self._fail(items, exc)
                continue
            self._execute(_Batch(items, prepared, collected, time.time_ns()))

    def _fail(self, items: list[_Item[T, R]], error: BaseException) -> None:
        for item in items:
            self._deliver(item, error)

    def _deliver(self, item: _Item[T, R], result: object) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for this item any more
            item.loop.call_soon_threadsafe(_settle, item.future, result)

    def _execute(self, batch: _Batch[T, R, P]) -> None:
        started = time.time_ns()
        graph = False
        try:
            results, graph = self._run(batch.prepared)
        except Exception as exc:
            log.warning("%s batch of %d failed: %s", self.name, len(batch.items), exc)
            results = [exc] * len(batch.items)
        finished = time.time_ns()
        size = len(batch.items)
        for observer in self._observers():
            observer.observe_codec_batch(self.name, size, (finished - started) / 1e9, graph)
            for item in batch.items:
                observer.observe_codec_queue_wait(self.name, (batch.collected_ns - item.submitted_ns) / 1e9)
        for item, result in zip(batch.items, results, strict=True):
            if self._spans is not None and item.span_parent is not None:  # before the result:
                self._record_spans(self._spans, item, batch, started, finished, graph)  # its span ends after
            self._deliver(item, result)

    def _record_spans(
        self,
        spans: SpanRecorder,
        item: _Item[T, R],
        batch: _Batch[T, R, P],
        started: int,
        finished: int,
        graph: bool,
    ) -> None:
        record, parent, size = spans.record_span, item.span_parent, len(batch.items)
        wait, prep, compute_wait, compute = SPAN_NAMES.get(self.name, SPAN_NAMES["decode"])
        record(wait, parent, item.submitted_ns, batch.collected_ns)
        record(prep, parent, batch.collected_ns, batch.prepared_ns, {"batch.size": size})
        record(compute_wait, parent, batch.prepared_ns, started)
        record(compute, parent, started, finished, {"batch.size": size, "codec.cuda_graph": graph})
