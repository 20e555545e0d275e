"""Admission control for the synthesis and upload routes: stream slots and the viability check.

A request is admitted while fewer than MAX_CONCURRENT_STREAMS are served and, with VIABILITY_CHECK,
while one more stream leaves every admitted stream ahead of real time at what this process has measured
(``Capacity.viable``: each family's rule, e.g. NeuCodec's codec cost against its windows, and one
stream's LM pace against VIABILITY_LM_FLOOR of real time). A lone stream is always
admitted. The number of streams served is kept in ``Capacity.streams``, where the families read it to
size their windows. Otherwise the request waits in a bounded FIFO queue (MAX_QUEUED_STREAMS): for a slot up to
QUEUE_WAIT_S, for room at the measured rates up to VIABILITY_WAIT_S; a full queue or a wait that runs
out is answered 429 with the OpenAI error body and a ``Retry-After`` of when the room it lacks is expected
back (``SlotTimes``: the slots held now, against how long recent holds lasted; at most RETRY_AFTER_MOST_S,
the fixed wait before any hold has ended). Waiters are re-checked whenever a
stream ends and, since the measured rates change without any stream ending, every ``RECHECK_S``; a wait
that runs out while a slot is free was a wait for room at the measured rates, and its 429 says so. The
slot is held until the response's last byte is sent, and released on success, error, cancellation or
client disconnect alike (the middleware's ``finally``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.slot_times import SlotTimes
from app.core.errors import RateLimited
from app.core.routes import ADMITTED_PATHS
from app.observability.metrics import Metrics

RECHECK_S = 0.25
"""How often the waiters are re-checked while no stream ends (the measured rates move on their own)."""

RETRY_AFTER_MOST_S = 60
"""The longest ``Retry-After`` given (the OpenAI SDK waits that long; past 120 s it gives up instead)."""


@dataclass(frozen=True)
class Viability:
    """The viability check's settings (VIABILITY_*)."""

    lm_floor: float = 0.8  # share of real time a stream's LM must keep (audio seconds per second)
    wait_s: float = 3.0  # longest wait for room at the measured rates


class Admission:
    """Stream slots and their wait queue (one event loop; no locks needed)."""

    def __init__(
        self,
        max_active: int,
        max_queued: int,
        wait_s: float,
        metrics: Metrics,
        viability: Viability | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_active = max_active  # 0: no limit
        self.max_queued = max_queued
        self.wait_s = wait_s
        self.viability = viability  # None: slots only
        self._waiters: deque[asyncio.Future[float]] = deque()  # each set to its slot's start
        self._metrics = metrics
        self._times = SlotTimes(clock)  # one start per slot held

    @property
    def active(self) -> int:
        """Streams holding a slot now."""
        return self._times.held

    def _retry_after(self, slots: int, fallback_s: float) -> dict[str, str]:
        """The header telling a refused client when ``slots`` slots are expected back."""
        expected = self._times.expected_back_s(slots)
        wait_s = fallback_s if expected is None else min(expected, RETRY_AFTER_MOST_S)
        return {"Retry-After": str(max(1, math.ceil(wait_s)))}

    def _rejected(self, why: str, slots: int, wait_s: float) -> RateLimited:
        return RateLimited(
            f"The server is at its limit of {self.max_active} concurrent streams ({why}); retry later.",
            headers=self._retry_after(slots, wait_s),
        )

    def _refused(self, slots: int) -> RateLimited:
        assert self.viability is not None
        capacity = self._metrics.capacity
        codec, lm = capacity.codec.rate, capacity.lm.rate
        measured = f"codec {codec:.1f} audio s/s" if codec is not None else "codec not measured"
        measured += f", LM {lm:.2f}x real time per stream" if lm is not None else ""
        return RateLimited(
            f"The server cannot keep one more stream ahead of real time ({self.active} streams, "
            f"{measured}); retry later.",
            headers=self._retry_after(slots, self.viability.wait_s),
        )

    def _gauges(self) -> None:
        self._metrics.capacity.streams = self.active
        self._metrics.active.set(self.active)
        self._metrics.queued.set(len(self._waiters))

    def _slot_free(self) -> bool:
        return self.max_active == 0 or self.active < self.max_active

    def _viable(self) -> bool:
        v = self.viability
        return v is None or self.active == 0 or self._metrics.capacity.viable(self.active, v.lm_floor)

    def _count(self, outcome: str) -> None:
        if self.viability is not None:
            self._metrics.viability.labels(outcome).inc()

    async def acquire(self) -> float:
        """Take a slot, waiting in the queue if needed; RateLimited when none comes. Returns the slot's
        start, to pass to ``release``."""
        if not self._waiters and self._slot_free() and self._viable():
            started = self._times.start()
            self._count("admitted")
            self._gauges()
            return started
        for_slot = not self._slot_free()
        if len(self._waiters) >= self.max_queued:  # room for it once every waiter has had a slot
            raise self._rejected("the wait queue is full", len(self._waiters) + 1, self.wait_s)
        wait_s = self.wait_s if for_slot or self.viability is None else self.viability.wait_s
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._gauges()
        try:
            try:
                async with asyncio.timeout(wait_s):
                    while not waiter.done():  # _wake() takes the slot for us before setting the result
                        await asyncio.wait({waiter}, timeout=RECHECK_S)
                        self._wake()
            except TimeoutError:
                self._wake()  # room may have come since the last check
                if not waiter.done():
                    waiter.cancel()
                    slots = self._waiters.index(waiter) + 1  # those ahead of it come first
                    if self.viability is not None and self._slot_free():  # it waited for room, not a slot
                        self._count("refused")
                        raise self._refused(slots) from None
                    raise self._rejected(f"no slot within {wait_s:g} s", slots, wait_s) from None
            started = await waiter
            self._count("waited")
            return started
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())  # the slot came just as the request was cancelled: pass it on
            elif not waiter.done():
                waiter.cancel()
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            self._gauges()

    def release(self, started: float) -> None:
        """Give back the slot ``acquire`` started at ``started``, then admit the waiters that now fit,
        first come first."""
        self._times.end(started)
        self._wake()
        self._gauges()

    def _wake(self) -> None:
        while self._waiters and self._slot_free() and self._viable():
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(self._times.start())


class AdmissionMiddleware:
    """Holds a slot around each synthesis or voice-registration request, 429 when none is available."""

    def __init__(self, app: ASGIApp, admission: Admission) -> None:
        self.app = app
        self.admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in ADMITTED_PATHS:
            await self.app(scope, receive, send)
            return
        try:
            started = await self.admission.acquire()
        except RateLimited as error:
            response = JSONResponse(error.body(), status_code=error.status, headers=error.headers)
            await response(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.admission.release(started)
