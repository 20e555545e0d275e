"""Cross-request dynamic batching of codec work, exact by construction.

``await batcher.submit(item)`` from any request. Two threads per batcher, nothing polls:

- the **collector** blocks on the queue for the first item, then gathers more for at most
  ``window_s`` or until ``max_batch`` items wait, drops items whose caller has gone (cancelled future),
  groups the rest by ``key`` (the exact window length for decodes: batches are never padded in time),
  splits groups at ``max_batch``, and prepares each batch (``prepare``: e.g. the host-to-device copy)
  before handing it to the worker through a one-slot hand-off, so the next batch is staged while the
  current one computes;
- the **worker** owns the device: it runs each batch (``run``) and settles every future of the batch
  on its event loop with ``loop.call_soon_threadsafe``.

A failure fails only the futures of its batch; both threads keep running. ``timeout_s`` bounds each
caller's wait (503 past it). ``close`` fails what is queued, lets the batch in flight finish and
joins the threads. Timings of every batch go to a ``BatchObserver`` (metrics) and, per item, to a
``SpanRecorder`` with the span context captured at submit (tracing), recorded after the fact.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

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
        parent: object | None,
        start_ns: int,
        end_ns: int,
        attributes: Mapping[str, object] | None = None,
    ) -> None: ...


@dataclass
class BatchStats:
    """Plain counters of one batcher: batch sizes, per-item queue waits, compute times, graph hits."""

    sizes: Counter[int] = field(default_factory=Counter)
    waits_s: list[float] = field(default_factory=list)
    compute_s: list[float] = field(default_factory=list)
    graph_hits: int = 0
    graph_misses: int = 0
    depth: int = 0

    def observe_codec_batch(self, queue: str, size: int, compute_s: float, graph: bool) -> None:
        self.sizes[size] += 1
        self.compute_s.append(compute_s)
        if graph:
            self.graph_hits += 1
        else:
            self.graph_misses += 1

    def observe_codec_queue_wait(self, queue: str, wait_s: float) -> None:
        self.waits_s.append(wait_s)

    def set_codec_queue_depth(self, queue: str, depth: int) -> None:
        self.depth = depth


@dataclass
class _Item(Generic[T, R]):
    payload: T
    future: asyncio.Future[R]
    loop: asyncio.AbstractEventLoop
    submitted_ns: int
    span_parent: object | None


@dataclass
class _Batch(Generic[T, R, P]):
    items: list[_Item[T, R]]
    prepared: P
    collected_ns: int  # the collector took the batch
    prepared_ns: int  # staged for the worker


_STOP = object()

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


class Batcher(Generic[T, R, P]):
    """One queue of codec work and the two threads that batch and run it (module docstring).

    ``prepare(items) -> P`` runs on the collector thread, ``run(P) -> (results, graph_used)`` on the
    worker thread; results come in item order and a result that is an exception fails only its item.
    ``bind_thread`` runs first on both threads (e.g. to make the device current), then ``warmup`` on
    the worker thread (e.g. CUDA graph capture); items queue meanwhile.
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
        self._key = key
        self._prepare = prepare
        self._run = run
        self._window_s = window_s
        self.max_batch = max_batch
        self._timeout_s = timeout_s
        self._bind_thread = bind_thread
        self._warmup = warmup
        self.stats = BatchStats()  # replaceable (a bench resets it between runs)
        self._observer = observer
        self._spans = spans  # None: no tracing (no context captured, so nothing recorded)
        self._queue: queue.SimpleQueue[_Item[T, R] | object] = queue.SimpleQueue()
        self._handoff: queue.Queue[_Batch[T, R, P] | object] = queue.Queue(maxsize=1)
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._lock = threading.Lock()  # submit vs close: nothing is queued after close has drained

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``close()``."""
        return bool(self._threads) and not self._closed

    def _observers(self) -> list[BatchObserver]:
        return [self.stats] if self._observer is None else [self.stats, self._observer]

    def start(self) -> None:
        """Start the collector and the worker threads."""
        if self._threads or self._closed:
            raise RuntimeError(f"{self.name} batcher: start() called twice or after close()")
        self._threads = [
            threading.Thread(target=self._collect, name=f"{self.name}-collector", daemon=True),
            threading.Thread(target=self._work, name=f"{self.name}-worker", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    async def submit(self, payload: T) -> R:
        """Queue ``payload`` and wait for its result. Raises BatcherClosed, BatchTimeout, or the
        exception its batch raised. Cancelling the caller drops the item if it has not been batched."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        parent = self._spans.current_context() if self._spans is not None else None
        item = _Item(payload, future, loop, time.time_ns(), parent)
        with self._lock:
            if not self.running:
                raise BatcherClosed(f"the codec is not running (no {self.name} accepted)")
            self._queue.put(item)
        try:
            return await asyncio.wait_for(future, self._timeout_s)
        except TimeoutError:
            raise BatchTimeout(
                f"the codec is overloaded: a {self.name} waited more than {self._timeout_s:g} s"
            ) from None

    async def close(self) -> None:
        """Stop taking work, fail what is queued, finish the batch in flight and join the threads."""
        with self._lock:
            first = not self._closed
            self._closed = True
        if first and self._threads:
            self._queue.put(_STOP)
        for thread in self._threads:
            await asyncio.to_thread(thread.join)

    # --- collector thread ------------------------------------------------------------------------

    def _gather(self, first: _Item[T, R]) -> tuple[list[_Item[T, R]], bool]:
        """``first`` and what arrives within the window (up to max_batch); True when stop was seen."""
        items = [first]
        deadline = time.monotonic() + self._window_s
        while len(items) < self.max_batch:
            remaining = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return items, True
            items.append(item)  # type: ignore[arg-type]
        return items, False

    def _collect(self) -> None:
        self._bind_thread()
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is _STOP:
                break
            items, stopping = self._gather(first)  # type: ignore[arg-type]
            for observer in self._observers():
                observer.set_codec_queue_depth(self.name, self._queue.qsize())
            if stopping or self._closed:  # fail these with the rest of the queue
                self._fail(items, self._closed_error())
                break
            collected = time.time_ns()
            live = [item for item in items if not item.future.cancelled()]  # a plain state read
            groups: dict[Hashable, list[_Item[T, R]]] = {}
            for item in live:
                groups.setdefault(self._key(item.payload), []).append(item)
            for group in groups.values():
                for start in range(0, len(group), self.max_batch):
                    self._stage(group[start : start + self.max_batch], collected)
        self._fail(self._drain(), self._closed_error())
        self._handoff.put(_STOP)

    def _closed_error(self) -> BatcherClosed:
        return BatcherClosed(f"the codec stopped before this {self.name} ran")

    def _stage(self, items: list[_Item[T, R]], collected_ns: int) -> None:
        """Prepare one batch and hand it to the worker (blocks while the worker has one waiting)."""
        try:
            prepared = self._prepare([item.payload for item in items])
        except Exception as exc:
            self._fail(items, exc)
            return
        self._handoff.put(_Batch(items, prepared, collected_ns, time.time_ns()))

    def _drain(self) -> list[_Item[T, R]]:
        items = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return items
            if item is not _STOP:
                items.append(item)  # type: ignore[arg-type]

    def _fail(self, items: list[_Item[T, R]], error: BaseException) -> None:
        for item in items:
            self._deliver(item, error)

    def _deliver(self, item: _Item[T, R], result: object) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for this item any more
            item.loop.call_soon_threadsafe(_settle, item.future, result)

    # --- worker thread ---------------------------------------------------------------------------

    def _work(self) -> None:
        self._bind_thread()
        self._warmup()
        while True:
            batch = self._handoff.get()
            if batch is _STOP:
                return
            if self._closed:  # staged but not started: fail it rather than delay the shutdown
                self._fail(batch.items, self._closed_error())  # type: ignore[union-attr]
                continue
            self._execute(batch)  # type: ignore[arg-type]

    def _execute(self, batch: _Batch[T, R, P]) -> None:
        if all(item.future.cancelled() for item in batch.items):  # every caller gave up while it waited
            return
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
